//! MySQL statements of job control: cancelling waiting jobs, running
//! scheduled or blocked ones now, asking running ones to stop. MySQL has
//! no `DELETE … RETURNING` nor a `WITH` that writes, so each step locks
//! and reads its rows (`FOR UPDATE`, in id order, waiting for other
//! holders as PostgreSQL's `DELETE` and `UPDATE` wait), then changes
//! exactly those. No notification of cancellation: MySQL has no `NOTIFY`,
//! workers find it when they poll.

use diesel::sql_types::{BigInt, Text};
use diesel::{MysqlConnection, QueryResult, QueryableByName, RunQueryDsl, sql_query};

use super::{IDS, IdRow, NOW, json_ids, write_tx};
use crate::store::{Cached, RemovedPending};

/// The execution tables a waiting job can be in; the first is ready.
const PENDING_TABLES: [&str; 3] = [
    "solidq_ready_executions",
    "solidq_scheduled_executions",
    "solidq_blocked_executions",
];

fn lock_pending_sql(table: &str) -> String {
    format!(
        "SELECT t.job_id AS id FROM {IDS} STRAIGHT_JOIN {table} t ON t.job_id = ids.value
         ORDER BY t.job_id FOR UPDATE"
    )
}

/// Deletes and updates by a list of ids join it, not `IN (SELECT …)`:
/// MariaDB (before 11.1) runs a single-table `DELETE` or `UPDATE`'s `IN`
/// subquery once per row of a full scan. `STRAIGHT_JOIN` reads the list
/// first, then each row by primary key.
fn delete_pending_sql(table: &str) -> String {
    format!("DELETE t FROM {IDS} STRAIGHT_JOIN {table} t ON t.job_id = ids.value")
}

/// `was_ready` is filled in from the ready rows deleted.
fn removed_sql() -> String {
    format!(
        "SELECT j.id, j.concurrency_key, j.options, 0 AS was_ready
         FROM {IDS} STRAIGHT_JOIN solidq_jobs j ON j.id = ids.value ORDER BY j.id"
    )
}

/// Per execution table: lock the rows of `ids`, delete them. Then the
/// jobs' facts. Inside a transaction.
pub(super) fn pending_remove(
    conn: &mut MysqlConnection,
    ids: &[i64],
) -> QueryResult<Vec<RemovedPending>> {
    let ids = json_ids(ids);
    let mut ready = Vec::new();
    let mut removed = Vec::new();
    for (i, table) in PENDING_TABLES.into_iter().enumerate() {
        let rows: Vec<IdRow> =
            Cached(sql_query(lock_pending_sql(table)).bind::<Text, _>(&ids)).load(conn)?;
        if rows.is_empty() {
            continue;
        }
        let locked: Vec<i64> = rows.into_iter().map(|r| r.id).collect();
        Cached(sql_query(delete_pending_sql(table)).bind::<Text, _>(json_ids(&locked)))
            .execute(conn)?;
        if i == 0 {
            ready.extend_from_slice(&locked);
        }
        removed.extend(locked);
    }
    if removed.is_empty() {
        return Ok(Vec::new());
    }
    let mut jobs: Vec<RemovedPending> =
        Cached(sql_query(removed_sql()).bind::<Text, _>(json_ids(&removed))).load(conn)?;
    for job in &mut jobs {
        job.was_ready = ready.contains(&job.id);
    }
    Ok(jobs)
}

fn make_due_sql() -> String {
    format!(
        "UPDATE {IDS} STRAIGHT_JOIN solidq_scheduled_executions x ON x.job_id = ids.value
         SET x.scheduled_at = {NOW}"
    )
}

/// The jobs take their execution's new time, so both hold the same
/// instant (`UTC_TIMESTAMP(6)` is fixed within a statement, not across
/// two).
fn make_jobs_due_sql() -> String {
    format!(
        "UPDATE {IDS} STRAIGHT_JOIN solidq_scheduled_executions x ON x.job_id = ids.value
         STRAIGHT_JOIN solidq_jobs j ON j.id = x.job_id
         SET j.scheduled_at = x.scheduled_at, j.updated_at = x.scheduled_at"
    )
}

/// Two updates: the executions (their count, of rows matched under
/// `CLIENT_FOUND_ROWS`, is the answer), then their jobs. Inside a
/// transaction.
pub(super) fn scheduled_make_due(conn: &mut MysqlConnection, ids: &[i64]) -> QueryResult<usize> {
    let ids = json_ids(ids);
    let moved = Cached(sql_query(make_due_sql()).bind::<Text, _>(&ids)).execute(conn)?;
    if moved > 0 {
        Cached(sql_query(make_jobs_due_sql()).bind::<Text, _>(&ids)).execute(conn)?;
    }
    Ok(moved)
}

fn lock_blocked_sql() -> String {
    format!(
        "SELECT b.job_id, b.queue_name FROM {IDS}
         STRAIGHT_JOIN solidq_blocked_executions b ON b.job_id = ids.value
         ORDER BY b.job_id FOR UPDATE"
    )
}

fn unlimit_jobs_sql() -> String {
    format!(
        "UPDATE {IDS} STRAIGHT_JOIN solidq_jobs j ON j.id = ids.value
         SET j.concurrency_key = NULL, j.scheduled_at = {NOW}, j.updated_at = {NOW}"
    )
}

fn ready_from_jobs_sql() -> String {
    format!(
        "INSERT INTO solidq_ready_executions ({}) {} ORDER BY id",
        crate::store::fair::READY_COLUMNS,
        crate::store::fair::ready_rows_sql(
            "j",
            "j.scheduled_at",
            &format!("FROM {IDS} STRAIGHT_JOIN solidq_jobs j ON j.id = ids.value")
        )
    )
}

/// Locks the blocked rows, deletes them, takes their jobs out of their
/// limit, and inserts their ready rows (created at the jobs' new
/// `scheduled_at`, the same instant); returns their queues.
/// Inside a transaction.
pub(super) fn blocked_run_now(conn: &mut MysqlConnection, ids: &[i64]) -> QueryResult<Vec<String>> {
    #[derive(QueryableByName)]
    struct Locked {
        #[diesel(sql_type = BigInt)]
        job_id: i64,
        #[diesel(sql_type = Text)]
        queue_name: String,
    }
    let locked: Vec<Locked> =
        Cached(sql_query(lock_blocked_sql()).bind::<Text, _>(json_ids(ids))).load(conn)?;
    if locked.is_empty() {
        return Ok(Vec::new());
    }
    let moved = json_ids(&locked.iter().map(|l| l.job_id).collect::<Vec<_>>());
    Cached(sql_query(delete_pending_sql("solidq_blocked_executions")).bind::<Text, _>(&moved))
        .execute(conn)?;
    Cached(sql_query(unlimit_jobs_sql()).bind::<Text, _>(&moved)).execute(conn)?;
    Cached(sql_query(ready_from_jobs_sql()).bind::<Text, _>(&moved)).execute(conn)?;
    Ok(locked.into_iter().map(|l| l.queue_name).collect())
}

/// Claimed jobs not asked yet, locked in id order (the claims are read,
/// not locked).
fn lock_askable_sql() -> String {
    format!(
        "SELECT j.id FROM {IDS} STRAIGHT_JOIN solidq_jobs j ON j.id = ids.value
         WHERE j.cancel_requested_at IS NULL
           AND EXISTS (SELECT 1 FROM solidq_claimed_executions c WHERE c.job_id = j.id)
         ORDER BY j.id FOR UPDATE"
    )
}

fn ask_sql() -> String {
    format!(
        "UPDATE {IDS} STRAIGHT_JOIN solidq_jobs j ON j.id = ids.value
         SET j.cancel_requested_at = {NOW}, j.updated_at = {NOW}"
    )
}

/// Its own transaction (the store runs it outside one): lock the jobs to
/// ask, then ask them.
pub(super) fn jobs_request_cancel(
    conn: &mut MysqlConnection,
    ids: &[i64],
) -> QueryResult<Vec<i64>> {
    write_tx(conn, |conn| {
        let rows: Vec<IdRow> =
            Cached(sql_query(lock_askable_sql()).bind::<Text, _>(json_ids(ids))).load(conn)?;
        let asked: Vec<i64> = rows.into_iter().map(|r| r.id).collect();
        if !asked.is_empty() {
            Cached(sql_query(ask_sql()).bind::<Text, _>(json_ids(&asked))).execute(conn)?;
        }
        Ok(asked)
    })
}
