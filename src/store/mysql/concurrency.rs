//! MySQL primitives of concurrency limits, with PostgreSQL's locking: a
//! semaphore row is locked (`FOR UPDATE`, or by the upsert that creates
//! it) to the end of the transaction, which serializes every acquire and
//! release of one key; due and blocked executions are taken with `FOR
//! UPDATE SKIP LOCKED`. MySQL has no `DELETE … RETURNING`, so rows are
//! locked and read first, then deleted in the same transaction.
//!
//! The locking reads name the execution table alone: a `FOR UPDATE` over
//! a join would lock (and skip on) the jobs' rows too. Each job's kind and
//! options are read after, without a lock, and a row whose job is gone is
//! left out as PostgreSQL's join leaves it out.

use std::collections::HashMap;

use chrono::NaiveDateTime;
use diesel::sql_types::{BigInt, Integer, Text, Timestamp};
use diesel::{MysqlConnection, QueryResult, QueryableByName, RunQueryDsl};

use super::{Scalar, json_ids, json_strings};
use crate::store::named::named;
use crate::store::{Cached, Discarded, LimitedJob, LimitsDriver, micros, prepared};
use crate::types::StoredLimit;

const SQL: &str = include_str!("concurrency.sql");
const LIMITED_DUE: &str = named(SQL, "scheduled_limited_due");
const LOCK_IDS: &str = named(SQL, "scheduled_take_limited/lock_ids");
pub(super) const LOCK_DUE: &str = named(SQL, "scheduled_take_limited/lock_due");
const DELETE_SCHEDULED: &str = named(SQL, "scheduled_take_limited/delete");
const TAKEN_FACTS: &str = named(SQL, "scheduled_take_limited/job_facts");
const ENSURE: &str = named(SQL, "semaphore_acquire/ensure");
const TAKE: &str = named(SQL, "semaphore_acquire/take");
const SIGNAL: &str = named(SQL, "semaphore_signal");
const BLOCKED_INSERT: &str = named(SQL, "blocked_insert");
pub(super) const BLOCKED_NEXT: &str = named(SQL, "blocked_next/lock");
const NEXT_FACTS: &str = named(SQL, "blocked_next/job_facts");
const BLOCKED_DELETE: &str = named(SQL, "blocked_delete");
const DISCARD: &str = named(SQL, "jobs_discard");
const DISCARD_INDEX: &str = named(SQL, "jobs_discard/index");
const LOCK_EXPIRED: &str = named(SQL, "semaphores_delete_expired/lock");
const DELETE_SEMAPHORES: &str = named(SQL, "semaphores_delete_expired/delete");
const EXPIRED_KEYS: &str = named(SQL, "blocked_expired_keys");

/// The execution-table half of a [`LimitedJob`].
#[derive(QueryableByName)]
struct Execution {
    #[diesel(sql_type = BigInt)]
    job_id: i64,
    #[diesel(sql_type = Text)]
    queue_name: String,
    #[diesel(sql_type = Integer)]
    priority: i32,
    #[diesel(sql_type = Text)]
    concurrency_key: String,
}

/// The jobs' half of a [`LimitedJob`].
#[derive(QueryableByName)]
struct JobFacts {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = Text)]
    kind: String,
    #[diesel(sql_type = Text)]
    options: String,
}

/// Joins executions with their jobs' kind and options (read by `facts`, an
/// operation's `job_facts` step), in the executions' order, leaving out
/// those whose job row is gone.
fn with_job_facts(
    conn: &mut MysqlConnection,
    facts: &'static str,
    executions: Vec<Execution>,
) -> QueryResult<Vec<LimitedJob>> {
    if executions.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<i64> = executions.iter().map(|x| x.job_id).collect();
    let facts: Vec<JobFacts> =
        Cached(prepared(facts).bind::<Text, _>(json_ids(&ids))).load(conn)?;
    let mut facts: HashMap<i64, JobFacts> = facts.into_iter().map(|f| (f.id, f)).collect();
    Ok(executions
        .into_iter()
        .filter_map(|x| {
            let job = facts.remove(&x.job_id)?;
            Some(LimitedJob {
                job_id: x.job_id,
                queue_name: x.queue_name,
                priority: x.priority,
                concurrency_key: x.concurrency_key,
                kind: job.kind,
                options: job.options,
            })
        })
        .collect())
}

fn slots(limit: &StoredLimit) -> i32 {
    i32::try_from(limit.limit).unwrap_or(i32::MAX)
}

#[derive(QueryableByName)]
struct KeyRow {
    #[diesel(sql_type = Text)]
    key: String,
}

impl LimitsDriver for MysqlConnection {
    fn rate_keys_lock(&mut self, keys: &[String]) -> QueryResult<Vec<(String, NaiveDateTime)>> {
        for chunk in crate::store::rates::rate_key_rows(keys).chunks(500) {
            diesel::insert_or_ignore_into(crate::store::schema::solidq_rate_limits::table)
                .values(chunk)
                .execute(self)?;
        }
        diesel::QueryDsl::for_update(crate::store::rates::rate_keys_query(keys)).load(self)
    }

    fn rate_clock(&mut self) -> QueryResult<NaiveDateTime> {
        diesel::select(diesel::dsl::sql::<Timestamp>("UTC_TIMESTAMP(6)")).get_result(self)
    }

    fn scheduled_take_limited(
        &mut self,
        ids: Option<&[i64]>,
        batch: usize,
    ) -> QueryResult<Vec<LimitedJob>> {
        let mut locked: Vec<Execution> = match ids {
            Some(ids) => Cached(prepared(LOCK_IDS).bind::<Text, _>(json_ids(ids))).load(self)?,
            None => Cached(prepared(LOCK_DUE).bind::<BigInt, _>(batch as i64)).load(self)?,
        };
        if locked.is_empty() {
            return Ok(Vec::new());
        }
        if ids.is_some() {
            // Locked in id order; handed back in priority order.
            locked.sort_by_key(|x| (x.priority, x.job_id));
        }
        let locked_ids: Vec<i64> = locked.iter().map(|x| x.job_id).collect();
        Cached(prepared(DELETE_SCHEDULED).bind::<Text, _>(json_ids(&locked_ids))).execute(self)?;
        with_job_facts(self, TAKEN_FACTS, locked)
    }

    fn scheduled_limited_due(&mut self) -> QueryResult<bool> {
        let row: Scalar = Cached(prepared(LIMITED_DUE)).get_result(self)?;
        Ok(row.v != 0)
    }

    fn semaphore_acquire(&mut self, key: &str, limit: &StoredLimit) -> QueryResult<bool> {
        let duration = micros(limit.duration());
        Cached(
            prepared(ENSURE)
                .bind::<Text, _>(key)
                .bind::<Integer, _>(slots(limit))
                .bind::<BigInt, _>(duration),
        )
        .execute(self)?;
        let taken = Cached(
            prepared(TAKE)
                .bind::<BigInt, _>(duration)
                .bind::<Text, _>(key),
        )
        .execute(self)?;
        log::trace!("semaphore {key:?}: slot taken: {}", taken > 0);
        Ok(taken > 0)
    }

    fn semaphore_signal(&mut self, key: &str, limit: &StoredLimit) -> QueryResult<bool> {
        let given = Cached(
            prepared(SIGNAL)
                .bind::<BigInt, _>(micros(limit.duration()))
                .bind::<Text, _>(key)
                .bind::<Integer, _>(slots(limit)),
        )
        .execute(self)?;
        log::trace!("semaphore {key:?}: slot given back: {}", given > 0);
        Ok(given > 0)
    }

    fn ready_insert(&mut self, jobs: &[LimitedJob]) -> QueryResult<()> {
        let ids: Vec<i64> = jobs.iter().map(|j| j.job_id).collect();
        crate::store::fair::insert_ready_by_id(self, &ids)
    }

    fn blocked_insert(&mut self, jobs: &[LimitedJob]) -> QueryResult<()> {
        if jobs.is_empty() {
            return Ok(());
        }
        let rows: Vec<(i64, &str, i32, &str, i64)> = jobs
            .iter()
            .map(|j| {
                (
                    j.job_id,
                    j.queue_name.as_str(),
                    j.priority,
                    j.concurrency_key.as_str(),
                    micros(j.slot().limit.duration()),
                )
            })
            .collect();
        Cached(
            prepared(BLOCKED_INSERT)
                .bind::<Text, _>(serde_json::to_string(&rows).expect("rows serialize")),
        )
        .execute(self)
        .map(drop)
    }

    fn blocked_next(&mut self, key: &str) -> QueryResult<Option<LimitedJob>> {
        let locked: Vec<Execution> =
            Cached(prepared(BLOCKED_NEXT).bind::<Text, _>(key)).load(self)?;
        Ok(with_job_facts(self, NEXT_FACTS, locked)?.pop())
    }

    fn blocked_delete(&mut self, job_id: i64) -> QueryResult<()> {
        Cached(prepared(BLOCKED_DELETE).bind::<BigInt, _>(job_id))
            .execute(self)
            .map(drop)
    }

    fn jobs_discard(&mut self, rows: &[Discarded]) -> QueryResult<()> {
        let mut rows: Vec<&Discarded> = rows.iter().collect();
        rows.sort_by_key(|r| r.id);
        for row in rows {
            Cached(
                prepared(DISCARD)
                    .bind::<BigInt, _>(micros(row.keep))
                    .bind::<Text, _>(&row.error)
                    .bind::<Text, _>(&row.error)
                    .bind::<BigInt, _>(row.id),
            )
            .execute(self)?;
            Cached(prepared(DISCARD_INDEX).bind::<BigInt, _>(row.id)).execute(self)?;
        }
        Ok(())
    }

    fn semaphores_delete_expired(&mut self) -> QueryResult<Vec<String>> {
        let rows: Vec<KeyRow> = Cached(prepared(LOCK_EXPIRED)).load(self)?;
        let keys: Vec<String> = rows.into_iter().map(|r| r.key).collect();
        if !keys.is_empty() {
            Cached(prepared(DELETE_SEMAPHORES).bind::<Text, _>(json_strings(&keys)))
                .execute(self)?;
        }
        Ok(keys)
    }

    fn blocked_expired_keys(&mut self, limit: usize) -> QueryResult<Vec<String>> {
        let rows: Vec<KeyRow> =
            Cached(prepared(EXPIRED_KEYS).bind::<BigInt, _>(limit as i64)).load(self)?;
        Ok(rows.into_iter().map(|r| r.key).collect())
    }
}
