//! Recurring tasks in the store: the `recurring_tasks` table mirrors the
//! scheduler's configuration, and each tick is fired through one
//! transaction that inserts the job and the `(task_key, run_at)` row whose
//! primary key makes a tick fire once however many schedulers race for it.

use chrono::NaiveDateTime;

use super::{LimitedJob, NewJob, Store, in_transaction};
use crate::types::Result;

/// A recurring task as the `recurring_tasks` table stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RecurringTaskRow {
    pub key: String,
    pub schedule: String,
    pub timezone: String,
    pub kind: String,
    /// JSON.
    pub arguments: String,
    pub queue_name: Option<String>,
    pub priority: Option<i32>,
    pub description: Option<String>,
}

/// A recurring task's row with its latest tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RecurringListing {
    pub task: RecurringTaskRow,
    /// The latest tick fired, and its job.
    pub last: Option<(NaiveDateTime, i64)>,
}

impl Store {
    /// Every row of `recurring_tasks` (by key) with its latest tick.
    pub(crate) fn recurring_list(&self) -> Result<Vec<RecurringListing>> {
        use super::schema::{
            solidq_recurring_executions as executions, solidq_recurring_tasks as tasks,
        };
        use diesel::prelude::*;
        self.with_read("recurring_list", |conn| {
            type Row = (
                String,
                String,
                String,
                String,
                String,
                Option<String>,
                Option<i32>,
                Option<String>,
            );
            let rows: Vec<Row> = tasks::table
                .select((
                    tasks::key,
                    tasks::schedule,
                    tasks::timezone,
                    tasks::kind,
                    tasks::arguments,
                    tasks::queue_name,
                    tasks::priority,
                    tasks::description,
                ))
                .order(tasks::key)
                .load(conn)?;
            rows.into_iter()
                .map(
                    |(
                        key,
                        schedule,
                        timezone,
                        kind,
                        arguments,
                        queue_name,
                        priority,
                        description,
                    )| {
                        let last: Option<(NaiveDateTime, i64)> = executions::table
                            .filter(executions::task_key.eq(&key))
                            .order(executions::run_at.desc())
                            .select((executions::run_at, executions::job_id))
                            .first(conn)
                            .optional()?;
                        Ok(RecurringListing {
                            task: RecurringTaskRow {
                                key,
                                schedule,
                                timezone,
                                kind,
                                arguments,
                                queue_name,
                                priority,
                                description,
                            },
                            last,
                        })
                    },
                )
                .collect()
        })
    }

    /// The database's clock (the host's on SQLite), UTC.
    pub(crate) fn db_now(&self) -> Result<NaiveDateTime> {
        self.with_driver("db_now", |d| d.db_now())
    }

    /// Makes `recurring_tasks` hold exactly `tasks`: inserts new ones,
    /// updates changed ones, deletes the others.
    pub(crate) fn recurring_tasks_sync(&self, tasks: &[RecurringTaskRow]) -> Result<()> {
        self.with_driver("recurring_tasks_sync", |d| {
            in_transaction(d, |d| d.recurring_tasks_sync(tasks))
        })
    }

    /// Fires one tick of `task_key`: inserts `job` and the tick's row in one
    /// transaction. Returns the job's id (and the job, if its concurrency
    /// limit discarded it on the way in), or `None` when another scheduler
    /// fired this tick first (then nothing was written).
    pub(crate) fn recurring_fire(
        &self,
        task_key: &str,
        run_at: NaiveDateTime,
        job: &NewJob,
    ) -> Result<Option<(i64, Option<LimitedJob>)>> {
        self.with_driver("recurring_fire", |d| {
            let mut lost = false;
            let outcome = in_transaction(d, |d| {
                let mut inserted = Store::jobs_enqueue_on(d, std::slice::from_ref(job), true)?;
                let id = match inserted.outcome.pop() {
                    Some(Ok(id)) => id,
                    // Its unique key is held by another job: nothing to do.
                    Some(Err(_)) | None => return Ok(None),
                };
                if d.recurring_execution_insert(task_key, run_at, id)? {
                    Ok(Some((id, inserted.discarded.pop())))
                } else {
                    // Another scheduler fired this tick: undo our job.
                    lost = true;
                    Err(diesel::result::Error::RollbackTransaction)
                }
            });
            match outcome {
                Err(diesel::result::Error::RollbackTransaction) if lost => Ok(None),
                other => other,
            }
        })
    }
}
