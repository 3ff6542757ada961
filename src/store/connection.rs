//! Connections: how a connection is set up for the backend its
//! [`DatabaseUrl`] names, and the r2d2 pool manager that builds them.

use std::time::Duration;

use diesel::Connection;
#[cfg(feature = "mysql")]
use diesel::MysqlConnection;
#[cfg(feature = "postgres")]
use diesel::PgConnection;
#[cfg(feature = "sqlite")]
use diesel::SqliteConnection;
use diesel::connection::SimpleConnection;

use crate::config::{DEFAULT_SQLITE_BUSY_TIMEOUT, DEFAULT_SQLITE_SYNCHRONOUS};
use crate::types::{DatabaseUrl, Error, Result, SqliteSynchronous};

/// One connection to any compiled backend, set up as solidq sets up its own.
///
/// It is a diesel [`MultiConnection`](diesel::MultiConnection) (derived
/// with `#[derive(diesel::MultiConnection)]`), so it implements
/// [`diesel::Connection`]: diesel queries every compiled backend accepts
/// run on the enum itself, a `match` on the variant reaches backend-only
/// ones, and [`AnyConnection::write_transaction`] writes safely on SQLite.
/// [`Queue::open_connection`](crate::Queue::open_connection) gives the
/// caller one, and [`Queue::enqueue_on`](crate::Queue::enqueue_on) enqueues
/// on it inside the caller's transaction. (Inside solidq only `store/`
/// looks inside.)
///
/// ```
/// use diesel::RunQueryDsl;
/// use solidq::{AnyConnection, Queue};
///
/// # fn main() -> solidq::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let url = format!("sqlite://{}", dir.path().join("app.sqlite3").display());
/// let queue = Queue::connect(&url)?; // any backend's URL
/// # queue.migrate()?;
/// let mut conn: AnyConnection = queue.open_connection()?;
/// // A query for every backend, on the enum:
/// diesel::sql_query("CREATE TABLE notes (body TEXT)").execute(&mut conn)?;
/// // A backend's own API, through its variant:
/// match &mut conn {
///     AnyConnection::Sqlite(sqlite) => {
///         diesel::sql_query("PRAGMA optimize").execute(sqlite)?;
///     }
///     _ => {}
/// }
/// # Ok(())
/// # }
/// ```
///
/// Each variant exists only when its backend's Cargo feature (`postgres`,
/// `sqlite`, `mysql`) is on.
#[derive(diesel::MultiConnection)]
pub enum AnyConnection {
    /// A PostgreSQL connection.
    #[cfg(feature = "postgres")]
    Postgres(PgConnection),
    /// An SQLite connection (WAL, `synchronous` as configured, busy
    /// timeout, foreign keys on).
    #[cfg(feature = "sqlite")]
    Sqlite(SqliteConnection),
    /// A MySQL or MariaDB connection (`READ COMMITTED`, strict SQL mode,
    /// UTC).
    #[cfg(feature = "mysql")]
    Mysql(MysqlConnection),
}

impl AnyConnection {
    /// Runs `f` in a write transaction and commits it if `f` returns `Ok`
    /// (rolls it back otherwise): `BEGIN IMMEDIATE` on SQLite, `BEGIN` on
    /// PostgreSQL; a savepoint when a transaction is already open.
    ///
    /// On SQLite this is what a transaction that writes should be. A plain
    /// (deferred) `BEGIN` takes no lock: a transaction that reads first
    /// holds a snapshot, and when another connection commits before its
    /// first write, that write cannot upgrade to the write lock and fails
    /// with `database is locked` (`SQLITE_BUSY`) at once, whatever the busy
    /// timeout, because waiting could not help. `BEGIN IMMEDIATE` takes the
    /// write lock first, waiting for it up to the busy timeout, so nothing
    /// inside can fail that way. (On a
    /// [`SqliteConnection`] itself, diesel's
    /// [`immediate_transaction`](SqliteConnection::immediate_transaction)
    /// does the same.)
    ///
    /// ```no_run
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Serialize, Deserialize)] struct ShipOrder { id: i64 }
    /// # impl solidq::Job for ShipOrder { const KIND: &'static str = "ship";
    /// #   fn perform(&self, _: &solidq::JobContext) -> solidq::JobResult { Ok(serde_json::Value::Null) } }
    /// let queue = solidq::Queue::connect("sqlite://app.sqlite3")?;
    /// let mut conn: solidq::AnyConnection = queue.open_connection()?;
    /// conn.write_transaction(|conn| {
    ///     // insert the order with diesel, then:
    ///     queue.enqueue_on(conn, &ShipOrder { id: 7 })
    /// })?;
    /// # Ok::<(), solidq::Error>(())
    /// ```
    pub fn write_transaction<T, E, F>(&mut self, f: F) -> std::result::Result<T, E>
    where
        F: FnOnce(&mut AnyConnection) -> std::result::Result<T, E>,
        E: From<diesel::result::Error>,
    {
        match self {
            #[cfg(feature = "sqlite")]
            AnyConnection::Sqlite(sqlite) => {
                use diesel::connection::{AnsiTransactionManager, TransactionManager};
                let depth = AnsiTransactionManager::transaction_manager_status_mut(sqlite)
                    .transaction_depth()?;
                if depth.is_some() {
                    return Connection::transaction(self, f);
                }
                AnsiTransactionManager::begin_transaction_sql(sqlite, "BEGIN IMMEDIATE")?;
                type Manager = <AnyConnection as Connection>::TransactionManager;
                match f(self) {
                    Ok(value) => {
                        Manager::commit_transaction(self)?;
                        Ok(value)
                    }
                    Err(error) => {
                        Manager::rollback_transaction(self)?;
                        Err(error)
                    }
                }
            }
            #[cfg(feature = "postgres")]
            AnyConnection::Postgres(_) => Connection::transaction(self, f),
            #[cfg(feature = "mysql")]
            AnyConnection::Mysql(mysql) => {
                // `BEGIN` and `COMMIT` prepared: one round trip each, where
                // diesel's take three (`mysql::begin`).
                if super::mysql::in_transaction(mysql)? {
                    return Connection::transaction(self, f);
                }
                super::mysql::begin(mysql)?;
                use diesel::connection::TransactionManager;
                type Manager = <AnyConnection as Connection>::TransactionManager;
                match f(self) {
                    Ok(value) => {
                        // Irrefutable in a build of the MySQL backend alone.
                        #[allow(irrefutable_let_patterns)]
                        if let AnyConnection::Mysql(mysql) = self {
                            super::mysql::commit(mysql)?;
                        }
                        Ok(value)
                    }
                    Err(error) => {
                        Manager::rollback_transaction(self)?;
                        Err(error)
                    }
                }
            }
        }
    }
}

static STATEMENTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Counts every statement solidq's connections finish (transaction control
/// included): one round trip each on PostgreSQL.
struct StatementCounter;

impl diesel::connection::Instrumentation for StatementCounter {
    fn on_connection_event(&mut self, event: diesel::connection::InstrumentationEvent<'_>) {
        if let diesel::connection::InstrumentationEvent::FinishQuery { .. } = event {
            STATEMENTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// How many SQL statements solidq's own connections have run in this
/// process (BEGIN and COMMIT included; not the caller's connections), for
/// measuring the load solidq puts on the database.
pub fn statements_executed() -> u64 {
    STATEMENTS.load(std::sync::atomic::Ordering::Relaxed)
}

/// How solidq sets up an SQLite connection (PostgreSQL needs nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SqliteSettings {
    /// How long a statement waits for the write lock.
    pub busy_timeout: Duration,
    /// The `synchronous` pragma.
    pub synchronous: SqliteSynchronous,
}

impl Default for SqliteSettings {
    fn default() -> Self {
        SqliteSettings {
            busy_timeout: DEFAULT_SQLITE_BUSY_TIMEOUT,
            synchronous: DEFAULT_SQLITE_SYNCHRONOUS,
        }
    }
}

/// Whose connection it is, which decides who waits for a busy lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    /// solidq's own: SQLite does not wait (busy timeout 0); the store
    /// retries the whole operation with short pauses (`Store::with_conn`).
    /// Its statements are counted ([`statements_executed`]).
    Solidq,
    /// The caller's: solidq cannot retry the caller's transaction, so
    /// SQLite's own busy handler waits up to the busy timeout.
    Caller,
}

impl DatabaseUrl {
    /// Opens one of solidq's own connections, configured as every pooled
    /// connection is.
    pub(crate) fn establish(&self, sqlite: SqliteSettings) -> Result<AnyConnection> {
        self.open(sqlite, Owner::Solidq)
    }

    /// Opens a connection for the caller, with the same pragmas as
    /// solidq's own but a busy timeout that stays (see [`Owner::Caller`]).
    pub(crate) fn establish_for_caller(&self, sqlite: SqliteSettings) -> Result<AnyConnection> {
        self.open(sqlite, Owner::Caller)
    }

    #[cfg_attr(not(feature = "sqlite"), allow(unused_variables))]
    fn open(&self, sqlite: SqliteSettings, owner: Owner) -> Result<AnyConnection> {
        let connect_error = |source: diesel::ConnectionError| Error::Connect {
            url: self.redacted(),
            source: Box::new(source),
        };
        match self.sqlite_path() {
            #[cfg(feature = "mysql")]
            None if self.backend() == crate::types::Backend::Mysql => {
                let mut conn =
                    MysqlConnection::establish(&self.conninfo()).map_err(connect_error)?;
                conn.batch_execute(MYSQL_SESSION)
                    .map_err(|source| Error::Connect {
                        url: self.redacted(),
                        source: Box::new(diesel::ConnectionError::CouldntSetupConfiguration(
                            source,
                        )),
                    })?;
                if owner == Owner::Solidq {
                    // MySQL: "Unknown system variable" (1193), nothing set.
                    let _ = conn.batch_execute(MARIADB_SESSION);
                }
                if owner == Owner::Solidq {
                    conn.set_instrumentation(StatementCounter);
                }
                Ok(AnyConnection::Mysql(conn))
            }
            #[cfg(feature = "postgres")]
            None => {
                let mut conn = PgConnection::establish(&self.conninfo()).map_err(connect_error)?;
                if !self.prepared_statements() {
                    // Unnamed statements, each sent in one round trip: a
                    // pooler in transaction mode (see `types/pooler.rs`).
                    conn.set_prepared_statement_cache_size(diesel::connection::CacheSize::Disabled);
                }
                // Behind a transaction-mode pooler a session's settings
                // would stick to a server connection other clients share.
                if owner == Owner::Solidq && self.prepared_statements() {
                    conn.batch_execute(POSTGRES_SESSION)
                        .map_err(|source| Error::Connect {
                            url: self.redacted(),
                            source: Box::new(diesel::ConnectionError::CouldntSetupConfiguration(
                                source,
                            )),
                        })?;
                }
                if owner == Owner::Solidq {
                    conn.set_instrumentation(StatementCounter);
                }
                Ok(AnyConnection::Postgres(conn))
            }
            #[cfg(feature = "sqlite")]
            Some(path) => {
                let path = path.to_string_lossy();
                let mut conn = SqliteConnection::establish(&path).map_err(connect_error)?;
                if owner == Owner::Solidq {
                    conn.set_instrumentation(StatementCounter);
                }
                configure_sqlite(&mut conn, sqlite, owner).map_err(|source| Error::Connect {
                    url: self.redacted(),
                    source: Box::new(diesel::ConnectionError::CouldntSetupConfiguration(source)),
                })?;
                Ok(AnyConnection::Sqlite(conn))
            }
            #[allow(unreachable_patterns)]
            _ => unreachable!("DatabaseUrl::parse refuses a backend left out of the build"),
        }
    }
}

/// What every one of solidq's own PostgreSQL sessions sets on the server,
/// the server's half of [`crate::config::LIBPQ_DEFAULTS`]: when a worker host is
/// cut off, its sessions' backends would otherwise wait for it until the
/// server's TCP keepalive gives up (two hours by the kernel's default),
/// each holding a connection slot and, if the cut came inside a
/// transaction, its locks (a claim's lock on the process row keeps the
/// prune from releasing that process's jobs). With keepalives the server
/// notices a silent client in about 11 s. A transaction left idle for 10 s
/// (solidq's own last milliseconds: its process was frozen, SIGSTOP or a
/// stalled VM, in the middle of one) is ended, so its locks hold up the
/// prune of that process for 10 s, not until it thaws. The caller's connections
/// are left as the caller's server configures them, and so are sessions
/// through a transaction-mode pooler (`prepared_statements=false`), where
/// a `SET` would stick to a server connection other clients share: set
/// these on the server or the role there.
#[cfg(feature = "postgres")]
const POSTGRES_SESSION: &str = "SET tcp_keepalives_idle = 5;
     SET tcp_keepalives_interval = 2;
     SET tcp_keepalives_count = 3;
     SET tcp_user_timeout = 10000;
     SET idle_in_transaction_session_timeout = '10s';";

/// What every MySQL session solidq opens (the caller's too) sets:
/// * `READ COMMITTED`: InnoDB's default `REPEATABLE READ` takes gap and
///   next-key locks on the ranges a statement scans, which is where
///   SolidQueue's MySQL deadlocks between inserts into ready executions and
///   claims came from (rails/solid_queue#229, #240); under `READ
///   COMMITTED` a statement locks the rows it changes and little else.
/// * a strict SQL mode of our own, whatever the server's: a value too long
///   for its column is an error, never silently cut, and `||` means OR and
///   `"` quotes a string as the statements here expect.
/// * `innodb_lock_wait_timeout = 5`: a lock held by a frozen process
///   (SIGSTOP) fails the waiting statement in 5 s instead of 50; the store
///   retries it (error 1205) within its budget, with the transaction
///   rolled back.
/// * UTC (diesel sets the time zone too): `DATETIME` holds UTC.
///
/// And, on MariaDB, [`MARIADB_SESSION`].
#[cfg(feature = "mysql")]
const MYSQL_SESSION: &str = "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED;
     SET SESSION sql_mode = 'STRICT_ALL_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION';
     SET SESSION innodb_lock_wait_timeout = 5;
     SET time_zone = '+00:00';";

/// MariaDB (10.3 and later) ends a session whose transaction stayed idle
/// for 10 s, as PostgreSQL's `idle_in_transaction_session_timeout` does: a
/// process frozen in the middle of a transaction would otherwise hold its
/// row locks, and keep a prune from releasing its claims, until it thaws
/// (`innodb_lock_wait_timeout` only fails the waiters). MySQL has no such
/// setting and refuses the name; that refusal is ignored.
#[cfg(feature = "mysql")]
const MARIADB_SESSION: &str = "SET SESSION idle_transaction_timeout = 10";

/// The pragmas every SQLite connection gets. `busy_timeout` comes first so
/// the switch to WAL itself waits for a concurrent opener instead of
/// failing. On solidq's own connections it then goes to 0: SQLite's own
/// busy handler sleeps 1 ms, then 2, 5, 10…, however briefly the lock is
/// held (our write transactions hold it for a fraction of a millisecond),
/// which halved the throughput of two worker processes on one file. A taken
/// lock there fails at once and the store retries with pauses that start at
/// 50 µs (see `Store::with_conn`), for up to the configured busy timeout.
/// A caller's connection keeps the busy timeout: nobody else could retry
/// its transactions.
#[cfg(feature = "sqlite")]
fn configure_sqlite(
    conn: &mut SqliteConnection,
    settings: SqliteSettings,
    owner: Owner,
) -> diesel::QueryResult<()> {
    let pragmas = format!(
        "PRAGMA busy_timeout = {};
         PRAGMA journal_mode = WAL;
         PRAGMA synchronous = {};
         PRAGMA foreign_keys = ON;
         PRAGMA temp_store = MEMORY;",
        settings.busy_timeout.as_millis(),
        settings.synchronous.as_str().to_uppercase(),
    );
    // Switching a new file to WAL takes its exclusive lock. Two openers
    // that both read it first (a pool filling up, processes starting at
    // once) collide, and SQLite reports BUSY at once rather than waiting
    // (the busy handler would deadlock them): try again within the busy
    // timeout. Once the file is in WAL the switch changes nothing.
    let started = std::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(1);
    loop {
        match conn.batch_execute(&pragmas) {
            Ok(()) => break,
            Err(diesel::result::Error::DatabaseError(_, info))
                if info.message().contains("database is locked")
                    && started.elapsed() < settings.busy_timeout =>
            {
                std::thread::sleep(pause.mul_f64(0.5 + fastrand::f64()));
                pause = (pause * 2).min(std::time::Duration::from_millis(50));
            }
            Err(error) => return Err(error),
        }
    }
    if owner == Owner::Solidq {
        conn.batch_execute("PRAGMA busy_timeout = 0;")?;
    }
    Ok(())
}

/// Sets up the connections of the caller's own r2d2 pool (diesel's
/// `r2d2::Pool<ConnectionManager<_>>`) as solidq sets up its own, so that
/// transactions on them that enqueue wait for SQLite's write lock instead
/// of failing with `database is locked`: on SQLite the pragmas of
/// [`Queue::open_connection`](crate::Queue::open_connection) (WAL, the
/// queue's `synchronous` and busy timeout, foreign keys, in-memory temp
/// store); on PostgreSQL nothing. Get one from
/// [`Queue::connection_customizer`](crate::Queue::connection_customizer).
///
/// ```no_run
/// use diesel::r2d2::{ConnectionManager, Pool};
/// use diesel::SqliteConnection;
///
/// let queue = solidq::Queue::connect("sqlite://app.sqlite3")?;
/// let pool = Pool::builder()
///     .connection_customizer(Box::new(queue.connection_customizer()))
///     .build(ConnectionManager::<SqliteConnection>::new("app.sqlite3"))
///     .expect("pool");
/// # Ok::<(), solidq::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ConnectionCustomizer {
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    sqlite: SqliteSettings,
}

impl ConnectionCustomizer {
    pub(crate) fn new(sqlite: SqliteSettings) -> ConnectionCustomizer {
        ConnectionCustomizer { sqlite }
    }
}

#[cfg(feature = "sqlite")]
impl r2d2::CustomizeConnection<SqliteConnection, diesel::r2d2::Error> for ConnectionCustomizer {
    fn on_acquire(
        &self,
        conn: &mut SqliteConnection,
    ) -> std::result::Result<(), diesel::r2d2::Error> {
        configure_sqlite(conn, self.sqlite, Owner::Caller).map_err(diesel::r2d2::Error::QueryError)
    }
}

#[cfg(feature = "postgres")]
impl r2d2::CustomizeConnection<PgConnection, diesel::r2d2::Error> for ConnectionCustomizer {}

/// MySQL: the session settings of solidq's own connections (`READ
/// COMMITTED` above all; see the README's MySQL section).
#[cfg(feature = "mysql")]
impl r2d2::CustomizeConnection<MysqlConnection, diesel::r2d2::Error> for ConnectionCustomizer {
    fn on_acquire(
        &self,
        conn: &mut MysqlConnection,
    ) -> std::result::Result<(), diesel::r2d2::Error> {
        conn.batch_execute(MYSQL_SESSION)
            .map_err(diesel::r2d2::Error::QueryError)
    }
}

impl r2d2::CustomizeConnection<AnyConnection, diesel::r2d2::Error> for ConnectionCustomizer {
    fn on_acquire(&self, conn: &mut AnyConnection) -> std::result::Result<(), diesel::r2d2::Error> {
        match conn {
            #[cfg(feature = "sqlite")]
            AnyConnection::Sqlite(conn) => self.on_acquire(conn),
            #[cfg(feature = "postgres")]
            AnyConnection::Postgres(_) => Ok(()),
            #[cfg(feature = "mysql")]
            AnyConnection::Mysql(conn) => self.on_acquire(conn),
        }
    }
}

/// A pooled connection: the connection, and whether an error showed it is
/// dead (the server closed it), so the pool drops it instead of handing it
/// out again.
pub(crate) struct PoolConn {
    pub(crate) conn: AnyConnection,
    pub(crate) broken: bool,
    /// When this connection was last known to work (opened or validated).
    pub(crate) verified_at: std::time::Instant,
}

impl PoolConn {
    /// Whether this connection still works and its server still takes
    /// writes: on PostgreSQL a server in recovery (a standby, or an old
    /// primary come back as one after a failover) answers queries but
    /// refuses every write, so a connection to it is as useless to solidq
    /// as a dead one.
    pub(crate) fn check(&mut self) -> Result<()> {
        match &mut self.conn {
            #[cfg(feature = "postgres")]
            AnyConnection::Postgres(conn) => {
                use diesel::RunQueryDsl;
                #[derive(diesel::QueryableByName)]
                struct Recovery {
                    #[diesel(sql_type = diesel::sql_types::Bool)]
                    in_recovery: bool,
                }
                let row: Recovery =
                    diesel::sql_query("SELECT pg_catalog.pg_is_in_recovery() AS in_recovery")
                        .get_result(conn)
                        .map_err(Error::db("connection_check"))?;
                if row.in_recovery {
                    return Err(Error::Database {
                        operation: "connection_check",
                        source: Box::new(diesel::result::Error::DatabaseError(
                            diesel::result::DatabaseErrorKind::ReadOnlyTransaction,
                            Box::new("the server is in recovery (a standby)".to_string()),
                        )),
                    });
                }
                Ok(())
            }
            #[cfg(feature = "sqlite")]
            AnyConnection::Sqlite(conn) => conn
                .batch_execute("SELECT 1")
                .map_err(Error::db("connection_check")),
            #[cfg(feature = "mysql")]
            AnyConnection::Mysql(conn) => conn
                .batch_execute("SELECT 1")
                .map_err(Error::db("connection_check")),
        }
    }
}

/// r2d2 manager that opens the backend the URL names and applies the SQLite
/// pragmas to each new connection.
pub(crate) struct Manager {
    pub(crate) url: DatabaseUrl,
    pub(crate) sqlite: SqliteSettings,
}

impl r2d2::ManageConnection for Manager {
    type Connection = PoolConn;
    type Error = Error;

    fn connect(&self) -> Result<PoolConn> {
        Ok(PoolConn {
            conn: self.url.establish(self.sqlite)?,
            broken: false,
            verified_at: std::time::Instant::now(),
        })
    }

    fn is_valid(&self, conn: &mut PoolConn) -> Result<()> {
        conn.check()
    }

    fn has_broken(&self, conn: &mut PoolConn) -> bool {
        use diesel::connection::TransactionManager;
        // A connection returned in the middle of a transaction (a panic
        // inside one) must not be reused either.
        conn.broken
            || <AnyConnection as Connection>::TransactionManager::transaction_manager_status_mut(
                &mut conn.conn,
            )
            .transaction_depth()
            .map_or(true, |depth| depth.is_some())
    }
}

#[cfg(all(test, feature = "sqlite"))]
mod tests {
    use diesel::sql_types::Integer;
    use diesel::{QueryableByName, RunQueryDsl};

    use super::*;
    use crate::store::{PoolOptions, Store};

    #[derive(QueryableByName)]
    struct Pragma {
        #[diesel(sql_type = Integer)]
        v: i32,
    }

    /// (synchronous, busy_timeout) of an SQLite connection.
    fn pragmas(conn: &mut AnyConnection) -> (i32, i32) {
        #[allow(irrefutable_let_patterns)]
        let AnyConnection::Sqlite(conn) = conn else {
            panic!("an SQLite connection");
        };
        let read = |conn: &mut SqliteConnection, pragma: &str, column: &str| {
            diesel::sql_query(format!("SELECT {column} AS v FROM pragma_{pragma}"))
                .get_result::<Pragma>(conn)
                .unwrap()
                .v
        };
        (
            read(conn, "synchronous", "synchronous"),
            read(conn, "busy_timeout", "timeout"),
        )
    }

    #[test]
    fn every_sqlite_connection_solidq_opens_has_the_configured_synchronous() {
        let dir = tempfile::tempdir().unwrap();
        let url = DatabaseUrl::parse(&dir.path().join("t.sqlite3").display().to_string()).unwrap();
        for synchronous in SqliteSynchronous::ALL {
            let sqlite = SqliteSettings {
                busy_timeout: Duration::from_millis(1234),
                synchronous,
            };
            let store = Store::connect(
                &url,
                &PoolOptions {
                    size: 3,
                    timeout: Duration::from_secs(5),
                    sqlite,
                },
            )
            .unwrap();
            let level = synchronous.pragma_level();
            // Three at once, so the pool opens three.
            let mut pooled: Vec<_> = (0..3).map(|_| store.conn().unwrap()).collect();
            for conn in &mut pooled {
                let conn: &mut PoolConn = conn;
                // solidq's own wait nothing: the store retries.
                assert_eq!(pragmas(&mut conn.conn), (level, 0), "pooled, {synchronous}");
            }
            drop(pooled);
            let via_store = store.with_conn("test", |c| Ok(pragmas(c))).unwrap();
            assert_eq!(via_store, (level, 0), "with_conn, {synchronous}");
            assert_eq!(
                pragmas(&mut store.dedicated_connection().unwrap()),
                (level, 0),
                "dedicated, {synchronous}"
            );
            // The caller's waits: nobody could retry its transaction.
            assert_eq!(
                pragmas(&mut store.caller_connection().unwrap()),
                (level, 1234),
                "caller's, {synchronous}"
            );
        }
    }
}
