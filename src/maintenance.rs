//! Maintenance, for every process that may be the only one left to do it:
//! a supervisor, and standalone workers and dispatchers (a deployment
//! without a supervisor must still recover a crashed worker's jobs). Every
//! heartbeat interval a round prunes processes whose heartbeat is older
//! than the alive threshold (on any host), releases claims whose process
//! row does not exist at all, deletes finished jobs and recurring tick
//! guards past their retention, folds old job statistics into their
//! totals and tends the tables. Any number of processes can run it at
//! once: each dead process is pruned in one transaction by exactly one of
//! them.
//!
//! A process judges others dead by heartbeat age only once its own
//! heartbeats have succeeded for a whole threshold ([`Lease::healthy_for`]):
//! after a database outage everybody's heartbeat is old, and the first
//! process back must give the others the same chance to write; after an
//! outage of its own, for half its pool timeout more (the longest its
//! pool, like theirs, waits between two tries to connect). A
//! supervisor spares its own children, whose pids it knows are alive; it
//! kills one whose heartbeat is stale instead (a frozen process), and then
//! prunes it by pid.
//!
//! And the one place where pruned processes and released jobs are logged
//! and reported to the event hooks: logged here whatever hooks are
//! installed (every stall is logged and reported), so `LogEvents` does not
//! repeat them.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use crate::config::{JOB_STATS_RETENTION, RECURRING_GUARD_RETENTION};
use crate::events::{Events, JobReleased, JobStalled, ProcessPruned, PruneReason, ReleaseCause};
use crate::lifecycle::{PruneTarget, Pruned, ReleaseReason, ReleaseReport};
use crate::process::StoppableThread;
use crate::process::heartbeat::Lease;
use crate::store::{ProcessRow, Store};
use crate::types::Result;

/// Dead processes pruned per round, at most.
const PRUNE_BATCH: usize = 100;
/// Orphaned claims released per round, at most.
const ORPHAN_BATCH: usize = 1_000;
/// How long a round deletes finished jobs at most: a backlog of millions
/// (a `keep_result` shortened) is cleaned over many rounds, one right
/// after another, and the pruning and the stop between them wait no longer
/// than this.
const CLEAN_BUDGET: Duration = Duration::from_secs(1);

/// Settings of the maintenance loop.
#[derive(Clone)]
pub(crate) struct MaintenanceConfig {
    pub interval: Duration,
    pub alive_threshold: Duration,
    pub default_max_stalled: u32,
}

/// Rows the caller knows are alive (a supervisor's running children): they
/// are not pruned by heartbeat age; `true` spares the row.
pub(crate) type Spare = Arc<dyn Fn(&ProcessRow) -> bool + Send + Sync>;

/// Who runs maintenance: its own row (never pruned by itself), what its
/// heartbeats prove, and the rows it knows are alive.
#[derive(Clone)]
pub(crate) struct Pruner {
    pub own_id: Arc<AtomicI64>,
    pub lease: Arc<Lease>,
    pub spare: Option<Spare>,
}

/// A running maintenance thread; stopping it joins it.
pub(crate) type Maintenance = StoppableThread;

/// Runs a maintenance round at once and then every `config.interval` on
/// its own thread.
pub(crate) fn spawn(
    store: Store,
    pruner: Pruner,
    config: MaintenanceConfig,
    events: Arc<dyn Events>,
) -> Result<Maintenance> {
    StoppableThread::spawn("solidq-maintenance", move |stopped| {
        loop {
            let more = run_once(&store, &pruner, &config, events.as_ref());
            // Finished jobs left to clean: the next round at once, so the
            // pruning between rounds is never more than a cleaning budget
            // (CLEAN_BUDGET) late.
            let wait = if more {
                Duration::ZERO
            } else {
                config.interval
            };
            if stopped.recv_timeout(wait).is_ok() {
                break;
            }
        }
    })
}

/// One round: prune expired processes (once healthy long enough), release
/// orphaned claims, clean (for [`CLEAN_BUDGET`] at most) and tend. True
/// when finished jobs may be left to clean.
pub(crate) fn run_once(
    store: &Store,
    pruner: &Pruner,
    config: &MaintenanceConfig,
    events: &dyn Events,
) -> bool {
    let reason = ReleaseReason::Died {
        default_max_stalled: config.default_max_stalled,
        cause: None,
    };
    // After an outage of its own, a process also waits for the others'
    // pools to connect again: r2d2 retries a failed connect after a
    // doubling delay (up to half the pool timeout, 15 s by default), so a
    // process whose pool failed a few times during the outage may write
    // its first heartbeat seconds after the database is back. Judged
    // after one threshold only, it was pruned alive (the outage test saw
    // it, a 3.4 s outage, its heartbeat 2.4 s after the database's return).
    let needed = judging_after(
        &pruner.lease,
        config.alive_threshold,
        store.reconnect_within(),
    );
    let healthy = pruner.lease.healthy_for();
    if healthy >= needed {
        // Health is asked again for each row, inside its transaction.
        let spare = |row: &ProcessRow| {
            pruner.lease.healthy_for() < needed
                || pruner.spare.as_ref().is_some_and(|spare| spare(row))
        };
        let target = PruneTarget::Expired {
            threshold: config.alive_threshold,
            exclude: pruner.own_id.load(Ordering::SeqCst),
            limit: PRUNE_BATCH,
            spare: &spare,
        };
        match store.process_prune(target, &reason) {
            Ok(pruned) => report_pruned(&pruned, PruneReason::HeartbeatExpired, events),
            Err(error) => log::warn!("pruning dead processes failed: {error}"),
        }
    } else {
        log::debug!(
            "not judging other processes by heartbeat age yet: this one's heartbeats have succeeded for {healthy:?}, less than {needed:?} (the alive threshold {:?}, and after an outage the time the others' pools may take to connect again)",
            config.alive_threshold
        );
    }
    match store.claimed_release_orphans(config.default_max_stalled, ORPHAN_BATCH) {
        Ok(report) => report_released(&report, "its process row does not exist", events),
        Err(error) => log::warn!("releasing orphaned claims failed: {error}"),
    }
    let more = clean(store);
    tend(store);
    more
}

/// Deletes finished jobs whose `keep_result` has ended, and the guards of
/// recurring ticks older than [`RECURRING_GUARD_RETENTION`] (but each
/// task's latest), in batches. Guards are aged out on their own, not with
/// their jobs: a tick whose job was deleted must still not fire again
/// while any scheduler could still fire it. Folds the job statistics'
/// minutes older than [`JOB_STATS_RETENTION`] into their totals rows.
/// Stops deleting jobs after [`CLEAN_BUDGET`]; true when more may be left.
pub(crate) fn clean(store: &Store) -> bool {
    let more = match store.jobs_clean(None, Some(CLEAN_BUDGET)) {
        Ok((0, _)) => false,
        Ok((n, more)) => {
            log::info!("deleted {n} finished jobs past their keep_result");
            more
        }
        Err(error) => {
            log::warn!("cleaning finished jobs failed: {error}");
            false
        }
    };
    match store.recurring_guards_clean(RECURRING_GUARD_RETENTION) {
        Ok(0) => {}
        Ok(n) => log::info!(
            "deleted {n} recurring tick guards older than {}",
            humantime::format_duration(RECURRING_GUARD_RETENTION)
        ),
        Err(error) => log::warn!("cleaning recurring tick guards failed: {error}"),
    }
    match store.job_stats_fold(JOB_STATS_RETENTION) {
        Ok(0) => {}
        Ok(n) => log::debug!(
            "folded {n} job statistics rows older than {} into the totals",
            humantime::format_duration(JOB_STATS_RETENTION)
        ),
        Err(error) => log::warn!("folding old job statistics failed: {error}"),
    }
    more
}

/// Vacuums and analyzes solidq's tables where their statistics say so.
/// Every job inserts and deletes a row in two or three small tables; when
/// autovacuum is off or slow, their dead rows make each claim wade through
/// thousands of dead index entries (a soak on a server with autovacuum off
/// slowed to a quarter in three minutes), and stale statistics mislead the
/// planner.
pub(crate) fn tend(store: &Store) {
    match store.tables_tend() {
        Ok(done) => {
            for action in done {
                log::debug!("tended {action}");
            }
        }
        Err(error) => log::warn!("vacuuming solidq's tables failed: {error}"),
    }
}

/// How long `lease`'s heartbeats must have succeeded before its process
/// judges others by heartbeat age: the alive threshold, and after an
/// outage of its own `reconnect_within` more (see [`run_once`]).
fn judging_after(lease: &Lease, alive_threshold: Duration, reconnect_within: Duration) -> Duration {
    if lease.ever_failed() {
        alive_threshold + reconnect_within
    } else {
        alive_threshold
    }
}

/// Logs each pruned process and each of its jobs, and tells the hooks.
pub(crate) fn report_pruned(pruned: &[Pruned], reason: PruneReason, events: &dyn Events) {
    for p in pruned {
        let row = &p.process;
        let why = match reason {
            PruneReason::Exited => "it exited without deregistering".to_string(),
            PruneReason::KilledAtShutdown => {
                "it was killed after the shutdown grace period".to_string()
            }
            _ => format!(
                "its last heartbeat was at {} (database clock)",
                row.last_heartbeat_at
            ),
        };
        log::warn!(
            "pruned {} {} (process {}, pid {} on {}): {why}; released {} jobs, failed {}",
            row.kind,
            row.name,
            row.id,
            row.pid,
            row.hostname,
            p.report.released().len(),
            p.report.failed().len()
        );
        let cause = format!("process {} ({}) died", row.id, row.name);
        if reason == PruneReason::KilledAtShutdown {
            report_shutdown_kill(&p.report, events);
        } else {
            report_released(&p.report, &cause, events);
        }
        events.process_pruned(&ProcessPruned {
            process_id: row.id,
            kind: row.kind.clone(),
            name: row.name.clone(),
            pid: row.pid,
            hostname: row.hostname.clone(),
            last_heartbeat_at: row.last_heartbeat_at.and_utc(),
            reason,
            released: p.report.released().len(),
            failed: p.report.failed().len(),
        });
    }
}

/// Logs every stalled job at warn level with its id, kind, dead process and
/// count, and reports it to the hooks. A job the dead process held ahead
/// and never started is no stall: it is reported released.
pub(crate) fn report_released(report: &ReleaseReport, cause: &str, events: &dyn Events) {
    for entry in &report.entries {
        let job = &entry.job;
        if !job.started {
            log::info!(
                "job {} ({}, queue {}) released to ready: {cause} while holding it unstarted (process {}); not a stall",
                job.id,
                job.kind,
                job.queue_name,
                job.process_id
            );
            events.job_released(&JobReleased {
                job_id: job.id,
                kind: job.kind.clone(),
                queue: job.queue_name.clone(),
                process_id: job.process_id,
                cause: ReleaseCause::NotStarted,
                failed: None,
            });
            continue;
        }
        match &entry.failed {
            None => log::warn!(
                "job {} ({}, queue {}) stalled: {cause} while holding it (process {}); released to ready (stalled_count {})",
                job.id,
                job.kind,
                job.queue_name,
                job.process_id,
                entry.stalled_count
            ),
            Some(error) => log::warn!(
                "job {} ({}, queue {}) stalled: {cause} while holding it (process {}); failed: {error} (stalled_count {})",
                job.id,
                job.kind,
                job.queue_name,
                job.process_id,
                entry.stalled_count
            ),
        }
        events.job_stalled(&JobStalled {
            job_id: job.id,
            kind: job.kind.clone(),
            queue: job.queue_name.clone(),
            process_id: job.process_id,
            stalled_count: entry.stalled_count,
            failed: entry.failed.clone(),
        });
    }
}

/// Logs every job of a worker killed at shutdown (released, not a stall;
/// at-most-once ones failed) and reports it to the hooks.
fn report_shutdown_kill(report: &ReleaseReport, events: &dyn Events) {
    for entry in &report.entries {
        let job = &entry.job;
        match &entry.failed {
            None => log::warn!(
                "job {} ({}, queue {}) released to ready: its worker was killed at shutdown",
                job.id,
                job.kind,
                job.queue_name
            ),
            Some(error) => log::warn!(
                "job {} ({}, queue {}) failed: {error}",
                job.id,
                job.kind,
                job.queue_name
            ),
        }
        events.job_released(&JobReleased {
            job_id: job.id,
            kind: job.kind.clone(),
            queue: job.queue_name.clone(),
            process_id: job.process_id,
            cause: ReleaseCause::KilledAtShutdown,
            failed: entry.failed.clone(),
        });
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    #[test]
    fn after_an_outage_of_its_own_a_pruner_also_waits_for_the_others_pools() {
        let (threshold, reconnect) = (Duration::from_secs(1), Duration::from_secs(15));
        let lease = Lease::new(Instant::now(), threshold, Duration::from_millis(200));
        assert_eq!(
            judging_after(&lease, threshold, reconnect),
            threshold,
            "a process whose heartbeats never failed"
        );
        lease.failed();
        lease.renew(Instant::now());
        assert_eq!(
            judging_after(&lease, threshold, reconnect),
            threshold + reconnect,
            "after an outage of its own, healthy again"
        );
    }
}
