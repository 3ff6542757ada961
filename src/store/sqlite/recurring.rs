//! SQLite primitives of recurring tasks.

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

#[derive(QueryableByName)]
struct Inserted {
    #[diesel(sql_type = BigInt)]
    #[allow(dead_code)]
    job_id: i64,
}

pub(super) fn execution_insert(
    conn: &mut SqliteConnection,
    task_key: &str,
    run_at: NaiveDateTime,
    job_id: i64,
) -> QueryResult<bool> {
    let rows: Vec<Inserted> = Cached(
        sql_query(
            "INSERT INTO solidq_recurring_executions (task_key, run_at, job_id, created_at)
             VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (task_key, run_at) DO NOTHING
             RETURNING job_id",
        )
        .bind::<Text, _>(task_key)
        .bind::<Timestamp, _>(run_at)
        .bind::<BigInt, _>(job_id)
        .bind::<Timestamp, _>(utc_now()),
    )
    .load(conn)?;
    Ok(!rows.is_empty())
}
