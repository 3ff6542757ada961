//! Middleware: code that wraps every execution of a job on a worker —
//! before it, after it with its outcome, or instead of it — for tracing
//! spans, context propagation, timing. Added with
//! [`crate::Worker::wrap`]; the first added is the outermost.
//!
//! [`crate::events`] stay the after-the-fact facts (a job succeeded, was
//! retried, stalled) reported once the outcome is recorded; middleware runs
//! on the job's own thread, around `perform`, and can change what it
//! returns.
//!
//! A panic in middleware is caught like a panic in `perform`: the attempt
//! fails with it and the worker carries on.

use std::sync::Arc;

use super::{JobContext, JobResult};

/// Wraps each execution of a job. Call [`Next::run`] to run the rest of
/// the chain and the job; not calling it skips the job, and what `call`
/// returns is its outcome.
///
/// ```
/// use solidq::{JobContext, JobResult, Middleware, Next};
/// use std::time::Instant;
///
/// struct Timing;
///
/// impl Middleware for Timing {
///     fn call(&self, ctx: &JobContext, next: Next<'_>) -> JobResult {
///         let started = Instant::now();
///         let outcome = next.run();
///         log::info!("job {} ({}) took {:?}, ok: {}", ctx.job_id(), ctx.kind(),
///                    started.elapsed(), outcome.is_ok());
///         outcome
///     }
/// }
/// ```
///
/// A closure `Fn(&JobContext, Next) -> JobResult` is middleware too.
pub trait Middleware: Send + Sync + 'static {
    /// Runs around one execution of the job `ctx` describes.
    fn call(&self, ctx: &JobContext, next: Next<'_>) -> JobResult;
}

impl<F> Middleware for F
where
    F: Fn(&JobContext, Next<'_>) -> JobResult + Send + Sync + 'static,
{
    fn call(&self, ctx: &JobContext, next: Next<'_>) -> JobResult {
        self(ctx, next)
    }
}

/// The rest of the chain: the inner middleware, then the job itself.
pub struct Next<'a> {
    ctx: &'a JobContext,
    rest: &'a [Arc<dyn Middleware>],
    perform: &'a dyn Fn(&JobContext) -> JobResult,
}

impl Next<'_> {
    /// Runs the inner middleware and the job, and returns the job's
    /// outcome (as the inner middleware left it).
    pub fn run(self) -> JobResult {
        run_chain(self.rest, self.ctx, self.perform)
    }
}

/// Runs `perform` inside `chain`, outermost first.
pub(crate) fn run_chain(
    chain: &[Arc<dyn Middleware>],
    ctx: &JobContext,
    perform: &dyn Fn(&JobContext) -> JobResult,
) -> JobResult {
    match chain.split_first() {
        Some((outer, rest)) => outer.call(ctx, Next { ctx, rest, perform }),
        None => perform(ctx),
    }
}
