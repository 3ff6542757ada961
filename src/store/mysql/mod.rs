//! MySQL 8 / MariaDB 10.6+ half of the store. Neither has a statement
//! that both changes rows and returns them everywhere (MySQL has no
//! `RETURNING`, MariaDB none on `UPDATE` and no writable `WITH`), so an
//! operation that moves rows reads them first with `FOR UPDATE SKIP
//! LOCKED` (or `FOR UPDATE` where it must wait) and then deletes, inserts
//! and updates them in the same transaction. Batches of ids travel as one
//! JSON array through `JSON_TABLE` (see [`IDS`]), which keeps each
//! statement's text fixed and its prepared form cached. Sessions run in
//! `READ COMMITTED` (see `connection.rs`), so a statement locks the rows it
//! changes and not the gaps between them. "Now" is the database's clock,
//! `UTC_TIMESTAMP(6)`, as on PostgreSQL. Deadlocks (1213) and lock wait
//! timeouts (1205) are retried by the store from the start of the
//! operation (`Store::with_conn`).
//!
//! Placeholders are `?`, bound in the order they appear: a value used
//! twice is bound twice. Deletes and updates of a batch start from the ids
//! (`DELETE t FROM {IDS} STRAIGHT_JOIN t …`): MariaDB before 11.1 runs
//! `DELETE … WHERE id IN (SELECT value FROM JSON_TABLE …)` as a full scan
//! with a dependent subquery; the join reads the ids first and looks each
//! row up by its primary key.

use std::collections::HashMap;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::NaiveDateTime;
use diesel::sql_types::{BigInt, Integer, Nullable, Text, Timestamp};
use diesel::{Connection, MysqlConnection, QueryResult, QueryableByName, RunQueryDsl, sql_query};

mod audit;
mod claims;
mod concurrency;
mod control;
mod explain;
mod floor;
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
    ReleasedJob, Retried, Snoozed, Succeeded, micros, prepared,
};
use crate::store::fair::{READY_COLUMNS, ready_rows_sql, ready_values_of};

/// A JSON array of ids bound as one `?`, as a table of one column,
/// `value`: `… WHERE job_id IN (SELECT value FROM {IDS})`, or joined.
pub(super) const IDS: &str = "JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids";

/// A JSON array of strings bound as one `?`, as a table of one column,
/// `value`, compared byte for byte as the tables' columns are.
pub(super) const STRINGS: &str =
    "JSON_TABLE(?, '$[*]' COLUMNS (value VARCHAR(255) PATH '$')) AS strs";

/// The database's clock, in UTC with microseconds.
pub(super) const NOW: &str = "UTC_TIMESTAMP(6)";

/// The server's `max_allowed_packet` (the largest statement it takes),
/// `None` if it cannot be read.
pub(in crate::store) fn max_allowed_packet(conn: &mut MysqlConnection) -> Option<usize> {
    sql_query("SELECT CAST(@@max_allowed_packet AS SIGNED) AS v")
        .get_result::<Scalar>(conn)
        .map_err(|e| log::debug!("cannot read max_allowed_packet: {e}"))
        .ok()
        .and_then(|s| usize::try_from(s.v).ok())
}

pub(super) fn json_ids(ids: &[i64]) -> String {
    serde_json::to_string(ids).expect("integers serialize")
}

/// Ids as `FIND_IN_SET` reads them: `1,2,3`. A fifth of the CPU of
/// `JSON_CONTAINS` over a JSON array of them (`SELECT BENCHMARK(…)`).
pub(super) fn id_list(ids: &[i64]) -> String {
    ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
}

pub(super) fn json_strings(values: &[String]) -> String {
    serde_json::to_string(values).expect("strings serialize")
}

/// The statements of queue pauses (`pauses.sql`).
const PAUSES: &str = include_str!("pauses.sql");
const PAUSE_INSERT: &str = crate::store::named::named(PAUSES, "pause_insert");
const PAUSE_DELETE: &str = crate::store::named::named(PAUSES, "pause_delete");

#[derive(QueryableByName)]
pub(super) struct IdRow {
    #[diesel(sql_type = BigInt)]
    pub(super) id: i64,
}

#[derive(QueryableByName)]
pub(super) struct Scalar {
    #[diesel(sql_type = BigInt)]
    pub(super) v: i64,
}

/// Runs `body` in a transaction ([`begin`], [`commit`]), or a savepoint
/// inside the caller's.
pub(super) fn write_tx<T>(
    conn: &mut MysqlConnection,
    body: impl FnOnce(&mut MysqlConnection) -> QueryResult<T>,
) -> QueryResult<T> {
    use diesel::connection::{AnsiTransactionManager, TransactionManager};
    if in_transaction(conn)? {
        return Connection::transaction(conn, body);
    }
    begin(conn)?;
    match body(conn) {
        Ok(value) => {
            commit(conn)?;
            Ok(value)
        }
        Err(error) => match AnsiTransactionManager::rollback_transaction(conn) {
            Ok(()) | Err(diesel::result::Error::BrokenTransactionManager) => Err(error),
            Err(rollback) => Err(rollback),
        },
    }
}

/// Whether the server runs `BEGIN` and `COMMIT` as prepared statements
/// (MariaDB does). Until one answers that it cannot, they are.
static PREPARED_BEGIN_COMMIT: AtomicBool = AtomicBool::new(true);

/// Whether `error` is the server's refusal to prepare a statement (1295).
pub(super) fn not_preparable(error: &diesel::result::Error) -> bool {
    matches!(error, diesel::result::Error::DatabaseError(_, info)
        if info.message().contains("not supported in the prepared statement protocol"))
}

/// Opens a transaction, as diesel's transaction manager knows it, in one
/// round trip. Diesel sends `BEGIN` and `COMMIT` as text, which the MySQL
/// client library runs between two requests that turn multi-statement
/// texts on and off: three round trips each, four of a transaction's
/// round trips for nothing (`performance_schema`: as many `Set option`
/// commands as `BEGIN`s and `COMMIT`s together, twice over). A prepared
/// statement, cached, is one round trip: single enqueues went from about
/// 1,550 to 2,550 a second on MariaDB.
pub(super) fn begin(conn: &mut MysqlConnection) -> QueryResult<()> {
    use diesel::connection::{AnsiTransactionManager, TransactionDepthChange};
    if prepared_control(conn, "BEGIN", TransactionDepthChange::IncreaseDepth)? {
        return Ok(());
    }
    AnsiTransactionManager::begin_transaction_sql(conn, "BEGIN")
}

/// Commits the transaction [`begin`] opened, in one round trip; when the
/// `COMMIT` fails, rolls back as diesel's transaction manager does (and
/// reports both errors if that fails too: the connection is then broken).
pub(super) fn commit(conn: &mut MysqlConnection) -> QueryResult<()> {
    use diesel::connection::{AnsiTransactionManager, TransactionDepthChange, TransactionManager};
    match prepared_control(conn, "COMMIT", TransactionDepthChange::DecreaseDepth) {
        Ok(true) => Ok(()),
        Ok(false) => AnsiTransactionManager::commit_transaction(conn),
        Err(commit_error) => match AnsiTransactionManager::rollback_transaction(conn) {
            Ok(()) => Err(commit_error),
            Err(rollback_error) => {
                AnsiTransactionManager::transaction_manager_status_mut(conn).set_in_error();
                Err(diesel::result::Error::RollbackErrorOnCommit {
                    rollback_error: Box::new(rollback_error),
                    commit_error: Box::new(commit_error),
                })
            }
        },
    }
}

/// Runs `sql` (`BEGIN` or `COMMIT`) prepared and moves diesel's transaction
/// depth by `change`: `Ok(true)`. `Ok(false)` when it is to be sent as text
/// instead: the server refused to prepare it (then or before; refused at
/// its preparing, nothing ran).
fn prepared_control(
    conn: &mut MysqlConnection,
    sql: &'static str,
    change: diesel::connection::TransactionDepthChange,
) -> QueryResult<bool> {
    use diesel::connection::{AnsiTransactionManager, TransactionManager};
    if !PREPARED_BEGIN_COMMIT.load(Ordering::Relaxed) {
        return Ok(false);
    }
    match Cached(prepared(sql)).execute(conn) {
        Ok(_) => {
            AnsiTransactionManager::transaction_manager_status_mut(conn)
                .transaction_state()?
                .change_transaction_depth(change)?;
            Ok(true)
        }
        Err(error) if not_preparable(&error) => {
            PREPARED_BEGIN_COMMIT.store(false, Ordering::Relaxed);
            Ok(false)
        }
        Err(error) => Err(error),
    }
}

/// Whether `conn` is inside a transaction.
pub(super) fn in_transaction(conn: &mut MysqlConnection) -> QueryResult<bool> {
    use diesel::connection::{AnsiTransactionManager, TransactionManager};
    Ok(AnsiTransactionManager::transaction_manager_status_mut(conn)
        .transaction_depth()?
        .is_some())
}

/// Runs `body` in a transaction of its own, or inside the caller's without
/// a savepoint: for statements that need only to run together, whose
/// error the caller's transaction ends with (a savepoint costs two round
/// trips, its `SAVEPOINT` and its `RELEASE`).
pub(super) fn in_tx<T>(
    conn: &mut MysqlConnection,
    body: impl FnOnce(&mut MysqlConnection) -> QueryResult<T>,
) -> QueryResult<T> {
    if in_transaction(conn)? {
        body(conn)
    } else {
        Connection::transaction(conn, body)
    }
}

#[derive(QueryableByName)]
struct KeyRow {
    #[diesel(sql_type = Text)]
    unique_key: String,
    #[diesel(sql_type = BigInt)]
    id: i64,
}

/// A candidate of a claim with its job (`JOB_COLUMNS`), and its ready
/// row's priority, which orders the claim.
#[derive(QueryableByName)]
pub(super) struct Candidate {
    #[diesel(embed)]
    pub(super) job: ClaimedJob,
    #[diesel(sql_type = Integer)]
    ready_priority: i32,
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
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, COALESCE(?, (UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)),
        UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))
ON DUPLICATE KEY UPDATE id = id + LAST_INSERT_ID(0)";

/// The id the connection's last insert generated (the job's), or 0 when
/// [`INSERT_JOB`] found its unique key taken: its no-op update sets
/// `LAST_INSERT_ID()` to 0. (Affected rows cannot tell: diesel connects
/// with `CLIENT_FOUND_ROWS`, under which a no-op update counts 1, as an
/// insert does.)
const LAST_ID: &str = "SELECT LAST_INSERT_ID() AS id";

/// The ready row of a job without a fairness key: its place is its id.
const INSERT_READY_BY_ID: &str = "\
INSERT INTO solidq_ready_executions (job_id, queue_name, priority, created_at, fairness_key, position, kind, delivery)
VALUES (?, ?, ?, UTC_TIMESTAMP(6), NULL, ?, ?, ?)";

/// A job not immediately ready: ready when its time has come and it has
/// no concurrency key, scheduled otherwise. The second statement asks
/// whether the first inserted, not the clock again: `UTC_TIMESTAMP(6)`
/// moves between two statements, and a job falling due in between would
/// otherwise land in neither table.
///
/// A job with a fairness key due now takes this statement too: its place
/// is computed from the ready rows (`store::fair`).
static INSERT_READY_IF_DUE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "INSERT INTO solidq_ready_executions ({READY_COLUMNS})
         SELECT {} FROM solidq_jobs
         WHERE id = ? AND scheduled_at <= UTC_TIMESTAMP(6) AND concurrency_key IS NULL",
        ready_values_of("solidq_jobs", "UTC_TIMESTAMP(6)")
    )
});

const INSERT_SCHEDULED_UNLESS_DUE: &str = "\
INSERT INTO solidq_scheduled_executions (job_id, queue_name, priority, scheduled_at, created_at,
                                         concurrency_key)
SELECT id, queue_name, priority, scheduled_at, UTC_TIMESTAMP(6), concurrency_key FROM solidq_jobs
WHERE id = ? AND NOT EXISTS (SELECT 1 FROM solidq_ready_executions WHERE job_id = ?)";

/// The ready rows of the jobs of a JSON array of ids, placed by
/// `store::fair`: due jobs, and ready jobs with a fairness key.
static MOVE_DUE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "INSERT INTO solidq_ready_executions ({READY_COLUMNS}) {}",
        ready_rows_sql(
            "j",
            "UTC_TIMESTAMP(6)",
            "FROM JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids
             STRAIGHT_JOIN solidq_jobs j ON j.id = ids.value"
        )
    )
});

/// A claim's candidates as claimed jobs: the select list around
/// `ClaimQuery::candidates_with_jobs_sql`, its job columns under their
/// names in [`ClaimedJob`]. `claimed_at` is this read's time, `due_at`
/// as on the other backends, `started` set by the claim, which knows it.
/// The jobs are read in the candidates' locking read, not by a statement
/// after the claim's writes: one round trip less a claim.
fn claimed_candidates_sql(candidates: &str) -> String {
    format!(
        "SELECT job_id AS id, j_queue_name AS queue_name, j_kind AS kind, j_arguments AS arguments, \
         j_concurrency_key AS concurrency_key, j_priority AS priority, j_options AS options, \
         j_delivery AS delivery, j_max_attempts AS max_attempts, j_attempts AS attempts, \
         j_stalled_count AS stalled_count, j_snoozes AS snoozes, j_checkpoint AS checkpoint, \
         j_batch_id AS batch_id, j_cancel_requested AS cancel_requested, j_created_at AS created_at, \
         j_due_at AS due_at, UTC_TIMESTAMP(6) AS claimed_at, CAST(ord AS SIGNED) AS ord, position, \
         FALSE AS started, j_run_alone AS run_alone, priority AS ready_priority FROM ({candidates}) AS c"
    )
}

const DELETE_READY_CLAIMED: &str = "\
DELETE r FROM JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids
STRAIGHT_JOIN solidq_ready_executions r ON r.job_id = ids.value";

/// Claims by process `?1` for the picked jobs, `?2` a JSON array of
/// `[id, 1 if started now else 0]`. Without a subquery, so that it is
/// prepared once per connection (`store::has_subquery`): the started ones
/// were a subquery of their own list, and the statement was prepared and
/// closed around every claim.
const INSERT_CLAIMED: &str = "\
INSERT INTO solidq_claimed_executions (job_id, process_id, created_at, started_at)
SELECT ids.value, ?, UTC_TIMESTAMP(6), CASE WHEN ids.started = 1 THEN UTC_TIMESTAMP(6) END
FROM JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$[0]', started INT PATH '$[1]')) AS ids";

/// The claiming process's row, share-locked to the claim's commit: the
/// prune of that process (`process_lock`, `FOR UPDATE SKIP LOCKED`) skips
/// it meanwhile, so a claim and the prune of its process cannot interleave
/// into an orphaned claim.
const PROCESS_ALIVE: &str = "SELECT COUNT(*) AS v FROM (SELECT id FROM solidq_processes WHERE id = ? LOCK IN SHARE MODE) AS p";

fn insert_jobs(conn: &mut MysqlConnection, jobs: &[NewJob]) -> QueryResult<Vec<Option<i64>>> {
    let mut ids: Vec<Option<i64>> = vec![None; jobs.len()];
    // Jobs without a unique key, many to a statement when their ids can be
    // told from the first; the others (and all, when they cannot) one by
    // one, which also tells a unique key already taken.
    let plain: Vec<usize> = (0..jobs.len())
        .filter(|&i| jobs[i].unique_key.is_none())
        .collect();
    let step = if plain.len() > 1 {
        consecutive_ids(conn)?
    } else {
        None
    };
    let mut single: Vec<usize> = (0..jobs.len()).collect();
    if let Some(step) = step {
        for chunk in plain.chunks(ROWS_PER_INSERT) {
            let first = insert_rows(conn, jobs, chunk)?;
            for (k, &i) in chunk.iter().enumerate() {
                ids[i] = Some(first + k as i64 * step);
            }
        }
        single.retain(|&i| jobs[i].unique_key.is_some());
    }
    for i in single {
        ids[i] = insert_one(conn, &jobs[i])?;
    }
    // Ready jobs with a fairness key: placed together at the end, each
    // key's places looked up once (`store::fair`). Those without one are
    // placed by their id, many to a statement.
    let mut fair = Vec::new();
    let mut plain = Vec::new();
    for (job, id) in jobs.iter().zip(&ids) {
        let Some(id) = *id else { continue };
        // Jobs under a concurrency limit go to scheduled even when due now:
        // the caller places them (a slot, blocked or discarded).
        let now = job.run_at.is_none() && job.delay.is_zero();
        if now && job.concurrency_key.is_none() && job.fairness_key.is_none() {
            plain.push((id, job));
        } else if now && job.concurrency_key.is_none() {
            fair.push(id);
        } else {
            Cached(prepared(INSERT_READY_IF_DUE.as_str()).bind::<BigInt, _>(id)).execute(conn)?;
            Cached(
                prepared(INSERT_SCHEDULED_UNLESS_DUE)
                    .bind::<BigInt, _>(id)
                    .bind::<BigInt, _>(id),
            )
            .execute(conn)?;
        }
    }
    for chunk in plain.chunks(ROWS_PER_INSERT) {
        insert_ready_rows(conn, chunk)?;
    }
    if !fair.is_empty() {
        Cached(prepared(MOVE_DUE.as_str()).bind::<Text, _>(json_ids(&fair))).execute(conn)?;
    }
    // A negative priority or a fair place: ready below the tail, where
    // claims may have moved past (`store::floor`).
    if crate::store::floor::moves_on(jobs) {
        floor::moved(conn, 1)?;
    }
    Ok(ids)
}

/// The most jobs one multi-row insert takes: 13 values each, well under
/// the 65,535 placeholders of a prepared statement.
const ROWS_PER_INSERT: usize = 500;

#[derive(QueryableByName)]
struct AutoIncrement {
    #[diesel(sql_type = BigInt)]
    mode: i64,
    #[diesel(sql_type = BigInt)]
    step: i64,
}

/// The step between the ids of one multi-row insert's rows, when they are
/// one run from `LAST_INSERT_ID()` (the first row's): under
/// `innodb_autoinc_lock_mode` 0 or 1 (MariaDB's default) an insert whose
/// row count is known takes its ids at once, `auto_increment_increment`
/// apart (more than 1 on Galera). Under 2 (MySQL 8's default,
/// "interleaved") concurrent inserts may interleave their ids: `None`,
/// and the jobs go in one by one.
fn consecutive_ids(conn: &mut MysqlConnection) -> QueryResult<Option<i64>> {
    let row: AutoIncrement = Cached(prepared(
        "SELECT CAST(@@innodb_autoinc_lock_mode AS SIGNED) AS mode, \
                CAST(@@auto_increment_increment AS SIGNED) AS step",
    ))
    .get_result(conn)?;
    Ok((row.mode <= 1).then_some(row.step.max(1)))
}

/// [`INSERT_JOB`]'s row for each of the jobs `rows` (none with a unique
/// key), in one statement; the first row's id.
fn insert_rows(conn: &mut MysqlConnection, jobs: &[NewJob], rows: &[usize]) -> QueryResult<i64> {
    let (head, rest) = INSERT_JOB
        .split_once("VALUES")
        .expect("INSERT_JOB has VALUES");
    let (row, _) = rest
        .split_once("ON DUPLICATE KEY")
        .expect("INSERT_JOB has its unique-key clause");
    let sql = format!("{head}VALUES {}", vec![row.trim(); rows.len()].join(", "));
    let mut query = sql_query(sql).into_boxed::<diesel::mysql::Mysql>();
    for &i in rows {
        let job = &jobs[i];
        query = query
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
            .bind::<Nullable<Timestamp>, _>(job.run_at)
            .bind::<BigInt, _>(micros(job.delay));
    }
    let inserted = query.execute(conn)?;
    let IdRow { id } = Cached(prepared(LAST_ID)).get_result(conn)?;
    if inserted != rows.len() || id == 0 {
        return Err(diesel::result::Error::QueryBuilderError(
            format!(
                "a multi-row insert of {} jobs inserted {inserted}, first id {id}",
                rows.len()
            )
            .into(),
        ));
    }
    Ok(id)
}

/// [`INSERT_READY_BY_ID`]'s row for each of `rows` (job id and job), in
/// one statement; one row alone takes the fixed statement.
fn insert_ready_rows(conn: &mut MysqlConnection, rows: &[(i64, &NewJob)]) -> QueryResult<()> {
    if let [(id, job)] = rows {
        return Cached(
            prepared(INSERT_READY_BY_ID)
                .bind::<BigInt, _>(*id)
                .bind::<Text, _>(&job.queue_name)
                .bind::<Integer, _>(job.priority)
                .bind::<BigInt, _>(*id)
                .bind::<Text, _>(&job.kind)
                .bind::<Text, _>(job.delivery.as_str()),
        )
        .execute(conn)
        .map(drop);
    }
    let (head, row) = INSERT_READY_BY_ID
        .split_once("VALUES")
        .expect("INSERT_READY_BY_ID has VALUES");
    let sql = format!("{head}VALUES {}", vec![row.trim(); rows.len()].join(", "));
    let mut query = sql_query(sql).into_boxed::<diesel::mysql::Mysql>();
    for (id, job) in rows {
        query = query
            .bind::<BigInt, _>(*id)
            .bind::<Text, _>(&job.queue_name)
            .bind::<Integer, _>(job.priority)
            .bind::<BigInt, _>(*id)
            .bind::<Text, _>(&job.kind)
            .bind::<Text, _>(job.delivery.as_str());
    }
    query.execute(conn).map(drop)
}

/// Inserts one job ([`INSERT_JOB`]); its id, or `None` when its unique
/// key was taken.
fn insert_one(conn: &mut MysqlConnection, job: &NewJob) -> QueryResult<Option<i64>> {
    Cached(
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
            .bind::<Nullable<Timestamp>, _>(job.run_at)
            .bind::<BigInt, _>(micros(job.delay)),
    )
    .execute(conn)?;
    let IdRow { id } = Cached(prepared(LAST_ID)).get_result(conn)?;
    Ok((id != 0).then_some(id))
}

impl ClaimQuery {
    /// The candidates, locked (`FOR UPDATE SKIP LOCKED` in each pattern's
    /// part); binds the limit once per part ([`ClaimQuery::parts`]). From
    /// a floor (`store::floor`; a single pattern), the floor's position
    /// first.
    pub(super) fn mysql_candidates(&self, from_floor: bool) -> &str {
        let (sql, extra) = if from_floor {
            (&self.mysql_floor_sql, floor::CONDITION)
        } else {
            (&self.mysql_sql, "")
        };
        sql.get_or_init(|| {
            claimed_candidates_sql(&self.candidates_with_jobs_sql(
                "?",
                extra,
                " FOR UPDATE SKIP LOCKED",
            ))
        })
    }

    /// The candidates that may be claimed ahead, locked: jobs of the kinds
    /// of the second `?` (at least once), not among the ids of the first;
    /// then (from a floor) the floor's position; then the limit. Those
    /// binds once per part. The kinds are filtered before the limit, so
    /// that the claim locks only rows it may take: InnoDB releases at once
    /// the lock on a row the `WHERE` refused, while a row locked and not
    /// taken would stay locked to the commit, and a concurrent claim would
    /// skip it.
    pub(super) fn mysql_candidates_ahead(&self, from_floor: bool) -> &str {
        let sql = if from_floor {
            &self.mysql_floor_ahead_sql
        } else {
            &self.mysql_ahead_sql
        };
        sql.get_or_init(|| {
            // Functions of the row, not `IN (SELECT …)` or `EXISTS`, which
            // MariaDB turns into a semi-join that reads the table whole
            // and sorts it, locking every row.
            // The ready row's kind and delivery; its job's for a row an
            // older release wrote without them (a `CASE` runs only the
            // branch it takes).
            let mut extra = " AND FIND_IN_SET(r.job_id, ?) = 0
                  AND JSON_CONTAINS(?, JSON_QUOTE(CASE
                       WHEN r.kind IS NULL THEN (SELECT j.kind FROM solidq_jobs j
                            WHERE j.id = r.job_id AND j.delivery = 'at_least_once')
                       WHEN r.delivery = 'at_least_once' THEN r.kind END))"
                .to_string();
            if from_floor {
                extra.push_str(floor::CONDITION);
            }
            claimed_candidates_sql(&self.candidates_with_jobs_sql(
                "?",
                &extra,
                " FOR UPDATE SKIP LOCKED",
            ))
        })
    }
}

/// Claimed jobs, and the ready priority and place of the last one.
type Candidates = (Vec<ClaimedJob>, Option<(i32, i64)>);

/// Up to `limit` candidates in claim order with their jobs, locked
/// (ready row and job row): any job (`ahead = None`), or only jobs that may be claimed ahead, of the fast
/// kinds and not among the ids given; from the head, or at or after
/// `(0, floor)` in claim order (`store::floor`). With them, the ready
/// priority and place of the last one taken.
fn load_candidates(
    conn: &mut MysqlConnection,
    claim: &ClaimQuery,
    limit: usize,
    ahead: Option<(&[String], &[i64])>,
    floor: Option<i64>,
) -> QueryResult<Candidates> {
    if limit == 0 {
        return Ok((Vec::new(), None));
    }
    let mut query = match ahead {
        Some(_) => sql_query(claim.mysql_candidates_ahead(floor.is_some())),
        None => sql_query(claim.mysql_candidates(floor.is_some())),
    }
    .into_boxed::<diesel::mysql::Mysql>();
    let filters = ahead.map(|(kinds, taken)| (id_list(taken), json_strings(kinds)));
    for _ in 0..claim.parts() {
        if let Some((taken, kinds)) = &filters {
            query = query
                .bind::<Text, _>(taken.clone())
                .bind::<Text, _>(kinds.clone());
        }
        if let Some(floor) = floor {
            query = query.bind::<BigInt, _>(floor);
        }
        query = query.bind::<BigInt, _>(limit as i64);
    }
    let mut rows: Vec<Candidate> = Cached(query).load(conn)?;
    // A job can match several patterns (`mail` and `*`): keep its first.
    rows.sort_by_key(|c| (c.job.id, c.job.ord));
    rows.dedup_by_key(|c| c.job.id);
    rows.sort_by_key(|c| (c.job.ord, c.ready_priority, c.job.position, c.job.id));
    rows.truncate(limit);
    let last = rows.last().map(|c| (c.ready_priority, c.job.position));
    Ok((rows.into_iter().map(|c| c.job).collect(), last))
}

impl Driver for MysqlConnection {
    fn transaction(
        &mut self,
        body: &mut dyn FnMut(&mut dyn Driver) -> QueryResult<()>,
    ) -> QueryResult<()> {
        write_tx(self, |c| body(c))
    }
}

impl AdminDriver for MysqlConnection {
    fn pause_set(&mut self, queue: &str, paused: bool) -> QueryResult<bool> {
        let changed = if paused {
            // A taken key fails this statement only (not the transaction):
            // the queue was paused already.
            Cached(prepared(PAUSE_INSERT).bind::<Text, _>(queue))
                .execute(self)
                .or_else(|e| match e {
                    diesel::result::Error::DatabaseError(
                        diesel::result::DatabaseErrorKind::UniqueViolation,
                        _,
                    ) => Ok(0),
                    e => Err(e),
                })?
        } else {
            let resumed = Cached(prepared(PAUSE_DELETE).bind::<Text, _>(queue)).execute(self)?;
            // Its ready jobs may be anywhere below the floors of claims
            // made while it was paused.
            floor::moved(self, resumed)?;
            resumed
        };
        Ok(changed > 0)
    }

    fn db_now(&mut self) -> QueryResult<NaiveDateTime> {
        #[derive(QueryableByName)]
        struct Now {
            #[diesel(sql_type = Timestamp)]
            now: NaiveDateTime,
        }
        let row: Now = Cached(prepared("SELECT UTC_TIMESTAMP(6) AS now")).get_result(self)?;
        Ok(row.now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A transaction opened and committed by prepared `BEGIN` and `COMMIT`
    /// is diesel's as much as its own are (a nested one is a savepoint),
    /// and the server's refusal to prepare a statement is told from other
    /// errors: a server refusing `BEGIN` or `COMMIT` is sent them as text.
    #[test]
    fn a_transaction_in_prepared_begin_and_commit_and_a_refusal_to_prepare() {
        let Some(url) = crate::store::conformance::mysql_url() else {
            return;
        };
        let crate::store::AnyConnection::Mysql(mut conn) = crate::types::DatabaseUrl::parse(&url)
            .unwrap()
            .establish(crate::store::SqliteSettings::default())
            .unwrap()
        else {
            panic!("a MySQL connection");
        };
        let in_server = |c: &mut MysqlConnection| -> i64 {
            Cached(prepared("SELECT @@in_transaction AS v"))
                .get_result::<Scalar>(c)
                .unwrap()
                .v
        };
        let depths = write_tx(&mut conn, |c| {
            let outer = (in_transaction(c)?, in_server(c));
            let inner = write_tx(c, |c| Ok((in_transaction(c)?, in_server(c))))?;
            Ok((outer, inner))
        })
        .unwrap();
        assert_eq!(depths, ((true, 1), (true, 1)));
        assert!(!in_transaction(&mut conn).unwrap());
        assert_eq!(in_server(&mut conn), 0, "committed");
        let refused = Cached(prepared("DEALLOCATE PREPARE nothing"))
            .execute(&mut conn)
            .unwrap_err();
        assert!(not_preparable(&refused), "{refused}");
        let other = Cached(prepared("SELECT nothing FROM nowhere"))
            .execute(&mut conn)
            .unwrap_err();
        assert!(!not_preparable(&other), "{other}");
        // And a claim's writes are kept prepared: none holds a subquery.
        for sql in [INSERT_CLAIMED, DELETE_READY_CLAIMED, "BEGIN", "COMMIT"] {
            assert!(!crate::store::has_subquery(sql), "{sql}");
        }
    }
}
