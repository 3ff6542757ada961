//! What operators do: queue sizes and latency, pause and resume, retry and
//! discard failed jobs in batches, delete finished jobs whose retention
//! ended. Reads are backend-neutral DSL on [`AnyConnection`]; writes are
//! [`Driver`] primitives.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use chrono::NaiveDateTime;
use diesel::dsl::{count_star, min};
use diesel::prelude::*;

use super::info::held_in;
use super::schema::{
    solidq_blocked_executions as blocked, solidq_claimed_executions as claimed,
    solidq_failed_executions as failed, solidq_jobs as jobs, solidq_pauses as pauses,
    solidq_ready_executions as ready,
};
use super::{AnyConnection, Store, driver};
use crate::types::{Backend, Result};

/// Counts per queue, read in one transaction.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct QueueCounts {
    pub ready: i64,
    /// Waiting for their first run time.
    pub scheduled: i64,
    /// Waiting for the run time of a retry.
    pub retrying: i64,
    /// Claimed, not started.
    pub claimed: i64,
    /// Claimed and started.
    pub running: i64,
    pub blocked: i64,
    pub failed: i64,
    /// Workflow members waiting for their parents.
    pub waiting: i64,
    pub oldest_ready: Option<NaiveDateTime>,
    pub paused: bool,
}

/// [`Store::queue_counts`]'s snapshot.
#[derive(Debug, Clone, Default)]
pub(crate) struct QueueSnapshot {
    /// Per queue: every queue with jobs in an execution table or waiting,
    /// paused, or whose jobs finished (the job statistics keep every
    /// queue and kind ever counted); zeros for the last.
    pub counts: BTreeMap<String, QueueCounts>,
    /// The database's "now".
    pub now: NaiveDateTime,
    /// The metadata (JSON text) of every worker process row: the queues
    /// workers name are listed too.
    pub worker_metadata: Vec<String>,
}

/// Which failed jobs an operation acts on.
#[derive(Debug, Clone, Default)]
pub(crate) struct FailedSelection {
    pub ids: Option<Vec<i64>>,
    pub kind: Option<String>,
    pub queue: Option<String>,
}

/// A process row with the jobs it holds, as an operator sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProcessListing {
    pub id: i64,
    pub kind: String,
    pub name: String,
    pub pid: i32,
    pub hostname: String,
    pub supervisor_id: Option<i64>,
    pub metadata: String,
    pub last_heartbeat_at: NaiveDateTime,
    pub created_at: NaiveDateTime,
    /// Ids of the jobs it has claimed, ascending.
    pub jobs: Vec<i64>,
}

/// The names an operator command is checked against: what jobs (through
/// the job statistics and the execution tables), pauses, recurring tasks
/// and registered processes mention.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct NamesSeen {
    /// Queues of jobs: every queue the job statistics counted and the
    /// queues of jobs waiting, running or failed. Under
    /// [`NameScope::Probe`], only the probed queues found in the
    /// statistics.
    pub job_queues: Vec<String>,
    /// Kinds of jobs, as `job_queues`.
    pub job_kinds: Vec<String>,
    /// Paused queues.
    pub paused: Vec<String>,
    /// Queues recurring tasks name (`None`: the default queue).
    pub recurring_queues: Vec<Option<String>>,
    /// Kinds recurring tasks enqueue.
    pub recurring_kinds: Vec<String>,
    /// The metadata (JSON text) of every worker process row.
    pub worker_metadata: Vec<String>,
}

/// How much of the job names [`Store::names_seen`] reads.
#[derive(Debug, Clone, Copy)]
pub(crate) enum NameScope<'a> {
    /// Every queue and kind of the job statistics and of the jobs in the
    /// execution tables (never a scan of every job: finished ones are in
    /// the statistics).
    All,
    /// Only whether these kinds and queues are in the job statistics (one
    /// `EXISTS` each): what an enqueue asks on its way in.
    Probe {
        kinds: &'a [String],
        queues: &'a [String],
    },
}

/// Failed jobs handled per transaction.
pub(crate) const FAILED_BATCH: usize = 1_000;
/// Finished jobs deleted per transaction.
pub(crate) const CLEAN_BATCH: usize = 1_000;
/// Finished jobs deleted per transaction on SQLite, whose one write lock
/// each batch holds while claims and enqueues wait: about a millisecond
/// on this machine (`guide/performance.md`, Big tables).
const SQLITE_CLEAN_BATCH: usize = 500;

impl Store {
    /// Per-queue counts, the database's "now" and the workers' queue
    /// lists, all in one snapshot. Reads the execution tables, the job
    /// statistics and the process rows, never every job.
    pub(crate) fn queue_counts(&self) -> Result<QueueSnapshot> {
        use super::schema::{solidq_job_stats as stats, solidq_processes as processes};
        self.with_read("queue_counts", |conn| {
            conn.transaction(|conn| {
                let mut map: BTreeMap<String, QueueCounts> = BTreeMap::new();
                let rows: Vec<(String, i64, Option<NaiveDateTime>)> = ready::table
                    .group_by(ready::queue_name)
                    .select((ready::queue_name, count_star(), min(ready::created_at)))
                    .load(conn)?;
                for (queue, n, oldest) in rows {
                    let entry = map.entry(queue).or_default();
                    entry.ready = n;
                    entry.oldest_ready = oldest;
                }
                let mut add =
                    |rows: Vec<(String, i64)>, field: fn(&mut QueueCounts) -> &mut i64| {
                        for (queue, n) in rows {
                            *field(map.entry(queue).or_default()) = n;
                        }
                    };
                // Split as a job's status is: by attempts made, and by
                // whether the claimed job started. The scheduled ids drive
                // (`IN`): SQLite without statistics would otherwise scan
                // every job, finished ones included.
                add(
                    jobs::table
                        .filter(held_in("solidq_scheduled_executions"))
                        .filter(jobs::attempts.eq(0))
                        .group_by(jobs::queue_name)
                        .select((jobs::queue_name, count_star()))
                        .load(conn)?,
                    |c| &mut c.scheduled,
                );
                add(
                    jobs::table
                        .filter(held_in("solidq_scheduled_executions"))
                        .filter(jobs::attempts.gt(0))
                        .group_by(jobs::queue_name)
                        .select((jobs::queue_name, count_star()))
                        .load(conn)?,
                    |c| &mut c.retrying,
                );
                add(
                    blocked::table
                        .group_by(blocked::queue_name)
                        .select((blocked::queue_name, count_star()))
                        .load(conn)?,
                    |c| &mut c.blocked,
                );
                add(
                    jobs::table
                        .filter(held_in(
                            "solidq_claimed_executions WHERE started_at IS NULL",
                        ))
                        .group_by(jobs::queue_name)
                        .select((jobs::queue_name, count_star()))
                        .load(conn)?,
                    |c| &mut c.claimed,
                );
                add(
                    jobs::table
                        .filter(held_in(
                            "solidq_claimed_executions WHERE started_at IS NOT NULL",
                        ))
                        .group_by(jobs::queue_name)
                        .select((jobs::queue_name, count_star()))
                        .load(conn)?,
                    |c| &mut c.running,
                );
                add(
                    jobs::table
                        .filter(held_in("solidq_failed_executions"))
                        .group_by(jobs::queue_name)
                        .select((jobs::queue_name, count_star()))
                        .load(conn)?,
                    |c| &mut c.failed,
                );
                add(
                    jobs::table
                        .filter(held_in("solidq_waiting_executions"))
                        .group_by(jobs::queue_name)
                        .select((jobs::queue_name, count_star()))
                        .load(conn)?,
                    |c| &mut c.waiting,
                );
                let paused: Vec<String> = pauses::table.select(pauses::queue_name).load(conn)?;
                for queue in paused {
                    map.entry(queue).or_default().paused = true;
                }
                let finished: Vec<String> = stats::table
                    .select(stats::queue_name)
                    .distinct()
                    .load(conn)?;
                for queue in finished {
                    map.entry(queue).or_default();
                }
                let worker_metadata = processes::table
                    .filter(processes::kind.eq("worker"))
                    .select(processes::metadata)
                    .load(conn)?;
                let now = driver(conn).db_now()?;
                Ok(QueueSnapshot {
                    counts: map,
                    now,
                    worker_metadata,
                })
            })
        })
    }

    /// Every process row with the jobs it holds, and the database's "now",
    /// in one snapshot.
    pub(crate) fn processes_list(&self) -> Result<(Vec<ProcessListing>, NaiveDateTime)> {
        use super::schema::solidq_processes as processes;
        self.with_read("processes_list", |conn| {
            conn.transaction(|conn| {
                type Row = (
                    i64,
                    String,
                    String,
                    i32,
                    String,
                    Option<i64>,
                    String,
                    NaiveDateTime,
                    NaiveDateTime,
                );
                let rows: Vec<Row> = processes::table
                    .select((
                        processes::id,
                        processes::kind,
                        processes::name,
                        processes::pid,
                        processes::hostname,
                        processes::supervisor_id,
                        processes::metadata,
                        processes::last_heartbeat_at,
                        processes::created_at,
                    ))
                    .order((processes::kind, processes::id))
                    .load(conn)?;
                let held: Vec<(i64, i64)> = claimed::table
                    .select((claimed::process_id, claimed::job_id))
                    .order(claimed::job_id)
                    .load(conn)?;
                let now = driver(conn).db_now()?;
                let mut by_process: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
                for (process, job) in held {
                    by_process.entry(process).or_default().push(job);
                }
                let list = rows
                    .into_iter()
                    .map(
                        |(
                            id,
                            kind,
                            name,
                            pid,
                            hostname,
                            supervisor_id,
                            metadata,
                            beat,
                            created,
                        )| {
                            ProcessListing {
                                jobs: by_process.remove(&id).unwrap_or_default(),
                                id,
                                kind,
                                name,
                                pid,
                                hostname,
                                supervisor_id,
                                metadata,
                                last_heartbeat_at: beat,
                                created_at: created,
                            }
                        },
                    )
                    .collect();
                Ok((list, now))
            })
        })
    }

    /// The queues and kinds jobs, pauses, recurring tasks and worker
    /// process rows mention, in one snapshot; `scope` says how much of the
    /// jobs' names.
    pub(crate) fn names_seen(&self, scope: NameScope<'_>) -> Result<NamesSeen> {
        use super::schema::{
            solidq_job_stats as stats, solidq_processes as processes,
            solidq_recurring_tasks as recurring,
        };
        self.with_read("names_seen", |conn| {
            conn.transaction(|conn| {
                let mut seen = NamesSeen {
                    paused: pauses::table.select(pauses::queue_name).load(conn)?,
                    worker_metadata: processes::table
                        .filter(processes::kind.eq("worker"))
                        .select(processes::metadata)
                        .load(conn)?,
                    ..NamesSeen::default()
                };
                let tasks: Vec<(String, Option<String>)> = recurring::table
                    .select((recurring::kind, recurring::queue_name))
                    .load(conn)?;
                (seen.recurring_kinds, seen.recurring_queues) = tasks.into_iter().unzip();
                match scope {
                    NameScope::Probe { kinds, queues } => {
                        for kind in kinds {
                            let found: bool = diesel::select(diesel::dsl::exists(
                                stats::table.filter(stats::kind.eq(kind)),
                            ))
                            .get_result(conn)?;
                            if found {
                                seen.job_kinds.push(kind.clone());
                            }
                        }
                        for queue in queues {
                            let found: bool = diesel::select(diesel::dsl::exists(
                                stats::table.filter(stats::queue_name.eq(queue)),
                            ))
                            .get_result(conn)?;
                            if found {
                                seen.job_queues.push(queue.clone());
                            }
                        }
                    }
                    NameScope::All => {
                        let mut pairs: Vec<(String, String)> = stats::table
                            .select((stats::queue_name, stats::kind))
                            .distinct()
                            .load(conn)?;
                        // The execution tables' ids drive (`IN`), as in
                        // `queue_counts`: finished jobs are not read.
                        for table in [
                            "solidq_ready_executions",
                            "solidq_scheduled_executions",
                            "solidq_claimed_executions",
                            "solidq_blocked_executions",
                            "solidq_failed_executions",
                            "solidq_waiting_executions",
                        ] {
                            pairs.extend(
                                jobs::table
                                    .filter(held_in(table))
                                    .select((jobs::queue_name, jobs::kind))
                                    .distinct()
                                    .load::<(String, String)>(conn)?,
                            );
                        }
                        (seen.job_queues, seen.job_kinds) = pairs.into_iter().unzip();
                    }
                }
                Ok(seen)
            })
        })
    }

    /// Pauses (or resumes) `queue`; returns whether that changed anything.
    pub(crate) fn pause_set(&self, queue: &str, paused: bool) -> Result<bool> {
        self.with_driver("pause_set", |d| d.pause_set(queue, paused))
    }

    /// Deletes the failed jobs `selection` names, in batches; returns how
    /// many.
    pub(crate) fn failed_discard(&self, selection: &FailedSelection) -> Result<u64> {
        self.failed_batches("failed_discard", selection, |conn, ids| {
            driver(conn).failed_discard(ids)
        })
    }

    pub(crate) fn failed_batches(
        &self,
        operation: &'static str,
        selection: &FailedSelection,
        act: impl Fn(&mut AnyConnection, &[i64]) -> QueryResult<usize>,
    ) -> Result<u64> {
        let mut done = 0u64;
        let mut after = 0i64;
        loop {
            let ids = self.with_conn(operation, |conn| {
                failed_ids(conn, selection, after, FAILED_BATCH)
            })?;
            let Some(&last) = ids.last() else {
                return Ok(done);
            };
            after = last;
            done += self.with_conn(operation, |conn| act(conn, &ids))? as u64;
            if ids.len() < FAILED_BATCH {
                return Ok(done);
            }
        }
    }

    /// The query plans of the hot statements (name, plan), for the test that
    /// checks each uses an index and for `docs/query-plans.md`.
    pub(crate) fn explain_hot(&self) -> Result<Vec<(String, String)>> {
        self.with_conn("explain", |conn| match conn {
            #[cfg(feature = "postgres")]
            AnyConnection::Postgres(c) => super::postgres::explain(c),
            #[cfg(feature = "sqlite")]
            AnyConnection::Sqlite(c) => super::sqlite::explain(c),
            #[cfg(feature = "mysql")]
            AnyConnection::Mysql(c) => super::mysql::explain(c),
        })
    }

    /// Vacuums and analyzes solidq's tables where needed (PostgreSQL: a
    /// safety net for when autovacuum is off or lagging behind the churn
    /// of the queue tables); returns what was done.
    pub(crate) fn tables_tend(&self) -> Result<Vec<String>> {
        self.with_driver("tables_tend", |d| d.tables_tend())
    }

    /// Deletes finished jobs whose `keep_result` ended (`older_than` None),
    /// or that finished more than `older_than` ago, in batches of
    /// [`CLEAN_BATCH`] ([`SQLITE_CLEAN_BATCH`] on SQLite). On SQLite, whose
    /// one writer each batch is, it pauses after each as long as the batch
    /// took, so the writes waiting for the lock (enqueues, claims,
    /// outcomes) get it in between; on the
    /// servers the batches follow each other (such a pause halved the rate
    /// and raised the pickup p99 beside it: 8.7 → 12.3 ms, the bench's big
    /// section on PostgreSQL). Stops once `budget` has passed, if given.
    /// Returns how many it deleted and whether more may be left.
    pub(crate) fn jobs_clean(
        &self,
        older_than: Option<Duration>,
        budget: Option<Duration>,
    ) -> Result<(u64, bool)> {
        let started = Instant::now();
        let size = match self.backend() {
            Backend::Sqlite => SQLITE_CLEAN_BATCH,
            _ => CLEAN_BATCH,
        };
        let mut done = 0u64;
        loop {
            let batch = Instant::now();
            let n = self.with_driver("jobs_clean", |d| d.jobs_delete_finished(older_than, size))?;
            done += n as u64;
            if n < size {
                return Ok((done, false));
            }
            if budget.is_some_and(|budget| started.elapsed() >= budget) {
                return Ok((done, true));
            }
            if self.backend() == Backend::Sqlite {
                std::thread::sleep(batch.elapsed());
            }
        }
    }
}

fn failed_ids(
    conn: &mut AnyConnection,
    selection: &FailedSelection,
    after: i64,
    limit: usize,
) -> QueryResult<Vec<i64>> {
    let mut query = failed::table
        .inner_join(jobs::table.on(jobs::id.eq(failed::job_id)))
        .select(failed::job_id)
        .filter(failed::job_id.gt(after))
        .order(failed::job_id)
        .limit(limit as i64)
        .into_boxed();
    if let Some(ids) = &selection.ids {
        query = query.filter(failed::job_id.eq_any(ids.clone()));
    }
    if let Some(kind) = &selection.kind {
        query = query.filter(jobs::kind.eq(kind.clone()));
    }
    if let Some(queue) = &selection.queue {
        query = query.filter(jobs::queue_name.eq(queue.clone()));
    }
    query.load(conn)
}

#[cfg(all(test, feature = "sqlite"))]
mod tests {
    use super::*;
    use crate::store::NewJob;

    /// A cleaning budget ends the cleaning after the batch that passed
    /// it, saying more may be left (the maintenance round then runs again
    /// at once); without one it goes on until every expired job is gone.
    #[test]
    fn a_cleaning_budget_stops_after_a_batch_and_says_more_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::sqlite_in(dir.path());
        let job = NewJob::plain("default", "noop");
        let jobs = vec![job; SQLITE_CLEAN_BATCH * 2 + 300];
        store.jobs_enqueue(&jobs).unwrap();
        store
            .with_conn("expire", |c| match c {
                AnyConnection::Sqlite(c) => diesel::sql_query(
                    "UPDATE solidq_jobs SET finished_at = '2000-01-01 00:00:00',
                                            expires_at = '2000-01-02 00:00:00'",
                )
                .execute(c),
                #[allow(unreachable_patterns)]
                _ => unreachable!("an SQLite store"),
            })
            .unwrap();
        assert_eq!(
            store.jobs_clean(None, Some(Duration::ZERO)).unwrap(),
            (SQLITE_CLEAN_BATCH as u64, true)
        );
        assert_eq!(
            store.jobs_clean(None, None).unwrap(),
            (SQLITE_CLEAN_BATCH as u64 + 300, false)
        );
        assert_eq!(store.jobs_clean(None, None).unwrap(), (0, false));
    }
}
