//! Recurring tasks in the store: the `recurring_tasks` table mirrors the
//! scheduler's configuration, and each tick is fired through one
//! transaction that inserts the job and the `(task_key, run_at)` guard row
//! whose primary key makes a tick fire once however many schedulers race
//! for it. Guards do not refer to their job by a foreign key: they outlive
//! it (a job may be deleted as it finishes) and are aged out on their own.

use std::time::Duration;

use chrono::NaiveDateTime;

use super::admin::CLEAN_BATCH;
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

/// What [`Store::recurring_ticks`] reads: when the task was declared, and
/// its ticks (run time, job id, fired at).
pub(crate) type RecurringTicks = (
    Option<NaiveDateTime>,
    Vec<(NaiveDateTime, i64, NaiveDateTime)>,
);

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

    /// When task `key` was first declared (`None`: no such task), and its
    /// ticks (run time, job id, when it was fired), newest first, at most
    /// `limit`, none older than `since`.
    pub(crate) fn recurring_ticks(
        &self,
        key: &str,
        since: NaiveDateTime,
        limit: usize,
    ) -> Result<RecurringTicks> {
        use super::schema::{
            solidq_recurring_executions as executions, solidq_recurring_tasks as tasks,
        };
        use diesel::prelude::*;
        self.with_read("recurring_ticks", |conn| {
            let declared: Option<NaiveDateTime> = tasks::table
                .filter(tasks::key.eq(key))
                .select(tasks::created_at)
                .first(conn)
                .optional()?;
            let ticks = executions::table
                .filter(executions::task_key.eq(key))
                .filter(executions::run_at.ge(since))
                .order(executions::run_at.desc())
                .limit(i64::try_from(limit).unwrap_or(i64::MAX))
                .select((
                    executions::run_at,
                    executions::job_id,
                    executions::created_at,
                ))
                .load(conn)?;
            Ok((declared, ticks))
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

    /// Deletes tick guards whose tick is more than `older_than` ago (the
    /// database's clock), in batches, but never a task's latest; returns
    /// how many.
    pub(crate) fn recurring_guards_clean(&self, older_than: Duration) -> Result<u64> {
        let mut done = 0u64;
        loop {
            let n = self.with_driver("recurring_guards_clean", |d| {
                d.recurring_executions_delete_old(older_than, CLEAN_BATCH)
            })?;
            done += n as u64;
            if n < CLEAN_BATCH {
                return Ok(done);
            }
        }
    }
}

/// One tick to fire ([`Store::recurring_fire`]).
pub(crate) struct TickFire<'a> {
    pub task_key: &'a str,
    /// The tick, on the database's clock.
    pub run_at: NaiveDateTime,
    pub job: &'a NewJob,
    /// The latest past `run_at` the tick may still be fired.
    pub max_lateness: Duration,
}

/// What became of a tick ([`Store::recurring_fire`]).
#[derive(Debug)]
pub(crate) enum Fire {
    /// Its job was enqueued, created at `created_at` (the database's
    /// clock); `discarded` is the job if its concurrency limit discarded
    /// it on the way in.
    Enqueued {
        job_id: i64,
        created_at: NaiveDateTime,
        discarded: Option<LimitedJob>,
    },
    /// It was fired already (its guard exists), or its job's unique key is
    /// held: nothing was written.
    Elsewhere,
    /// The database's clock (`now`) has not reached the tick: nothing was
    /// written.
    NotYet { now: NaiveDateTime },
    /// The database's clock (`now`) is more than the allowed lateness past
    /// the tick: nothing was written.
    TooLate { now: NaiveDateTime },
}
