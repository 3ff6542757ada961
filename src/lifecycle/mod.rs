//! Every rule of a job's life that spans the tables: what an enqueue
//! places, what a finish writes and releases, what follows when members of
//! a batch end (their counts and callbacks, the dependants of the jobs that
//! ended), what happens to the claims of a process that stops or dies, and
//! an operator's cancel. Each runs inside one transaction over the
//! [`Driver`](crate::store::Driver); `store` below holds the drivers, the
//! rows and the statements, and decides nothing of this.
//!
//! The `Store` methods that open those transactions are defined here, as
//! `impl Store` blocks, so that callers above call them as before.

mod claims;
mod control;
mod jobs;
mod places;
mod processes;
mod rates;
mod recurring;
mod rules;

pub(crate) use jobs::{BatchMaking, BatchRefused, batch_make_on};
pub(crate) use processes::{PruneTarget, Pruned, ReleaseReason, ReleaseReport};
pub(crate) use rates::Limited;
