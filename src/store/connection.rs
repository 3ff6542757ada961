//! Connections: how a connection is set up for the backend its
//! [`DatabaseUrl`] names, and the r2d2 pool manager that builds them.

use std::time::Duration;

use diesel::connection::SimpleConnection;
use diesel::{Connection, PgConnection, SqliteConnection};

use crate::types::{DatabaseUrl, Error, Result};

/// One connection to either backend. Shared (backend-neutral) queries run on
/// the enum itself; backend-only SQL matches on the variant. Only `store/`
/// looks inside.
#[derive(diesel::MultiConnection)]
pub enum AnyConnection {
    /// A PostgreSQL connection.
    Postgres(PgConnection),
    /// An SQLite connection (WAL, busy timeout, foreign keys on).
    Sqlite(SqliteConnection),
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

impl DatabaseUrl {
    /// Opens one connection, configured as every pooled connection is.
    pub(crate) fn establish(&self, sqlite_busy_timeout: Duration) -> Result<AnyConnection> {
        let connect_error = |source| Error::Connect {
            url: self.redacted(),
            source,
        };
        match self.sqlite_path() {
            None => {
                let mut conn = PgConnection::establish(self.expose()).map_err(connect_error)?;
                conn.set_instrumentation(StatementCounter);
                Ok(AnyConnection::Postgres(conn))
            }
            Some(path) => {
                let path = path.to_string_lossy();
                let mut conn = SqliteConnection::establish(&path).map_err(connect_error)?;
                conn.set_instrumentation(StatementCounter);
                configure_sqlite(&mut conn, sqlite_busy_timeout).map_err(|source| {
                    Error::Connect {
                        url: self.redacted(),
                        source: diesel::ConnectionError::CouldntSetupConfiguration(source),
                    }
                })?;
                Ok(AnyConnection::Sqlite(conn))
            }
        }
    }
}

/// The pragmas every SQLite connection gets. `busy_timeout` comes first so
/// the switch to WAL itself waits for a concurrent opener instead of
/// failing; then it goes to 0. SQLite's own busy handler sleeps 1 ms, then
/// 2, 5, 10…, however briefly the lock is held (our write transactions hold
/// it for a fraction of a millisecond), which halved the throughput of two
/// worker processes on one file. A taken lock now fails at once and the
/// store retries with pauses that start at 50 µs (see `Store::with_conn`),
/// for up to the configured busy timeout.
fn configure_sqlite(
    conn: &mut SqliteConnection,
    busy_timeout: Duration,
) -> diesel::QueryResult<()> {
    conn.batch_execute(&format!(
        "PRAGMA busy_timeout = {};
         PRAGMA journal_mode = WAL;
         PRAGMA synchronous = NORMAL;
         PRAGMA foreign_keys = ON;
         PRAGMA temp_store = MEMORY;
         PRAGMA busy_timeout = 0;",
        busy_timeout.as_millis()
    ))
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

/// r2d2 manager that opens the backend the URL names and applies the SQLite
/// pragmas to each new connection.
pub(crate) struct Manager {
    pub(crate) url: DatabaseUrl,
    pub(crate) sqlite_busy_timeout: Duration,
}

impl r2d2::ManageConnection for Manager {
    type Connection = PoolConn;
    type Error = Error;

    fn connect(&self) -> Result<PoolConn> {
        Ok(PoolConn {
            conn: self.url.establish(self.sqlite_busy_timeout)?,
            broken: false,
            verified_at: std::time::Instant::now(),
        })
    }

    fn is_valid(&self, conn: &mut PoolConn) -> Result<()> {
        conn.conn
            .batch_execute("SELECT 1")
            .map_err(Error::db("connection_check"))
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
