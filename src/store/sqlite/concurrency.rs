//! SQLite primitives of concurrency limits. Every caller holds the write
//! lock (`BEGIN IMMEDIATE`), so acquiring and giving back slots need no
//! row locks: one writer at a time is the serialization.

use diesel::sql_types::{BigInt, Integer, Text, Timestamp};
use diesel::{QueryResult, QueryableByName, RunQueryDsl, SqliteConnection, sql_query};

use super::{json_ids, plus};
use crate::store::named::named;
use crate::store::{Cached, Discarded, LimitedJob, utc_now};
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

pub(super) fn scheduled_limited_due(conn: &mut SqliteConnection) -> QueryResult<bool> {
    let rows: Vec<Due> =
        Cached(sql_query(LIMITED_DUE).bind::<Timestamp, _>(utc_now())).load(conn)?;
    Ok(rows.first().is_some_and(|r| r.due))
}

pub(super) fn scheduled_take_limited(
    conn: &mut SqliteConnection,
    ids: Option<&[i64]>,
    batch: usize,
) -> QueryResult<Vec<LimitedJob>> {
    let now = utc_now();
    let jobs: Vec<LimitedJob> = match ids {
        Some(ids) => Cached(
            sql_query(FIND_IDS)
                .bind::<Text, _>(json_ids(ids))
                .bind::<Timestamp, _>(now),
        )
        .load(conn)?,
        None => Cached(
            sql_query(FIND_DUE)
                .bind::<Timestamp, _>(now)
                .bind::<BigInt, _>(batch as i64),
        )
        .load(conn)?,
    };
    if !jobs.is_empty() {
        Cached(
            sql_query(DELETE_SCHEDULED)
                .bind::<Text, _>(json_ids(&jobs.iter().map(|j| j.job_id).collect::<Vec<_>>())),
        )
        .execute(conn)?;
    }
    Ok(jobs)
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
        sql_query(sql)
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

pub(super) fn semaphore_acquire(
    conn: &mut SqliteConnection,
    key: &str,
    limit: &StoredLimit,
) -> QueryResult<bool> {
    semaphore(conn, ACQUIRE, key, limit)
}

pub(super) fn semaphore_signal(
    conn: &mut SqliteConnection,
    key: &str,
    limit: &StoredLimit,
) -> QueryResult<bool> {
    semaphore(conn, SIGNAL, key, limit)
}

pub(super) fn blocked_insert(conn: &mut SqliteConnection, jobs: &[LimitedJob]) -> QueryResult<()> {
    let now = utc_now();
    for job in jobs {
        Cached(
            sql_query(BLOCKED_INSERT)
                .bind::<BigInt, _>(job.job_id)
                .bind::<Text, _>(&job.queue_name)
                .bind::<Integer, _>(job.priority)
                .bind::<Text, _>(&job.concurrency_key)
                .bind::<Timestamp, _>(plus(now, job.slot().limit.duration()))
                .bind::<Timestamp, _>(now),
        )
        .execute(conn)?;
    }
    Ok(())
}

pub(super) fn blocked_next(
    conn: &mut SqliteConnection,
    key: &str,
) -> QueryResult<Option<LimitedJob>> {
    let mut rows: Vec<LimitedJob> =
        Cached(sql_query(BLOCKED_NEXT).bind::<Text, _>(key)).load(conn)?;
    Ok(rows.pop())
}

pub(super) fn blocked_delete(conn: &mut SqliteConnection, job_id: i64) -> QueryResult<()> {
    Cached(sql_query(BLOCKED_DELETE).bind::<BigInt, _>(job_id))
        .execute(conn)
        .map(drop)
}

pub(super) fn jobs_discard(conn: &mut SqliteConnection, rows: &[Discarded]) -> QueryResult<()> {
    let now = utc_now();
    for row in rows {
        Cached(
            sql_query(DISCARD)
                .bind::<Text, _>(&row.error)
                .bind::<Timestamp, _>(now)
                .bind::<Timestamp, _>(plus(now, row.keep))
                .bind::<BigInt, _>(row.id),
        )
        .execute(conn)?;
    }
    Ok(())
}

#[derive(QueryableByName)]
struct KeyRow {
    #[diesel(sql_type = Text)]
    key: String,
}

pub(super) fn semaphores_delete_expired(conn: &mut SqliteConnection) -> QueryResult<Vec<String>> {
    let rows: Vec<KeyRow> =
        Cached(sql_query(DELETE_EXPIRED).bind::<Timestamp, _>(utc_now())).load(conn)?;
    Ok(rows.into_iter().map(|r| r.key).collect())
}

pub(super) fn blocked_expired_keys(
    conn: &mut SqliteConnection,
    limit: usize,
) -> QueryResult<Vec<String>> {
    let rows: Vec<KeyRow> = Cached(
        sql_query(EXPIRED_KEYS)
            .bind::<Timestamp, _>(utc_now())
            .bind::<BigInt, _>(limit as i64),
    )
    .load(conn)?;
    Ok(rows.into_iter().map(|r| r.key).collect())
}
