//! Connections: how a connection is set up for the backend its
//! [`DatabaseUrl`] names, and the r2d2 pool manager that builds them.

use std::time::Duration;

use diesel::connection::SimpleConnection;
use diesel::{Connection, PgConnection, SqliteConnection};

use crate::config::{DEFAULT_SQLITE_BUSY_TIMEOUT, DEFAULT_SQLITE_SYNCHRONOUS};
use crate::types::{DatabaseUrl, Error, Result, SqliteSynchronous};

/// One connection to either backend. Shared (backend-neutral) queries run on
/// the enum itself; backend-only SQL matches on the variant. Only `store/`
/// looks inside.
#[derive(diesel::MultiConnection)]
pub enum AnyConnection {
    /// A PostgreSQL connection.
    Postgres(PgConnection),
    /// An SQLite connection (WAL, `synchronous` as configured, busy
    /// timeout, foreign keys on).
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

impl DatabaseUrl {
    /// Opens one connection, configured as every pooled connection is.
    pub(crate) fn establish(&self, sqlite: SqliteSettings) -> Result<AnyConnection> {
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
                configure_sqlite(&mut conn, sqlite).map_err(|source| Error::Connect {
                    url: self.redacted(),
                    source: diesel::ConnectionError::CouldntSetupConfiguration(source),
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
    settings: SqliteSettings,
) -> diesel::QueryResult<()> {
    conn.batch_execute(&format!(
        "PRAGMA busy_timeout = {};
         PRAGMA journal_mode = WAL;
         PRAGMA synchronous = {};
         PRAGMA foreign_keys = ON;
         PRAGMA temp_store = MEMORY;
         PRAGMA busy_timeout = 0;",
        settings.busy_timeout.as_millis(),
        settings.synchronous.as_str().to_uppercase(),
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

#[cfg(test)]
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
        }
    }
}
