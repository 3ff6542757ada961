//! PostgreSQL primitives of concurrency limits: semaphores as upserts (the
//! row lock serializes every acquire and release of one key), blocked
//! executions taken with `SKIP LOCKED`.

use chrono::NaiveDateTime;
use diesel::sql_types::{Array, BigInt, Integer, Text, Timestamp};
use diesel::{PgConnection, QueryResult, QueryableByName, RunQueryDsl};

use crate::store::named::named;
use crate::store::{Cached, Discarded, LimitedJob, LimitsDriver, micros, prepared};
use crate::types::StoredLimit;

const SQL: &str = include_str!("concurrency.sql");
const LIMITED_DUE: &str = named(SQL, "scheduled_limited_due");
const TAKE_IDS: &str = named(SQL, "scheduled_take_limited/take_ids");
const TAKE_DUE: &str = named(SQL, "scheduled_take_limited/take_due");
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
    conn: &mut PgConnection,
    sql: &'static str,
    key: &str,
    limit: &StoredLimit,
) -> QueryResult<bool> {
    let rows: Vec<Value> = Cached(
        prepared(sql)
            .bind::<Text, _>(key)
            .bind::<Integer, _>(i32::try_from(limit.limit).unwrap_or(i32::MAX))
            .bind::<BigInt, _>(micros(limit.duration())),
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

impl LimitsDriver for PgConnection {
    fn rate_keys_lock(&mut self, keys: &[String]) -> QueryResult<Vec<(String, NaiveDateTime)>> {
        for chunk in crate::store::rates::rate_key_rows(keys).chunks(500) {
            diesel::insert_into(crate::store::schema::solidq_rate_limits::table)
                .values(chunk)
                .on_conflict_do_nothing()
                .execute(self)?;
        }
        diesel::QueryDsl::for_update(crate::store::rates::rate_keys_query(keys)).load(self)
    }

    fn rate_clock(&mut self) -> QueryResult<NaiveDateTime> {
        // The statement's time (`LOCALTIMESTAMP` is the transaction's).
        diesel::select(diesel::dsl::sql::<Timestamp>(
            "CAST(clock_timestamp() AS timestamp)",
        ))
        .get_result(self)
    }

    fn scheduled_take_limited(
        &mut self,
        ids: Option<&[i64]>,
        batch: usize,
    ) -> QueryResult<Vec<LimitedJob>> {
        match ids {
            Some(ids) => Cached(prepared(TAKE_IDS).bind::<Array<BigInt>, _>(ids)).load(self),
            None => Cached(prepared(TAKE_DUE).bind::<BigInt, _>(batch as i64)).load(self),
        }
    }

    fn scheduled_limited_due(&mut self) -> QueryResult<bool> {
        let rows: Vec<Due> = Cached(prepared(LIMITED_DUE)).load(self)?;
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
        Cached(
            prepared(BLOCKED_INSERT)
                .bind::<Array<BigInt>, _>(jobs.iter().map(|j| j.job_id).collect::<Vec<_>>())
                .bind::<Array<Text>, _>(
                    jobs.iter()
                        .map(|j| j.queue_name.as_str())
                        .collect::<Vec<_>>(),
                )
                .bind::<Array<Integer>, _>(jobs.iter().map(|j| j.priority).collect::<Vec<_>>())
                .bind::<Array<Text>, _>(
                    jobs.iter()
                        .map(|j| j.concurrency_key.as_str())
                        .collect::<Vec<_>>(),
                )
                .bind::<Array<BigInt>, _>(
                    jobs.iter()
                        .map(|j| micros(j.slot().limit.duration()))
                        .collect::<Vec<_>>(),
                ),
        )
        .execute(self)
        .map(drop)
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
        Cached(
            prepared(DISCARD)
                .bind::<Array<BigInt>, _>(rows.iter().map(|r| r.id).collect::<Vec<_>>())
                .bind::<Array<Text>, _>(rows.iter().map(|r| r.error.as_str()).collect::<Vec<_>>())
                .bind::<Array<BigInt>, _>(rows.iter().map(|r| micros(r.keep)).collect::<Vec<_>>()),
        )
        .execute(self)
        .map(drop)
    }

    fn semaphores_delete_expired(&mut self) -> QueryResult<Vec<String>> {
        let rows: Vec<KeyRow> = Cached(prepared(DELETE_EXPIRED)).load(self)?;
        Ok(rows.into_iter().map(|r| r.key).collect())
    }

    fn blocked_expired_keys(&mut self, limit: usize) -> QueryResult<Vec<String>> {
        let rows: Vec<KeyRow> =
            Cached(prepared(EXPIRED_KEYS).bind::<BigInt, _>(limit as i64)).load(self)?;
        Ok(rows.into_iter().map(|r| r.key).collect())
    }
}
