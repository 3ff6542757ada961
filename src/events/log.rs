//! The default hooks: one log line per event.

use super::{
    Events, JobCancelled, JobClaimed, JobDiscarded, JobEnqueued, JobFailed, JobRetried, JobSnoozed,
    JobSucceeded, ProcessRegistered, RecurringFired, RecurringSkipped, SkipReason,
};

/// The hooks installed by default: each event becomes one line through
/// `log`, under the `solidq` target of the module that raised it.
///
/// | event | level |
/// | --- | --- |
/// | enqueued, claimed, succeeded, process registered, tick fired elsewhere | debug |
/// | discarded, recurring fired | info |
/// | retried, failed, ticks skipped for falling behind | warn |
/// | stalled, released, pruned | not here: solidq logs them itself (warn), whatever hooks are installed |
///
/// Installing other hooks replaces these lines; install
/// `(LogEvents, yours)` to keep them.
#[derive(Debug, Default, Clone, Copy)]
pub struct LogEvents;

impl Events for LogEvents {
    fn job_enqueued(&self, e: &JobEnqueued) {
        match e.run_at {
            None => log::debug!(
                "enqueued job {} ({}) on {} at priority {}",
                e.job_id,
                e.kind,
                e.queue,
                e.priority
            ),
            Some(at) => log::debug!(
                "enqueued job {} ({}) on {} at priority {}, due at {at}",
                e.job_id,
                e.kind,
                e.queue,
                e.priority
            ),
        }
    }

    fn job_claimed(&self, e: &JobClaimed) {
        log::debug!(
            "claimed job {} ({}) from {} at priority {}: attempt {}, due {:?} ago",
            e.job_id,
            e.kind,
            e.queue,
            e.priority,
            e.attempt,
            e.wait
        );
    }

    fn job_succeeded(&self, e: &JobSucceeded) {
        log::debug!(
            "job {} ({}) attempt {} succeeded in {:?}",
            e.job_id,
            e.kind,
            e.attempt,
            e.run_time
        );
    }

    fn job_retried(&self, e: &JobRetried) {
        log::warn!(
            "job {} ({}) attempt {} failed after {:?}: {}: {}; retrying in {:?}",
            e.job_id,
            e.kind,
            e.attempt,
            e.run_time,
            e.error_kind,
            e.error,
            e.delay
        );
    }

    fn job_snoozed(&self, e: &JobSnoozed) {
        log::info!(
            "job {} ({}) handed itself back after {:?} without spending attempt {}; due again in {:?}",
            e.job_id,
            e.kind,
            e.run_time,
            e.attempt,
            e.delay
        );
    }

    fn job_cancelled(&self, e: &JobCancelled) {
        log::info!(
            "job {} ({}) cancelled by an operator, stopped after {:?}; discarded",
            e.job_id,
            e.kind,
            e.run_time
        );
    }

    fn job_failed(&self, e: &JobFailed) {
        log::warn!(
            "job {} ({}) attempt {} failed after {:?}: {}: {}; not retried, the job failed",
            e.job_id,
            e.kind,
            e.attempt,
            e.run_time,
            e.error_kind,
            e.error
        );
    }

    fn job_discarded(&self, e: &JobDiscarded) {
        log::info!(
            "discarded job {} ({}) on {}: concurrency limit {} of {:?} reached",
            e.job_id,
            e.kind,
            e.queue,
            e.limit,
            e.concurrency_key
        );
    }

    fn process_registered(&self, e: &ProcessRegistered) {
        log::debug!(
            "registered {} {} as process {} (pid {} on {})",
            e.kind,
            e.name,
            e.process_id,
            e.pid,
            e.hostname
        );
    }

    fn recurring_fired(&self, e: &RecurringFired) {
        log::info!(
            "recurring task {} fired for {} as job {}",
            e.task_key,
            e.run_at,
            e.job_id
        );
    }

    fn recurring_skipped(&self, e: &RecurringSkipped) {
        match e.reason {
            SkipReason::FiredElsewhere => log::debug!(
                "recurring task {}: its {} tick was fired by another scheduler",
                e.task_key,
                e.run_at
            ),
            SkipReason::TooLate => log::warn!(
                "recurring task {}: skipped {} ticks from {} through {}, more than {} late",
                e.task_key,
                e.ticks,
                e.run_at,
                e.through,
                humantime::format_duration(crate::config::RECURRING_MAX_LATENESS)
            ),
            _ => log::warn!(
                "recurring task {} fell too far behind; skipped {} ticks from {} through {}",
                e.task_key,
                e.ticks,
                e.run_at,
                e.through
            ),
        }
    }
}
