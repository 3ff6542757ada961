//! The only place with SQL.
//!
//! [`Store`] owns the connection pool and offers the operations the runtime
//! needs, named noun_verb after the table they act on (`ready_claim`,
//! `claimed_finish`, `process_register`…). Each operation is composed from
//! the primitives of the [`Driver`] trait, which `postgres/`, `sqlite/`
//! and `mysql/` implement for their connection types: the decisions (what is
//! released, what fails) are written once here, the SQL once per backend.
//!
//! Backend differences, all behind `Driver`:
//! * PostgreSQL claims with `FOR UPDATE SKIP LOCKED` in one statement, passes
//!   batches as arrays (`unnest`), and takes "now" from the database clock.
//! * SQLite runs every write transaction as `BEGIN IMMEDIATE` (one writer at
//!   a time, so no lock upgrade can deadlock), retries `SQLITE_BUSY`, passes
//!   batches as JSON arrays (`json_each`), and takes "now" from the host
//!   clock, which every process on that file shares.
//! * MySQL/MariaDB claims with `FOR UPDATE SKIP LOCKED` in a transaction
//!   (MySQL has no `UPDATE … RETURNING`, MariaDB no CTE that writes), passes
//!   batches as JSON arrays (`JSON_TABLE`), runs its sessions in `READ
//!   COMMITTED`, retries deadlocks (1213) and lock wait timeouts (1205),
//!   and takes "now" from the database clock (`UTC_TIMESTAMP(6)`).

mod admin;
mod areas;
mod audit;
pub(crate) mod batches;
#[cfg(test)]
mod conformance;
mod connection;
pub(crate) mod dependencies;
pub(crate) mod fair;
#[cfg(any(feature = "postgres", feature = "mysql"))]
mod floor;
mod health;
mod info;
mod jobs;
mod listener;
#[cfg(all(test, any(feature = "postgres", feature = "mysql")))]
mod lost_commit;
#[cfg(feature = "mysql")]
mod mysql;
mod named;
#[cfg(feature = "postgres")]
mod notifier;
mod options;
mod overview;
mod params;
mod portable;
#[cfg(feature = "postgres")]
mod postgres;
pub(crate) mod rates;
mod recurring;
pub(crate) mod schema;
#[cfg(feature = "sqlite")]
mod sqlite;
mod statement;
mod stats;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::NaiveDateTime;
use diesel::backend::Backend as DieselBackend;
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::{QueryResult, RunQueryDsl};
use diesel_migrations::{EmbeddedMigrations, MigrationHarness, embed_migrations};

pub(crate) use admin::{FailedSelection, NameScope, NamesSeen};
pub(crate) use areas::{
    AdminDriver, AuditDriver, BatchesDriver, ClaimsDriver, ControlDriver, DependenciesDriver,
    Driver, HealthDriver, JobsDriver, LimitsDriver, ProcessesDriver, RatesDriver, RecurringDriver,
    StatsDriver,
};
pub(crate) use audit::{AuditRow, NewAudit};
use connection::PoolConn;
pub(crate) use connection::SqliteSettings;
pub use connection::{AnyConnection, ConnectionCustomizer, statements_executed};
#[cfg(feature = "postgres")]
pub(crate) use health::PostgresFacts;
#[cfg(feature = "sqlite")]
pub(crate) use health::SqliteFacts;
pub(crate) use health::{HealthFacts, HorizonFacts, TableFacts};
pub(crate) use info::{DISCARDED, JobLookup, JobSelection};
pub(crate) use listener::{DUTY_LEASE, Duty, Heard, Listener};
pub(crate) use options::StoredOptions;
pub(crate) use params::*;
pub(crate) use recurring::{Fire, RecurringTaskRow, TickFire};
pub use statement::{EnqueueStatement, SqlValue, Statement};
pub(crate) use stats::{Counted, StatsDelta, TOTALS_BUCKET, count_now, minute_of};

use crate::types::{Backend, DatabaseUrl, Error, ErrorInfo, Result};

const POSTGRES_MIGRATIONS: EmbeddedMigrations = embed_migrations!("migrations/postgres");
const SQLITE_MIGRATIONS: EmbeddedMigrations = embed_migrations!("migrations/sqlite");
const MYSQL_MIGRATIONS: EmbeddedMigrations = embed_migrations!("migrations/mysql");

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
    /// How many times a server refused a write as read-only (a failover):
    /// the LISTEN connection and the notifier reconnect when it changes,
    /// since a connection to an old primary kept up as a standby would
    /// otherwise listen there forever, hearing nothing.
    read_only_seen: Arc<std::sync::atomic::AtomicU64>,
    /// PostgreSQL: sends the notifications of enqueued jobs (started on the
    /// first enqueue).
    #[cfg(feature = "postgres")]
    notifier: Arc<std::sync::OnceLock<notifier::Notifier>>,
    /// How long an operation keeps retrying lock conflicts.
    lock_budget: Duration,
    /// How SQLite connections are set up.
    sqlite: SqliteSettings,
    /// Whether a database ahead of this build was said (once).
    said_ahead: Arc<std::sync::atomic::AtomicBool>,
    /// MySQL: the server's `max_allowed_packet`, read once at connect.
    max_packet: Option<usize>,
}

/// What diesel's migrations table says against this build's migrations.
struct SchemaVersions {
    /// This build's versions the database has not applied, oldest first.
    pending: Vec<String>,
    /// Versions the database applied that this build does not have.
    unknown: Vec<String>,
}

/// Reads the applied versions on `conn` (diesel makes its table if it is
/// missing: a fresh database lacks every migration).
fn schema_versions(conn: &mut AnyConnection) -> Result<SchemaVersions> {
    fn names<DB: diesel::backend::Backend>(
        list: Vec<Box<dyn diesel::migration::Migration<DB>>>,
    ) -> Vec<String> {
        list.iter()
            .map(|m| m.name().version().to_string())
            .collect()
    }
    let to_strings = |list: Vec<diesel::migration::MigrationVersion<'static>>| -> Vec<String> {
        list.iter().map(|v| v.to_string()).collect()
    };
    let (pending, applied) = match conn {
        #[cfg(feature = "postgres")]
        AnyConnection::Postgres(c) => (
            c.pending_migrations(POSTGRES_MIGRATIONS).map(names),
            c.applied_migrations().map(to_strings),
        ),
        #[cfg(feature = "sqlite")]
        AnyConnection::Sqlite(c) => (
            c.pending_migrations(SQLITE_MIGRATIONS).map(names),
            c.applied_migrations().map(to_strings),
        ),
        #[cfg(feature = "mysql")]
        AnyConnection::Mysql(c) => (
            c.pending_migrations(MYSQL_MIGRATIONS).map(names),
            c.applied_migrations().map(to_strings),
        ),
    };
    let migration_error = |source| Error::Migration { source };
    let mut pending = pending.map_err(migration_error)?;
    pending.sort();
    let backend = match conn {
        #[cfg(feature = "postgres")]
        AnyConnection::Postgres(_) => Backend::Postgres,
        #[cfg(feature = "sqlite")]
        AnyConnection::Sqlite(_) => Backend::Sqlite,
        #[cfg(feature = "mysql")]
        AnyConnection::Mysql(_) => Backend::Mysql,
    };
    let embedded = Store::embedded_migrations(backend);
    let mut unknown: Vec<String> = applied
        .map_err(migration_error)?
        .into_iter()
        .filter(|v| !embedded.contains(v))
        .collect();
    unknown.sort();
    Ok(SchemaVersions { pending, unknown })
}

/// Connection pool settings.
#[derive(Debug, Clone)]
pub(crate) struct PoolOptions {
    pub size: u32,
    pub timeout: Duration,
    pub sqlite: SqliteSettings,
}

impl Store {
    /// Opens one connection first, so a bad URL or an unreachable server
    /// fails at once with libpq's or SQLite's own message, then builds the
    /// pool around it lazily.
    pub(crate) fn connect(url: &DatabaseUrl, options: &PoolOptions) -> Result<Store> {
        #[cfg_attr(not(feature = "mysql"), allow(unused_mut))]
        let mut first = url.establish(options.sqlite)?;
        let max_packet = match &mut first {
            #[cfg(feature = "mysql")]
            AnyConnection::Mysql(conn) => mysql::max_allowed_packet(conn),
            #[allow(unreachable_patterns)]
            _ => None,
        };
        drop(first);
        let manager = connection::Manager {
            url: url.clone(),
            sqlite: options.sqlite,
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
            read_only_seen: Arc::default(),
            #[cfg(feature = "postgres")]
            notifier: Arc::default(),
            lock_budget: match url.backend() {
                Backend::Sqlite => options.sqlite.busy_timeout,
                Backend::Postgres | Backend::Mysql => LOCK_RETRY_BUDGET,
            },
            sqlite: options.sqlite,
            said_ahead: Arc::default(),
            max_packet,
        })
    }

    /// MySQL: the server's `max_allowed_packet` when the store connected,
    /// the largest statement it takes (a larger one is answered by closing
    /// the connection: "server has gone away"). `None` elsewhere.
    pub(crate) fn max_packet(&self) -> Option<usize> {
        self.max_packet
    }

    /// Notes that a server refused a write as read-only.
    fn saw_read_only(&self) {
        self.read_only_seen
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// How many times a server refused solidq's writes as read-only: a
    /// change means a failover happened, and connections that only read or
    /// listen (which the server does not refuse) must be opened again.
    pub(crate) fn read_only_seen(&self) -> u64 {
        self.read_only_seen
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How long after the database answers again this pool may still wait
    /// before it connects: r2d2 retries a failed connect after a doubling
    /// delay of at most half its timeout (`pool_timeout`), and a caller
    /// waits for that retry.
    pub(crate) fn reconnect_within(&self) -> Duration {
        self.pool.connection_timeout() / 2
    }

    pub(crate) fn url(&self) -> &DatabaseUrl {
        &self.url
    }

    pub(crate) fn backend(&self) -> Backend {
        self.url.backend()
    }

    /// Checks a connection out of the pool, validating it first if it has
    /// not been seen working since a connection was last found dead, or
    /// (PostgreSQL) for longer than [`IDLE_CHECK_AFTER`].
    pub(crate) fn conn(&self) -> Result<PooledConnection> {
        self.conn_within(None)
    }

    /// [`Store::conn`], waiting at most `timeout` (instead of the pool's
    /// own timeout) for a connection.
    fn conn_within(&self, timeout: Option<Duration>) -> Result<PooledConnection> {
        loop {
            let checked_out = match timeout {
                Some(timeout) => self.pool.get_timeout(timeout),
                None => self.pool.get(),
            };
            let mut checked_out = checked_out.map_err(|source| Error::Pool {
                url: self.url.redacted(),
                pool_size: self.pool_size,
                source: Box::new(source),
            })?;
            let lost_at = *self.lost_at.lock().unwrap_or_else(|p| p.into_inner());
            let pooled: &mut PoolConn = &mut checked_out;
            let idle_too_long = self.backend() != Backend::Sqlite
                && pooled.verified_at.elapsed() > IDLE_CHECK_AFTER;
            if idle_too_long || lost_at.is_some_and(|lost| pooled.verified_at <= lost) {
                if let Err(error) = pooled.check() {
                    if error.is_read_only() {
                        self.saw_read_only();
                    }
                    pooled.broken = true;
                    continue;
                }
                pooled.verified_at = Instant::now();
            }
            return Ok(checked_out);
        }
    }

    /// Opens one of solidq's connections outside the pool (the SQLite and
    /// MySQL change watchers keep one for themselves), set up as the pooled
    /// ones.
    #[cfg(any(feature = "sqlite", feature = "mysql"))]
    pub(crate) fn dedicated_connection(&self) -> Result<AnyConnection> {
        self.url.establish(self.sqlite)
    }

    /// Opens a connection for the caller: the pragmas of solidq's own
    /// connections, and SQLite waiting out a busy lock for up to the busy
    /// timeout (solidq cannot retry the caller's transactions).
    pub(crate) fn caller_connection(&self) -> Result<AnyConnection> {
        self.url.establish_for_caller(self.sqlite)
    }

    /// Sets up the caller's pooled connections as [`Store::caller_connection`].
    pub(crate) fn caller_customizer(&self) -> ConnectionCustomizer {
        ConnectionCustomizer::new(self.sqlite)
    }

    /// Runs `op` on a pooled connection, retrying while the database reports
    /// a lock conflict (SQLite busy, PostgreSQL deadlock or serialization
    /// failure, MySQL deadlock or lock wait timeout): those errors mean the transaction was rolled back, so running
    /// it again is safe. A connection that turns out dead is dropped from the
    /// pool, so the caller's next attempt gets a fresh one. A server that
    /// refuses writes (SQLSTATE 25006: it is a standby now, after a
    /// failover) wrote nothing either: its connection is dropped and `op`
    /// runs again on a fresh one, which libpq opens through the URL's hosts
    /// to the one that takes writes.
    pub(crate) fn with_conn<T>(
        &self,
        operation: &'static str,
        op: impl FnMut(&mut AnyConnection) -> QueryResult<T>,
    ) -> Result<T> {
        self.with_conn_within(operation, None, op)
    }

    /// `error` naming this store's database when that is what a caller
    /// needs to act: a full database says which one is full.
    fn named(&self, error: Error) -> Error {
        if error.kind() != crate::types::ErrorKind::StorageFull {
            return error;
        }
        match error {
            Error::Database { operation, source } => Error::StorageFull {
                database: self.url.redacted(),
                operation,
                source,
            },
            other => other,
        }
    }

    /// [`Store::with_conn`], waiting at most `checkout` for a connection.
    pub(crate) fn with_conn_within<T>(
        &self,
        operation: &'static str,
        checkout: Option<Duration>,
        mut op: impl FnMut(&mut AnyConnection) -> QueryResult<T>,
    ) -> Result<T> {
        let mut checked_out = self.conn_within(checkout)?;
        let started = Instant::now();
        let mut pause = FIRST_LOCK_PAUSE;
        loop {
            let pooled: &mut PoolConn = &mut checked_out;
            match op(&mut pooled.conn) {
                Ok(value) => {
                    pooled.verified_at = Instant::now();
                    return Ok(value);
                }
                Err(source) => {
                    if self.backend() == Backend::Mysql
                        && matches!(source, diesel::result::Error::RollbackTransaction)
                    {
                        // Rolled back by choice, perhaps after an error of
                        // a statement not ours (a job's own, in its
                        // transaction: a deadlock in a locking read leaves
                        // the client library's statement unable to run
                        // again, see below). Rare: a fresh connection.
                        pooled.broken = true;
                    }
                    let error = Error::Database {
                        operation,
                        source: Box::new(source),
                    };
                    if error.is_connection_lost() {
                        pooled.broken = true;
                        *self.lost_at.lock().unwrap_or_else(|p| p.into_inner()) =
                            Some(Instant::now());
                    }
                    if error.kind() == crate::types::ErrorKind::SchemaMismatch {
                        // A missing table or column: say which migrations
                        // the database lacks, if it lacks any.
                        let pooled: &mut PoolConn = &mut checked_out;
                        if let Ok(versions) = schema_versions(&mut pooled.conn) {
                            self.schema_verdict(versions)?;
                        }
                        return Err(error);
                    }
                    let refused = error.is_read_only();
                    if !(refused || is_lock_conflict(&error))
                        || started.elapsed() > self.lock_budget
                    {
                        return Err(self.named(error));
                    }
                    if refused {
                        self.saw_read_only();
                        log::warn!("{operation}: {error}; running it again on a fresh connection");
                        drop(checked_out);
                        std::thread::sleep(pause.max(FAILOVER_PAUSE));
                        checked_out = self.conn_within(checkout)?;
                        continue;
                    }
                    LOCK_CONFLICTS_RETRIED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    // Jitter, so processes that collided do not retry in step.
                    let wait = pause.mul_f64(0.5 + fastrand::f64());
                    log::trace!("{operation}: {error}; retrying in {wait:?}");
                    if self.backend() == Backend::Mysql {
                        // A deadlock can be reported in the middle of a
                        // locking read's rows, and the client library then
                        // left that prepared statement unable to run again
                        // (its next execution waited forever for an answer
                        // the server never owed). A fresh connection has
                        // none of the old statements.
                        let pooled: &mut PoolConn = &mut checked_out;
                        pooled.broken = true;
                        drop(checked_out);
                        std::thread::sleep(wait);
                        pause = (pause * 2).min(MAX_LOCK_PAUSE);
                        checked_out = self.conn_within(checkout)?;
                        continue;
                    }
                    std::thread::sleep(wait);
                    pause = (pause * 2).min(MAX_LOCK_PAUSE);
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

    /// A migrated store on an SQLite file in `dir` (unit tests).
    #[cfg(all(test, feature = "sqlite"))]
    pub(crate) fn sqlite_in(dir: &std::path::Path) -> Store {
        let path = dir.join("q.sqlite3").display().to_string();
        let store = Store::connect(
            &crate::types::DatabaseUrl::parse(&path).unwrap(),
            &PoolOptions {
                size: 2,
                timeout: std::time::Duration::from_secs(5),
                sqlite: SqliteSettings::default(),
            },
        )
        .unwrap();
        store.migrate().unwrap();
        store
    }

    /// A store in a new directory with four ready jobs (their ids), a
    /// worker registered as `name` (its id), and a claim of every queue.
    #[cfg(all(test, feature = "sqlite"))]
    pub(crate) fn four_jobs_and_a_worker(
        name: &str,
    ) -> (tempfile::TempDir, Store, Vec<i64>, i64, ClaimQuery) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::sqlite_in(dir.path());
        let ids: Vec<i64> = store
            .jobs_enqueue(&vec![NewJob::plain("default", "noop"); 4])
            .unwrap()
            .outcome
            .into_iter()
            .map(|o| o.unwrap())
            .collect();
        let process = store
            .process_register(&NewProcess {
                kind: "worker".into(),
                name: name.into(),
                pid: 1,
                hostname: "test".into(),
                supervisor_id: None,
                metadata: "{}".into(),
            })
            .unwrap();
        let claim = ClaimQuery::new(vec![crate::types::QueuePattern::parse("*").unwrap()]);
        (dir, store, ids, process, claim)
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
            #[cfg(feature = "postgres")]
            AnyConnection::Postgres(c) => {
                use diesel::connection::SimpleConnection;
                const LOCK: &str = "SELECT pg_advisory_lock(7370731563215631)";
                const UNLOCK: &str = "SELECT pg_advisory_unlock(7370731563215631)";
                c.batch_execute(LOCK).map_err(Error::db("migrate"))?;
                let result = c.run_pending_migrations(POSTGRES_MIGRATIONS).map(versions);
                c.batch_execute(UNLOCK).map_err(Error::db("migrate"))?;
                result.map_err(migration_error)?
            }
            #[cfg(feature = "sqlite")]
            AnyConnection::Sqlite(c) => {
                // Concurrent migrators wait for each other here (the pooled
                // connection otherwise fails at once on a taken lock).
                use diesel::connection::SimpleConnection;
                c.batch_execute("PRAGMA busy_timeout = 30000")
                    .map_err(Error::db("migrate"))?;
                let result: std::result::Result<_, Box<dyn std::error::Error + Send + Sync>> = c
                    .immediate_transaction(|c| {
                        c.run_pending_migrations(SQLITE_MIGRATIONS).map(versions)
                    });
                c.batch_execute("PRAGMA busy_timeout = 0")
                    .map_err(Error::db("migrate"))?;
                result.map_err(migration_error)?
            }
            #[cfg(feature = "mysql")]
            AnyConnection::Mysql(c) => {
                // MySQL runs DDL outside transactions: concurrent migrators
                // take turns on a named lock (released at disconnect too).
                use diesel::connection::SimpleConnection;
                c.batch_execute("DO GET_LOCK('solidq_migrate', 60)")
                    .map_err(Error::db("migrate"))?;
                let result = c.run_pending_migrations(MYSQL_MIGRATIONS).map(versions);
                c.batch_execute("DO RELEASE_LOCK('solidq_migrate')")
                    .map_err(Error::db("migrate"))?;
                result.map_err(migration_error)?
            }
        };
        for version in &applied {
            log::info!("applied migration {version} to {}", self.url);
        }
        Ok(applied)
    }

    /// Tells listeners (PostgreSQL) that the ready ones among `jobs` are
    /// there, after their commit, without making the enqueuer wait.
    #[cfg_attr(not(feature = "postgres"), allow(unused_variables))]
    pub(crate) fn notify_ready(&self, jobs: &[NewJob]) {
        #[cfg(feature = "postgres")]
        if self.backend() == Backend::Postgres {
            self.notify_ready_postgres(jobs);
        }
    }

    #[cfg(feature = "postgres")]
    fn notify_ready_postgres(&self, jobs: &[NewJob]) {
        if self.backend() != Backend::Postgres {
            return;
        }
        let mut queues: Vec<String> = jobs
            .iter()
            .filter(|j| j.delay.is_zero() && j.run_at.is_none_or(|t| t <= utc_now()))
            .map(|j| j.queue_name.clone())
            .collect();
        queues.sort_unstable();
        queues.dedup();
        if !queues.is_empty() {
            self.notifier
                .get_or_init(|| {
                    notifier::Notifier::start(self.url.clone(), Arc::clone(&self.read_only_seen))
                })
                .ready(queues);
        }
    }

    /// The one schema check: `Err(Error::SchemaBehind)` when the database
    /// lacks migrations of this build (one read of diesel's migrations
    /// table). A database ahead of the build (migrated by a newer one) is
    /// fine, migrations being additive: said once, at info level.
    pub(crate) fn check_schema(&self) -> Result<()> {
        let mut checked_out = self.conn()?;
        let pooled: &mut PoolConn = &mut checked_out;
        let versions = schema_versions(&mut pooled.conn)?;
        self.schema_verdict(versions)
    }

    fn schema_verdict(&self, versions: SchemaVersions) -> Result<()> {
        if !versions.pending.is_empty() {
            return Err(Error::SchemaBehind {
                database: self.url.redacted(),
                pending: versions.pending,
            });
        }
        if !versions.unknown.is_empty() && !self.said_ahead.swap(true, Ordering::Relaxed) {
            log::info!(
                "the database at {} has migrations this build does not know ({}): a newer solidq migrated it; this one runs on it (migrations are additive)",
                self.url.redacted(),
                versions.unknown.join(", ")
            );
        }
        Ok(())
    }

    /// Applies the embedded migrations up to and including `version`,
    /// oldest first, and no further (a test's way to stand where an older
    /// release left the schema); returns the versions applied.
    pub(crate) fn migrate_through(&self, version: &str) -> Result<Vec<String>> {
        let mut applied = Vec::new();
        let mut checked_out = self.conn()?;
        let pooled: &mut PoolConn = &mut checked_out;
        let migration_error = |source| Error::Migration { source };
        loop {
            let pending = schema_versions(&mut pooled.conn)?.pending;
            let Some(next) = pending.first() else { break };
            if next.as_str() > version {
                break;
            }
            match &mut pooled.conn {
                #[cfg(feature = "postgres")]
                AnyConnection::Postgres(c) => c
                    .run_next_migration(POSTGRES_MIGRATIONS)
                    .map(drop)
                    .map_err(migration_error)?,
                #[cfg(feature = "sqlite")]
                AnyConnection::Sqlite(c) => c
                    .run_next_migration(SQLITE_MIGRATIONS)
                    .map(drop)
                    .map_err(migration_error)?,
                #[cfg(feature = "mysql")]
                AnyConnection::Mysql(c) => c
                    .run_next_migration(MYSQL_MIGRATIONS)
                    .map(drop)
                    .map_err(migration_error)?,
            }
            applied.push(next.clone());
        }
        Ok(applied)
    }

    /// The migration versions embedded in this build, oldest first.
    pub(crate) fn embedded_migrations(backend: Backend) -> Vec<String> {
        use diesel::migration::MigrationSource;
        let source = match backend {
            Backend::Postgres => POSTGRES_MIGRATIONS,
            Backend::Sqlite => SQLITE_MIGRATIONS,
            Backend::Mysql => MYSQL_MIGRATIONS,
        };
        // Listing needs a backend type, not a connection: any compiled in.
        type Db = <AnyConnection as diesel::Connection>::Backend;
        let migrations: Vec<Box<dyn diesel::migration::Migration<Db>>> =
            MigrationSource::<Db>::migrations(&source).unwrap_or_default();
        migrations
            .iter()
            .map(|m| m.name().version().to_string())
            .collect()
    }
}

fn versions(list: Vec<diesel::migration::MigrationVersion<'_>>) -> Vec<String> {
    list.iter().map(|v| v.to_string()).collect()
}

/// How long a PostgreSQL or MySQL operation keeps retrying deadlocks,
/// serialization failures and (MySQL) lock wait timeouts before giving up. (SQLite's budget is its
/// configured busy timeout.)
const LOCK_RETRY_BUDGET: Duration = Duration::from_secs(30);
/// The first pause before retrying a lock conflict; it doubles up to
/// [`MAX_LOCK_PAUSE`]. SQLite holds its write lock for well under a
/// millisecond per transaction here.
const FIRST_LOCK_PAUSE: Duration = Duration::from_micros(50);
const MAX_LOCK_PAUSE: Duration = Duration::from_millis(2);
/// A PostgreSQL connection unused for longer than this is checked (one
/// round trip) before it is handed out, as HikariCP does past 500 ms: a
/// server restarted, failed over or that terminated the session meanwhile
/// shows here, where nothing was sent yet, instead of as an error on the
/// caller's write that cannot say whether it committed
/// ([`Error::may_have_committed`]). Busy connections are never idle that
/// long, so the check costs nothing under load.
const IDLE_CHECK_AFTER: Duration = Duration::from_secs(1);
/// The pause before running an operation again after a server refused it
/// as read-only (a failover under way: the next connection may reach the
/// same standby until it is promoted).
const FAILOVER_PAUSE: Duration = Duration::from_millis(200);

static LOCK_CONFLICTS_RETRIED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many times an operation of solidq's own in this process met a lock
/// conflict — SQLite's busy lock, a deadlock or serialization failure
/// (PostgreSQL, MySQL), a lock wait timeout (MySQL) — and ran again from
/// the start of its transaction, unseen by its caller. A conflict outlasting
/// the retry budget (30 s; SQLite's busy timeout) surfaces as an error
/// instead, and is not counted here.
pub fn lock_conflicts_retried() -> u64 {
    LOCK_CONFLICTS_RETRIED.load(std::sync::atomic::Ordering::Relaxed)
}

pub(crate) fn is_lock_conflict(error: &Error) -> bool {
    matches!(error, Error::Database { .. }) && error.kind() == crate::types::ErrorKind::LockConflict
}

/// The driver for a pooled connection: the one `match` on the backend
/// outside the backend files.
pub(crate) fn driver(conn: &mut AnyConnection) -> &mut dyn Driver {
    match conn {
        #[cfg(feature = "postgres")]
        AnyConnection::Postgres(c) => c,
        #[cfg(feature = "sqlite")]
        AnyConnection::Sqlite(c) => c,
        #[cfg(feature = "mysql")]
        AnyConnection::Mysql(c) => c,
    }
}

/// Runs `body` in a [`Driver::transaction`], returning its value.
pub(crate) fn in_transaction<T>(
    driver: &mut dyn Driver,
    body: impl FnMut(&mut dyn Driver) -> QueryResult<T>,
) -> QueryResult<T> {
    returning(driver, body, |d, b| d.transaction(b))
}

/// Runs a claim, `body`, in a transaction of its own
/// ([`Driver::claim_transaction`]); returns what it returned.
pub(crate) fn in_claim_transaction<T>(
    driver: &mut dyn Driver,
    body: impl FnMut(&mut dyn Driver) -> QueryResult<T>,
) -> QueryResult<T> {
    returning(driver, body, |d, b| d.claim_transaction(b))
}

/// Runs `body` through `run` (a transaction of the driver's, whose body
/// returns nothing), returning `body`'s value.
fn returning<T>(
    driver: &mut dyn Driver,
    mut body: impl FnMut(&mut dyn Driver) -> QueryResult<T>,
    run: impl FnOnce(
        &mut dyn Driver,
        &mut dyn FnMut(&mut dyn Driver) -> QueryResult<()>,
    ) -> QueryResult<()>,
) -> QueryResult<T> {
    let mut out = None;
    run(driver, &mut |d| {
        out = Some(body(d)?);
        Ok(())
    })?;
    Ok(out.expect("a committed transaction ran its body"))
}

/// A raw SQL statement that diesel may cache as a prepared statement (keyed
/// by its text). diesel's `sql_query` opts out of the cache, which on
/// PostgreSQL means a parse and plan per call; our statements are static
/// strings, so caching them is safe. Write its text with [`prepared`], not
/// `sql_query`: this wrapper's opt-in reaches diesel only through the
/// statements diesel takes by value (`load`, `get_result`); `execute` takes
/// it by reference, and diesel's reference impl asks the text itself, which
/// `sql_query` answers "never cache" (an `execute` then ran as an unnamed
/// statement: parsed and planned at every call on PostgreSQL, prepared and
/// closed around every call on MySQL, compiled every time on SQLite).
pub(crate) struct Cached<Q>(pub Q);

/// A statement's text for [`Cached`]: `sql_query` without its opt-out of
/// diesel's prepared-statement cache (on MySQL, only for statements
/// without a subquery: see [`has_subquery`]). Bind values with `.bind::<T, _>(v)`, as on `sql_query`.
pub(crate) fn prepared(sql: impl Into<String>) -> Prepared {
    Prepared(sql.into())
}

/// See [`prepared`].
pub(crate) struct Prepared(String);

impl Prepared {
    pub(crate) fn bind<ST, V>(self, value: V) -> Bind<Self, V, ST> {
        Bind(self, value, std::marker::PhantomData)
    }
}

/// A statement of [`prepared`] text with one more value bound: the text
/// holds its placeholders, so each value is sent without adding one.
pub(crate) struct Bind<Q, V, ST>(Q, V, std::marker::PhantomData<ST>);

impl<Q, V, ST> Bind<Q, V, ST> {
    pub(crate) fn bind<ST2, V2>(self, value: V2) -> Bind<Self, V2, ST2> {
        Bind(self, value, std::marker::PhantomData)
    }
}

impl<Q, V, ST> QueryId for Bind<Q, V, ST> {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl<Q, V, ST> Query for Bind<Q, V, ST> {
    type SqlType = diesel::sql_types::Untyped;
}

impl<Q, V, ST, DB> QueryFragment<DB> for Bind<Q, V, ST>
where
    DB: DieselBackend + diesel::sql_types::HasSqlType<ST>,
    Q: QueryFragment<DB>,
    V: diesel::serialize::ToSql<ST, DB>,
{
    fn walk_ast<'b>(&'b self, mut pass: AstPass<'_, 'b, DB>) -> QueryResult<()> {
        self.0.walk_ast(pass.reborrow())?;
        pass.push_bind_param_value_only(&self.1)
    }
}

impl<Q, V, ST, C> RunQueryDsl<C> for Bind<Q, V, ST> {}

impl QueryId for Prepared {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl Query for Prepared {
    type SqlType = diesel::sql_types::Untyped;
}

impl<DB: DieselBackend + 'static> QueryFragment<DB> for Prepared {
    fn walk_ast<'b>(&'b self, mut pass: AstPass<'_, 'b, DB>) -> QueryResult<()> {
        #[cfg(feature = "mysql")]
        if std::any::TypeId::of::<DB>() == std::any::TypeId::of::<diesel::mysql::Mysql>()
            && has_subquery(&self.0)
        {
            pass.unsafe_to_cache_prepared();
        }
        pass.push_sql(&self.0);
        Ok(())
    }
}

impl<C> RunQueryDsl<C> for Prepared {}

/// Whether a statement holds a subquery (`(SELECT`, any spacing or case).
/// On MySQL such a statement run by `execute` is not kept prepared:
/// MariaDB 10.11 runs some of them wrongly when a prepared one is executed
/// again (the fair-share placement's `INSERT … SELECT` over a derived
/// table failed its second run with "Unknown column 's.queue_name' in
/// 'WHERE'"; its fixes of re-executed derived tables and subqueries
/// continue through 11.x), so those are prepared and closed around each
/// call, as every `execute` was before. Statements without one (the
/// heartbeat, the fence, the finish's steps, the cleaner's deletes) are
/// prepared once per connection; `load`s always were.
#[cfg(feature = "mysql")]
fn has_subquery(sql: &str) -> bool {
    let bytes = sql.as_bytes();
    bytes.iter().enumerate().any(|(at, &b)| {
        b == b'('
            && bytes[at + 1..]
                .iter()
                .position(|c| !c.is_ascii_whitespace())
                .is_some_and(|skip| {
                    bytes[at + 1 + skip..]
                        .get(..6)
                        .is_some_and(|word| word.eq_ignore_ascii_case(b"select"))
                })
    })
}

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

/// The JSON stored for an error (in `failed_executions.error` and the job's
/// `errors` history). Its `at` is the host's clock here; PostgreSQL
/// replaces it with the database's as it writes it.
pub(crate) fn error_json(kind: &str, message: &str) -> String {
    ErrorInfo {
        kind: kind.to_string(),
        message: message.to_string(),
        backtrace: None,
        attempt: None,
        at: Some(chrono::Utc::now()),
        retry_in_ms: None,
    }
    .to_stored_json()
}

/// The host clock as the naive UTC timestamps the tables store.
pub(crate) fn utc_now() -> NaiveDateTime {
    chrono::Utc::now().naive_utc()
}

/// A duration in whole microseconds, for SQL interval arithmetic.
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use diesel::result::{DatabaseErrorKind, Error as D};

    use super::*;

    fn db_error(kind: DatabaseErrorKind, message: &str) -> Error {
        Error::Database {
            operation: "test",
            source: Box::new(D::DatabaseError(kind, Box::new(message.to_string()))),
        }
    }

    /// Every statement written as `Cached(prepared(…))` is prepared once
    /// per connection, whether it is run by `execute` (which diesel takes
    /// by reference) or by `load`; with `sql_query` the `execute`s were
    /// never (on PostgreSQL, a parse and a plan at every call).
    #[cfg(feature = "sqlite")]
    #[test]
    fn a_cached_statement_is_prepared_once_whichever_way_it_runs() {
        use diesel::connection::{Connection, InstrumentationEvent, SimpleConnection};
        use diesel::sql_types::Integer;

        #[derive(diesel::QueryableByName)]
        struct Row {
            #[diesel(sql_type = Integer)]
            x: i32,
        }
        let prepared_texts = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let mut conn = diesel::SqliteConnection::establish(":memory:").unwrap();
        conn.batch_execute("CREATE TABLE t (x INTEGER NOT NULL)")
            .unwrap();
        let seen = std::sync::Arc::clone(&prepared_texts);
        conn.set_instrumentation(move |event: InstrumentationEvent<'_>| {
            if let InstrumentationEvent::CacheQuery { sql, .. } = event {
                seen.lock().unwrap().push(sql.to_string());
            }
        });
        for x in 1..=3 {
            let inserted = Cached(prepared("INSERT INTO t (x) VALUES (?)").bind::<Integer, _>(x))
                .execute(&mut conn)
                .unwrap();
            assert_eq!(inserted, 1);
            let rows: Vec<Row> =
                Cached(prepared("SELECT x FROM t WHERE x <= ?").bind::<Integer, _>(x))
                    .load(&mut conn)
                    .unwrap();
            assert_eq!(rows.iter().map(|r| r.x).sum::<i32>(), x * (x + 1) / 2);
        }
        assert_eq!(
            *prepared_texts.lock().unwrap(),
            [
                "INSERT INTO t (x) VALUES (?)",
                "SELECT x FROM t WHERE x <= ?"
            ],
            "each text prepared once, on its first run"
        );
    }

    /// The same on a real PostgreSQL: the server holds the statement that
    /// `execute` ran, prepared once (it was an unnamed one before).
    #[cfg(feature = "postgres")]
    #[test]
    fn a_statement_run_by_execute_is_prepared_on_postgresql() {
        use diesel::connection::Connection;
        use diesel::sql_types::{BigInt, Text};

        let Some(url) = conformance::postgres_url() else {
            return;
        };
        #[derive(diesel::QueryableByName)]
        struct Count {
            #[diesel(sql_type = BigInt)]
            n: i64,
        }
        const TEXT: &str = "SELECT pg_notify('solidq_prepared_test', $1)";
        let mut conn = diesel::PgConnection::establish(&url).unwrap();
        for _ in 0..3 {
            Cached(prepared(TEXT).bind::<Text, _>("x"))
                .execute(&mut conn)
                .unwrap();
        }
        let held: Count = diesel::sql_query(
            "SELECT count(*) AS n FROM pg_prepared_statements WHERE statement = $1",
        )
        .bind::<Text, _>(TEXT)
        .get_result(&mut conn)
        .unwrap();
        assert_eq!(held.n, 1, "the statement prepared once on this session");
    }

    /// On MySQL a statement without a subquery that `execute` runs is
    /// prepared once per session; one with a subquery is prepared at each
    /// run (MariaDB's re-execution bugs: see [`has_subquery`]).
    #[cfg(feature = "mysql")]
    #[test]
    fn on_mysql_a_statement_without_a_subquery_is_prepared_once() {
        use diesel::connection::{Connection, SimpleConnection};
        use diesel::sql_types::BigInt;

        let Some(url) = conformance::mysql_url() else {
            return;
        };
        #[derive(diesel::QueryableByName)]
        struct Status {
            #[diesel(sql_type = diesel::sql_types::Text)]
            #[diesel(column_name = Value)]
            value: String,
        }
        let mut conn = diesel::MysqlConnection::establish(&url).unwrap();
        conn.batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY, n BIGINT NOT NULL)")
            .unwrap();
        conn.batch_execute("INSERT INTO t VALUES (1, 0)").unwrap();
        let prepares = |conn: &mut diesel::MysqlConnection| -> u64 {
            let row: Status = diesel::sql_query("SHOW SESSION STATUS LIKE 'Com_stmt_prepare'")
                .get_result(conn)
                .unwrap();
            row.value.parse().unwrap()
        };
        let flat = "UPDATE t SET n = n + ? WHERE id = 1";
        let nested = "UPDATE t SET n = n + ? WHERE id IN ( select id FROM (SELECT 1 AS id) AS o)";
        // Reading the count is a prepared statement of its own.
        let read = {
            let first = prepares(&mut conn);
            prepares(&mut conn) - first
        };
        for (sql, expected) in [(flat, 1), (nested, 3)] {
            let before = prepares(&mut conn);
            for _ in 0..3 {
                let changed = Cached(prepared(sql).bind::<BigInt, _>(1))
                    .execute(&mut conn)
                    .unwrap();
                assert_eq!(changed, 1, "{sql}");
            }
            assert_eq!(prepares(&mut conn) - before - read, expected, "{sql}");
        }
    }

    #[cfg(feature = "mysql")]
    #[test]
    fn a_subquery_is_found_whatever_its_spacing_and_case() {
        assert!(has_subquery("DELETE FROM t WHERE id IN (SELECT id FROM u)"));
        assert!(has_subquery(
            "DELETE FROM t WHERE id IN (\n   select id FROM u)"
        ));
        assert!(!has_subquery("UPDATE t SET n = (n + 1) WHERE id = ?"));
        assert!(!has_subquery("SELECT a FROM t WHERE (b) = ?"));
        assert!(!has_subquery("INSERT INTO t (a, b) VALUES (?, ?)"));
        assert!(!has_subquery("x = ("));
    }

    #[test]
    fn mysql_deadlocks_and_lock_waits_are_retried_and_lost_connections_are_not() {
        // 1213 (diesel's SerializationFailure) and 1205 (Unknown).
        assert!(is_lock_conflict(&db_error(
            DatabaseErrorKind::SerializationFailure,
            "Deadlock found when trying to get lock; try restarting transaction",
        )));
        assert!(is_lock_conflict(&db_error(
            DatabaseErrorKind::Unknown,
            "Lock wait timeout exceeded; try restarting transaction",
        )));
        assert!(!is_lock_conflict(&db_error(
            DatabaseErrorKind::Unknown,
            "Lost connection to server during query",
        )));
        assert!(!is_lock_conflict(&db_error(
            DatabaseErrorKind::UniqueViolation,
            "Duplicate entry 'k' for key 'solidq_jobs_unique_key'",
        )));
    }
}
