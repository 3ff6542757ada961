//! MySQL primitives of recurring tasks. Times are the database's
//! (`UTC_TIMESTAMP(6)`, read per statement, not per transaction as
//! PostgreSQL's `LOCALTIMESTAMP`: a tick's guard copies its job's
//! `created_at` rather than reading the clock again).

use std::time::Duration;

use chrono::NaiveDateTime;
use diesel::result::{DatabaseErrorKind, Error as DieselError};
use diesel::sql_types::{BigInt, Integer, Nullable, Text, Timestamp};
use diesel::{MysqlConnection, QueryResult, QueryableByName, RunQueryDsl};

use super::json_strings;
use crate::store::named::named;
use crate::store::{Cached, RecurringDriver, RecurringTaskRow, micros, prepared};

const SQL: &str = include_str!("recurring.sql");
const UPSERT_TASK: &str = named(SQL, "upsert_task");
const DELETE_OTHER_TASKS: &str = named(SQL, "delete_other_tasks");
const INSERT_GUARD: &str = named(SQL, "insert_guard");
const GUARD_CREATED: &str = named(SQL, "insert_guard/created_at");
const DELETE_OLD_GUARDS: &str = named(SQL, "delete_old_guards");

#[derive(QueryableByName)]
struct Inserted {
    #[diesel(sql_type = Timestamp)]
    created_at: NaiveDateTime,
}

impl RecurringDriver for MysqlConnection {
    fn recurring_tasks_sync(&mut self, tasks: &[RecurringTaskRow]) -> QueryResult<()> {
        let mut sorted: Vec<&RecurringTaskRow> = tasks.iter().collect();
        sorted.sort_by(|a, b| a.key.cmp(&b.key));
        for task in sorted {
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
        let keys: Vec<String> = tasks.iter().map(|t| t.key.clone()).collect();
        Cached(prepared(DELETE_OTHER_TASKS).bind::<Text, _>(json_strings(&keys)))
            .execute(self)
            .map(drop)
    }

    fn recurring_execution_insert(
        &mut self,
        task_key: &str,
        run_at: NaiveDateTime,
        job_id: i64,
    ) -> QueryResult<Option<NaiveDateTime>> {
        let inserted = Cached(
            prepared(INSERT_GUARD)
                .bind::<Text, _>(task_key)
                .bind::<Timestamp, _>(run_at)
                .bind::<BigInt, _>(job_id),
        )
        .execute(self);
        match inserted {
            Ok(0) => return Ok(None),
            Ok(_) => {}
            Err(DieselError::DatabaseError(DatabaseErrorKind::UniqueViolation, _)) => {
                return Ok(None);
            }
            Err(error) => return Err(error),
        }
        let rows: Vec<Inserted> = Cached(
            prepared(GUARD_CREATED)
                .bind::<Text, _>(task_key)
                .bind::<Timestamp, _>(run_at),
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
