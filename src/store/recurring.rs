//! Recurring tasks in the store: the `recurring_tasks` table mirrors the
//! scheduler's configuration, and each tick is fired through one
//! transaction that inserts the job and the `(task_key, run_at)` row whose
//! primary key makes a tick fire once however many schedulers race for it.

use chrono::NaiveDateTime;

use super::{NewJob, Store, enqueue_on_driver, in_transaction};
use crate::error::Result;

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

impl Store {
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
    /// transaction. Returns the job's id, or `None` when another scheduler
    /// fired this tick first (then nothing was written).
    pub(crate) fn recurring_fire(
        &self,
        task_key: &str,
        run_at: NaiveDateTime,
        job: &NewJob,
    ) -> Result<Option<i64>> {
        self.with_driver("recurring_fire", |d| {
            let mut lost = false;
            let outcome = in_transaction(d, |d| {
                let id = match enqueue_on_driver(d, std::slice::from_ref(job), true)?.pop() {
                    Some(Ok(id)) => id,
                    // Its unique key is held by another job: nothing to do.
                    Some(Err(_)) | None => return Ok(None),
                };
                if d.recurring_execution_insert(task_key, run_at, id)? {
                    Ok(Some(id))
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
