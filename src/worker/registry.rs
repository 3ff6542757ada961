//! The job types a worker knows: kind → a function that rebuilds the job
//! from its JSON arguments and runs it, the type's retry backoff, and how
//! long its jobs take here (which decides whether they are claimed ahead);
//! with the middleware that wraps every run and the state jobs share.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::types::{Backoff, ErrorInfo};

use super::stats::RunTime;
use crate::job::{Job, JobContext, JobError, JobResult, Middleware, StateMap, run_chain};

type Run = Box<dyn Fn(&str, &JobContext) -> JobResult + Send + Sync>;

/// A type's retry delay function ([`Job::retry_delay`]).
pub(crate) type RetryDelay = fn(u32, &ErrorInfo, &Backoff) -> Duration;

struct Handler {
    run: Run,
    retry_delay: RetryDelay,
    /// Run time of its jobs in this worker (see [`RunTime`]).
    time: RunTime,
    /// Whether its type has a rate limit (never claimed ahead).
    rate_limited: bool,
}

/// Registered job types, by kind.
#[derive(Default)]
pub(crate) struct Registry {
    handlers: HashMap<&'static str, Handler>,
    duplicates: Vec<&'static str>,
    /// The first option of each registered type that cannot work
    /// ([`crate::JobOptions::validate`]), refused by `Worker::start`.
    invalid: Vec<(&'static str, String, String)>,
    /// Wraps every run, outermost first.
    middleware: Vec<Arc<dyn Middleware>>,
    /// Given to every job's context.
    pub(crate) state: StateMap,
    /// The largest result stored: a larger one fails its job.
    pub(crate) payload: crate::client::PayloadLimit,
}

impl Registry {
    pub(crate) fn register<J: Job>(&mut self) {
        if let Err(error) = J::options().validate() {
            let (option, value, reason) = match error {
                crate::types::Error::InvalidOption {
                    option,
                    value,
                    reason,
                } => (option, value, reason),
                other => ("job options", String::new(), other.to_string()),
            };
            let reason = format!("{reason} (in the options of job kind {:?})", J::KIND);
            self.invalid.push((option, value, reason));
        }
        let handler = Handler {
            run: Box::new(|arguments, ctx| {
                let job: J = serde_json::from_str(arguments).map_err(|e| {
                    JobError::new(
                        "malformed_arguments",
                        format!(
                            "arguments of kind {:?} do not deserialize: {e}; arguments: {arguments}",
                            J::KIND
                        ),
                    )
                    .no_retry()
                })?;
                job.perform(ctx)
            }),
            retry_delay: J::retry_delay,
            time: RunTime::default(),
            rate_limited: J::options().rate_limit.is_some(),
        };
        if self.handlers.insert(J::KIND, handler).is_some() {
            self.duplicates.push(J::KIND);
        }
    }

    /// Adds middleware inside what was added before.
    pub(crate) fn wrap(&mut self, middleware: Arc<dyn Middleware>) {
        self.middleware.push(middleware);
    }

    /// Runs the job of `kind` inside the middleware: `None` if the kind is
    /// unknown (no middleware runs). Arguments that do not deserialize are
    /// a final `malformed_arguments` error, seen by the middleware.
    pub(crate) fn run(&self, kind: &str, arguments: &str, ctx: &JobContext) -> Option<JobResult> {
        let handler = self.handlers.get(kind)?;
        Some(run_chain(&self.middleware, ctx, &|ctx| {
            (handler.run)(arguments, ctx)
        }))
    }

    /// The retry delay function of `kind`, if it is registered.
    pub(crate) fn retry_delay(&self, kind: &str) -> Option<RetryDelay> {
        self.handlers.get(kind).map(|h| h.retry_delay)
    }

    /// Folds a run time of a job of `kind` into its average.
    pub(crate) fn observe(&self, kind: &str, took: Duration) {
        if let Some(handler) = self.handlers.get(kind) {
            handler.time.observe(took);
        }
    }

    /// Every kind that may be claimed ahead with the run time of its jobs
    /// ([`RunTime::get`]) and of its latest job, in microseconds (0 before
    /// the first ends). Rate-limited kinds never are: their starts are
    /// granted when they are claimed, so they are claimed only for threads
    /// that start them at once.
    pub(crate) fn times(&self) -> impl Iterator<Item = (&'static str, f64, f64)> + '_ {
        self.handlers
            .iter()
            .filter(|(_, h)| !h.rate_limited)
            .map(|(kind, h)| (*kind, h.time.get(), h.time.last()))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.handlers.is_empty()
    }

    pub(crate) fn kinds(&self) -> Vec<&'static str> {
        let mut kinds: Vec<_> = self.handlers.keys().copied().collect();
        kinds.sort_unstable();
        kinds
    }

    pub(crate) fn duplicates(&self) -> &[&'static str] {
        &self.duplicates
    }

    /// The first option of a registered type that cannot work, as an
    /// error naming the value and the kind.
    pub(crate) fn invalid(&self) -> Option<crate::types::Error> {
        self.invalid.first().map(
            |(option, value, reason)| crate::types::Error::InvalidOption {
                option,
                value: value.clone(),
                reason: reason.clone(),
            },
        )
    }
}
