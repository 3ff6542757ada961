//! Connections: which backend a URL names, how a connection is set up, and the
//! r2d2 pool manager that builds them.
//!
//! diesel's own `MultiConnection::establish` tries every backend in turn, so a
//! mistyped `postgres://` URL would silently open an SQLite file of that name.
//! [`DatabaseUrl`] decides the backend from the scheme instead, and
//! [`Manager`] opens exactly that backend.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use diesel::connection::SimpleConnection;
use diesel::{Connection, PgConnection, SqliteConnection};

use crate::error::{Error, Result};

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

/// The backend a [`DatabaseUrl`] names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    /// PostgreSQL, the fleet backend.
    Postgres,
    /// SQLite, the embedded default.
    Sqlite,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Postgres => "postgres",
            Backend::Sqlite => "sqlite",
        })
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

/// How long an SQLite connection waits for the write lock before reporting
/// `database is locked` (which solidq then retries). Defaults to 5 s.
pub const DEFAULT_SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// A parsed database URL.
///
/// * `postgres://…` or `postgresql://…`: PostgreSQL; passed to libpq as is, so
///   every libpq parameter works (`?options=-csearch_path%3Dmyschema` puts the
///   tables in another schema).
/// * `sqlite://path`, `sqlite:path`, or a plain file path: SQLite. The file
///   is created if missing. `sqlite:///abs/path` is an absolute path.
///
/// `Display` and `Debug` never show the password.
#[derive(Clone, PartialEq, Eq)]
pub struct DatabaseUrl {
    raw: String,
    target: Target,
}

#[derive(Clone, PartialEq, Eq)]
enum Target {
    Postgres,
    Sqlite(PathBuf),
}

impl DatabaseUrl {
    /// Parses `url`, deciding its backend from the scheme.
    pub fn parse(url: &str) -> Result<DatabaseUrl> {
        let trimmed = url.trim();
        let invalid = |reason: &str| Error::InvalidDatabaseUrl {
            url: redact(trimmed),
            reason: reason.to_string(),
        };
        if trimmed.is_empty() {
            return Err(invalid("empty"));
        }
        let target = if let Some(rest) = trimmed
            .strip_prefix("postgres://")
            .or_else(|| trimmed.strip_prefix("postgresql://"))
        {
            if rest.is_empty() {
                return Err(invalid("no host or database after the scheme"));
            }
            Target::Postgres
        } else if let Some(path) = trimmed
            .strip_prefix("sqlite://")
            .or_else(|| trimmed.strip_prefix("sqlite:"))
        {
            sqlite_target(path).map_err(|reason| invalid(&reason))?
        } else if let Some((scheme, _)) = trimmed.split_once("://") {
            return Err(invalid(&format!(
                "unsupported scheme {scheme:?}; use postgres://…, sqlite://path or a file path"
            )));
        } else {
            sqlite_target(trimmed).map_err(|reason| invalid(&reason))?
        };
        Ok(DatabaseUrl {
            raw: trimmed.to_string(),
            target,
        })
    }

    /// The backend this URL names.
    pub fn backend(&self) -> Backend {
        match self.target {
            Target::Postgres => Backend::Postgres,
            Target::Sqlite(_) => Backend::Sqlite,
        }
    }

    /// The URL exactly as given, password included: pass it to child
    /// processes, never to logs.
    pub fn expose(&self) -> &str {
        &self.raw
    }

    /// The URL with any password replaced by `***`.
    pub fn redacted(&self) -> String {
        redact(&self.raw)
    }

    /// Opens one connection, configured as every pooled connection is.
    pub(crate) fn establish(&self, sqlite_busy_timeout: Duration) -> Result<AnyConnection> {
        let connect_error = |source| Error::Connect {
            url: self.redacted(),
            source,
        };
        match &self.target {
            Target::Postgres => {
                let mut conn = PgConnection::establish(&self.raw).map_err(connect_error)?;
                conn.set_instrumentation(StatementCounter);
                Ok(AnyConnection::Postgres(conn))
            }
            Target::Sqlite(path) => {
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

fn sqlite_target(path: &str) -> std::result::Result<Target, String> {
    if path.is_empty() {
        return Err("no file path".into());
    }
    if path == ":memory:" || path.contains("mode=memory") {
        return Err(
            "in-memory SQLite cannot be shared by a pool or by several processes; use a file"
                .into(),
        );
    }
    Ok(Target::Sqlite(PathBuf::from(path)))
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

/// Replaces the password of a `scheme://user:password@host` URL (and any
/// `password=` query parameter) with `***`.
pub(crate) fn redact(url: &str) -> String {
    let mut out = match url.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, tail) = match rest.find(['/', '?']) {
                Some(i) => rest.split_at(i),
                None => (rest, ""),
            };
            match authority.rsplit_once('@') {
                Some((userinfo, host)) => match userinfo.split_once(':') {
                    Some((user, _password)) => format!("{scheme}://{user}:***@{host}{tail}"),
                    None => url.to_string(),
                },
                None => url.to_string(),
            }
        }
        None => url.to_string(),
    };
    if let Some(start) = out.find("password=") {
        let value_start = start + "password=".len();
        let value_end = out[value_start..]
            .find(['&', ' '])
            .map_or(out.len(), |i| value_start + i);
        out.replace_range(value_start..value_end, "***");
    }
    out
}

impl fmt::Display for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DatabaseUrl({:?})", self.redacted())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheme_decides_the_backend() {
        let pg = DatabaseUrl::parse("postgres://u:secret@localhost/db").unwrap();
        assert_eq!(pg.backend(), Backend::Postgres);
        assert_eq!(pg.to_string(), "postgres://u:***@localhost/db");
        assert!(!format!("{pg:?}").contains("secret"));
        for url in [
            "sqlite://jobs.sqlite3",
            "sqlite:jobs.sqlite3",
            "jobs.sqlite3",
        ] {
            assert_eq!(
                DatabaseUrl::parse(url).unwrap().backend(),
                Backend::Sqlite,
                "{url}"
            );
        }
        match DatabaseUrl::parse("sqlite:///tmp/x.db").unwrap().target {
            Target::Sqlite(p) => assert_eq!(p, PathBuf::from("/tmp/x.db")),
            Target::Postgres => panic!("wrong backend"),
        }
    }

    #[test]
    fn bad_urls_are_rejected_with_the_url_redacted() {
        for url in [
            "",
            "mysql://u:pw@h/db",
            "sqlite://",
            ":memory:",
            "postgres://",
        ] {
            let err = DatabaseUrl::parse(url).unwrap_err();
            assert!(
                matches!(err, Error::InvalidDatabaseUrl { .. }),
                "{url}: {err}"
            );
            assert!(!err.to_string().contains(":pw@"), "{err}");
        }
    }

    #[test]
    fn redact_handles_query_passwords_and_urls_without_userinfo() {
        assert_eq!(
            redact("postgres://h/db?password=x&a=b"),
            "postgres://h/db?password=***&a=b"
        );
        assert_eq!(redact("postgres://user@h/db"), "postgres://user@h/db");
        assert_eq!(redact("jobs.sqlite3"), "jobs.sqlite3");
    }
}
