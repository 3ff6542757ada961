//! SQLite primitives of concurrency limits. Every caller holds the write
//! lock (`BEGIN IMMEDIATE`), so acquiring and giving back slots need no
//! row locks: one writer at a time is the serialization.

use diesel::sql_types::{BigInt, Integer, Text, Timestamp};
use diesel::{QueryResult, QueryableByName, RunQueryDsl, SqliteConnection, sql_query};

use super::{APPEND_ERROR, json_ids, plus};
use crate::store::{Cached, Discarded, LimitedJob, utc_now};
use crate::types::StoredLimit;

const LIMITED_COLUMNS: &str =
    "x.job_id, x.queue_name, x.priority, x.concurrency_key, j.kind, j.options";

fn find_ids_sql() -> String {
    format!(
        "SELECT {LIMITED_COLUMNS} FROM solidq_scheduled_executions x JOIN solidq_jobs j ON j.id = x.job_id
         WHERE x.job_id IN (SELECT value FROM json_each(?1)) AND x.concurrency_key IS NOT NULL
           AND x.scheduled_at <= ?2
         ORDER BY x.priority, x.job_id"
    )
}

fn find_due_sql() -> String {
    format!(
        "SELECT {LIMITED_COLUMNS} FROM solidq_scheduled_executions x JOIN solidq_jobs j ON j.id = x.job_id
         WHERE x.scheduled_at <= ?1 AND x.concurrency_key IS NOT NULL
         ORDER BY x.scheduled_at, x.priority, x.job_id LIMIT ?2"
    )
}

#[derive(QueryableByName)]
struct Due {
    #[diesel(sql_type = diesel::sql_types::Bool)]
    due: bool,
}

pub(super) fn scheduled_limited_due(conn: &mut SqliteConnection) -> QueryResult<bool> {
    let rows: Vec<Due> = Cached(
        sql_query(
            "SELECT EXISTS (SELECT 1 FROM solidq_scheduled_executions
                            WHERE scheduled_at <= ?1 AND concurrency_key IS NOT NULL) AS due",
        )
        .bind::<Timestamp, _>(utc_now()),
    )
    .load(conn)?;
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
            sql_query(find_ids_sql())
                .bind::<Text, _>(json_ids(ids))
                .bind::<Timestamp, _>(now),
        )
        .load(conn)?,
        None => Cached(
            sql_query(find_due_sql())
                .bind::<Timestamp, _>(now)
                .bind::<BigInt, _>(batch as i64),
        )
        .load(conn)?,
    };
    if !jobs.is_empty() {
        Cached(
            sql_query(
                "DELETE FROM solidq_scheduled_executions WHERE job_id IN (SELECT value FROM json_each(?1))",
            )
            .bind::<Text, _>(json_ids(&jobs.iter().map(|j| j.job_id).collect::<Vec<_>>())),
        )
        .execute(conn)?;
    }
    Ok(jobs)
}

const ACQUIRE: &str = "\
INSERT INTO solidq_semaphores (key, value, expires_at, created_at, updated_at)
VALUES (?1, ?2 - 1, ?3, ?4, ?4)
ON CONFLICT (key) DO UPDATE SET value = solidq_semaphores.value - 1, expires_at = excluded.expires_at,
                                updated_at = excluded.updated_at
WHERE solidq_semaphores.value > 0
RETURNING value";

const SIGNAL: &str = "\
UPDATE solidq_semaphores SET value = value + 1, expires_at = ?3, updated_at = ?4
WHERE key = ?1 AND value < ?2
RETURNING value";

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
            sql_query(
                "INSERT INTO solidq_blocked_executions
                     (job_id, queue_name, priority, concurrency_key, expires_at, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
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

fn blocked_next_sql() -> String {
    format!(
        "SELECT {LIMITED_COLUMNS}
         FROM solidq_blocked_executions x JOIN solidq_jobs j ON j.id = x.job_id
         WHERE x.concurrency_key = ?1
         ORDER BY x.priority, x.job_id LIMIT 1"
    )
}

pub(super) fn blocked_next(
    conn: &mut SqliteConnection,
    key: &str,
) -> QueryResult<Option<LimitedJob>> {
    let mut rows: Vec<LimitedJob> =
        Cached(sql_query(blocked_next_sql()).bind::<Text, _>(key)).load(conn)?;
    Ok(rows.pop())
}

pub(super) fn blocked_delete(conn: &mut SqliteConnection, job_id: i64) -> QueryResult<()> {
    Cached(
        sql_query("DELETE FROM solidq_blocked_executions WHERE job_id = ?1")
            .bind::<BigInt, _>(job_id),
    )
    .execute(conn)
    .map(drop)
}

pub(super) fn jobs_discard(conn: &mut SqliteConnection, rows: &[Discarded]) -> QueryResult<()> {
    let now = utc_now();
    for row in rows {
        Cached(
            sql_query(format!(
                "UPDATE solidq_jobs SET finished_at = ?2, expires_at = ?3, errors = {APPEND_ERROR},
                        updated_at = ?2
                 WHERE id = ?4"
            ))
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
    let rows: Vec<KeyRow> = Cached(
        sql_query("DELETE FROM solidq_semaphores WHERE expires_at < ?1 RETURNING key")
            .bind::<Timestamp, _>(utc_now()),
    )
    .load(conn)?;
    Ok(rows.into_iter().map(|r| r.key).collect())
}

pub(super) fn blocked_expired_keys(
    conn: &mut SqliteConnection,
    limit: usize,
) -> QueryResult<Vec<String>> {
    let rows: Vec<KeyRow> = Cached(
        sql_query(
            "SELECT DISTINCT concurrency_key AS key FROM solidq_blocked_executions
             WHERE expires_at < ?1 ORDER BY key LIMIT ?2",
        )
        .bind::<Timestamp, _>(utc_now())
        .bind::<BigInt, _>(limit as i64),
    )
    .load(conn)?;
    Ok(rows.into_iter().map(|r| r.key).collect())
}
