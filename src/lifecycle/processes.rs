//! Process rows and what happens to the claims of a process that stops or
//! dies: the release rules, written once for every path (an orderly stop,
//! a supervisor seeing its child exit, heartbeat expiry, orphaned claims).
//!
//! A dead process is pruned in ONE transaction: its row is locked (`FOR
//! UPDATE SKIP LOCKED` on PostgreSQL, so two supervisors never prune the
//! same process; SQLite's single writer does the same), its claims are
//! deleted and each job is released or failed, and the row is deleted.
//!
//! The same transaction counts, in the job statistics, every stall (a job
//! the dead process had started) and every at-most-once job failed because
//! its worker stopped while it ran: those attempts have no worker left to
//! count them. Jobs handed back unstarted, or at an orderly stop, are not
//! counted: their next attempt is.

use std::time::Duration;

use diesel::QueryResult;

use super::places as concurrency;
use crate::store::{
    Counted, Driver, Failed, NewProcess, ProcessRow, Released, ReleasedJob, Store, error_json,
    in_transaction,
};
use crate::types::{Delivery, Result};

/// Why a process's claims are being handed back, which decides each job's
/// fate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReleaseReason {
    /// The process stops in order. Jobs go back to ready, not counted as
    /// stalls, except at-most-once jobs in `started` (still running, or run
    /// with their outcome unwritten), which fail.
    Shutdown { started: Vec<i64> },
    /// Its supervisor killed it after the shutdown grace period: as an
    /// orderly stop, except at-most-once jobs that had started fail.
    Killed,
    /// The process died. A job it had started gets `stalled_count + 1`
    /// and runs alone next time; past its `max_stalled_count` (the job's
    /// own, else `default_max_stalled`), or for at-most-once jobs, it
    /// fails instead of going back to ready. A job it held ahead and never
    /// started goes back to ready as it was. `cause` is how the process
    /// ended, as far as the one releasing its jobs knows ("pid 4711 was
    /// killed by signal 6 (SIGABRT) after 10.2s"); without it, a process
    /// pruned for its silence is said to have stopped heartbeating.
    Died {
        default_max_stalled: u32,
        cause: Option<String>,
    },
}

/// What happened to one released claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReleaseEntry {
    pub job: ReleasedJob,
    /// The job's `stalled_count` after this release.
    pub stalled_count: u32,
    /// `Some(message)` when the job was failed instead of released.
    pub failed: Option<String>,
}

/// What happened to the claims of a stopping or dead process.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct ReleaseReport {
    pub entries: Vec<ReleaseEntry>,
}

impl ReleaseReport {
    /// Jobs put back in ready.
    pub(crate) fn released(&self) -> Vec<i64> {
        self.entries
            .iter()
            .filter(|e| e.failed.is_none())
            .map(|e| e.job.id)
            .collect()
    }

    /// Jobs moved to failed.
    pub(crate) fn failed(&self) -> Vec<i64> {
        self.entries
            .iter()
            .filter(|e| e.failed.is_some())
            .map(|e| e.job.id)
            .collect()
    }
}

/// Which process rows to prune.
#[derive(Clone, Copy)]
pub(crate) enum PruneTarget<'a> {
    /// Rows whose last heartbeat is older than `threshold` (database
    /// clock), except `exclude` (the caller's own row) and those `spare`
    /// keeps (a supervisor's children, known alive), at most `limit`.
    Expired {
        threshold: Duration,
        exclude: i64,
        limit: usize,
        spare: &'a dyn Fn(&ProcessRow) -> bool,
    },
    /// The rows of OS process `pid` on `hostname` spawned by supervisor
    /// `supervisor_id`: a child it just saw exit (a pid reused by another
    /// supervisor's child is not touched).
    Pid {
        hostname: &'a str,
        pid: i32,
        supervisor_id: i64,
    },
}

/// A pruned process and what became of its claims.
#[derive(Debug, Clone)]
pub(crate) struct Pruned {
    pub process: ProcessRow,
    pub report: ReleaseReport,
}

impl Store {
    /// Registers a process; returns its id.
    pub(crate) fn process_register(&self, process: &NewProcess) -> Result<i64> {
        self.with_driver("process_register", |d| d.process_insert(process))
    }

    /// Writes a heartbeat; `false` when the process row is gone (pruned).
    /// Waits at most `checkout` for a pooled connection: a heartbeat must
    /// fail visibly while the database is away.
    ///
    /// A heartbeat is idempotent, so one that met a lost connection runs
    /// once more, at once, on a fresh one: a server that ends sessions
    /// (`pg_terminate_backend`, a pooler, a failover) often ends the idle
    /// one the next heartbeat would take, and a process whose every
    /// heartbeat met a dead connection would stop itself with the server
    /// up.
    pub(crate) fn process_heartbeat(&self, id: i64, checkout: Duration) -> Result<bool> {
        let beat = || {
            self.with_conn_within("process_heartbeat", Some(checkout), |conn| {
                crate::store::driver(conn).process_heartbeat(id)
            })
        };
        match beat() {
            Err(error) if error.is_connection_lost() => {
                log::debug!("heartbeat: {error}; once more on a fresh connection");
                beat()
            }
            other => other,
        }
    }

    /// Deletes a process row and, in the same transaction, handles every
    /// claim it still holds per `reason`.
    pub(crate) fn process_deregister(
        &self,
        process_id: i64,
        reason: &ReleaseReason,
    ) -> Result<ReleaseReport> {
        self.with_driver("process_deregister", |d| {
            in_transaction(d, |d| {
                let claims = d.claimed_delete_by_process(process_id)?;
                let report = release_claims(d, &claims, reason)?;
                d.process_delete(process_id)?;
                Ok(report)
            })
        })
    }

    /// Prunes the rows `target` names, one transaction per process. A row
    /// another pruner holds, or that heartbeated meanwhile, is skipped.
    pub(crate) fn process_prune(
        &self,
        target: PruneTarget<'_>,
        reason: &ReleaseReason,
    ) -> Result<Vec<Pruned>> {
        let mut spared: &dyn Fn(&ProcessRow) -> bool = &|_| false;
        let (candidates, dead_for) = match target {
            PruneTarget::Expired {
                threshold,
                exclude,
                limit,
                spare,
            } => {
                let mut rows = self.with_driver("process_prune", |d| {
                    d.process_find_expired(threshold, exclude, limit)
                })?;
                rows.retain(|row| !spare(row));
                spared = spare;
                (rows, Some(threshold))
            }
            PruneTarget::Pid {
                hostname,
                pid,
                supervisor_id,
            } => (
                self.with_driver("process_prune", |d| {
                    d.process_find_by_pid(hostname, pid, supervisor_id)
                })?,
                None,
            ),
        };
        let mut pruned = Vec::new();
        for candidate in candidates {
            let outcome = self.with_driver("process_prune", |d| {
                in_transaction(d, |d| {
                    let Some(process) = d.process_lock(candidate.id, dead_for)? else {
                        return Ok(None);
                    };
                    // Asked again with the row locked: the pruner's own
                    // transaction may have waited (behind SQLite's write
                    // lock, say) as long as everybody's heartbeats did.
                    if spared(&process) {
                        return Ok(None);
                    }
                    let claims = d.claimed_delete_by_process(process.id)?;
                    let report = release_claims(d, &claims, &reason.for_process(&process))?;
                    d.process_delete(process.id)?;
                    Ok(Some(Pruned { process, report }))
                })
            })?;
            pruned.extend(outcome);
        }
        Ok(pruned)
    }

    /// Releases (with the stall rules) up to `limit` claims whose process
    /// row does not exist at all.
    pub(crate) fn claimed_release_orphans(
        &self,
        default_max_stalled: u32,
        limit: usize,
    ) -> Result<ReleaseReport> {
        self.with_driver("claimed_release_orphans", |d| {
            in_transaction(d, |d| {
                let claims = d.claimed_delete_orphans(limit)?;
                release_claims(
                    d,
                    &claims,
                    &ReleaseReason::Died {
                        default_max_stalled,
                        cause: Some("its process row was gone".into()),
                    },
                )
            })
        })
    }
}

impl ReleaseReason {
    /// This reason for pruned process `process`: a death with no cause
    /// known is the silence it was pruned for.
    fn for_process(&self, process: &ProcessRow) -> ReleaseReason {
        match self {
            ReleaseReason::Died {
                default_max_stalled,
                cause: None,
            } => ReleaseReason::Died {
                default_max_stalled: *default_max_stalled,
                cause: Some(format!(
                    "pid {} on {} stopped heartbeating at {} (database clock)",
                    process.pid,
                    process.hostname,
                    process.last_heartbeat_at.format("%Y-%m-%d %H:%M:%S%.3f")
                )),
            },
            other => other.clone(),
        }
    }
}

/// The error kind of a stall: in a released job's `errors` (its stall
/// history, the attempt going on) and as the final error of a job that
/// stalled too often.
pub(crate) const STALLED: &str = "stalled";

/// Applies `reason`'s rules to claims that were just deleted.
fn release_claims(
    d: &mut dyn Driver,
    claims: &[ReleasedJob],
    reason: &ReleaseReason,
) -> QueryResult<ReleaseReport> {
    let mut report = ReleaseReport::default();
    let (mut release, mut fail, mut counted) = (vec![], vec![], vec![]);
    for job in claims {
        let at_most_once = Delivery::from_column(&job.delivery) == Delivery::AtMostOnce;
        let stalled_before = u32::try_from(job.stalled_count).unwrap_or(0);
        let (stalled, failure) = match reason {
            ReleaseReason::Shutdown { started } => (
                false,
                (at_most_once && started.contains(&job.id)).then(|| {
                    (
                        "shutdown",
                        "the worker stopped while the job was running; at_most_once delivery, not retried".to_string(),
                    )
                }),
            ),
            ReleaseReason::Killed => (
                false,
                (at_most_once && job.started).then(|| {
                    (
                        "shutdown",
                        format!(
                            "process {} was killed after the shutdown grace period; at_most_once delivery, not retried",
                            job.process_id
                        ),
                    )
                }),
            ),
            // A claim held ahead that never started is not a stall: it
            // goes back as it came, whatever its delivery.
            ReleaseReason::Died { .. } if !job.started => (false, None),
            ReleaseReason::Died {
                default_max_stalled,
                cause,
            } => {
                let cause = cause.as_deref().unwrap_or("how is not known");
                let stalls = stalled_before + 1;
                let max = job.max_stalled_count.map_or(*default_max_stalled, |m| u32::try_from(m).unwrap_or(0));
                let failure = if at_most_once {
                    Some((
                        "process_died",
                        format!(
                            "process died; at_most_once delivery, not retried (process {} held it: {cause})",
                            job.process_id
                        ),
                    ))
                } else if stalls > max {
                    Some((
                        STALLED,
                        format!(
                            "stalled {stalls} times (max_stalled_count {max}): the process running it died each time, last process {}: {cause}",
                            job.process_id
                        ),
                    ))
                } else {
                    None
                };
                (true, failure)
            }
        };
        if stalled || failure.is_some() {
            let outcome = if stalled {
                Counted::Stalled
            } else {
                Counted::Failed
            };
            counted.push((job, outcome));
        }
        match &failure {
            Some((kind, message)) => fail.push(Failed {
                id: job.id,
                error: error_json(kind, message),
                ends_attempt: !stalled,
                stalled,
            }),
            None => release.push(Released {
                id: job.id,
                stalled,
                // The stall history: which process died holding it. Not an
                // attempt's error (`attempt` is unset): the attempt did not
                // end, it runs again.
                error: stalled.then(|| {
                    let (default_max, cause) = match reason {
                        ReleaseReason::Died {
                            default_max_stalled,
                            cause,
                        } => (*default_max_stalled, cause.as_deref()),
                        _ => (0, None),
                    };
                    error_json(
                        STALLED,
                        &format!(
                            "process {} died while running it (stall {} of at most {}): {}; released to run again, alone in its process",
                            job.process_id,
                            stalled_before + 1,
                            job.max_stalled_count
                                .map_or(default_max, |m| u32::try_from(m).unwrap_or(0)),
                            cause.unwrap_or("how is not known"),
                        ),
                    )
                }),
            }),
        }
        report.entries.push(ReleaseEntry {
            job: job.clone(),
            stalled_count: stalled_before + u32::from(stalled),
            failed: failure.map(|(_, message)| message),
        });
    }
    if !release.is_empty() {
        d.jobs_release(&release)?;
    }
    if !fail.is_empty() {
        d.jobs_fail(&fail)?;
        let ids: Vec<i64> = fail.iter().map(|f| f.id).collect();
        super::rules::ended_by_id(d, &ids, crate::store::batches::MemberEnd::Failed)?;
        // A released job keeps its concurrency slot (it never gave it
        // back); a failed one ends and gives it to the next blocked job.
        let slots: Vec<_> = report
            .entries
            .iter()
            .filter(|e| e.failed.is_some())
            .filter_map(|e| e.job.slot())
            .collect();
        if !slots.is_empty() {
            let ready = concurrency::release_slots(d, &slots)?;
            concurrency::notify(d, &ready)?;
        }
    }
    if !counted.is_empty() {
        count_releases(d, &counted)?;
    }
    Ok(report)
}

/// Adds released jobs to the job statistics, at the current minute (no
/// wait or run time: the dead process took those with it).
fn count_releases(d: &mut dyn Driver, counted: &[(&ReleasedJob, Counted)]) -> QueryResult<()> {
    let jobs: Vec<(&str, &str, Counted)> = counted
        .iter()
        .map(|(job, outcome)| (job.queue_name.as_str(), job.kind.as_str(), *outcome))
        .collect();
    crate::store::count_now(d, &jobs)
}
