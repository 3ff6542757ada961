//! The runtime's reads and moves that decide nothing: due scheduled jobs
//! dispatched, the next due time, the jobs asked to stop. The rules of a
//! claim (a lost `COMMIT` read back, unstarted claims handed back) are
//! `lifecycle::claims`'s.

use std::time::Duration;

use super::{Store, driver};
use crate::types::Result;

impl Store {
    /// Moves up to `batch` due scheduled jobs to ready (those under a
    /// concurrency limit: see [`Store::scheduled_dispatch_limited`]).
    pub(crate) fn scheduled_dispatch(&self, batch: usize) -> Result<Vec<String>> {
        self.with_driver("scheduled_dispatch", |d| d.scheduled_dispatch(batch))
    }

    /// How long until the next scheduled job is due (zero when one is due
    /// already), by the backend's clock; `None` when none is scheduled.
    /// One read of the scheduled table's `scheduled_at` index.
    pub(crate) fn scheduled_next_due(&self) -> Result<Option<Duration>> {
        use super::schema::solidq_scheduled_executions as scheduled;
        use diesel::prelude::*;
        self.with_read("scheduled_next_due", |conn| {
            let next: Option<chrono::NaiveDateTime> = scheduled::table
                .select(diesel::dsl::min(scheduled::scheduled_at))
                .first(conn)?;
            let Some(next) = next else {
                return Ok(None);
            };
            let now = driver(conn).db_now()?;
            Ok(Some((next - now).to_std().unwrap_or(Duration::ZERO)))
        })
    }

    /// The jobs `process_id` holds whose running was asked to stop.
    pub(crate) fn claimed_cancelled(&self, process_id: i64) -> Result<Vec<i64>> {
        use super::schema::{solidq_claimed_executions as claimed, solidq_jobs as jobs};
        use diesel::prelude::*;
        self.with_conn("claimed_cancelled", |conn| {
            claimed::table
                .inner_join(jobs::table.on(jobs::id.eq(claimed::job_id)))
                .filter(claimed::process_id.eq(process_id))
                .filter(jobs::cancel_requested_at.is_not_null())
                .select(claimed::job_id)
                .load(conn)
        })
    }
}
