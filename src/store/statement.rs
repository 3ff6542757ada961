//! Enqueue statements for connections solidq does not own: the SQL and
//! its bound values, for the caller to run inside its own transaction with
//! whatever driver it uses (sqlx, tokio-postgres, rusqlite…). Each backend
//! writes its statements in its own `statement` module, from the same SQL
//! its own enqueue runs.

use chrono::NaiveDateTime;

use super::{NewJob, Store};
use crate::types::Backend;

/// One value for one placeholder, typed as its column takes it. `None` is
/// SQL `NULL` of that type; drivers that check parameter types (such as
/// `postgres`/`tokio-postgres`) need the typed `NULL`, so bind
/// `Option<i32>`, `Option<i64>`, `Option<String>` or
/// `Option<NaiveDateTime>` as the variant says.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SqlValue {
    /// `INTEGER` (PostgreSQL `int4`): an `i32`.
    Integer(Option<i32>),
    /// `BIGINT` (PostgreSQL `int8`): an `i64`.
    BigInt(Option<i64>),
    /// `TEXT`. On SQLite, times are text too (`YYYY-MM-DD HH:MM:SS.f`, UTC,
    /// as solidq stores them).
    Text(Option<String>),
    /// PostgreSQL `timestamp` (without time zone) or MySQL `DATETIME`, in
    /// UTC.
    Timestamp(Option<NaiveDateTime>),
}

/// One SQL statement and the values of its placeholders in order: `$1`,
/// `$2`… on PostgreSQL, `?1`, `?2`… on SQLite, `?` on MySQL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    /// The SQL text.
    pub sql: String,
    /// The value of each placeholder, the first for `$1` / `?1`.
    pub params: Vec<SqlValue>,
}

/// What enqueues one job on a connection solidq does not own, from
/// [`Queue::enqueue_statement`](crate::Queue::enqueue_statement): run
/// [`statements`](EnqueueStatement::statements) in order, on one
/// connection, inside your transaction. The job exists if and only if
/// that transaction commits.
///
/// * PostgreSQL: one statement (the job and its execution row in one
///   `WITH`). It returns one row, whose `id` column (`BIGINT`) is the new
///   job's id, or no row when the job's unique key is taken (the
///   transaction is not aborted). Workers listening for new jobs are
///   notified when your transaction commits. A job with a negative
///   priority or a fairness key adds a second, `SELECT
///   nextval('solidq_ready_below')`: it may be placed before jobs already
///   claimed past, and that tells the claims to look there (the guide's
///   performance chapter, "A transaction held open elsewhere").
/// * SQLite: two statements, run one right after the other: the first
///   inserts the job and returns its `id` (no row when the unique key is
///   taken: read it with `query`, not `execute`, in drivers that refuse
///   rows from `execute`); the second adds its ready or scheduled row,
///   finding the job through `last_insert_rowid()` and `changes()`, so run
///   nothing between them on that connection. Open the transaction with
///   `BEGIN IMMEDIATE` (see the README's SQLite section) and give the
///   connection a busy timeout.
/// * MySQL: two statements, run one right after the other, returning no
///   rows: the job's insert, then its ready or scheduled row, found
///   through `LAST_INSERT_ID()`. Afterwards `SELECT LAST_INSERT_ID()`
///   (or the driver's last insert id) is the new job's id, or 0 when its unique key was taken (then neither statement wrote
///   anything; the transaction goes on). Affected-row counts cannot tell
///   the two apart (drivers connecting with `CLIENT_FOUND_ROWS` count a
///   taken key as one row). Times are the database's clock; a delayed job
///   binds its run time (`DATETIME`, UTC, or `NULL`) and its delay in
///   microseconds. A job with a negative priority or a fairness key adds
///   a statement before those two, `INSERT INTO solidq_ready_below ()
///   VALUES ()`, for the same reason as on PostgreSQL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnqueueStatement {
    /// The backend the statements are written for.
    pub backend: Backend,
    /// The statements, to run in this order.
    pub statements: Vec<Statement>,
}

impl NewJob {
    /// The values of the job's own columns, in the order every backend's
    /// insert binds them first: queue, kind, arguments, priority, unique
    /// key, concurrency key, options, delivery, max attempts, max stalls,
    /// fairness key.
    pub(super) fn column_values(&self) -> Vec<SqlValue> {
        let text = |value: &str| SqlValue::Text(Some(value.to_string()));
        vec![
            text(&self.queue_name),
            text(&self.kind),
            text(&self.arguments),
            SqlValue::Integer(Some(self.priority)),
            SqlValue::Text(self.unique_key.clone()),
            SqlValue::Text(self.concurrency_key.clone()),
            text(&self.options),
            text(self.delivery.as_str()),
            SqlValue::Integer(Some(self.max_attempts)),
            SqlValue::Integer(self.max_stalled_count),
            SqlValue::Text(self.fairness_key.clone()),
        ]
    }
}

impl Store {
    /// The statements that enqueue `job` (not under a concurrency limit)
    /// on the caller's own connection.
    pub(crate) fn enqueue_statement(&self, job: &NewJob) -> EnqueueStatement {
        let statements = match self.backend() {
            #[cfg(feature = "postgres")]
            Backend::Postgres => super::postgres::enqueue_statement(job),
            #[cfg(feature = "sqlite")]
            Backend::Sqlite => super::sqlite::enqueue_statements(job),
            #[cfg(feature = "mysql")]
            Backend::Mysql => super::mysql::enqueue_statements(job),
            #[allow(unreachable_patterns)]
            _ => unreachable!("DatabaseUrl::parse refuses a backend left out of the build"),
        };
        EnqueueStatement {
            backend: self.backend(),
            statements,
        }
    }
}
