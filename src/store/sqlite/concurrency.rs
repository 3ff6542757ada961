//! SQLite primitives of concurrency limits. Every caller holds the write
//! lock (`BEGIN IMMEDIATE`), so acquiring and giving back slots need no
//! row locks: one writer at a time is the serialization.

use chrono::NaiveDateTime;
use diesel::sql_types::{BigInt, Integer, Text, Timestamp};
use diesel::{QueryResult, QueryableByName, RunQueryDsl, SqliteConnection};

use super::{json_ids, plus};
use crate::store::named::named;
use crate::store::{Cached, Discarded, LimitedJob, LimitsDriver, prepared, utc_now};
use crate::types::StoredLimit;

const SQL: &str = include_str!("concurrency.sql");
const LIMITED_DUE: &str = named(SQL, "scheduled_limited_due");
const FIND_IDS: &str = named(SQL, "scheduled_take_limited/find_ids");
const FIND_DUE: &str = named(SQL, "scheduled_take_limited/find_due");
const DELETE_SCHEDULED: &str = named(SQL, "scheduled_take_limited/delete");
const ACQUIRE: &str = named(SQL, "semaphore_acquire");
const SIGNAL: &str = named(SQL, "semaphore_signal");
const BLOCKED_INSERT: &str = named(SQL, "blocked_insert");
const BLOCKED_NEXT: &str = named(SQL, "blocked_next");
const BLOCKED_DELETE: &str = named(SQL, "blocked_delete");
const DISCARD: &str = named(SQL, "jobs_discard");
const DELETE_EXPIRED: &str = named(SQL, "semaphores_delete_expired");
const EXPIRED_KEYS: &str = named(SQL, "blocked_expired_keys");

#[derive(QueryableByName)]
struct Due {
    #[diesel(sql_type = diesel::sql_types::Bool)]
    due: bool,
}

#[derive(QueryableByName)]
struct Value {
    #[diesel(sql_type = Integer)]
    value: i32,
}

fn semaphore(
    conn: &mut SqliteConnection,
    sql: &'static str,
    key: &str,
    limit: &StoredLimit,
) -> QueryResult<bool> {
    let now = utc_now();
    let rows: Vec<Value> = Cached(
        prepared(sql)
            .bind::<Text, _>(key)
            .bind::<Integer, _>(i32::try_from(limit.limit).unwrap_or(i32::MAX))
            .bind::<Timestamp, _>(plus(now, limit.duration()))
            .bind::<Timestamp, _>(now),
    )
    .load(conn)?;
    if let Some(row) = rows.first() {
        log::trace!("semaphore {key:?}: {} slots free", row.value);
    }
    Ok(!rows.is_empty())
}

#[derive(QueryableByName)]
struct KeyRow {
    #[diesel(sql_type = Text)]
    key: String,
}

impl LimitsDriver for SqliteConnection {
    fn rate_keys_lock(&mut self, keys: &[String]) -> QueryResult<Vec<(String, NaiveDateTime)>> {
        // The write lock is held already (BEGIN IMMEDIATE): reading the
        // rows is enough.
        for chunk in crate::store::rates::rate_key_rows(keys).chunks(500) {
            diesel::insert_or_ignore_into(crate::store::schema::solidq_rate_limits::table)
                .values(chunk)
                .execute(self)?;
        }
        crate::store::rates::rate_keys_query(keys).load(self)
    }

    fn rate_clock(&mut self) -> QueryResult<NaiveDateTime> {
        Ok(utc_now())
    }

    fn scheduled_take_limited(
        &mut self,
        ids: Option<&[i64]>,
        batch: usize,
    ) -> QueryResult<Vec<LimitedJob>> {
        let now = utc_now();
        let jobs: Vec<LimitedJob> = match ids {
            Some(ids) => Cached(
                prepared(FIND_IDS)
                    .bind::<Text, _>(json_ids(ids))
                    .bind::<Timestamp, _>(now),
            )
            .load(self)?,
            None => Cached(
                prepared(FIND_DUE)
                    .bind::<Timestamp, _>(now)
                    .bind::<BigInt, _>(batch as i64),
            )
            .load(self)?,
        };
        if !jobs.is_empty() {
            Cached(
                prepared(DELETE_SCHEDULED)
                    .bind::<Text, _>(json_ids(&jobs.iter().map(|j| j.job_id).collect::<Vec<_>>())),
            )
            .execute(self)?;
        }
        Ok(jobs)
    }

    fn scheduled_limited_due(&mut self) -> QueryResult<bool> {
        let rows: Vec<Due> =
            Cached(prepared(LIMITED_DUE).bind::<Timestamp, _>(utc_now())).load(self)?;
        Ok(rows.first().is_some_and(|r| r.due))
    }

    fn semaphore_acquire(&mut self, key: &str, limit: &StoredLimit) -> QueryResult<bool> {
        semaphore(self, ACQUIRE, key, limit)
    }

    fn semaphore_signal(&mut self, key: &str, limit: &StoredLimit) -> QueryResult<bool> {
        semaphore(self, SIGNAL, key, limit)
    }

    fn ready_insert(&mut self, jobs: &[LimitedJob]) -> QueryResult<()> {
        let ids: Vec<i64> = jobs.iter().map(|j| j.job_id).collect();
        crate::store::fair::insert_ready_by_id(self, &ids)
    }

    fn blocked_insert(&mut self, jobs: &[LimitedJob]) -> QueryResult<()> {
        let now = utc_now();
        for job in jobs {
            Cached(
                prepared(BLOCKED_INSERT)
                    .bind::<BigInt, _>(job.job_id)
                    .bind::<Text, _>(&job.queue_name)
                    .bind::<Integer, _>(job.priority)
                    .bind::<Text, _>(&job.concurrency_key)
                    .bind::<Timestamp, _>(plus(now, job.slot().limit.duration()))
                    .bind::<Timestamp, _>(now),
            )
            .execute(self)?;
        }
        Ok(())
    }

    fn blocked_next(&mut self, key: &str) -> QueryResult<Option<LimitedJob>> {
        let mut rows: Vec<LimitedJob> =
            Cached(prepared(BLOCKED_NEXT).bind::<Text, _>(key)).load(self)?;
        Ok(rows.pop())
    }

    fn blocked_delete(&mut self, job_id: i64) -> QueryResult<()> {
        Cached(prepared(BLOCKED_DELETE).bind::<BigInt, _>(job_id))
            .execute(self)
            .map(drop)
    }

    fn jobs_discard(&mut self, rows: &[Discarded]) -> QueryResult<()> {
        let now = utc_now();
        for row in rows {
            Cached(
                prepared(DISCARD)
                    .bind::<Text, _>(&row.error)
                    .bind::<Timestamp, _>(now)
                    .bind::<Timestamp, _>(plus(now, row.keep))
                    .bind::<BigInt, _>(row.id),
            )
            .execute(self)?;
        }
        Ok(())
    }

    fn semaphores_delete_expired(&mut self) -> QueryResult<Vec<String>> {
        let rows: Vec<KeyRow> =
            Cached(prepared(DELETE_EXPIRED).bind::<Timestamp, _>(utc_now())).load(self)?;
        Ok(rows.into_iter().map(|r| r.key).collect())
    }

    fn blocked_expired_keys(&mut self, limit: usize) -> QueryResult<Vec<String>> {
        let rows: Vec<KeyRow> = Cached(
            prepared(EXPIRED_KEYS)
                .bind::<Timestamp, _>(utc_now())
                .bind::<BigInt, _>(limit as i64),
        )
        .load(self)?;
        Ok(rows.into_iter().map(|r| r.key).collect())
    }
}
