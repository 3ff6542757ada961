//! PostgreSQL primitives of concurrency limits: semaphores as upserts (the
//! row lock serializes every acquire and release of one key), blocked
//! executions taken with `SKIP LOCKED`.

use diesel::sql_types::{Array, BigInt, Integer, Text};
use diesel::{PgConnection, QueryResult, QueryableByName, RunQueryDsl, sql_query};

use crate::store::named::named;
use crate::store::{Cached, Discarded, LimitedJob, micros};
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

pub(super) fn scheduled_limited_due(conn: &mut PgConnection) -> QueryResult<bool> {
    let rows: Vec<Due> = Cached(sql_query(LIMITED_DUE)).load(conn)?;
    Ok(rows.first().is_some_and(|r| r.due))
}

pub(super) fn scheduled_take_limited(
    conn: &mut PgConnection,
    ids: Option<&[i64]>,
    batch: usize,
) -> QueryResult<Vec<LimitedJob>> {
    match ids {
        Some(ids) => Cached(sql_query(TAKE_IDS).bind::<Array<BigInt>, _>(ids)).load(conn),
        None => Cached(sql_query(TAKE_DUE).bind::<BigInt, _>(batch as i64)).load(conn),
    }
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
        sql_query(sql)
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

pub(super) fn semaphore_acquire(
    conn: &mut PgConnection,
    key: &str,
    limit: &StoredLimit,
) -> QueryResult<bool> {
    semaphore(conn, ACQUIRE, key, limit)
}

pub(super) fn semaphore_signal(
    conn: &mut PgConnection,
    key: &str,
    limit: &StoredLimit,
) -> QueryResult<bool> {
    semaphore(conn, SIGNAL, key, limit)
}

pub(super) fn blocked_insert(conn: &mut PgConnection, jobs: &[LimitedJob]) -> QueryResult<()> {
    Cached(
        sql_query(BLOCKED_INSERT)
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
    .execute(conn)
    .map(drop)
}

pub(super) fn blocked_next(conn: &mut PgConnection, key: &str) -> QueryResult<Option<LimitedJob>> {
    let mut rows: Vec<LimitedJob> =
        Cached(sql_query(BLOCKED_NEXT).bind::<Text, _>(key)).load(conn)?;
    Ok(rows.pop())
}

pub(super) fn blocked_delete(conn: &mut PgConnection, job_id: i64) -> QueryResult<()> {
    Cached(sql_query(BLOCKED_DELETE).bind::<BigInt, _>(job_id))
        .execute(conn)
        .map(drop)
}

pub(super) fn jobs_discard(conn: &mut PgConnection, rows: &[Discarded]) -> QueryResult<()> {
    Cached(
        sql_query(DISCARD)
            .bind::<Array<BigInt>, _>(rows.iter().map(|r| r.id).collect::<Vec<_>>())
            .bind::<Array<Text>, _>(rows.iter().map(|r| r.error.as_str()).collect::<Vec<_>>())
            .bind::<Array<BigInt>, _>(rows.iter().map(|r| micros(r.keep)).collect::<Vec<_>>()),
    )
    .execute(conn)
    .map(drop)
}

#[derive(QueryableByName)]
struct KeyRow {
    #[diesel(sql_type = Text)]
    key: String,
}

pub(super) fn semaphores_delete_expired(conn: &mut PgConnection) -> QueryResult<Vec<String>> {
    let rows: Vec<KeyRow> = Cached(sql_query(DELETE_EXPIRED)).load(conn)?;
    Ok(rows.into_iter().map(|r| r.key).collect())
}

pub(super) fn blocked_expired_keys(
    conn: &mut PgConnection,
    limit: usize,
) -> QueryResult<Vec<String>> {
    let rows: Vec<KeyRow> =
        Cached(sql_query(EXPIRED_KEYS).bind::<BigInt, _>(limit as i64)).load(conn)?;
    Ok(rows.into_iter().map(|r| r.key).collect())
}
