//! Event hooks: implement [`Events`] to feed your own metrics or alerts
//! without patching solidq. Every method has a no-op default, so an
//! implementation overrides only what it needs.
//!
//! ## Where to install them
//!
//! | handle | reports |
//! | --- | --- |
//! | [`Queue::with_events`](crate::Queue::with_events) | [`job_enqueued`](Events::job_enqueued), [`job_discarded`](Events::job_discarded) at enqueue; inherited by what is built from that queue |
//! | [`Worker::events`](crate::Worker::events) | claimed, succeeded, retried, failed, released at shutdown, its own registration, its dispatcher's discards |
//! | [`Supervisor::events`](crate::Supervisor::events) | stalled, pruned, released at shutdown, its registration, its dispatcher's and scheduler's events |
//! | [`Scheduler::events`](crate::Scheduler::events), [`Dispatcher::events`](crate::Dispatcher::events) | recurring fired / skipped, discards when delayed jobs come due |
//!
//! A [`Worker`](crate::Worker), [`Dispatcher`](crate::Dispatcher) or
//! [`Scheduler`](crate::Scheduler) built from a queue uses that queue's
//! hooks unless it is given its own. The default everywhere is
//! [`LogEvents`]; [`NoEvents`] turns them off. Installing your own hooks
//! replaces `LogEvents`: install `(LogEvents, yours)` to keep the log lines
//! (a pair calls both, in order), and share one implementation between
//! several handles through an `Arc`.
//!
//! ## What a metrics system can rely on
//!
//! * Every event reports a fact that is **committed**: `job_succeeded`
//!   after the completer's transaction commits, `job_enqueued` after the
//!   insert commits, `job_stalled` after the prune's transaction commits. A
//!   completion whose claim was lost (its process was pruned meanwhile) is
//!   reported by nobody, because it changed nothing. One exception:
//!   [`Queue::enqueue_on`](crate::Queue::enqueue_on) runs on the caller's
//!   connection, so its `job_enqueued` fires once solidq's statements ran,
//!   and the caller's transaction may still roll back.
//! * Each claim ends in exactly one of `job_succeeded`, `job_retried`, `job_snoozed`, `job_cancelled`,
//!   `job_failed`, `job_stalled` or `job_released`, possibly in another
//!   process (a stall is reported by the supervisor that pruned the dead
//!   worker), so `claimed - ended` over a fleet is the number of jobs
//!   running. Each enqueued job is claimed or discarded (or still waiting).
//! * Attempts are 1-based and count runs that ended: a stall does not use
//!   an attempt, so a job that stalled is claimed again with the same
//!   attempt number and a higher `stalled_count`.
//! * Durations are measured on one clock: a claim's `wait` on the
//!   database's (from when the job became due to its claim), a run's
//!   `run_time` on the worker's monotonic clock.
//!
//! Hooks are called on solidq's own threads (the completer, the poller,
//! the maintenance loop…) while those threads wait: keep them quick (update
//! counters, send on a channel) and never block. A panic in a hook is
//! caught and logged at error level, and the thread that called it carries
//! on (the event is then lost for that hook only).
//!
//! ## Logging
//!
//! [`LogEvents`] logs each event once through `log`; solidq's code does not
//! log the same facts again. The exception is recovery: stalls, prunes and
//! releases at shutdown are logged at warn or info level by solidq itself
//! whatever hooks are installed (the design promises that every stall is
//! logged and reported), so `LogEvents` does not repeat them.

mod job;
mod log;
mod process;

use std::sync::Arc;

pub use self::log::LogEvents;
/// Process-wide counters for diagnostics and benchmarks: the statements
/// solidq's own connections ran, and the lock conflicts it retried.
pub use crate::store::{lock_conflicts_retried, statements_executed};
pub use job::{
    JobCancelled, JobClaimed, JobDiscarded, JobEnqueued, JobFailed, JobReleased, JobRetried,
    JobSnoozed, JobStalled, JobSucceeded, ReleaseCause,
};
pub use process::{
    ProcessPruned, ProcessRegistered, PruneReason, RecurringFired, RecurringSkipped, SkipReason,
};

/// Receives solidq's events. Every method defaults to doing nothing.
/// Called on solidq's own threads after the fact is committed: keep it
/// quick and never block (see the [module docs](self)).
pub trait Events: Send + Sync + 'static {
    /// A job was inserted (and committed, except on a caller's connection).
    fn job_enqueued(&self, _event: &JobEnqueued) {}

    /// A worker claimed a job and is about to run it.
    fn job_claimed(&self, _event: &JobClaimed) {}

    /// An attempt succeeded and its result was recorded.
    fn job_succeeded(&self, _event: &JobSucceeded) {}

    /// An attempt failed and a retry was scheduled after a delay.
    fn job_retried(&self, _event: &JobRetried) {}

    /// A running job that an operator cancelled returned an error and was
    /// recorded as discarded (not retried).
    fn job_cancelled(&self, _event: &JobCancelled) {}

    /// A job handed itself back without spending an attempt
    /// ([`JobError::snooze`](crate::JobError::snooze) or
    /// [`JobError::interrupted`](crate::JobError::interrupted)) and is due
    /// again after `delay`.
    fn job_snoozed(&self, _event: &JobSnoozed) {}

    /// An attempt failed and the job failed for good (no attempts left, or
    /// its error said not to retry). It is kept with its error until an
    /// operator retries or discards it.
    fn job_failed(&self, _event: &JobFailed) {}

    /// A claimed job's process died and the job was released to ready, or
    /// failed because it stalled too often (or is at-most-once).
    fn job_stalled(&self, _event: &JobStalled) {}

    /// A claimed job went back to ready without counting a stall: its
    /// stopping process handed it back (not started, or still running when
    /// the grace period ended), or its process died or was pruned while
    /// holding it claimed ahead, unstarted.
    fn job_released(&self, _event: &JobReleased) {}

    /// A job under a concurrency limit with
    /// [`OnConflict::Discard`](crate::OnConflict::Discard) found its limit
    /// reached and was finished without running.
    fn job_discarded(&self, _event: &JobDiscarded) {}

    /// A process (worker, dispatcher, scheduler, supervisor) registered its
    /// row, at start or again after being pruned while alive.
    fn process_registered(&self, _event: &ProcessRegistered) {}

    /// A dead process's row was deleted and its claims handled.
    fn process_pruned(&self, _event: &ProcessPruned) {}

    /// A scheduler enqueued a recurring task's job for a tick.
    fn recurring_fired(&self, _event: &RecurringFired) {}

    /// A scheduler did not enqueue a tick: another scheduler had, or the
    /// scheduler fell too far behind and skipped ticks.
    fn recurring_skipped(&self, _event: &RecurringSkipped) {}
}

/// Hooks that do nothing, to turn events (and the log lines of
/// [`LogEvents`]) off.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoEvents;

impl Events for NoEvents {}

/// One implementation shared by several handles.
impl<E: Events + ?Sized> Events for Arc<E> {
    fn job_enqueued(&self, event: &JobEnqueued) {
        (**self).job_enqueued(event);
    }
    fn job_claimed(&self, event: &JobClaimed) {
        (**self).job_claimed(event);
    }
    fn job_succeeded(&self, event: &JobSucceeded) {
        (**self).job_succeeded(event);
    }
    fn job_retried(&self, event: &JobRetried) {
        (**self).job_retried(event);
    }
    fn job_snoozed(&self, event: &JobSnoozed) {
        (**self).job_snoozed(event);
    }
    fn job_cancelled(&self, event: &JobCancelled) {
        (**self).job_cancelled(event);
    }
    fn job_failed(&self, event: &JobFailed) {
        (**self).job_failed(event);
    }
    fn job_stalled(&self, event: &JobStalled) {
        (**self).job_stalled(event);
    }
    fn job_released(&self, event: &JobReleased) {
        (**self).job_released(event);
    }
    fn job_discarded(&self, event: &JobDiscarded) {
        (**self).job_discarded(event);
    }
    fn process_registered(&self, event: &ProcessRegistered) {
        (**self).process_registered(event);
    }
    fn process_pruned(&self, event: &ProcessPruned) {
        (**self).process_pruned(event);
    }
    fn recurring_fired(&self, event: &RecurringFired) {
        (**self).recurring_fired(event);
    }
    fn recurring_skipped(&self, event: &RecurringSkipped) {
        (**self).recurring_skipped(event);
    }
}

/// Both hooks, first then second: `(LogEvents, metrics)` keeps the log
/// lines and feeds the metrics.
impl<A: Events, B: Events> Events for (A, B) {
    fn job_enqueued(&self, event: &JobEnqueued) {
        self.0.job_enqueued(event);
        self.1.job_enqueued(event);
    }
    fn job_claimed(&self, event: &JobClaimed) {
        self.0.job_claimed(event);
        self.1.job_claimed(event);
    }
    fn job_succeeded(&self, event: &JobSucceeded) {
        self.0.job_succeeded(event);
        self.1.job_succeeded(event);
    }
    fn job_retried(&self, event: &JobRetried) {
        self.0.job_retried(event);
        self.1.job_retried(event);
    }
    fn job_snoozed(&self, event: &JobSnoozed) {
        self.0.job_snoozed(event);
        self.1.job_snoozed(event);
    }
    fn job_cancelled(&self, event: &JobCancelled) {
        self.0.job_cancelled(event);
        self.1.job_cancelled(event);
    }
    fn job_failed(&self, event: &JobFailed) {
        self.0.job_failed(event);
        self.1.job_failed(event);
    }
    fn job_stalled(&self, event: &JobStalled) {
        self.0.job_stalled(event);
        self.1.job_stalled(event);
    }
    fn job_released(&self, event: &JobReleased) {
        self.0.job_released(event);
        self.1.job_released(event);
    }
    fn job_discarded(&self, event: &JobDiscarded) {
        self.0.job_discarded(event);
        self.1.job_discarded(event);
    }
    fn process_registered(&self, event: &ProcessRegistered) {
        self.0.process_registered(event);
        self.1.process_registered(event);
    }
    fn process_pruned(&self, event: &ProcessPruned) {
        self.0.process_pruned(event);
        self.1.process_pruned(event);
    }
    fn recurring_fired(&self, event: &RecurringFired) {
        self.0.recurring_fired(event);
        self.1.recurring_fired(event);
    }
    fn recurring_skipped(&self, event: &RecurringSkipped) {
        self.0.recurring_skipped(event);
        self.1.recurring_skipped(event);
    }
}

/// The hooks used where none were installed.
pub(crate) fn default_events() -> Arc<dyn Events> {
    Arc::new(LogEvents)
}

/// `events` installed behind a guard: a panic in any of its hooks is caught
/// and logged, and the solidq thread that called it carries on (a panicking
/// hook once killed the completer, and every later outcome was lost).
pub(crate) fn guarded(events: impl Events) -> Arc<dyn Events> {
    Arc::new(Guarded(events))
}

struct Guarded<E>(E);

/// Calls one hook, catching its panic.
fn guard(hook: &str, call: impl FnOnce()) {
    if let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(call)) {
        ::log::error!(
            "the {hook} event hook panicked ({}); solidq carries on without it for this event",
            crate::types::panic_message(payload.as_ref())
        );
    }
}

macro_rules! guarded_hooks {
    ($($hook:ident($event:ty)),* $(,)?) => {
        impl<E: Events> Events for Guarded<E> {
            $(
                fn $hook(&self, event: &$event) {
                    guard(stringify!($hook), || self.0.$hook(event));
                }
            )*
        }
    };
}

guarded_hooks!(
    job_enqueued(JobEnqueued),
    job_claimed(JobClaimed),
    job_succeeded(JobSucceeded),
    job_retried(JobRetried),
    job_snoozed(JobSnoozed),
    job_cancelled(JobCancelled),
    job_failed(JobFailed),
    job_stalled(JobStalled),
    job_released(JobReleased),
    job_discarded(JobDiscarded),
    process_registered(ProcessRegistered),
    process_pruned(ProcessPruned),
    recurring_fired(RecurringFired),
    recurring_skipped(RecurringSkipped),
);

/// The time from `from` to `to` (both on the same clock), zero if `to` is
/// earlier (a clock stepped back, or rows written by hosts whose clocks
/// disagree).
pub(crate) fn elapsed(
    from: chrono::NaiveDateTime,
    to: chrono::NaiveDateTime,
) -> std::time::Duration {
    (to - from).to_std().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Names(Mutex<Vec<&'static str>>);

    impl Events for Names {
        fn job_discarded(&self, _: &JobDiscarded) {
            self.0.lock().unwrap().push("discarded");
        }
    }

    #[test]
    fn pairs_and_arcs_forward_every_call() {
        let shared = Arc::new(Names::default());
        let both = (Arc::clone(&shared), (NoEvents, Arc::clone(&shared)));
        let event = JobDiscarded {
            job_id: 1,
            kind: "k".into(),
            queue: "q".into(),
            concurrency_key: "k/1".into(),
            limit: 1,
        };
        both.job_discarded(&event);
        both.job_claimed(&JobClaimed {
            job_id: 1,
            kind: "k".into(),
            queue: "q".into(),
            priority: 0,
            attempt: 1,
            stalled_count: 0,
            process_id: 2,
            wait: std::time::Duration::ZERO,
            enqueued_at: chrono::DateTime::UNIX_EPOCH,
        });
        assert_eq!(*shared.0.lock().unwrap(), ["discarded", "discarded"]);
    }

    #[test]
    fn elapsed_never_goes_negative() {
        let t = chrono::DateTime::UNIX_EPOCH.naive_utc();
        let later = t + chrono::Duration::milliseconds(1500);
        assert_eq!(elapsed(t, later), std::time::Duration::from_millis(1500));
        assert_eq!(elapsed(later, t), std::time::Duration::ZERO);
    }
}
