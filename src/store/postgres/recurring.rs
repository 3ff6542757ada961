//! PostgreSQL primitives of recurring tasks. Times are the database's
//! (`LOCALTIMESTAMP`, the start of the enclosing transaction).

use std::time::Duration;

use chrono::NaiveDateTime;
use diesel::sql_types::{Array, BigInt, Integer, Nullable, Text, Timestamp};
use diesel::{PgConnection, QueryResult, QueryableByName, RunQueryDsl};

use crate::store::{Cached, RecurringDriver, RecurringTaskRow, micros, prepared};

use crate::store::named::named;

const SQL: &str = include_str!("recurring.sql");
const UPSERT_TASK: &str = named(SQL, "upsert_task");
const DELETE_OTHER_TASKS: &str = named(SQL, "delete_other_tasks");
const INSERT_GUARD: &str = named(SQL, "insert_guard");
const DELETE_OLD_GUARDS: &str = named(SQL, "delete_old_guards");

#[derive(QueryableByName)]
struct Inserted {
    #[diesel(sql_type = Timestamp)]
    created_at: NaiveDateTime,
}

impl RecurringDriver for PgConnection {
    fn recurring_tasks_sync(&mut self, tasks: &[RecurringTaskRow]) -> QueryResult<()> {
        for task in tasks {
            Cached(
                prepared(UPSERT_TASK)
                    .bind::<Text, _>(&task.key)
                    .bind::<Text, _>(&task.schedule)
                    .bind::<Text, _>(&task.timezone)
                    .bind::<Text, _>(&task.kind)
                    .bind::<Text, _>(&task.arguments)
                    .bind::<Nullable<Text>, _>(task.queue_name.as_deref())
                    .bind::<Nullable<Integer>, _>(task.priority)
                    .bind::<Nullable<Text>, _>(task.description.as_deref()),
            )
            .execute(self)?;
        }
        Cached(
            prepared(DELETE_OTHER_TASKS)
                .bind::<Array<Text>, _>(tasks.iter().map(|t| t.key.as_str()).collect::<Vec<_>>()),
        )
        .execute(self)
        .map(drop)
    }

    fn recurring_execution_insert(
        &mut self,
        task_key: &str,
        run_at: NaiveDateTime,
        job_id: i64,
    ) -> QueryResult<Option<NaiveDateTime>> {
        let rows: Vec<Inserted> = Cached(
            prepared(INSERT_GUARD)
                .bind::<Text, _>(task_key)
                .bind::<Timestamp, _>(run_at)
                .bind::<BigInt, _>(job_id),
        )
        .load(self)?;
        Ok(rows.into_iter().next().map(|r| r.created_at))
    }

    fn recurring_executions_delete_old(
        &mut self,
        older_than: Duration,
        limit: usize,
    ) -> QueryResult<usize> {
        Cached(
            prepared(DELETE_OLD_GUARDS)
                .bind::<BigInt, _>(micros(older_than))
                .bind::<BigInt, _>(limit as i64),
        )
        .execute(self)
    }
}
