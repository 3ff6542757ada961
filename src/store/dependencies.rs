//! Dependencies between members of a batch (see `src/workflow.rs` for the
//! promises): the edges, the jobs waiting for their parents, and what
//! happens to those when a parent ends.
//!
//! Every statement here runs while the batch's row is locked by the
//! transaction (the count update of `add_on` or `members_ended` locks it,
//! to the commit; SQLite has one writer). Dependencies never cross batches,
//! so two transactions never resolve edges of the same dependant at once:
//! the one that ends the second of two parents, after the other committed,
//! reads both edges resolved (`READ COMMITTED` on PostgreSQL and MySQL
//! reads what committed before each statement) and releases the job. A
//! dependant added while its parent's completion waits for the lock is
//! seen by that completion's edge update; a parent that ended before the
//! lock was taken is read as ended, and its new edges resolved at once.

use std::collections::HashMap;

use chrono::NaiveDateTime;
use diesel::QueryResult;
use diesel::prelude::*;

use super::batches::MemberEnd;
use super::portable::Portable;
use super::schema::{
    solidq_dependencies as e, solidq_failed_executions as f, solidq_jobs as j,
    solidq_scheduled_executions as s, solidq_waiting_executions as w,
};
use super::{DependenciesDriver, NewJob};
use crate::types::ErrorInfo;

/// A run time no dependant reaches while it waits: it is inserted as a
/// scheduled job this far off (never due, never placed under its
/// concurrency limit), then moved to the waiting jobs in the same
/// transaction.
const NEVER: &str = "9999-12-31 00:00:00";

/// An edge's outcome once its parent ended.
pub(crate) const SUCCEEDED: &str = "succeeded";
/// See [`SUCCEEDED`].
pub(crate) const FAILED: &str = "failed";

/// A parent of a job being added: a job of the same call (its index) or a
/// member already stored (its id).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ParentRef {
    Index(usize),
    Id(i64),
}

/// A job of an add (its index) that waits for `parents`; with
/// `run_anyway`, it runs once they ended, however they ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Wait {
    pub index: usize,
    pub parents: Vec<ParentRef>,
    pub run_anyway: bool,
}

/// A stored parent's state, read when a job is added to wait for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParentRow {
    pub id: i64,
    pub batch_id: Option<i64>,
    /// `None` while it has not ended.
    pub ended: Option<MemberEnd>,
}

/// A dependant's row in `solidq_waiting_executions`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WaitingRow {
    pub job_id: i64,
    pub run_anyway: bool,
    /// Its own run time, when it has one (written to its job row when it
    /// is held; not read back).
    pub run_at: Option<NaiveDateTime>,
}

/// A released dependant, read from its job row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReleasedJob {
    pub id: i64,
    pub queue_name: String,
    pub priority: i32,
    pub scheduled_at: NaiveDateTime,
    pub created_at: NaiveDateTime,
    pub concurrency_key: Option<String>,
}

/// One edge: `job_id` waits for `parent_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Edge {
    pub job_id: i64,
    pub parent_id: i64,
    pub outcome: Option<String>,
}

/// Edges from `(job_id, parent_id, outcome)` rows.
pub(crate) fn edges(rows: Vec<(i64, i64, Option<String>)>) -> Vec<Edge> {
    rows.into_iter()
        .map(|(job_id, parent_id, outcome)| Edge {
            job_id,
            parent_id,
            outcome,
        })
        .collect()
}

fn never() -> NaiveDateTime {
    NaiveDateTime::parse_from_str(NEVER, "%Y-%m-%d %H:%M:%S").expect("a valid time")
}

/// `jobs` with the waiting ones inserted as never due.
pub(crate) fn held(jobs: &[NewJob], waits: &[Wait]) -> Vec<NewJob> {
    let mut jobs = jobs.to_vec();
    for wait in waits {
        jobs[wait.index].run_at = Some(never());
        jobs[wait.index].delay = std::time::Duration::ZERO;
    }
    jobs
}

/// How a stored job ended, for a dependant added to wait for it: from its
/// finish time, its last error and whether it sits in the failed jobs.
pub(crate) fn ended_of(finished: bool, errors: Option<&str>, in_failed: bool) -> Option<MemberEnd> {
    if in_failed {
        return Some(MemberEnd::Failed);
    }
    if !finished {
        return None;
    }
    let discarded = errors
        .and_then(|e| serde_json::from_str::<Vec<ErrorInfo>>(e).ok())
        .and_then(|e| e.last().map(|e| e.kind == super::DISCARDED))
        .unwrap_or(false);
    Some(if discarded {
        MemberEnd::Failed
    } else {
        MemberEnd::Succeeded
    })
}

impl<C: Portable> DependenciesDriver for C {
    fn dependency_parents(&mut self, ids: &[i64]) -> QueryResult<Vec<ParentRow>> {
        type Row = (
            i64,
            Option<i64>,
            Option<NaiveDateTime>,
            Option<String>,
            Option<i64>,
        );
        let rows: Vec<Row> = self.fetch(
            j::table
                .left_join(f::table.on(f::job_id.eq(j::id)))
                .filter(j::id.eq_any(ids))
                .select((
                    j::id,
                    j::batch_id,
                    j::finished_at,
                    j::errors,
                    f::job_id.nullable(),
                )),
        )?;
        Ok(rows
            .into_iter()
            .map(|(id, batch_id, finished_at, errors, failed)| ParentRow {
                id,
                batch_id,
                ended: ended_of(finished_at.is_some(), errors.as_deref(), failed.is_some()),
            })
            .collect())
    }

    fn dependencies_insert(&mut self, batch: i64, edges: &[(i64, i64)]) -> QueryResult<()> {
        let now = chrono::Utc::now().naive_utc();
        let rows: Vec<_> = edges
            .iter()
            .map(|(job, parent)| {
                (
                    e::job_id.eq(*job),
                    e::parent_id.eq(*parent),
                    e::batch_id.eq(batch),
                    e::created_at.eq(now),
                )
            })
            .collect();
        for chunk in rows.chunks(500) {
            self.run(diesel::insert_into(e::table).values(chunk))?;
        }
        Ok(())
    }

    fn waiting_hold(&mut self, rows: &[WaitingRow]) -> QueryResult<()> {
        let ids: Vec<i64> = rows.iter().map(|r| r.job_id).collect();
        let run_anyway: HashMap<i64, bool> =
            rows.iter().map(|r| (r.job_id, r.run_anyway)).collect();
        let now = chrono::Utc::now().naive_utc();
        let mut held = Vec::new();
        for chunk in ids.chunks(500) {
            self.run(diesel::delete(s::table.filter(s::job_id.eq_any(chunk))))?;
            // Their own run time back (a dependant with no run time of its
            // own runs when released).
            self.run(
                diesel::update(j::table.filter(j::id.eq_any(chunk)))
                    .set(j::scheduled_at.eq(j::created_at)),
            )?;
            let jobs: Vec<(i64, String, i32)> = self.fetch(
                j::table
                    .filter(j::id.eq_any(chunk))
                    .select((j::id, j::queue_name, j::priority)),
            )?;
            held.extend(jobs);
        }
        for row in rows {
            if let Some(at) = row.run_at {
                self.run(diesel::update(j::table.find(row.job_id)).set(j::scheduled_at.eq(at)))?;
            }
        }
        let values: Vec<_> = held
            .iter()
            .map(|(id, queue, priority)| {
                (
                    w::job_id.eq(*id),
                    w::queue_name.eq(queue.as_str()),
                    w::priority.eq(*priority),
                    w::run_anyway.eq(run_anyway.get(id).copied().unwrap_or(false)),
                    w::created_at.eq(now),
                )
            })
            .collect();
        for chunk in values.chunks(500) {
            self.run(diesel::insert_into(w::table).values(chunk))?;
        }
        Ok(())
    }

    fn dependencies_resolve(&mut self, parents: &[i64], outcome: &str) -> QueryResult<Vec<i64>> {
        let open = || {
            e::table
                .filter(e::parent_id.eq_any(parents))
                .filter(e::outcome.is_null())
        };
        let jobs: Vec<i64> = self.fetch(open().select(e::job_id))?;
        if !jobs.is_empty() {
            self.run(diesel::update(open()).set(e::outcome.eq(Some(outcome))))?;
        }
        Ok(jobs)
    }

    fn dependencies_of(&mut self, jobs: &[i64]) -> QueryResult<Vec<Edge>> {
        self.fetch(e::table.filter(e::job_id.eq_any(jobs)).select((
            e::job_id,
            e::parent_id,
            e::outcome,
        )))
        .map(edges)
    }

    fn dependencies_in_batch(&mut self, batch: i64) -> QueryResult<Vec<Edge>> {
        self.fetch(
            e::table
                .filter(e::batch_id.eq(batch))
                .order((e::job_id, e::parent_id))
                .select((e::job_id, e::parent_id, e::outcome)),
        )
        .map(edges)
    }

    fn waiting_get(&mut self, ids: &[i64]) -> QueryResult<Vec<WaitingRow>> {
        let rows: Vec<(i64, bool)> = self.fetch(
            w::table
                .filter(w::job_id.eq_any(ids))
                .select((w::job_id, w::run_anyway)),
        )?;
        Ok(rows
            .into_iter()
            .map(|(job_id, run_anyway)| WaitingRow {
                job_id,
                run_anyway,
                run_at: None,
            })
            .collect())
    }

    fn waiting_delete(&mut self, ids: &[i64]) -> QueryResult<()> {
        self.run(diesel::delete(w::table.filter(w::job_id.eq_any(ids))))
            .map(drop)
    }

    fn jobs_options(&mut self, ids: &[i64]) -> QueryResult<Vec<(i64, String)>> {
        self.fetch(
            j::table
                .filter(j::id.eq_any(ids))
                .select((j::id, j::options)),
        )
    }

    fn dependants_read(&mut self, ids: &[i64]) -> QueryResult<Vec<ReleasedJob>> {
        type Row = (
            i64,
            String,
            i32,
            NaiveDateTime,
            NaiveDateTime,
            Option<String>,
        );
        let rows: Vec<Row> =
            self.fetch(j::table.filter(j::id.eq_any(ids)).order(j::id).select((
                j::id,
                j::queue_name,
                j::priority,
                j::scheduled_at,
                j::created_at,
                j::concurrency_key,
            )))?;
        Ok(rows
            .into_iter()
            .map(
                |(id, queue_name, priority, scheduled_at, created_at, concurrency_key)| {
                    ReleasedJob {
                        id,
                        queue_name,
                        priority,
                        scheduled_at,
                        created_at,
                        concurrency_key,
                    }
                },
            )
            .collect())
    }

    fn dependants_ready(&mut self, jobs: &[ReleasedJob]) -> QueryResult<()> {
        let now = chrono::Utc::now().naive_utc();
        let ids: Vec<i64> = jobs.iter().map(|j| j.id).collect();
        super::fair::insert_ready_by_id(self, &ids)?;
        self.run(diesel::update(j::table.filter(j::id.eq_any(&ids))).set(j::scheduled_at.eq(now)))
            .map(drop)
    }

    fn dependants_schedule(&mut self, jobs: &[ReleasedJob]) -> QueryResult<()> {
        let now = chrono::Utc::now().naive_utc();
        let values: Vec<_> = jobs
            .iter()
            .map(|job| {
                (
                    s::job_id.eq(job.id),
                    s::queue_name.eq(job.queue_name.as_str()),
                    s::priority.eq(job.priority),
                    s::scheduled_at.eq(job.scheduled_at),
                    s::created_at.eq(now),
                    s::concurrency_key.eq(job.concurrency_key.as_deref()),
                )
            })
            .collect();
        for chunk in values.chunks(500) {
            self.run(diesel::insert_into(s::table).values(chunk))?;
        }
        Ok(())
    }
}
