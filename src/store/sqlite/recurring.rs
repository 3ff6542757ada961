//! SQLite primitives of recurring tasks. Times are this host's clock,
//! which is the database's.

use std::time::Duration;

use chrono::NaiveDateTime;
use diesel::sql_types::{BigInt, Integer, Nullable, Text, Timestamp};
use diesel::{QueryResult, QueryableByName, RunQueryDsl, SqliteConnection};

use crate::store::{Cached, RecurringDriver, RecurringTaskRow, prepared, utc_now};

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

impl RecurringDriver for SqliteConnection {
    fn recurring_tasks_sync(&mut self, tasks: &[RecurringTaskRow]) -> QueryResult<()> {
        let now = utc_now();
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
                    .bind::<Nullable<Text>, _>(task.description.as_deref())
                    .bind::<Timestamp, _>(now),
            )
            .execute(self)?;
        }
        let keys = serde_json::to_string(&tasks.iter().map(|t| &t.key).collect::<Vec<_>>())
            .expect("strings serialize");
        Cached(prepared(DELETE_OTHER_TASKS).bind::<Text, _>(keys))
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
        let cutoff = chrono::Duration::from_std(older_than)
            .ok()
            .and_then(|age| utc_now().checked_sub_signed(age))
            .unwrap_or(NaiveDateTime::MIN);
        Cached(
            prepared(DELETE_OLD_GUARDS)
                .bind::<Timestamp, _>(cutoff)
                .bind::<BigInt, _>(limit as i64),
        )
        .execute(self)
    }
}
