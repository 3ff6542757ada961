//! SQLite primitives of recurring tasks. Times are this host's clock,
//! which is the database's.

use std::time::Duration;

use chrono::NaiveDateTime;
use diesel::sql_types::{BigInt, Integer, Nullable, Text, Timestamp};
use diesel::{QueryResult, QueryableByName, RunQueryDsl, SqliteConnection, sql_query};

use crate::store::{Cached, RecurringTaskRow, utc_now};

const UPSERT_TASK: &str = "\
INSERT INTO solidq_recurring_tasks
    (key, schedule, timezone, kind, arguments, queue_name, priority, description, created_at, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)
ON CONFLICT (key) DO UPDATE SET
    schedule = excluded.schedule, timezone = excluded.timezone, kind = excluded.kind,
    arguments = excluded.arguments, queue_name = excluded.queue_name, priority = excluded.priority,
    description = excluded.description, updated_at = excluded.updated_at
WHERE (solidq_recurring_tasks.schedule, solidq_recurring_tasks.timezone, solidq_recurring_tasks.kind,
       solidq_recurring_tasks.arguments, solidq_recurring_tasks.queue_name,
       solidq_recurring_tasks.priority, solidq_recurring_tasks.description)
      IS NOT (excluded.schedule, excluded.timezone, excluded.kind, excluded.arguments,
              excluded.queue_name, excluded.priority, excluded.description)";

pub(super) fn tasks_sync(
    conn: &mut SqliteConnection,
    tasks: &[RecurringTaskRow],
) -> QueryResult<()> {
    let now = utc_now();
    for task in tasks {
        Cached(
            sql_query(UPSERT_TASK)
                .bind::<Text, _>(&task.key)
                .bind::<Text, _>(&task.schedule)
                .bind::<Text, _>(&task.timezone)
                .bind::<Text, _>(&task.kind)
                .bind::<Text, _>(&task.arguments)
                .bind::<Nullable<Text>, _>(task.queue_name.as_deref())
                .bind::<Nullable<Integer>, _>(task.priority)
                .bind::<Nullable<Text>, _>(task.description.as_deref())
                .bind::<Timestamp, _>(now),
        )
        .execute(conn)?;
    }
    let keys = serde_json::to_string(&tasks.iter().map(|t| &t.key).collect::<Vec<_>>())
        .expect("strings serialize");
    Cached(
        sql_query(
            "DELETE FROM solidq_recurring_tasks WHERE key NOT IN (SELECT value FROM json_each(?1))",
        )
        .bind::<Text, _>(keys),
    )
    .execute(conn)
    .map(drop)
}

/// The tick's guard takes its job's `created_at`, the time the database
/// stored for the tick.
const INSERT_GUARD: &str = "\
INSERT INTO solidq_recurring_executions (task_key, run_at, job_id, created_at)
SELECT ?1, ?2, id, created_at FROM solidq_jobs WHERE id = ?3
ON CONFLICT (task_key, run_at) DO NOTHING
RETURNING created_at";

/// Guards older than `?1`, but each task's latest, a batch at a time (the
/// run_at index finds the old ones, the primary key the later guard of the
/// same task).
const DELETE_OLD_GUARDS: &str = "\
DELETE FROM solidq_recurring_executions
WHERE rowid IN (
    SELECT e.rowid FROM solidq_recurring_executions e
    WHERE e.run_at < ?1
      AND EXISTS (SELECT 1 FROM solidq_recurring_executions later
                  WHERE later.task_key = e.task_key AND later.run_at > e.run_at)
    LIMIT ?2)";

#[derive(QueryableByName)]
struct Inserted {
    #[diesel(sql_type = Timestamp)]
    created_at: NaiveDateTime,
}

pub(super) fn execution_insert(
    conn: &mut SqliteConnection,
    task_key: &str,
    run_at: NaiveDateTime,
    job_id: i64,
) -> QueryResult<Option<NaiveDateTime>> {
    let rows: Vec<Inserted> = Cached(
        sql_query(INSERT_GUARD)
            .bind::<Text, _>(task_key)
            .bind::<Timestamp, _>(run_at)
            .bind::<BigInt, _>(job_id),
    )
    .load(conn)?;
    Ok(rows.into_iter().next().map(|r| r.created_at))
}

pub(super) fn executions_delete_old(
    conn: &mut SqliteConnection,
    older_than: Duration,
    limit: usize,
) -> QueryResult<usize> {
    let cutoff = chrono::Duration::from_std(older_than)
        .ok()
        .and_then(|age| utc_now().checked_sub_signed(age))
        .unwrap_or(NaiveDateTime::MIN);
    Cached(
        sql_query(DELETE_OLD_GUARDS)
            .bind::<Timestamp, _>(cutoff)
            .bind::<BigInt, _>(limit as i64),
    )
    .execute(conn)
}
