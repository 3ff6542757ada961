//! The bottom layer: the plain data every other module shares — errors,
//! job statuses, delivery modes, backoff policies, recorded errors, queue
//! patterns, stored concurrency limits, cron schedules, database URLs and
//! SQLite's durability setting.
//! It imports nothing of solidq, so config, store, worker, scheduler and
//! supervisor all stand on it without loops (see the layering in the crate
//! docs).

mod backtrace;
mod cron;
mod error;
mod job;
mod limit;
mod pooler;
mod queue;
mod sqlite;
mod url;

pub use cron::{Schedule, ScheduleError};
pub(crate) use error::panic_message;
pub use error::{BoxError, Error, ErrorKind, Result};
pub use job::{Backoff, Delivery, ErrorInfo, JobInfo, JobStatus};
pub use limit::{DEFAULT_CONCURRENCY_DURATION, OnConflict};
pub(crate) use limit::{StoredLimit, StoredRate};
pub(crate) use queue::validate_queue_name;
pub use queue::{MAX_QUEUE_NAME_LEN, QueuePattern};
pub use sqlite::SqliteSynchronous;
pub use url::{Backend, DatabaseUrl, LIBPQ_DEFAULTS};
