//! Batches: the counts of a set of jobs, updated in the transactions that
//! enqueue and finish its members, and the callback jobs enqueued, once
//! each, in the transaction that finishes the set (see `src/batch.rs` for
//! the promises).
//!
//! A batch row is locked by the first count update of a transaction and
//! stays locked to its commit (PostgreSQL and MySQL; SQLite has one
//! writer): the transaction that takes `pending` to zero is the one that
//! sees it at zero, and each callback is marked fired by a guarded update
//! (`… WHERE x_fired_at IS NULL`) in that same transaction. Batches are
//! updated in id order, so two completion transactions cannot deadlock on
//! them.

use chrono::NaiveDateTime;
use diesel::QueryResult;
use diesel::prelude::*;
use serde::{Deserialize, Serialize};

use super::portable::Portable;
use super::schema::{solidq_batches as b, solidq_jobs as j};
use super::{BatchesDriver, NewJob, Store};
use crate::types::{Delivery, Result};

/// A batch row to insert.
#[derive(Debug, Clone)]
pub(crate) struct NewBatch {
    pub parent_id: Option<i64>,
    pub description: Option<String>,
}

/// A stored batch.
#[derive(Debug, Clone, PartialEq, Eq, diesel::Queryable, diesel::Selectable)]
#[diesel(table_name = super::schema::solidq_batches)]
pub(crate) struct BatchRow {
    pub id: i64,
    pub parent_id: Option<i64>,
    pub description: Option<String>,
    pub callbacks: String,
    pub total: i64,
    pub pending: i64,
    pub succeeded: i64,
    pub failed: i64,
    pub created_at: NaiveDateTime,
    pub closed_at: Option<NaiveDateTime>,
    pub finished_at: Option<NaiveDateTime>,
    pub complete_fired_at: Option<NaiveDateTime>,
    pub success_fired_at: Option<NaiveDateTime>,
    pub failure_fired_at: Option<NaiveDateTime>,
    /// Dependency edges between its members.
    pub edges: i64,
}

/// A change of a batch's counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct BatchDelta {
    pub total: i64,
    pub pending: i64,
    pub succeeded: i64,
    pub failed: i64,
    pub edges: i64,
}

/// Which callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Callback {
    /// Every member finished, however.
    Complete,
    /// Every member succeeded.
    Success,
    /// Every member finished and at least one failed for good, was
    /// discarded or cancelled.
    Failure,
}

/// A callback job as stored in its batch row (JSON): what
/// [`NewJob`] needs, without keys (a callback has no unique or concurrency
/// key).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StoredCallback {
    pub queue_name: String,
    pub kind: String,
    pub arguments: String,
    pub priority: i32,
    pub options: String,
    pub delivery: Delivery,
    pub max_attempts: i32,
    pub max_stalled_count: Option<i32>,
}

impl StoredCallback {
    pub(crate) fn of(job: &NewJob) -> StoredCallback {
        StoredCallback {
            queue_name: job.queue_name.clone(),
            kind: job.kind.clone(),
            arguments: job.arguments.clone(),
            priority: job.priority,
            options: job.options.clone(),
            delivery: job.delivery,
            max_attempts: job.max_attempts,
            max_stalled_count: job.max_stalled_count,
        }
    }

    pub(crate) fn to_job(&self) -> NewJob {
        NewJob {
            queue_name: self.queue_name.clone(),
            kind: self.kind.clone(),
            arguments: self.arguments.clone(),
            priority: self.priority,
            unique_key: None,
            concurrency_key: None,
            fairness_key: None,
            options: self.options.clone(),
            delivery: self.delivery,
            max_attempts: self.max_attempts,
            max_stalled_count: self.max_stalled_count,
            run_at: None,
            delay: std::time::Duration::ZERO,
        }
    }
}

/// A batch's callbacks, as stored (JSON).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StoredCallbacks {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub complete: Option<StoredCallback>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success: Option<StoredCallback>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<StoredCallback>,
}

/// How a member ended, for its batch's counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MemberEnd {
    Succeeded,
    /// Failed for good, discarded or cancelled.
    Failed,
}

/// Why a batch refused an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No batch has this id.
    Missing,
    /// It finished: closed, and every member ended.
    Finished,
    /// A job would wait for this one, which is not a member of the batch.
    UnknownParent(i64),
}

impl Store {
    /// A batch, if it exists.
    pub(crate) fn batch_get(&self, id: i64) -> Result<Option<BatchRow>> {
        self.with_conn("batch_get", |conn| super::driver(conn).batch_get(id))
    }
}

impl<C: Portable> BatchesDriver for C {
    fn batch_insert(&mut self, batch: &NewBatch) -> QueryResult<i64> {
        self.run(diesel::insert_into(b::table).values((
            b::parent_id.eq(batch.parent_id),
            b::description.eq(batch.description.as_deref()),
            b::callbacks.eq("{}"),
            b::created_at.eq(diesel::dsl::now),
        )))?;
        self.last_insert_id()
    }

    fn batch_set_callbacks(&mut self, id: i64, callbacks: &str) -> QueryResult<()> {
        self.run(diesel::update(b::table.find(id)).set(b::callbacks.eq(callbacks)))
            .map(drop)
    }

    fn batch_change(&mut self, id: i64, delta: &BatchDelta) -> QueryResult<Option<BatchRow>> {
        let changed = self.run(diesel::update(b::table.find(id)).set((
            b::total.eq(b::total + delta.total),
            b::pending.eq(b::pending + delta.pending),
            b::succeeded.eq(b::succeeded + delta.succeeded),
            b::failed.eq(b::failed + delta.failed),
            b::edges.eq(b::edges + delta.edges),
        )))?;
        if changed == 0 {
            return Ok(None);
        }
        self.batch_get(id)
    }

    fn batch_get(&mut self, id: i64) -> QueryResult<Option<BatchRow>> {
        self.fetch_first(b::table.find(id).select(b::all_columns).limit(1))
    }

    fn batch_close(&mut self, id: i64) -> QueryResult<Option<BatchRow>> {
        self.run(
            diesel::update(b::table.find(id).filter(b::closed_at.is_null()))
                .set(b::closed_at.eq(diesel::dsl::now.nullable())),
        )?;
        self.batch_get(id)
    }

    fn batch_fire(&mut self, id: i64, which: Callback) -> QueryResult<bool> {
        let now = diesel::dsl::now.nullable();
        let changed = match which {
            Callback::Complete => self.run(
                diesel::update(b::table.find(id).filter(b::complete_fired_at.is_null()))
                    .set(b::complete_fired_at.eq(now)),
            )?,
            Callback::Success => self.run(
                diesel::update(b::table.find(id).filter(b::success_fired_at.is_null()))
                    .set(b::success_fired_at.eq(now)),
            )?,
            Callback::Failure => self.run(
                diesel::update(b::table.find(id).filter(b::failure_fired_at.is_null()))
                    .set(b::failure_fired_at.eq(now)),
            )?,
        };
        Ok(changed > 0)
    }

    fn batch_finish(&mut self, id: i64) -> QueryResult<bool> {
        self.run(
            diesel::update(b::table.find(id).filter(b::finished_at.is_null()))
                .set(b::finished_at.eq(diesel::dsl::now.nullable())),
        )
        .map(|n| n > 0)
    }

    fn batch_unfinish(&mut self, id: i64) -> QueryResult<bool> {
        self.run(
            diesel::update(b::table.find(id).filter(b::finished_at.is_not_null()))
                .set(b::finished_at.eq(None::<NaiveDateTime>)),
        )
        .map(|n| n > 0)
    }

    fn batch_members(&mut self, job_ids: &[i64]) -> QueryResult<Vec<(i64, i64)>> {
        let rows: Vec<(Option<i64>, i64)> = self.fetch(
            j::table
                .filter(j::id.eq_any(job_ids))
                .filter(j::batch_id.is_not_null())
                .select((j::batch_id, j::id)),
        )?;
        Ok(rows
            .into_iter()
            .filter_map(|(batch, job)| Some((batch?, job)))
            .collect())
    }

    fn batch_assign(&mut self, batch: i64, job_ids: &[i64]) -> QueryResult<()> {
        self.run(
            diesel::update(j::table.filter(j::id.eq_any(job_ids))).set(j::batch_id.eq(Some(batch))),
        )
        .map(drop)
    }
}
