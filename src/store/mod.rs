//! The only place with SQL.
//!
//! [`Store`] owns the connection pool and offers the operations the runtime
//! needs, named noun_verb after the table they act on (`ready_claim`,
//! `claimed_finish`, `process_register`…). Each operation is composed from
//! the primitives of the [`Driver`] trait, which `postgres.rs` and
//! `sqlite.rs` implement for their connection types: the decisions (what is
//! released, what fails) are written once here, the SQL once per backend.
//!
//! Backend differences, all behind `Driver`:
//! * PostgreSQL claims with `FOR UPDATE SKIP LOCKED` in one statement, passes
//!   batches as arrays (`unnest`), and takes "now" from the database clock.
//! * SQLite runs every write transaction as `BEGIN IMMEDIATE` (one writer at
//!   a time, so no lock upgrade can deadlock), retries `SQLITE_BUSY`, passes
//!   batches as JSON arrays (`json_each`), and takes "now" from the host
//!   clock, which every process on that file shares.

mod connection;
mod info;
mod postgres;
pub(crate) mod schema;
mod sqlite;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::NaiveDateTime;
use diesel::backend::Backend as DieselBackend;
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::{QueryResult, RunQueryDsl};
use diesel_migrations::{EmbeddedMigrations, MigrationHarness, embed_migrations};

use connection::PoolConn;
pub use connection::{AnyConnection, Backend, DEFAULT_SQLITE_BUSY_TIMEOUT, DatabaseUrl};
pub(crate) use info::JobLookup;

use crate::error::{Error, Result};
use crate::job::Delivery;

const POSTGRES_MIGRATIONS: EmbeddedMigrations = embed_migrations!("migrations/postgres");
const SQLITE_MIGRATIONS: EmbeddedMigrations = embed_migrations!("migrations/sqlite");

type Pool = r2d2::Pool<connection::Manager>;
type PooledConnection = r2d2::PooledConnection<connection::Manager>;

/// The connection pool and every database operation solidq performs.
#[derive(Clone)]
pub(crate) struct Store {
    pool: Pool,
    url: DatabaseUrl,
    pool_size: u32,
    /// The last time a connection was found dead: pooled connections not
    /// verified since are checked before use (after a server restart every
    /// idle connection is dead, and each would otherwise fail one caller).
    lost_at: Arc<Mutex<Option<Instant>>>,
}

/// Connection pool settings.
#[derive(Debug, Clone)]
pub(crate) struct PoolOptions {
    pub size: u32,
    pub timeout: Duration,
    pub sqlite_busy_timeout: Duration,
}

impl Store {
    /// Opens one connection first, so a bad URL or an unreachable server
    /// fails at once with libpq's or SQLite's own message, then builds the
    /// pool around it lazily.
    pub(crate) fn connect(url: &DatabaseUrl, options: &PoolOptions) -> Result<Store> {
        let first = url.establish(options.sqlite_busy_timeout)?;
        drop(first);
        let manager = connection::Manager {
            url: url.clone(),
            sqlite_busy_timeout: options.sqlite_busy_timeout,
        };
        let pool = r2d2::Pool::builder()
            .max_size(options.size.max(1))
            .min_idle(Some(0))
            .connection_timeout(options.timeout)
            .test_on_check_out(false)
            .build_unchecked(manager);
        Ok(Store {
            pool,
            url: url.clone(),
            pool_size: options.size.max(1),
            lost_at: Arc::default(),
        })
    }

    pub(crate) fn url(&self) -> &DatabaseUrl {
        &self.url
    }

    pub(crate) fn backend(&self) -> Backend {
        self.url.backend()
    }

    /// Checks a connection out of the pool, validating it first if it has
    /// not been seen working since a connection was last found dead.
    pub(crate) fn conn(&self) -> Result<PooledConnection> {
        loop {
            let mut checked_out = self.pool.get().map_err(|source| Error::Pool {
                url: self.url.redacted(),
                pool_size: self.pool_size,
                source,
            })?;
            let lost_at = *self.lost_at.lock().unwrap_or_else(|p| p.into_inner());
            let pooled: &mut PoolConn = &mut checked_out;
            if lost_at.is_some_and(|lost| pooled.verified_at <= lost) {
                use diesel::connection::SimpleConnection;
                if pooled.conn.batch_execute("SELECT 1").is_err() {
                    pooled.broken = true;
                    continue;
                }
                pooled.verified_at = Instant::now();
            }
            return Ok(checked_out);
        }
    }

    /// Opens a connection outside the pool (the PostgreSQL listener keeps
    /// one for itself).
    #[allow(dead_code)]
    pub(crate) fn dedicated_connection(&self) -> Result<AnyConnection> {
        self.url.establish(DEFAULT_SQLITE_BUSY_TIMEOUT)
    }

    /// Runs `op` on a pooled connection, retrying while the database reports
    /// a lock conflict (SQLite busy, PostgreSQL deadlock or serialization
    /// failure): those errors mean the transaction was rolled back, so running
    /// it again is safe. A connection that turns out dead is dropped from the
    /// pool, so the caller's next attempt gets a fresh one.
    pub(crate) fn with_conn<T>(
        &self,
        operation: &'static str,
        mut op: impl FnMut(&mut AnyConnection) -> QueryResult<T>,
    ) -> Result<T> {
        let mut checked_out = self.conn()?;
        let pooled: &mut PoolConn = &mut checked_out;
        let started = Instant::now();
        let mut pause = Duration::from_millis(2);
        loop {
            match op(&mut pooled.conn) {
                Ok(value) => return Ok(value),
                Err(source) => {
                    let error = Error::Database { operation, source };
                    if error.is_connection_lost() {
                        pooled.broken = true;
                        *self.lost_at.lock().unwrap_or_else(|p| p.into_inner()) =
                            Some(Instant::now());
                    }
                    if !is_lock_conflict(&error) || started.elapsed() > LOCK_RETRY_BUDGET {
                        return Err(error);
                    }
                    log::debug!("{operation}: {error}; retrying in {pause:?}");
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(100));
                }
            }
        }
    }

    /// [`Store::with_conn`] for read-only work: when the connection turns out
    /// dead, runs once more on a fresh one (a read has no half-done state).
    pub(crate) fn with_read<T>(
        &self,
        operation: &'static str,
        mut op: impl FnMut(&mut AnyConnection) -> QueryResult<T>,
    ) -> Result<T> {
        match self.with_conn(operation, &mut op) {
            Err(error) if error.is_connection_lost() => {
                log::warn!("{operation}: {error}; retrying on a fresh connection");
                self.with_conn(operation, op)
            }
            other => other,
        }
    }

    /// [`Store::with_conn`] through the connection's [`Driver`].
    pub(crate) fn with_driver<T>(
        &self,
        operation: &'static str,
        mut op: impl FnMut(&mut dyn Driver) -> QueryResult<T>,
    ) -> Result<T> {
        self.with_conn(operation, |conn| op(driver(conn)))
    }

    /// Runs the embedded migrations for this backend; already-applied ones
    /// are skipped, so running it twice changes nothing. Concurrent callers
    /// are serialized (an advisory lock on PostgreSQL, the write lock on
    /// SQLite).
    pub(crate) fn migrate(&self) -> Result<Vec<String>> {
        let mut checked_out = self.conn()?;
        let pooled: &mut PoolConn = &mut checked_out;
        let migration_error = |source| Error::Migration { source };
        let applied = match &mut pooled.conn {
            AnyConnection::Postgres(c) => {
                use diesel::connection::SimpleConnection;
                const LOCK: &str = "SELECT pg_advisory_lock(7370731563215631)";
                const UNLOCK: &str = "SELECT pg_advisory_unlock(7370731563215631)";
                c.batch_execute(LOCK).map_err(Error::db("migrate"))?;
                let result = c.run_pending_migrations(POSTGRES_MIGRATIONS).map(versions);
                c.batch_execute(UNLOCK).map_err(Error::db("migrate"))?;
                result.map_err(migration_error)?
            }
            AnyConnection::Sqlite(c) => {
                let result: std::result::Result<_, Box<dyn std::error::Error + Send + Sync>> = c
                    .immediate_transaction(|c| {
                        c.run_pending_migrations(SQLITE_MIGRATIONS).map(versions)
                    });
                result.map_err(migration_error)?
            }
        };
        for version in &applied {
            log::info!("applied migration {version} to {}", self.url);
        }
        Ok(applied)
    }

    /// The migration versions embedded in this build, oldest first.
    pub(crate) fn embedded_migrations(backend: Backend) -> Vec<String> {
        use diesel::migration::MigrationSource;
        let source = match backend {
            Backend::Postgres => POSTGRES_MIGRATIONS,
            Backend::Sqlite => SQLITE_MIGRATIONS,
        };
        let migrations: Vec<Box<dyn diesel::migration::Migration<diesel::pg::Pg>>> =
            MigrationSource::<diesel::pg::Pg>::migrations(&source).unwrap_or_default();
        migrations
            .iter()
            .map(|m| m.name().version().to_string())
            .collect()
    }
}

fn versions(list: Vec<diesel::migration::MigrationVersion<'_>>) -> Vec<String> {
    list.iter().map(|v| v.to_string()).collect()
}

/// How long a single operation keeps retrying lock conflicts (on top of
/// SQLite's own busy timeout) before giving up.
const LOCK_RETRY_BUDGET: Duration = Duration::from_secs(30);

fn is_lock_conflict(error: &Error) -> bool {
    use diesel::result::{DatabaseErrorKind, Error as D};
    match error {
        Error::Database {
            source: D::DatabaseError(kind, info),
            ..
        } => {
            matches!(kind, DatabaseErrorKind::SerializationFailure) || {
                let message = info.message();
                message.contains("database is locked")
                    || message.contains("database table is locked")
                    || message.contains("deadlock detected")
            }
        }
        _ => false,
    }
}

/// The backend-specific half of the store, one implementation per
/// connection type. Methods marked "operation" manage their own transaction;
/// the others are primitives meant to run inside [`Driver::transaction`].
pub(crate) trait Driver {
    /// Runs `body` in a write transaction: `BEGIN IMMEDIATE` on SQLite,
    /// `BEGIN` on PostgreSQL, a savepoint when one is already open.
    fn transaction(
        &mut self,
        body: &mut dyn FnMut(&mut dyn Driver) -> QueryResult<()>,
    ) -> QueryResult<()>;

    /// Inserts jobs and their ready or scheduled executions. Returns, for each
    /// input in order, its new id, or `None` when its unique key was taken.
    /// Must run inside a transaction (or be a single statement).
    fn jobs_insert(&mut self, jobs: &[NewJob]) -> QueryResult<Vec<Option<i64>>>;

    /// Ids of jobs holding these unique keys.
    fn jobs_find_by_unique_keys(&mut self, keys: &[String]) -> QueryResult<Vec<(String, i64)>>;

    /// Operation: claims up to `limit` ready jobs for `process_id`, in the
    /// worker's queue order, then priority, then id.
    fn ready_claim(
        &mut self,
        claim: &ClaimQuery,
        process_id: i64,
        limit: usize,
    ) -> QueryResult<Vec<ClaimedJob>>;

    /// Operation: moves up to `batch` due scheduled executions to ready;
    /// returns the queue of each job moved.
    fn scheduled_dispatch(&mut self, batch: usize) -> QueryResult<Vec<String>>;

    /// Deletes the claims of these jobs held by `process_id`; returns the ids
    /// whose claim existed (the fence: any other id's claim was lost).
    fn claimed_delete_fenced(&mut self, process_id: i64, job_ids: &[i64]) -> QueryResult<Vec<i64>>;

    /// Deletes every claim `process_id` holds and returns the jobs' facts.
    fn claimed_delete_by_process(&mut self, process_id: i64) -> QueryResult<Vec<ReleasedJob>>;

    /// Marks jobs finished with their results, kept until `now + keep`.
    fn jobs_succeed(&mut self, rows: &[Succeeded]) -> QueryResult<()>;

    /// Deletes jobs (and, by cascade, anything that refers to them).
    fn jobs_delete(&mut self, ids: &[i64]) -> QueryResult<()>;

    /// Records a failed attempt and schedules the retry.
    fn jobs_retry(&mut self, rows: &[Retried]) -> QueryResult<()>;

    /// Moves jobs to failed_executions with their error.
    fn jobs_fail(&mut self, rows: &[Failed]) -> QueryResult<()>;

    /// Puts jobs back in ready, counting a stall on those flagged.
    fn jobs_release(&mut self, rows: &[Released]) -> QueryResult<()>;

    /// Registers a process row; returns its id.
    fn process_insert(&mut self, process: &NewProcess) -> QueryResult<i64>;

    /// Writes a heartbeat; returns false when the row is gone.
    fn process_heartbeat(&mut self, id: i64) -> QueryResult<bool>;

    /// Deletes a process row; returns whether it existed.
    fn process_delete(&mut self, id: i64) -> QueryResult<bool>;
}

/// The driver for a pooled connection: the one `match` on the backend
/// outside the backend files.
pub(crate) fn driver(conn: &mut AnyConnection) -> &mut dyn Driver {
    match conn {
        AnyConnection::Postgres(c) => c,
        AnyConnection::Sqlite(c) => c,
    }
}

/// Runs `body` in a [`Driver::transaction`], returning its value.
pub(crate) fn in_transaction<T>(
    driver: &mut dyn Driver,
    mut body: impl FnMut(&mut dyn Driver) -> QueryResult<T>,
) -> QueryResult<T> {
    let mut out = None;
    driver.transaction(&mut |d| {
        out = Some(body(d)?);
        Ok(())
    })?;
    Ok(out.expect("a committed transaction ran its body"))
}

/// A raw SQL statement that diesel may cache as a prepared statement (keyed
/// by its text). diesel's `sql_query` opts out of the cache, which on
/// PostgreSQL means a parse and plan per call; our statements are static
/// strings, so caching them is safe.
pub(crate) struct Cached<Q>(pub Q);

impl<Q> QueryId for Cached<Q> {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl<Q: Query> Query for Cached<Q> {
    type SqlType = Q::SqlType;
}

impl<Q: QueryFragment<DB>, DB: DieselBackend> QueryFragment<DB> for Cached<Q> {
    fn walk_ast<'b>(&'b self, pass: AstPass<'_, 'b, DB>) -> QueryResult<()> {
        self.0.walk_ast(pass)
    }

    fn is_safe_to_cache_prepared(&self, _backend: &DB) -> QueryResult<bool> {
        Ok(true)
    }
}

impl<Q, C> RunQueryDsl<C> for Cached<Q> {}

/// A job to insert, with every option resolved.
#[derive(Debug, Clone)]
pub(crate) struct NewJob {
    pub queue_name: String,
    pub kind: String,
    pub arguments: String,
    pub priority: i32,
    pub unique_key: Option<String>,
    pub concurrency_key: Option<String>,
    pub options: String,
    pub delivery: Delivery,
    pub max_attempts: i32,
    pub max_stalled_count: Option<i32>,
    /// Absolute run time; when `None`, now + `delay`.
    pub run_at: Option<NaiveDateTime>,
    pub delay: Duration,
}

/// A worker's queue list, compiled once into the SQL that selects claim
/// candidates (see [`crate::worker::QueuePattern`]).
#[derive(Debug)]
pub(crate) struct ClaimQuery {
    pub(crate) patterns: Vec<crate::worker::QueuePattern>,
    postgres_sql: std::sync::OnceLock<String>,
    sqlite_sql: std::sync::OnceLock<String>,
}

impl ClaimQuery {
    pub(crate) fn new(patterns: Vec<crate::worker::QueuePattern>) -> ClaimQuery {
        ClaimQuery {
            patterns,
            postgres_sql: Default::default(),
            sqlite_sql: Default::default(),
        }
    }

    pub(crate) fn postgres_sql(&self) -> &str {
        self.postgres_sql.get_or_init(|| postgres::claim_sql(self))
    }

    /// `SELECT job_id, ord, priority` of up to `limit` candidates per
    /// pattern, each pattern's candidates in priority and id order, paused
    /// queues excluded. `lock` is appended to each pattern's subquery
    /// (`FOR UPDATE SKIP LOCKED` on PostgreSQL). Queue names are validated
    /// (letters, digits, `_-.:`) so inlining them is safe, and inlining makes
    /// the statement text fixed per worker: prepared once, planned per queue.
    pub(crate) fn candidates_sql(&self, limit: &str, lock: &str) -> String {
        use crate::worker::QueuePattern;
        let mut parts = Vec::with_capacity(self.patterns.len());
        for (ord, pattern) in self.patterns.iter().enumerate() {
            let condition = match pattern {
                QueuePattern::Exact(name) => format!("queue_name = '{name}'"),
                QueuePattern::Prefix(prefix) => format!(
                    "substr(queue_name, 1, {}) = '{prefix}'",
                    prefix.chars().count()
                ),
                QueuePattern::All => "1 = 1".to_string(),
            };
            parts.push(format!(
                "SELECT job_id, {ord} AS ord, priority FROM (SELECT job_id, priority \
                 FROM solidq_ready_executions WHERE {condition} \
                 AND queue_name NOT IN (SELECT queue_name FROM solidq_pauses) \
                 ORDER BY priority, job_id LIMIT {limit}{lock}) AS c{ord}"
            ));
        }
        parts.join(" UNION ALL ")
    }
}

/// A job claimed by a worker, with what it needs to run it.
#[derive(Debug, Clone, diesel::QueryableByName)]
pub(crate) struct ClaimedJob {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub id: i64,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub queue_name: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub kind: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub arguments: String,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    pub priority: i32,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub options: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub delivery: String,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    pub max_attempts: i32,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    pub attempts: i32,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    pub stalled_count: i32,
    #[diesel(sql_type = diesel::sql_types::Timestamp)]
    pub created_at: NaiveDateTime,
    /// The position in the claim order (queue list, then priority, then id).
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub ord: i64,
}

/// A claimed job being released: the facts the release rules look at.
#[derive(Debug, Clone, diesel::QueryableByName)]
pub(crate) struct ReleasedJob {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub id: i64,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub kind: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub queue_name: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub delivery: String,
    // Read by the supervisor's release rules (stall counting).
    #[allow(dead_code)]
    #[diesel(sql_type = diesel::sql_types::Integer)]
    pub stalled_count: i32,
    #[allow(dead_code)]
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Integer>)]
    pub max_stalled_count: Option<i32>,
}

/// A successful attempt to record.
#[derive(Debug, Clone)]
pub(crate) struct Succeeded {
    pub id: i64,
    pub result: Option<String>,
    pub keep: Duration,
}

/// A failed attempt with attempts left.
#[derive(Debug, Clone)]
pub(crate) struct Retried {
    pub id: i64,
    pub error: String,
    pub delay: Duration,
}

/// A job failing for good.
#[derive(Debug, Clone)]
pub(crate) struct Failed {
    pub id: i64,
    pub error: String,
    /// Whether this ends an attempt (`attempts + 1`); a stall does not.
    pub ends_attempt: bool,
    /// Whether this counts a stall (`stalled_count + 1`).
    pub stalled: bool,
}

/// A claimed job going back to ready.
#[derive(Debug, Clone)]
pub(crate) struct Released {
    pub id: i64,
    /// Whether its process died (`stalled_count + 1`) rather than stopped.
    pub stalled: bool,
}

/// A process row to register.
#[derive(Debug, Clone)]
pub(crate) struct NewProcess {
    pub kind: String,
    pub name: String,
    pub pid: i32,
    pub hostname: String,
    pub supervisor_id: Option<i64>,
    pub metadata: String,
}

/// A job's outcome as the worker reports it.
#[derive(Debug, Clone)]
pub(crate) enum Outcome {
    Succeeded {
        result: Option<String>,
        keep: Duration,
    },
    Retry {
        error: String,
        delay: Duration,
    },
    Failed {
        error: String,
    },
}

/// One finished execution to record, fenced by the claim it was run under.
#[derive(Debug, Clone)]
pub(crate) struct Completion {
    pub job_id: i64,
    pub process_id: i64,
    pub outcome: Outcome,
}

/// What a batch of completions came to.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct FinishReport {
    /// Jobs whose outcome was recorded.
    pub written: Vec<i64>,
    /// Jobs whose claim was gone (the process was pruned meanwhile): nothing
    /// was written for them.
    pub lost: Vec<i64>,
}

/// How a process's remaining claims are handled when it stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReleaseReason {
    /// An orderly stop: claims go back to ready, not counted as stalls,
    /// except at-most-once jobs that were running, which fail.
    Shutdown,
}

/// What happened to each claim of a stopping or dead process.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct ReleaseReport {
    /// Back in ready.
    pub released: Vec<i64>,
    /// Moved to failed.
    pub failed: Vec<i64>,
}

impl Store {
    /// Inserts jobs in one transaction. Each entry is the new id, or the id
    /// of the existing job holding the same unique key (`Err`).
    pub(crate) fn jobs_enqueue(
        &self,
        jobs: &[NewJob],
    ) -> Result<Vec<std::result::Result<i64, i64>>> {
        self.with_driver("jobs_enqueue", |d| enqueue_on_driver(d, jobs))
    }

    /// Claims up to `limit` jobs for `process_id`.
    pub(crate) fn ready_claim(
        &self,
        claim: &ClaimQuery,
        process_id: i64,
        limit: usize,
    ) -> Result<Vec<ClaimedJob>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        self.with_driver("ready_claim", |d| d.ready_claim(claim, process_id, limit))
    }

    /// Moves up to `batch` due scheduled jobs to ready.
    pub(crate) fn scheduled_dispatch(&self, batch: usize) -> Result<Vec<String>> {
        self.with_driver("scheduled_dispatch", |d| d.scheduled_dispatch(batch))
    }

    /// Records a batch of completions in one transaction, each fenced by its
    /// claim: a completion whose claim is gone is skipped (reported as lost),
    /// the rest of the batch is written.
    pub(crate) fn claimed_finish(&self, completions: &[Completion]) -> Result<FinishReport> {
        self.with_driver("claimed_finish", |d| {
            in_transaction(d, |d| finish_on_driver(d, completions))
        })
    }

    /// Hands claimed jobs that never started back to ready (not a stall).
    /// Returns the ids whose claim was still held.
    pub(crate) fn claimed_release(&self, process_id: i64, job_ids: &[i64]) -> Result<Vec<i64>> {
        self.with_driver("claimed_release", |d| {
            in_transaction(d, |d| {
                let held = d.claimed_delete_fenced(process_id, job_ids)?;
                let rows: Vec<Released> = held
                    .iter()
                    .map(|&id| Released { id, stalled: false })
                    .collect();
                if !rows.is_empty() {
                    d.jobs_release(&rows)?;
                }
                Ok(held)
            })
        })
    }

    /// Registers a process; returns its id.
    pub(crate) fn process_register(&self, process: &NewProcess) -> Result<i64> {
        self.with_driver("process_register", |d| d.process_insert(process))
    }

    /// Writes a heartbeat; `false` when the process row is gone (pruned).
    pub(crate) fn process_heartbeat(&self, id: i64) -> Result<bool> {
        self.with_driver("process_heartbeat", |d| d.process_heartbeat(id))
    }

    /// Deletes a process row and, in the same transaction, handles every
    /// claim it still holds per `reason`. `running_at_most_once` lists
    /// at-most-once jobs that had started; on an orderly stop they fail
    /// instead of going back to ready.
    pub(crate) fn process_deregister(
        &self,
        process_id: i64,
        reason: ReleaseReason,
        running_at_most_once: &[i64],
    ) -> Result<ReleaseReport> {
        self.with_driver("process_deregister", |d| {
            in_transaction(d, |d| {
                let claims = d.claimed_delete_by_process(process_id)?;
                let report = release_claims(d, &claims, reason, running_at_most_once)?;
                d.process_delete(process_id)?;
                Ok(report)
            })
        })
    }
}

/// Inserts `jobs` and resolves duplicates to the existing ids. Shared by
/// [`Store::jobs_enqueue`] and enqueueing on a caller's connection.
pub(crate) fn enqueue_on_driver(
    d: &mut dyn Driver,
    jobs: &[NewJob],
) -> QueryResult<Vec<std::result::Result<i64, i64>>> {
    in_transaction(d, |d| {
        let inserted = d.jobs_insert(jobs)?;
        let missing: Vec<String> = jobs
            .iter()
            .zip(&inserted)
            .filter(|(_, id)| id.is_none())
            .filter_map(|(job, _)| job.unique_key.clone())
            .collect();
        let existing: std::collections::HashMap<String, i64> = if missing.is_empty() {
            Default::default()
        } else {
            d.jobs_find_by_unique_keys(&missing)?.into_iter().collect()
        };
        Ok(jobs
            .iter()
            .zip(inserted)
            .map(|(job, id)| match id {
                Some(id) => Ok(id),
                None => Err(job
                    .unique_key
                    .as_ref()
                    .and_then(|k| existing.get(k).copied())
                    .unwrap_or(0)),
            })
            .collect())
    })
}

fn finish_on_driver(d: &mut dyn Driver, completions: &[Completion]) -> QueryResult<FinishReport> {
    let mut report = FinishReport::default();
    let mut by_process: std::collections::BTreeMap<i64, Vec<i64>> = Default::default();
    for c in completions {
        by_process.entry(c.process_id).or_default().push(c.job_id);
    }
    let mut fenced = std::collections::HashSet::new();
    for (process_id, ids) in &by_process {
        fenced.extend(d.claimed_delete_fenced(*process_id, ids)?);
    }
    let (mut succeeded, mut deleted, mut retried, mut failed) = (vec![], vec![], vec![], vec![]);
    for c in completions {
        if !fenced.contains(&c.job_id) {
            report.lost.push(c.job_id);
            continue;
        }
        report.written.push(c.job_id);
        match &c.outcome {
            Outcome::Succeeded { keep, .. } if keep.is_zero() => deleted.push(c.job_id),
            Outcome::Succeeded { result, keep } => succeeded.push(Succeeded {
                id: c.job_id,
                result: result.clone(),
                keep: *keep,
            }),
            Outcome::Retry { error, delay } => retried.push(Retried {
                id: c.job_id,
                error: error.clone(),
                delay: *delay,
            }),
            Outcome::Failed { error } => failed.push(Failed {
                id: c.job_id,
                error: error.clone(),
                ends_attempt: true,
                stalled: false,
            }),
        }
    }
    if !succeeded.is_empty() {
        d.jobs_succeed(&succeeded)?;
    }
    if !deleted.is_empty() {
        d.jobs_delete(&deleted)?;
    }
    if !retried.is_empty() {
        d.jobs_retry(&retried)?;
    }
    if !failed.is_empty() {
        d.jobs_fail(&failed)?;
    }
    Ok(report)
}

/// Applies the release rules to claims that were just deleted.
fn release_claims(
    d: &mut dyn Driver,
    claims: &[ReleasedJob],
    reason: ReleaseReason,
    running_at_most_once: &[i64],
) -> QueryResult<ReleaseReport> {
    let mut report = ReleaseReport::default();
    let (mut release, mut fail) = (vec![], vec![]);
    for job in claims {
        let at_most_once = Delivery::from_column(&job.delivery) == Delivery::AtMostOnce;
        match reason {
            ReleaseReason::Shutdown if at_most_once && running_at_most_once.contains(&job.id) => {
                log::warn!(
                    "failed at-most-once job {} ({}, queue {}): still running at shutdown",
                    job.id,
                    job.kind,
                    job.queue_name
                );
                fail.push(Failed {
                    id: job.id,
                    error: error_json(
                        "shutdown",
                        "worker stopped while the job was running; at_most_once delivery, not retried",
                    ),
                    ends_attempt: true,
                    stalled: false,
                });
                report.failed.push(job.id);
            }
            ReleaseReason::Shutdown => {
                log::info!(
                    "released job {} ({}, queue {}) back to ready at shutdown",
                    job.id,
                    job.kind,
                    job.queue_name
                );
                release.push(Released {
                    id: job.id,
                    stalled: false,
                });
                report.released.push(job.id);
            }
        }
    }
    if !release.is_empty() {
        d.jobs_release(&release)?;
    }
    if !fail.is_empty() {
        d.jobs_fail(&fail)?;
    }
    Ok(report)
}

/// The JSON stored for an error (in `failed_executions.error` and the job's
/// `errors` history).
pub(crate) fn error_json(kind: &str, message: &str) -> String {
    serde_json::json!({
        "kind": kind,
        "message": message,
        "at": chrono::Utc::now(),
    })
    .to_string()
}

/// The host clock as the naive UTC timestamps the tables store.
pub(crate) fn utc_now() -> NaiveDateTime {
    chrono::Utc::now().naive_utc()
}

/// A duration in whole microseconds, for SQL interval arithmetic.
pub(crate) fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}
