//! Draining: a worker's jobs run in the calling thread until none is left —
//! for tests of the user's own jobs (Oban's `drain_queue`, Sidekiq's
//! `drain`, rivertest's `Worker.Work`), with no threads, no polling and
//! no sleeps. The same claim, execution and fenced outcome write as a
//! running worker, one job at a time, with the worker's job types, state,
//! middleware and event hooks; its outcomes are added to the job
//! statistics when it returns.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use super::Worker;
use super::completer::{Ran, report_outcome};
use super::executor;
use super::pool::on_claim_clock;
use super::tally::Tally;
use super::transaction::{Claim, Finisher};
use crate::dispatcher::Dispatcher;
use crate::events::JobClaimed;
use crate::job::{ProgressCell, ShutdownSignal};
use crate::lifecycle::ReleaseReason;
use crate::process::{self, ProcessKind};
use crate::store::{ClaimLimits, ClaimQuery, Completion, Outcome, Progress, Slot, StoredOptions};
use crate::types::{Error, QueuePattern, Result};

/// What a drain ran: how its attempts ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Drained {
    /// Attempts that succeeded.
    pub succeeded: usize,
    /// Attempts that failed with attempts left (their retry is scheduled
    /// after its backoff, so a drain does not run it).
    pub retried: usize,
    /// Attempts that failed for good.
    pub failed: usize,
    /// Jobs that handed themselves back (snoozed; run again by a drain
    /// only once due, with [`Worker::drain`]).
    pub snoozed: usize,
    /// Jobs an operator had cancelled, discarded without running.
    pub cancelled: usize,
}

impl Drained {
    /// Every attempt the drain ran.
    pub fn total(&self) -> usize {
        self.succeeded + self.retried + self.failed + self.snoozed + self.cancelled
    }
}

impl Worker {
    /// Runs every job on this worker's queues in the calling thread until
    /// none is left: ready jobs, and scheduled jobs as they fall due (what
    /// this worker's embedded dispatcher would move, checked before each
    /// claim; a retry or snooze due in the future is not waited for).
    /// Jobs enqueued by the jobs it runs are run too. Returns how the
    /// attempts ended. For tests: the worker keeps its configuration and
    /// can drain again.
    ///
    /// ```
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Serialize, Deserialize)] struct SendEmail { to: String }
    /// # impl solidq::Job for SendEmail { const KIND: &'static str = "send_email";
    /// #   fn perform(&self, _: &solidq::JobContext) -> solidq::JobResult { Ok(serde_json::Value::Null) } }
    /// let test = solidq::testing::TestQueue::new()?;
    /// test.queue().enqueue(&SendEmail { to: "a@example.com".into() })?;
    /// let drained = solidq::Worker::new(test.queue().clone())
    ///     .register::<SendEmail>()
    ///     .drain()?;
    /// assert_eq!(drained.succeeded, 1);
    /// # Ok::<(), solidq::Error>(())
    /// ```
    pub fn drain(&self) -> Result<Drained> {
        self.drain_jobs(true)
    }

    /// [`Worker::drain`] without the scheduled jobs: only what is ready now
    /// (and what those jobs make ready).
    pub fn drain_ready(&self) -> Result<Drained> {
        self.drain_jobs(false)
    }

    fn drain_jobs(&self, scheduled: bool) -> Result<Drained> {
        if self.registry.is_empty() {
            return Err(Error::NoJobTypes);
        }
        if let Some(error) = self.registry.invalid() {
            return Err(error);
        }
        self.queue.check_schema()?;
        executor::install_panic_capture();
        executor::arm_panic_capture();
        let queue = match &self.events {
            Some(events) => self.queue.clone().with_events_arc(Arc::clone(events)),
            None => self.queue.clone(),
        };
        let store = queue.store().clone();
        let events = Arc::clone(queue.events());
        let patterns = self
            .config
            .queues
            .iter()
            .map(|q| QueuePattern::parse(q))
            .collect::<Result<Vec<_>>>()?;
        let claim = ClaimQuery::new(patterns);
        let limits = ClaimLimits::idle(1);
        let dispatcher = scheduled.then(|| Dispatcher::embedded(queue.clone()));
        let process = process::describe(
            ProcessKind::Worker,
            None,
            None,
            serde_json::json!({ "queues": self.config.queues, "threads": 1,
                                "kinds": self.registry.kinds(), "drain": true }),
        );
        let process_id = process::register(&store, &process, events.as_ref())?;
        let shutdown = Arc::new(ShutdownSignal::default());
        let tally = Tally::default();
        let mut drained = Drained::default();
        let result = (|| -> Result<()> {
            loop {
                if let Some(dispatcher) = &dispatcher {
                    while dispatcher.run_once()? > 0 {}
                }
                let Some(job) = store.ready_claim(&claim, process_id, &limits)?.pop() else {
                    return Ok(());
                };
                let claimed = Instant::now();
                events.job_claimed(&JobClaimed::of(&job, process_id));
                let options = StoredOptions::parse(&job.options);
                let started = Instant::now();
                // Progress and step checkpoints are written once, before
                // the outcome, as a worker writes them at the latest.
                let cell = ProgressCell::new(job.id, process_id, |_| {});
                let finisher = Arc::new(Finisher::new(Claim {
                    store: &store,
                    job_id: job.id,
                    process_id,
                    kind: &job.kind,
                    slot: Slot::of(job.concurrency_key.as_deref(), &options),
                    batch_id: job.batch_id,
                    keep: std::time::Duration::from_millis(options.keep_result_ms),
                    started,
                    payload: &self.registry.payload,
                }));
                let execution = executor::execute(
                    &job,
                    &options,
                    started,
                    &self.registry,
                    &shutdown,
                    executor::Attempt {
                        progress: Some(Arc::clone(&cell)),
                        cancel: Arc::new(AtomicBool::new(job.cancel_requested)),
                        finisher: Some(finisher),
                    },
                );
                let progress: Vec<Progress> = match cell.take() {
                    (None, None) => Vec::new(),
                    (json, checkpoint) => vec![Progress {
                        job_id: job.id,
                        process_id,
                        json,
                        checkpoint,
                    }],
                };
                let ended_at = on_claim_clock(&job, claimed, Instant::now());
                match &execution.outcome {
                    Outcome::Succeeded { .. } => drained.succeeded += 1,
                    Outcome::Retry { .. } => drained.retried += 1,
                    Outcome::Failed { .. } => drained.failed += 1,
                    Outcome::Snoozed { .. } => drained.snoozed += 1,
                    Outcome::Discarded { .. } => drained.cancelled += 1,
                }
                let completion = Completion {
                    job_id: job.id,
                    process_id,
                    outcome: execution.outcome,
                    slot: Slot::of(job.concurrency_key.as_deref(), &options),
                    batch_id: job.batch_id,
                    started: execution.started,
                    recorded: execution.recorded,
                };
                let report =
                    store.claimed_finish(std::slice::from_ref(&completion), &[], &progress)?;
                let ran = Ran {
                    attempt: u32::try_from(job.attempts).unwrap_or(0).saturating_add(1),
                    wait: crate::events::elapsed(job.due_at, job.claimed_at)
                        + started.duration_since(claimed),
                    ended_at,
                    kind: job.kind,
                    queue: job.queue_name,
                    run_time: execution.elapsed,
                    enqueued_at: job.created_at.and_utc(),
                    error: execution.error,
                };
                if report.lost.is_empty() {
                    tally.add([ran.counting(&completion.outcome)]);
                }
                report_outcome(events.as_ref(), &completion, ran);
            }
        })();
        executor::disarm_panic_capture();
        if let Err(error) = tally.flush(&store) {
            log::warn!(
                "{} drained outcomes could not be added to the job statistics: {error}",
                tally.pending()
            );
        }
        // Nothing is left claimed unless a write failed: then the job goes
        // back to ready with the row.
        store.process_deregister(process_id, &ReleaseReason::Shutdown { started: vec![] })?;
        result.map(|()| drained)
    }
}
