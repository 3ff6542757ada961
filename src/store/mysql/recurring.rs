//! MySQL primitives of recurring tasks. Times are the database's
//! (`UTC_TIMESTAMP(6)`, read per statement, not per transaction as
//! PostgreSQL's `LOCALTIMESTAMP`: a tick's guard copies its job's
//! `created_at` rather than reading the clock again).

use std::time::Duration;

use chrono::NaiveDateTime;
use diesel::result::{DatabaseErrorKind, Error as DieselError};
use diesel::sql_types::{BigInt, Integer, Nullable, Text, Timestamp};
use diesel::{MysqlConnection, QueryResult, QueryableByName, RunQueryDsl, sql_query};

use super::{NOW, NOW_MINUS, STRINGS, json_strings};
use crate::store::{Cached, RecurringTaskRow, micros};

/// Inserts a task, or updates it only when something differs (as
/// PostgreSQL's `WHERE … IS DISTINCT FROM`), so `updated_at` moves only on
/// a change. MySQL assigns left to right, each seeing the ones before:
/// `updated_at` comes first, comparing the old values with the new
/// (`<=>`: equal, `NULL`s included). `VALUES(col)` is the row proposed
/// (MariaDB has no `AS new` alias; MySQL 8 deprecates `VALUES()` but runs
/// it).
fn upsert_task_sql() -> String {
    format!(
        "INSERT INTO solidq_recurring_tasks
             (`key`, schedule, timezone, kind, arguments, queue_name, priority, description,
              created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, {NOW}, {NOW})
         ON DUPLICATE KEY UPDATE
             updated_at = IF(schedule <=> VALUES(schedule) AND timezone <=> VALUES(timezone)
                             AND kind <=> VALUES(kind) AND arguments <=> VALUES(arguments)
                             AND queue_name <=> VALUES(queue_name)
                             AND priority <=> VALUES(priority)
                             AND description <=> VALUES(description),
                             updated_at, VALUES(updated_at)),
             schedule = VALUES(schedule), timezone = VALUES(timezone), kind = VALUES(kind),
             arguments = VALUES(arguments), queue_name = VALUES(queue_name),
             priority = VALUES(priority), description = VALUES(description)"
    )
}

fn delete_other_tasks_sql() -> String {
    format!("DELETE FROM solidq_recurring_tasks WHERE `key` NOT IN (SELECT value FROM {STRINGS})")
}

/// One upsert per task, in key order (the caller's transaction locks the
/// rows in the order every syncing scheduler does), then one delete of
/// the others. Inside a transaction.
pub(super) fn tasks_sync(
    conn: &mut MysqlConnection,
    tasks: &[RecurringTaskRow],
) -> QueryResult<()> {
    let mut sorted: Vec<&RecurringTaskRow> = tasks.iter().collect();
    sorted.sort_by(|a, b| a.key.cmp(&b.key));
    for task in sorted {
        Cached(
            sql_query(upsert_task_sql())
                .bind::<Text, _>(&task.key)
                .bind::<Text, _>(&task.schedule)
                .bind::<Text, _>(&task.timezone)
                .bind::<Text, _>(&task.kind)
                .bind::<Text, _>(&task.arguments)
                .bind::<Nullable<Text>, _>(task.queue_name.as_deref())
                .bind::<Nullable<Integer>, _>(task.priority)
                .bind::<Nullable<Text>, _>(task.description.as_deref()),
        )
        .execute(conn)?;
    }
    let keys: Vec<String> = tasks.iter().map(|t| t.key.clone()).collect();
    Cached(sql_query(delete_other_tasks_sql()).bind::<Text, _>(json_strings(&keys)))
        .execute(conn)
        .map(drop)
}

/// The tick's guard takes its job's `created_at`, the time the database
/// stored for the tick. A plain `INSERT`, not an upsert: the affected-rows
/// count of `ON DUPLICATE KEY UPDATE` says 1 both for a row inserted and
/// for one left as it was under diesel's `CLIENT_FOUND_ROWS`, while a
/// duplicate key fails cleanly (error 1062 undoes the statement, not the
/// transaction). A racing insert of the same tick waits on the first's
/// key lock, then fails with 1062 if it committed, or inserts if it
/// rolled back: as PostgreSQL's `ON CONFLICT DO NOTHING`.
const INSERT_GUARD: &str = "\
INSERT INTO solidq_recurring_executions (task_key, run_at, job_id, created_at)
SELECT ?, ?, id, created_at FROM solidq_jobs WHERE id = ?";

const GUARD_CREATED: &str = "\
SELECT created_at FROM solidq_recurring_executions WHERE task_key = ? AND run_at = ?";

#[derive(QueryableByName)]
struct Inserted {
    #[diesel(sql_type = Timestamp)]
    created_at: NaiveDateTime,
}

/// The guard's insert (a taken tick is `None`), then its `created_at`.
pub(super) fn execution_insert(
    conn: &mut MysqlConnection,
    task_key: &str,
    run_at: NaiveDateTime,
    job_id: i64,
) -> QueryResult<Option<NaiveDateTime>> {
    let inserted = Cached(
        sql_query(INSERT_GUARD)
            .bind::<Text, _>(task_key)
            .bind::<Timestamp, _>(run_at)
            .bind::<BigInt, _>(job_id),
    )
    .execute(conn);
    match inserted {
        Ok(0) => return Ok(None),
        Ok(_) => {}
        Err(DieselError::DatabaseError(DatabaseErrorKind::UniqueViolation, _)) => return Ok(None),
        Err(error) => return Err(error),
    }
    let rows: Vec<Inserted> = Cached(
        sql_query(GUARD_CREATED)
            .bind::<Text, _>(task_key)
            .bind::<Timestamp, _>(run_at),
    )
    .load(conn)?;
    Ok(rows.into_iter().next().map(|r| r.created_at))
}

/// Guards older than the retention, but each task's latest, a batch at a
/// time. MySQL allows neither `LIMIT` in an `IN` subquery nor reading the
/// table a `DELETE` changes (error 1093) but through a derived table,
/// which it materializes first: the batch is picked there (the run_at
/// index finds the old ones, the primary key the later guard of the same
/// task), then joined to the rows it names by primary key
/// (`STRAIGHT_JOIN`: the batch first, so the delete locks only those).
fn delete_old_guards_sql() -> String {
    format!(
        "DELETE e FROM
             (SELECT old.task_key, old.run_at FROM solidq_recurring_executions old
              WHERE old.run_at < {NOW_MINUS}
                AND EXISTS (SELECT 1 FROM solidq_recurring_executions later
                            WHERE later.task_key = old.task_key AND later.run_at > old.run_at)
              LIMIT ?) AS batch
         STRAIGHT_JOIN solidq_recurring_executions e
           ON e.task_key = batch.task_key AND e.run_at = batch.run_at"
    )
}

pub(super) fn executions_delete_old(
    conn: &mut MysqlConnection,
    older_than: Duration,
    limit: usize,
) -> QueryResult<usize> {
    Cached(
        sql_query(delete_old_guards_sql())
            .bind::<BigInt, _>(micros(older_than))
            .bind::<BigInt, _>(limit as i64),
    )
    .execute(conn)
}
