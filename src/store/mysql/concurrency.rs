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

use diesel::sql_types::{BigInt, Integer, Text};
use diesel::{MysqlConnection, QueryResult, QueryableByName, RunQueryDsl, sql_query};

use super::{APPEND_ERROR, IDS, NOW, NOW_PLUS, STRINGS, Scalar, json_ids, json_strings};
use crate::store::{Cached, Discarded, LimitedJob, micros};
use crate::types::StoredLimit;

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

fn lock_ids_sql() -> String {
    format!(
        "SELECT x.job_id, x.queue_name, x.priority, x.concurrency_key
         FROM {IDS} STRAIGHT_JOIN solidq_scheduled_executions x ON x.job_id = ids.value
         WHERE x.concurrency_key IS NOT NULL AND x.scheduled_at <= {NOW}
         ORDER BY x.job_id FOR UPDATE"
    )
}

pub(super) const LOCK_DUE: &str = "\
SELECT job_id, queue_name, priority, concurrency_key FROM solidq_scheduled_executions
WHERE scheduled_at <= UTC_TIMESTAMP(6) AND concurrency_key IS NOT NULL
ORDER BY scheduled_at, priority, job_id
LIMIT ? FOR UPDATE SKIP LOCKED";

/// A join, not `IN (SELECT …)`: MariaDB (before 11.1) runs a single-table
/// `DELETE`'s `IN` subquery once per row of a full scan. `STRAIGHT_JOIN`
/// reads the list first, then each row by primary key.
fn delete_scheduled_sql() -> String {
    format!(
        "DELETE x FROM {IDS} STRAIGHT_JOIN solidq_scheduled_executions x ON x.job_id = ids.value"
    )
}

fn job_facts_sql() -> String {
    format!(
        "SELECT j.id, j.kind, j.options FROM {IDS} STRAIGHT_JOIN solidq_jobs j ON j.id = ids.value"
    )
}

/// Joins executions with their jobs' kind and options, in the executions'
/// order, leaving out those whose job row is gone.
fn with_job_facts(
    conn: &mut MysqlConnection,
    executions: Vec<Execution>,
) -> QueryResult<Vec<LimitedJob>> {
    if executions.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<i64> = executions.iter().map(|x| x.job_id).collect();
    let facts: Vec<JobFacts> =
        Cached(sql_query(job_facts_sql()).bind::<Text, _>(json_ids(&ids))).load(conn)?;
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

/// A plain read (`EXISTS` read as a number, not a boolean): an idle
/// dispatcher opens no transaction.
pub(super) fn scheduled_limited_due(conn: &mut MysqlConnection) -> QueryResult<bool> {
    let row: Scalar = Cached(sql_query(
        "SELECT CAST(EXISTS (SELECT 1 FROM solidq_scheduled_executions
                             WHERE scheduled_at <= UTC_TIMESTAMP(6)
                               AND concurrency_key IS NOT NULL) AS SIGNED) AS v",
    ))
    .get_result(conn)?;
    Ok(row.v != 0)
}

/// Locks the rows (`ids`: waiting for other holders, in id order, as
/// PostgreSQL's `DELETE` waits; due ones: skipping those others hold),
/// deletes them, then reads their jobs. Inside a transaction.
pub(super) fn scheduled_take_limited(
    conn: &mut MysqlConnection,
    ids: Option<&[i64]>,
    batch: usize,
) -> QueryResult<Vec<LimitedJob>> {
    let mut locked: Vec<Execution> = match ids {
        Some(ids) => Cached(sql_query(lock_ids_sql()).bind::<Text, _>(json_ids(ids))).load(conn)?,
        None => Cached(sql_query(LOCK_DUE).bind::<BigInt, _>(batch as i64)).load(conn)?,
    };
    if locked.is_empty() {
        return Ok(Vec::new());
    }
    if ids.is_some() {
        // Locked in id order; handed back in priority order.
        locked.sort_by_key(|x| (x.priority, x.job_id));
    }
    let locked_ids: Vec<i64> = locked.iter().map(|x| x.job_id).collect();
    Cached(sql_query(delete_scheduled_sql()).bind::<Text, _>(json_ids(&locked_ids)))
        .execute(conn)?;
    with_job_facts(conn, locked)
}

/// Creates the semaphore with every slot free, or locks it as it is: the
/// duplicate key path of `ON DUPLICATE KEY UPDATE` takes the row's
/// exclusive lock and keeps it to the end of the transaction, changing
/// nothing. (Its affected-rows count cannot tell the two paths apart:
/// diesel connects with `CLIENT_FOUND_ROWS`, which counts an unchanged row
/// as 1, like an inserted one; hence [`TAKE`].)
fn ensure_sql() -> String {
    format!(
        "INSERT INTO solidq_semaphores (`key`, value, expires_at, created_at, updated_at)
         VALUES (?, ?, {NOW_PLUS}, {NOW}, {NOW})
         ON DUPLICATE KEY UPDATE value = value"
    )
}

/// Takes a free slot of the semaphore [`ensure_sql`] locked; matches no
/// row when none is free (the row stays locked: the lock was taken by an
/// earlier statement, which `READ COMMITTED` does not release).
/// `expires_at` is assigned before `value`: MySQL assigns left to right.
fn take_sql() -> String {
    format!(
        "UPDATE solidq_semaphores SET expires_at = {NOW_PLUS}, updated_at = {NOW}, value = value - 1
         WHERE `key` = ? AND value > 0"
    )
}

fn signal_sql() -> String {
    format!(
        "UPDATE solidq_semaphores SET value = value + 1, expires_at = {NOW_PLUS}, updated_at = {NOW}
         WHERE `key` = ? AND value < ?"
    )
}

fn slots(limit: &StoredLimit) -> i32 {
    i32::try_from(limit.limit).unwrap_or(i32::MAX)
}

/// Two statements (see [`ensure_sql`] and [`take_sql`]): an upsert that
/// creates or locks the row, then an update that takes a slot. The update's
/// count is of rows matched (`CLIENT_FOUND_ROWS`): 1 when a slot was taken.
pub(super) fn semaphore_acquire(
    conn: &mut MysqlConnection,
    key: &str,
    limit: &StoredLimit,
) -> QueryResult<bool> {
    let duration = micros(limit.duration());
    Cached(
        sql_query(ensure_sql())
            .bind::<Text, _>(key)
            .bind::<Integer, _>(slots(limit))
            .bind::<BigInt, _>(duration),
    )
    .execute(conn)?;
    let taken = Cached(
        sql_query(take_sql())
            .bind::<BigInt, _>(duration)
            .bind::<Text, _>(key),
    )
    .execute(conn)?;
    log::trace!("semaphore {key:?}: slot taken: {}", taken > 0);
    Ok(taken > 0)
}

/// One update; its count is of rows matched (`CLIENT_FOUND_ROWS`), so a
/// semaphore below its limit counts 1 whatever changed.
pub(super) fn semaphore_signal(
    conn: &mut MysqlConnection,
    key: &str,
    limit: &StoredLimit,
) -> QueryResult<bool> {
    let given = Cached(
        sql_query(signal_sql())
            .bind::<BigInt, _>(micros(limit.duration()))
            .bind::<Text, _>(key)
            .bind::<Integer, _>(slots(limit)),
    )
    .execute(conn)?;
    log::trace!("semaphore {key:?}: slot given back: {}", given > 0);
    Ok(given > 0)
}

/// The jobs as one JSON array of `[id, queue, priority, key, duration in
/// microseconds]`.
fn blocked_insert_sql() -> String {
    format!(
        "INSERT INTO solidq_blocked_executions
             (job_id, queue_name, priority, concurrency_key, expires_at, created_at)
         SELECT u.id, u.queue_name, u.priority, u.concurrency_key,
                {NOW} + INTERVAL u.duration_us MICROSECOND, {NOW}
         FROM JSON_TABLE(?, '$[*]' COLUMNS (id BIGINT PATH '$[0]',
                                            queue_name VARCHAR(255) PATH '$[1]',
                                            priority INT PATH '$[2]',
                                            concurrency_key VARCHAR(255) PATH '$[3]',
                                            duration_us BIGINT PATH '$[4]')) AS u
         ORDER BY u.id"
    )
}

/// One statement: the jobs travel as a JSON array through `JSON_TABLE`;
/// each row expires its limit's
/// duration from the database's now.
pub(super) fn blocked_insert(conn: &mut MysqlConnection, jobs: &[LimitedJob]) -> QueryResult<()> {
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
        sql_query(blocked_insert_sql())
            .bind::<Text, _>(serde_json::to_string(&rows).expect("rows serialize")),
    )
    .execute(conn)
    .map(drop)
}

pub(super) const BLOCKED_NEXT: &str = "\
SELECT job_id, queue_name, priority, concurrency_key FROM solidq_blocked_executions
WHERE concurrency_key = ?
ORDER BY priority, job_id
LIMIT 1 FOR UPDATE SKIP LOCKED";

/// The next blocked row of `key`, locked (`SKIP LOCKED`, as PostgreSQL's
/// `FOR UPDATE OF x SKIP LOCKED`: only the blocked row), then its job read.
pub(super) fn blocked_next(
    conn: &mut MysqlConnection,
    key: &str,
) -> QueryResult<Option<LimitedJob>> {
    let locked: Vec<Execution> = Cached(sql_query(BLOCKED_NEXT).bind::<Text, _>(key)).load(conn)?;
    Ok(with_job_facts(conn, locked)?.pop())
}

pub(super) fn blocked_delete(conn: &mut MysqlConnection, job_id: i64) -> QueryResult<()> {
    Cached(
        sql_query("DELETE FROM solidq_blocked_executions WHERE job_id = ?")
            .bind::<BigInt, _>(job_id),
    )
    .execute(conn)
    .map(drop)
}

fn discard_sql() -> String {
    format!(
        "UPDATE solidq_jobs SET finished_at = {NOW}, expires_at = {NOW_PLUS},
                errors = {APPEND_ERROR}, updated_at = {NOW}
         WHERE id = ?"
    )
}

/// One update per job, in id order (rows locked in key order cannot
/// deadlock with another writer doing the same). The error's `at` is the
/// host's clock (PostgreSQL restamps it; MySQL stores it as given).
pub(super) fn jobs_discard(conn: &mut MysqlConnection, rows: &[Discarded]) -> QueryResult<()> {
    let mut rows: Vec<&Discarded> = rows.iter().collect();
    rows.sort_by_key(|r| r.id);
    for row in rows {
        Cached(
            sql_query(discard_sql())
                .bind::<BigInt, _>(micros(row.keep))
                .bind::<Text, _>(&row.error)
                .bind::<Text, _>(&row.error)
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

/// Locks the expired semaphores (waiting for a holder, as PostgreSQL's
/// `DELETE` waits, then seeing its committed expiry), in key order, then
/// deletes them.
const LOCK_EXPIRED: &str = "\
SELECT `key` FROM solidq_semaphores WHERE expires_at < UTC_TIMESTAMP(6)
ORDER BY `key` FOR UPDATE";

/// A join, as [`delete_scheduled_sql`].
fn delete_semaphores_sql() -> String {
    format!("DELETE s FROM {STRINGS} STRAIGHT_JOIN solidq_semaphores s ON s.`key` = strs.value")
}

pub(super) fn semaphores_delete_expired(conn: &mut MysqlConnection) -> QueryResult<Vec<String>> {
    let rows: Vec<KeyRow> = Cached(sql_query(LOCK_EXPIRED)).load(conn)?;
    let keys: Vec<String> = rows.into_iter().map(|r| r.key).collect();
    if !keys.is_empty() {
        Cached(sql_query(delete_semaphores_sql()).bind::<Text, _>(json_strings(&keys)))
            .execute(conn)?;
    }
    Ok(keys)
}

/// A plain read.
pub(super) fn blocked_expired_keys(
    conn: &mut MysqlConnection,
    limit: usize,
) -> QueryResult<Vec<String>> {
    let rows: Vec<KeyRow> = Cached(
        sql_query(
            "SELECT DISTINCT concurrency_key AS `key` FROM solidq_blocked_executions
             WHERE expires_at < UTC_TIMESTAMP(6) ORDER BY `key` LIMIT ?",
        )
        .bind::<BigInt, _>(limit as i64),
    )
    .load(conn)?;
    Ok(rows.into_iter().map(|r| r.key).collect())
}
