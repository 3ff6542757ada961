//! The enqueue statements for a connection solidq does not own. MySQL has
//! no `RETURNING` and no writable `WITH`, so there are two, run one right
//! after the other on one connection, inside the caller's transaction:
//!
//! 1. The job's insert. Its unique key taken, it inserts nothing: the
//!    duplicate path of `ON DUPLICATE KEY UPDATE` changes no column but
//!    calls `LAST_INSERT_ID(0)`. So afterwards `LAST_INSERT_ID()` (and the
//!    driver's last insert id, from the server's OK packet) is the new
//!    job's id, or 0 when the key was taken. The affected-rows count does
//!    not tell (a row left as it was counts 0, or 1 for drivers that
//!    connect with `CLIENT_FOUND_ROWS`, as diesel does), nor does
//!    `ROW_COUNT()`, which follows the same flag.
//! 2. Its ready or scheduled row, read from the job `WHERE id =
//!    LAST_INSERT_ID()`: no row when the key was taken. Its times are the
//!    job's (`created_at`, `scheduled_at`).
//!
//! A job with a negative priority or a fairness key may be placed before
//! jobs that claims already passed: a statement before those two moves
//! the counter that tells the claims to look there (`store::floor`), an
//! insert of its own whose id `LAST_INSERT_ID()` then no longer holds.
//!
//! Times are the database's clock (`UTC_TIMESTAMP(6)`): an immediate job
//! binds none; a delayed or timed one binds its run time (a `DATETIME`,
//! UTC, or `NULL`) and its delay in microseconds, added to the database's
//! now when the run time is `NULL`. Jobs under a concurrency key go to
//! scheduled even when due now, where the dispatcher places them under
//! their limit; a job without one whose run time has passed (by this
//! host's clock) goes to ready.

use super::NOW;
use crate::store::{NewJob, SqlValue, Statement, micros, utc_now};

const JOB_COLUMNS: &str = "queue_name, kind, arguments, priority, unique_key, concurrency_key, \
     options, delivery, max_attempts, max_stalled_count, fairness_key, scheduled_at, created_at, \
     updated_at";

/// The job, due now: eleven values bound.
pub(super) fn insert_job_now_sql() -> String {
    insert_job_sql(NOW)
}

/// The job, due at `?` (its run time, a `DATETIME` or `NULL`) or else
/// now plus `?` microseconds: thirteen values bound.
pub(super) fn insert_job_at_sql() -> String {
    insert_job_sql(&format!("COALESCE(?, {NOW} + INTERVAL ? MICROSECOND)"))
}

fn insert_job_sql(scheduled_at: &str) -> String {
    format!(
        "INSERT INTO solidq_jobs ({JOB_COLUMNS})
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, {scheduled_at}, {NOW}, {NOW})
         ON DUPLICATE KEY UPDATE id = id + LAST_INSERT_ID(0)"
    )
}

/// The ready row of the job statement 1 inserted (none if it inserted
/// nothing). `LAST_INSERT_ID()` is a constant of the statement: a primary
/// key lookup.
pub(super) static READY_AFTER_INSERT: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| {
        format!(
            "INSERT INTO solidq_ready_executions ({})
         SELECT {} FROM solidq_jobs WHERE id = LAST_INSERT_ID()",
            crate::store::fair::READY_COLUMNS,
            crate::store::fair::ready_values_of("solidq_jobs", "solidq_jobs.created_at")
        )
    });

/// The scheduled row of the job statement 1 inserted (none if it inserted
/// nothing).
pub(super) const SCHEDULED_AFTER_INSERT: &str = "\
INSERT INTO solidq_scheduled_executions (job_id, queue_name, priority, scheduled_at, created_at,
                                         concurrency_key)
SELECT id, queue_name, priority, scheduled_at, created_at, concurrency_key
FROM solidq_jobs WHERE id = LAST_INSERT_ID()";

/// The statements that enqueue `job` (see the module docs).
pub(in crate::store) fn enqueue_statements(job: &NewJob) -> Vec<Statement> {
    let mut params = job.column_values();
    let now = job.run_at.is_none() && job.delay.is_zero();
    let insert = if now {
        insert_job_now_sql()
    } else {
        params.push(SqlValue::Timestamp(job.run_at));
        params.push(SqlValue::BigInt(Some(micros(job.delay))));
        insert_job_at_sql()
    };
    let due = match job.run_at {
        Some(run_at) => run_at <= utc_now(),
        None => job.delay.is_zero(),
    };
    let execution = if due && job.concurrency_key.is_none() {
        READY_AFTER_INSERT.as_str()
    } else {
        SCHEDULED_AFTER_INSERT
    };
    let mut statements = Vec::with_capacity(3);
    // A job that may be ready below the tail moves the counter of the
    // claims' floor on (`store::floor`), in the same transaction: first,
    // so that `LAST_INSERT_ID()` is the job's afterwards.
    if crate::store::floor::moves_on(std::slice::from_ref(job)) {
        statements.push(Statement {
            sql: crate::store::portable::MYSQL_MOVE_ON.to_string(),
            params: Vec::new(),
        });
    }
    statements.push(Statement {
        sql: insert,
        params,
    });
    statements.push(Statement {
        sql: execution.to_string(),
        params: Vec::new(),
    });
    statements
}
