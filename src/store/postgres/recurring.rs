//! PostgreSQL primitives of recurring tasks. Times are the database's
//! (`LOCALTIMESTAMP`, the start of the enclosing transaction).

use std::time::Duration;

use chrono::NaiveDateTime;
use diesel::sql_types::{Array, BigInt, Integer, Nullable, Text, Timestamp};
use diesel::{PgConnection, QueryResult, QueryableByName, RunQueryDsl, sql_query};

use crate::store::{Cached, RecurringTaskRow, micros};

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

/// The tick's guard takes its job's `created_at`: within the fire
/// transaction both are the transaction's start on the database's clock.
const INSERT_GUARD: &str = "\
INSERT INTO solidq_recurring_executions (task_key, run_at, job_id, created_at)
SELECT $1, $2, id, created_at FROM solidq_jobs WHERE id = $3
ON CONFLICT (task_key, run_at) DO NOTHING
RETURNING created_at";

/// Guards older than the retention, but each task's latest, a batch at a
/// time (the run_at index finds the old ones, the primary key the later
/// guard of the same task).
const DELETE_OLD_GUARDS: &str = "\
DELETE FROM solidq_recurring_executions
WHERE (task_key, run_at) IN (
    SELECT e.task_key, e.run_at FROM solidq_recurring_executions e
    WHERE e.run_at < LOCALTIMESTAMP - $1 * INTERVAL '1 microsecond'
      AND EXISTS (SELECT 1 FROM solidq_recurring_executions later
                  WHERE later.task_key = e.task_key AND later.run_at > e.run_at)
    LIMIT $2)";

#[derive(QueryableByName)]
struct Inserted {
    #[diesel(sql_type = Timestamp)]
    created_at: NaiveDateTime,
}

pub(super) fn execution_insert(
    conn: &mut PgConnection,
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
    conn: &mut PgConnection,
    older_than: Duration,
    limit: usize,
) -> QueryResult<usize> {
    Cached(
        sql_query(DELETE_OLD_GUARDS)
            .bind::<BigInt, _>(micros(older_than))
            .bind::<BigInt, _>(limit as i64),
    )
    .execute(conn)
}
