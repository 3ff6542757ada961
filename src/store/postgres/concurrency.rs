//! PostgreSQL primitives of concurrency limits: semaphores as upserts (the
//! row lock serializes every acquire and release of one key), blocked
//! executions taken with `SKIP LOCKED`.

use diesel::sql_types::{Array, BigInt, Integer, Text};
use diesel::{PgConnection, QueryResult, QueryableByName, RunQueryDsl, sql_query};

use super::{APPEND_ERROR, stamped};
use crate::store::{Cached, Discarded, LimitedJob, micros};
use crate::types::StoredLimit;

/// The columns of a [`LimitedJob`], from an execution row `x` and its job.
const LIMITED_COLUMNS: &str =
    "x.job_id, x.queue_name, x.priority, x.concurrency_key, j.kind, j.options";

fn take_ids_sql() -> String {
    format!(
        "WITH x AS (
             DELETE FROM solidq_scheduled_executions
             WHERE job_id = ANY ($1) AND concurrency_key IS NOT NULL AND scheduled_at <= LOCALTIMESTAMP
             RETURNING job_id, queue_name, priority, concurrency_key)
         SELECT {LIMITED_COLUMNS} FROM x JOIN solidq_jobs j ON j.id = x.job_id
         ORDER BY x.priority, x.job_id"
    )
}

fn take_due_sql() -> String {
    format!(
        "WITH due AS (
             SELECT job_id FROM solidq_scheduled_executions
             WHERE scheduled_at <= LOCALTIMESTAMP AND concurrency_key IS NOT NULL
             ORDER BY scheduled_at, priority, job_id
             LIMIT $1 FOR UPDATE SKIP LOCKED),
         x AS (
             DELETE FROM solidq_scheduled_executions WHERE job_id = ANY (ARRAY(SELECT job_id FROM due))
             RETURNING job_id, queue_name, priority, concurrency_key, scheduled_at)
         SELECT {LIMITED_COLUMNS} FROM x JOIN solidq_jobs j ON j.id = x.job_id
         ORDER BY x.scheduled_at, x.priority, x.job_id"
    )
}

#[derive(QueryableByName)]
struct Due {
    #[diesel(sql_type = diesel::sql_types::Bool)]
    due: bool,
}

pub(super) fn scheduled_limited_due(conn: &mut PgConnection) -> QueryResult<bool> {
    let rows: Vec<Due> = Cached(sql_query(
        "SELECT EXISTS (SELECT 1 FROM solidq_scheduled_executions
                        WHERE scheduled_at <= LOCALTIMESTAMP AND concurrency_key IS NOT NULL) AS due",
    ))
    .load(conn)?;
    Ok(rows.first().is_some_and(|r| r.due))
}

pub(super) fn scheduled_take_limited(
    conn: &mut PgConnection,
    ids: Option<&[i64]>,
    batch: usize,
) -> QueryResult<Vec<LimitedJob>> {
    match ids {
        Some(ids) => Cached(sql_query(take_ids_sql()).bind::<Array<BigInt>, _>(ids)).load(conn),
        None => Cached(sql_query(take_due_sql()).bind::<BigInt, _>(batch as i64)).load(conn),
    }
}

/// Creates the semaphore with one slot taken, or takes a free one. When
/// none is free the `WHERE` fails but the conflicting row is still locked.
const ACQUIRE: &str = "\
INSERT INTO solidq_semaphores AS s (key, value, expires_at, created_at, updated_at)
VALUES ($1, $2 - 1, LOCALTIMESTAMP + $3 * INTERVAL '1 microsecond', LOCALTIMESTAMP, LOCALTIMESTAMP)
ON CONFLICT (key) DO UPDATE SET value = s.value - 1, expires_at = EXCLUDED.expires_at,
                                updated_at = EXCLUDED.updated_at
WHERE s.value > 0
RETURNING s.value";

const SIGNAL: &str = "\
UPDATE solidq_semaphores SET value = value + 1,
       expires_at = LOCALTIMESTAMP + $3 * INTERVAL '1 microsecond', updated_at = LOCALTIMESTAMP
WHERE key = $1 AND value < $2
RETURNING value";

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

const BLOCKED_INSERT: &str = "\
INSERT INTO solidq_blocked_executions (job_id, queue_name, priority, concurrency_key, expires_at, created_at)
SELECT id, queue_name, priority, key, LOCALTIMESTAMP + duration_us * INTERVAL '1 microsecond', LOCALTIMESTAMP
FROM unnest($1::bigint[], $2::text[], $3::int[], $4::text[], $5::bigint[])
    AS u(id, queue_name, priority, key, duration_us)";

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

fn blocked_next_sql() -> String {
    format!(
        "SELECT {LIMITED_COLUMNS}
         FROM solidq_blocked_executions x JOIN solidq_jobs j ON j.id = x.job_id
         WHERE x.concurrency_key = $1
         ORDER BY x.priority, x.job_id
         LIMIT 1 FOR UPDATE OF x SKIP LOCKED"
    )
}

pub(super) fn blocked_next(conn: &mut PgConnection, key: &str) -> QueryResult<Option<LimitedJob>> {
    let mut rows: Vec<LimitedJob> =
        Cached(sql_query(blocked_next_sql()).bind::<Text, _>(key)).load(conn)?;
    Ok(rows.pop())
}

pub(super) fn blocked_delete(conn: &mut PgConnection, job_id: i64) -> QueryResult<()> {
    Cached(
        sql_query("DELETE FROM solidq_blocked_executions WHERE job_id = $1")
            .bind::<BigInt, _>(job_id),
    )
    .execute(conn)
    .map(drop)
}

fn discard_sql() -> String {
    format!(
        "UPDATE solidq_jobs j SET finished_at = LOCALTIMESTAMP,
                expires_at = LOCALTIMESTAMP + u.keep_us * INTERVAL '1 microsecond',
                errors = {APPEND_ERROR}, updated_at = LOCALTIMESTAMP
         FROM (SELECT id, {error} AS error, keep_us
               FROM unnest($1::bigint[], $2::text[], $3::bigint[]) AS r(id, error, keep_us)) AS u
         WHERE j.id = u.id",
        error = stamped("r.error")
    )
}

pub(super) fn jobs_discard(conn: &mut PgConnection, rows: &[Discarded]) -> QueryResult<()> {
    Cached(
        sql_query(discard_sql())
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
    let rows: Vec<KeyRow> = Cached(sql_query(
        "DELETE FROM solidq_semaphores WHERE expires_at < LOCALTIMESTAMP RETURNING key",
    ))
    .load(conn)?;
    Ok(rows.into_iter().map(|r| r.key).collect())
}

pub(super) fn blocked_expired_keys(
    conn: &mut PgConnection,
    limit: usize,
) -> QueryResult<Vec<String>> {
    let rows: Vec<KeyRow> = Cached(
        sql_query(
            "SELECT DISTINCT concurrency_key AS key FROM solidq_blocked_executions
             WHERE expires_at < LOCALTIMESTAMP ORDER BY key LIMIT $1",
        )
        .bind::<BigInt, _>(limit as i64),
    )
    .load(conn)?;
    Ok(rows.into_iter().map(|r| r.key).collect())
}
