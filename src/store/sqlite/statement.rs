//! The enqueue statements for a connection solidq does not own. SQLite
//! has no writable `WITH`, so there are two: the job's insert (the one
//! solidq runs itself), then its execution row, which finds the job by
//! `last_insert_rowid()`, and only when `changes()` says the insert did
//! insert (a taken unique key inserts nothing, and `last_insert_rowid()`
//! would then name some earlier row).

use chrono::NaiveDateTime;

use super::{INSERT_JOB, plus};
use crate::store::{NewJob, SqlValue, Statement, utc_now};

static READY_AFTER_INSERT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "INSERT INTO solidq_ready_executions ({})
         SELECT {} FROM solidq_jobs WHERE id = last_insert_rowid() AND changes() = 1",
        crate::store::fair::READY_COLUMNS,
        crate::store::fair::ready_values_of("solidq_jobs", "?1")
    )
});

const SCHEDULED_AFTER_INSERT: &str = "\
INSERT INTO solidq_scheduled_executions (job_id, queue_name, priority, scheduled_at, created_at,
                                         concurrency_key)
SELECT id, queue_name, priority, scheduled_at, ?1, concurrency_key
FROM solidq_jobs WHERE id = last_insert_rowid() AND changes() = 1";

/// A time as diesel stores it on SQLite (`%F %T%.f`), so text comparisons
/// with solidq's own rows hold.
fn time(t: NaiveDateTime) -> SqlValue {
    SqlValue::Text(Some(t.format("%F %T%.f").to_string()))
}

pub(in crate::store) fn enqueue_statements(job: &NewJob) -> Vec<Statement> {
    let now = utc_now();
    let scheduled_at = job.run_at.unwrap_or_else(|| plus(now, job.delay));
    let mut params = job.column_values();
    params.extend([time(scheduled_at), time(now)]);
    let insert = Statement {
        sql: INSERT_JOB.to_string(),
        params,
    };
    let execution = if scheduled_at <= now && job.concurrency_key.is_none() {
        READY_AFTER_INSERT.as_str()
    } else {
        SCHEDULED_AFTER_INSERT
    };
    vec![
        insert,
        Statement {
            sql: execution.to_string(),
            params: vec![time(now)],
        },
    ]
}
