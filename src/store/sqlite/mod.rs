//! SQLite half of the store. One writer at a time: every write transaction
//! is `BEGIN IMMEDIATE` (it takes the write lock up front, so two writers
//! never deadlock upgrading a read lock), waits out `busy_timeout`, and the
//! store retries what is still `database is locked`. Operations that may
//! find nothing to do (claims, dispatch) look first with a plain read, so an
//! idle worker never takes the write lock. Batches of ids travel as one JSON
//! array (`json_each`), which keeps each statement's text fixed and its
//! prepared form cached. "Now" is the host clock: SQLite has no server, and
//! every process using the file shares the host.

use std::collections::HashMap;

use chrono::NaiveDateTime;

use diesel::connection::{AnsiTransactionManager, TransactionManager};
use diesel::sql_types::{BigInt, Integer, Nullable, Text, Timestamp};
use diesel::{Connection, QueryResult, QueryableByName, RunQueryDsl, SqliteConnection, sql_query};

use std::sync::LazyLock;
use std::time::Duration;

use crate::store::fair::{READY_COLUMNS, ready_rows_sql};

mod audit;
mod claims;
mod concurrency;
mod control;
mod explain;
mod health;
mod jobs;
mod processes;
mod recurring;
mod statement;
mod stats;

pub(in crate::store) use explain::explain;
pub(in crate::store) use statement::enqueue_statements;

use super::{
    AdminDriver, AttemptStarted, Cached, ClaimLimits, ClaimQuery, ClaimedJob, ClaimsDriver, Driver,
    Failed, JobsDriver, NewJob, NewProcess, ProcessRow, ProcessesDriver, Progress, Released,
    ReleasedJob, Retried, Snoozed, Succeeded, prepared, utc_now,
};

/// The statements of queue pauses (`pauses.sql`).
const PAUSES: &str = include_str!("pauses.sql");
const PAUSE_INSERT: &str = crate::store::named::named(PAUSES, "pause_insert");
const PAUSE_DELETE: &str = crate::store::named::named(PAUSES, "pause_delete");

#[derive(QueryableByName)]
struct IdRow {
    #[diesel(sql_type = BigInt)]
    id: i64,
}

#[derive(QueryableByName)]
struct KeyRow {
    #[diesel(sql_type = Text)]
    unique_key: String,
    #[diesel(sql_type = BigInt)]
    id: i64,
}

#[derive(QueryableByName)]
struct Candidate {
    #[diesel(sql_type = BigInt)]
    job_id: i64,
    #[diesel(sql_type = BigInt)]
    ord: i64,
    #[diesel(sql_type = Integer)]
    priority: i32,
    /// Its place in claim order (`store::fair`).
    #[diesel(sql_type = BigInt)]
    position: i64,
    /// May be claimed ahead (absent from the plain query: false).
    #[diesel(sql_type = diesel::sql_types::Bool)]
    #[diesel(column_name = eligible)]
    eligible: bool,
}

#[derive(QueryableByName)]
struct DueRow {
    #[diesel(sql_type = BigInt)]
    job_id: i64,
    #[diesel(sql_type = Text)]
    queue_name: String,
}

pub(super) const INSERT_JOB: &str = "\
INSERT INTO solidq_jobs (queue_name, kind, arguments, priority, unique_key, concurrency_key, options,
                         delivery, max_attempts, max_stalled_count, fairness_key, scheduled_at, created_at,
                         updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?13)
ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL DO NOTHING
RETURNING id";

/// The ready row of a job without a fairness key: its place is its id.
pub(super) const INSERT_READY: &str = "\
INSERT INTO solidq_ready_executions (job_id, queue_name, priority, created_at, fairness_key, position, kind, delivery)
VALUES (?1, ?2, ?3, ?4, NULL, ?1, ?5, ?6)";

const INSERT_SCHEDULED: &str = "\
INSERT INTO solidq_scheduled_executions (job_id, queue_name, priority, scheduled_at, created_at,
                                         concurrency_key)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)";

/// The ready rows of the jobs `?1` (a JSON array of ids) at `?2`, placed
/// by `store::fair`: due jobs, and ready jobs with a fairness key.
pub(super) static MOVE_DUE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "INSERT INTO solidq_ready_executions ({READY_COLUMNS}) {}",
        ready_rows_sql(
            "j",
            "?2",
            "FROM solidq_jobs j WHERE j.id IN (SELECT value FROM json_each(?1))"
        )
    )
});

/// `due_at` is when the job last became due: its `scheduled_at` (enqueue,
/// run time, retry time), or its `updated_at` when that is later (a release
/// after a stall touches only `updated_at`). `?2` is the claim's time, `?3`
/// the jobs recorded as started.
const SELECT_CLAIMED_JOBS: &str = "\
SELECT id, queue_name, kind, arguments, concurrency_key, priority, options, delivery, max_attempts, attempts,
       stalled_count, snoozes, checkpoint, batch_id, cancel_requested_at IS NOT NULL AS cancel_requested, created_at,
       max(scheduled_at, updated_at) AS due_at, ?2 AS claimed_at, 0 AS ord, 0 AS position,
       id IN (SELECT value FROM json_each(?3)) AS started, run_alone
FROM solidq_jobs WHERE id IN (SELECT value FROM json_each(?1))";

/// A claim takes its jobs out of ready…
const DELETE_READY_CLAIMED: &str =
    "DELETE FROM solidq_ready_executions WHERE job_id IN (SELECT value FROM json_each(?1))";

/// …and into claimed, those in `?4` recorded as started.
const INSERT_CLAIMED: &str =
    "INSERT INTO solidq_claimed_executions (job_id, process_id, created_at, started_at)
     SELECT value, ?2, ?3, CASE WHEN value IN (SELECT value FROM json_each(?4)) THEN ?3 END
     FROM json_each(?1)";

/// Whether the claiming process still has its row.
const PROCESS_ALIVE: &str = "SELECT count(*) AS v FROM solidq_processes WHERE id = ?1";

/// `[id, started_at]` pairs as a JSON array, the times as diesel writes
/// SQLite timestamps (`%F %T%.f`), for `jobs_succeed_fenced/group`
/// (claims.sql).
fn attempt_starts(rows: &[(i64, NaiveDateTime)]) -> String {
    serde_json::Value::Array(
        rows.iter()
            .map(|(id, at)| serde_json::json!([id, at.format("%F %T%.f").to_string()]))
            .collect(),
    )
    .to_string()
}

#[derive(QueryableByName)]
struct Scalar {
    #[diesel(sql_type = BigInt)]
    v: i64,
}

pub(super) fn json_ids(ids: &[i64]) -> String {
    serde_json::to_string(ids).expect("integers serialize")
}

fn insert_jobs(conn: &mut SqliteConnection, jobs: &[NewJob]) -> QueryResult<Vec<Option<i64>>> {
    let now = utc_now();
    let mut ids = Vec::with_capacity(jobs.len());
    // Ready jobs with a fairness key: placed together at the end, each
    // key's places looked up once (`store::fair`).
    let mut fair = Vec::new();
    for job in jobs {
        let scheduled_at = job.run_at.unwrap_or_else(|| plus(now, job.delay));
        let row: Option<IdRow> = Cached(
            prepared(INSERT_JOB)
                .bind::<Text, _>(&job.queue_name)
                .bind::<Text, _>(&job.kind)
                .bind::<Text, _>(&job.arguments)
                .bind::<Integer, _>(job.priority)
                .bind::<Nullable<Text>, _>(job.unique_key.as_deref())
                .bind::<Nullable<Text>, _>(job.concurrency_key.as_deref())
                .bind::<Text, _>(&job.options)
                .bind::<Text, _>(job.delivery.as_str())
                .bind::<Integer, _>(job.max_attempts)
                .bind::<Nullable<Integer>, _>(job.max_stalled_count)
                .bind::<Nullable<Text>, _>(job.fairness_key.as_deref())
                .bind::<Timestamp, _>(scheduled_at)
                .bind::<Timestamp, _>(now),
        )
        .get_result(conn)
        .map(Some)
        .or_else(|e| match e {
            diesel::result::Error::NotFound => Ok(None),
            e => Err(e),
        })?;
        let Some(IdRow { id }) = row else {
            ids.push(None);
            continue;
        };
        // Jobs under a concurrency limit go to scheduled even when due now:
        // the caller places them (a slot, blocked or discarded).
        if scheduled_at <= now && job.concurrency_key.is_none() && job.fairness_key.is_some() {
            fair.push(id);
        } else if scheduled_at <= now && job.concurrency_key.is_none() {
            Cached(
                prepared(INSERT_READY)
                    .bind::<BigInt, _>(id)
                    .bind::<Text, _>(&job.queue_name)
                    .bind::<Integer, _>(job.priority)
                    .bind::<Timestamp, _>(now)
                    .bind::<Text, _>(&job.kind)
                    .bind::<Text, _>(job.delivery.as_str()),
            )
            .execute(conn)?;
        } else {
            Cached(
                prepared(INSERT_SCHEDULED)
                    .bind::<BigInt, _>(id)
                    .bind::<Text, _>(&job.queue_name)
                    .bind::<Integer, _>(job.priority)
                    .bind::<Timestamp, _>(scheduled_at)
                    .bind::<Timestamp, _>(now)
                    .bind::<Nullable<Text>, _>(job.concurrency_key.as_deref()),
            )
            .execute(conn)?;
        }
        ids.push(Some(id));
    }
    if !fair.is_empty() {
        Cached(
            prepared(MOVE_DUE.as_str())
                .bind::<Text, _>(json_ids(&fair))
                .bind::<Timestamp, _>(now),
        )
        .execute(conn)?;
    }
    Ok(ids)
}

/// Runs `body` in a write transaction: `BEGIN IMMEDIATE`, or a savepoint
/// inside the caller's transaction.
fn write_tx<T>(
    conn: &mut SqliteConnection,
    body: impl FnOnce(&mut SqliteConnection) -> QueryResult<T>,
) -> QueryResult<T> {
    let depth = AnsiTransactionManager::transaction_manager_status_mut(conn).transaction_depth()?;
    if depth.is_some() {
        Connection::transaction(conn, body)
    } else {
        conn.immediate_transaction(body)
    }
}

pub(super) fn plus(now: NaiveDateTime, d: std::time::Duration) -> NaiveDateTime {
    chrono::Duration::from_std(d)
        .ok()
        .and_then(|d| now.checked_add_signed(d))
        .unwrap_or(chrono::NaiveDateTime::MAX)
}

impl ClaimQuery {
    fn sqlite_candidates(&self) -> &str {
        self.sqlite_sql.get_or_init(|| {
            format!(
                "SELECT job_id, ord, priority, position, 0 AS eligible FROM ({}) AS c",
                self.candidates_sql("?1", "")
            )
        })
    }

    /// The candidates with whether each may be claimed ahead (a kind of
    /// `?2`, at least once), in the same statement: a second statement
    /// under the write lock cost a sixth of the work-down's throughput.
    /// Judged by the kind and delivery the ready row carries; a row an
    /// older release wrote without them, by its job.
    fn sqlite_candidates_ahead(&self) -> &str {
        self.sqlite_ahead_sql.get_or_init(|| {
            format!(
                "SELECT c.job_id, c.ord, c.priority, c.position,
                        CASE WHEN c.kind IS NULL
                             THEN EXISTS (SELECT 1 FROM solidq_jobs j WHERE j.id = c.job_id
                                          AND j.delivery = 'at_least_once'
                                          AND j.kind IN (SELECT value FROM json_each(?2)))
                             ELSE c.delivery = 'at_least_once'
                                  AND c.kind IN (SELECT value FROM json_each(?2)) END AS eligible
                 FROM ({}) AS c",
                self.candidates_with_kind_sql("?1")
            )
        })
    }
}

fn claim_candidates(
    conn: &mut SqliteConnection,
    claim: &ClaimQuery,
    limit: usize,
) -> QueryResult<Vec<Candidate>> {
    let rows: Vec<Candidate> =
        Cached(prepared(claim.sqlite_candidates()).bind::<BigInt, _>(limit as i64)).load(conn)?;
    Ok(in_claim_order(rows, limit))
}

/// The candidates, each with whether it may be claimed ahead.
fn claim_candidates_ahead(
    conn: &mut SqliteConnection,
    claim: &ClaimQuery,
    limit: usize,
    fast_kinds: &[String],
) -> QueryResult<Vec<Candidate>> {
    let kinds = serde_json::to_string(fast_kinds).expect("strings serialize");
    let rows: Vec<Candidate> = Cached(
        prepared(claim.sqlite_candidates_ahead())
            .bind::<BigInt, _>(limit as i64)
            .bind::<Text, _>(kinds),
    )
    .load(conn)?;
    Ok(in_claim_order(rows, limit))
}

fn in_claim_order(mut rows: Vec<Candidate>, limit: usize) -> Vec<Candidate> {
    // A job can match several patterns (`mail` and `*`): keep its first.
    rows.sort_by_key(|c| (c.job_id, c.ord));
    rows.dedup_by_key(|c| c.job_id);
    rows.sort_by_key(|c| (c.ord, c.priority, c.position, c.job_id));
    rows.truncate(limit);
    rows
}

impl Driver for SqliteConnection {
    fn transaction(
        &mut self,
        body: &mut dyn FnMut(&mut dyn Driver) -> QueryResult<()>,
    ) -> QueryResult<()> {
        // Inside the caller's transaction this is a savepoint, so a failure
        // undoes our part only.
        write_tx(self, |c| body(c))
    }
}

impl AdminDriver for SqliteConnection {
    fn pause_set(&mut self, queue: &str, paused: bool) -> QueryResult<bool> {
        let changed = if paused {
            Cached(
                prepared(PAUSE_INSERT)
                    .bind::<Text, _>(queue)
                    .bind::<Timestamp, _>(utc_now()),
            )
            .execute(self)?
        } else {
            Cached(prepared(PAUSE_DELETE).bind::<Text, _>(queue)).execute(self)?
        };
        Ok(changed > 0)
    }

    fn db_now(&mut self) -> QueryResult<NaiveDateTime> {
        Ok(utc_now())
    }
}

fn minus(now: NaiveDateTime, d: Duration) -> NaiveDateTime {
    chrono::Duration::from_std(d)
        .ok()
        .and_then(|d| now.checked_sub_signed(d))
        .unwrap_or(NaiveDateTime::MIN)
}
