//! PostgreSQL primitives of recurring tasks.

use chrono::NaiveDateTime;
use diesel::sql_types::{Array, BigInt, Integer, Nullable, Text, Timestamp};
use diesel::{PgConnection, QueryResult, QueryableByName, RunQueryDsl, sql_query};

use crate::store::{Cached, RecurringTaskRow};

const UPSERT_TASK: &str = "\
INSERT INTO solidq_recurring_tasks AS t
    (key, schedule, timezone, kind, arguments, queue_name, priority, description, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, LOCALTIMESTAMP, LOCALTIMESTAMP)
ON CONFLICT (key) DO UPDATE SET
    schedule = EXCLUDED.schedule, timezone = EXCLUDED.timezone, kind = EXCLUDED.kind,
    arguments = EXCLUDED.arguments, queue_name = EXCLUDED.queue_name, priority = EXCLUDED.priority,
    description = EXCLUDED.description, updated_at = EXCLUDED.updated_at
WHERE (t.schedule, t.timezone, t.kind, t.arguments, t.queue_name, t.priority, t.description)
      IS DISTINCT FROM (EXCLUDED.schedule, EXCLUDED.timezone, EXCLUDED.kind, EXCLUDED.arguments,
                        EXCLUDED.queue_name, EXCLUDED.priority, EXCLUDED.description)";

pub(super) fn tasks_sync(conn: &mut PgConnection, tasks: &[RecurringTaskRow]) -> QueryResult<()> {
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
                .bind::<Nullable<Text>, _>(task.description.as_deref()),
        )
        .execute(conn)?;
    }
    Cached(
        sql_query("DELETE FROM solidq_recurring_tasks WHERE NOT (key = ANY ($1))")
            .bind::<Array<Text>, _>(tasks.iter().map(|t| t.key.as_str()).collect::<Vec<_>>()),
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
    conn: &mut PgConnection,
    task_key: &str,
    run_at: NaiveDateTime,
    job_id: i64,
) -> QueryResult<bool> {
    let rows: Vec<Inserted> = Cached(
        sql_query(
            "INSERT INTO solidq_recurring_executions (task_key, run_at, job_id, created_at)
             VALUES ($1, $2, $3, LOCALTIMESTAMP)
             ON CONFLICT (task_key, run_at) DO NOTHING
             RETURNING job_id",
        )
        .bind::<Text, _>(task_key)
        .bind::<Timestamp, _>(run_at)
        .bind::<BigInt, _>(job_id),
    )
    .load(conn)?;
    Ok(!rows.is_empty())
}
