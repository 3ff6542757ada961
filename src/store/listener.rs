//! Wake-ups across processes, so an idle worker hears about new jobs in
//! milliseconds without polling the job tables.
//!
//! * PostgreSQL: every statement that makes jobs ready (enqueue, dispatch,
//!   release, retry, resume) sends `NOTIFY solidq, '<schema>:<queue>'` in its
//!   own transaction, once per queue. A [`Listener`] holds a dedicated libpq
//!   connection (diesel does not expose its socket) that `LISTEN`s and
//!   blocks in `poll()` on the socket: an idle worker costs the server
//!   nothing. Installations in other schemas of the same database are told
//!   apart by the payload's schema.
//! * SQLite: no server to notify. A dedicated connection reads
//!   `PRAGMA data_version` every few milliseconds: a counter in shared
//!   memory that changes when another connection commits. No table is read
//!   until it changes.
//! * MySQL: no notifications either, and no change counter. A dedicated
//!   connection reads a signature of the ready jobs every
//!   [`MYSQL_WATCH_INTERVAL`]: the highest ready job id, the first ready
//!   job in claim order, and the number of paused queues — three index
//!   probes, no lock, no transaction. It changes when a job becomes ready
//!   (enqueued: a higher id; retried, released or dispatched while the
//!   table was empty or ahead of the others: a new first job), when the
//!   first job is claimed, and when a queue is paused or resumed. A job
//!   made ready behind others that nobody could claim (paused queues,
//!   queues no idle worker serves) may not change it: the poller's
//!   fallback poll finds that one.

#[cfg(feature = "postgres")]
use std::ffi::{CStr, CString};
#[cfg(feature = "postgres")]
use std::ptr::NonNull;
use std::time::Duration;
#[cfg(feature = "sqlite")]
use std::time::Instant;

#[cfg(feature = "sqlite")]
use diesel::connection::SimpleConnection;
#[cfg(feature = "postgres")]
use diesel::result::{DatabaseErrorKind, Error as DieselError};
#[cfg(feature = "sqlite")]
use diesel::{QueryableByName, RunQueryDsl, SqliteConnection};

#[cfg(feature = "postgres")]
use super::DatabaseUrl;
use super::{Backend, Store};
use crate::types::{Error, Result};

/// The PostgreSQL notification channel (the payload says which schema and
/// queue).
#[cfg(feature = "postgres")]
pub(crate) const CHANNEL: &str = "solidq";

/// What a wait heard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Heard {
    /// Nothing before the timeout.
    Nothing,
    /// Jobs became ready on these queues.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    Queues(Vec<String>),
    /// The database changed; jobs may be ready (SQLite and MySQL say no
    /// more).
    #[cfg_attr(not(any(feature = "sqlite", feature = "mysql")), allow(dead_code))]
    Changes,
}

/// How often a worker asks which of its running jobs were asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CancelChecks {
    /// The least time between two checks prompted by what the listener
    /// heard: zero where it hears cancellations themselves (PostgreSQL's
    /// notifications), half a second where it hears any change (SQLite's
    /// counter, MySQL's ready jobs) and most changes are not one.
    pub min_gap: Duration,
    /// The most time between two checks while jobs run: 10 s where
    /// cancellations are heard (the check is for a lost notification), 1 s
    /// on MySQL, whose change check sees new ready jobs only.
    pub fallback: Duration,
}

impl Store {
    /// This backend's [`CancelChecks`].
    pub(crate) fn cancel_checks(&self) -> CancelChecks {
        const HEARD: Duration = Duration::from_secs(10);
        match self.backend() {
            Backend::Postgres => CancelChecks {
                min_gap: Duration::ZERO,
                fallback: HEARD,
            },
            Backend::Sqlite => CancelChecks {
                min_gap: Duration::from_millis(500),
                fallback: HEARD,
            },
            Backend::Mysql => CancelChecks {
                min_gap: Duration::from_millis(500),
                fallback: Duration::from_secs(1),
            },
        }
    }
}

/// Waits for signs of new ready jobs.
pub(crate) trait Listener: Send {
    /// Blocks up to `timeout`. An error means the listener is broken and
    /// should be dropped and reopened.
    fn wait(&mut self, timeout: Duration) -> Result<Heard>;
}

impl Store {
    /// Opens a listener on this database; `sqlite_interval` is how often
    /// SQLite's change counter is read.
    pub(crate) fn listener(&self, sqlite_interval: Duration) -> Result<Box<dyn Listener>> {
        match self.backend() {
            #[cfg(feature = "postgres")]
            Backend::Postgres => Ok(Box::new(PgListener::connect(self.url())?)),
            #[cfg(feature = "sqlite")]
            Backend::Sqlite => Ok(Box::new(SqliteWatcher::open(self, sqlite_interval)?)),
            #[cfg(feature = "mysql")]
            Backend::Mysql => Ok(Box::new(MysqlWatcher::open(self)?)),
            #[allow(unreachable_patterns)]
            _ => {
                let _ = sqlite_interval;
                unreachable!("DatabaseUrl::parse refuses a backend left out of the build")
            }
        }
    }
}

#[cfg(feature = "postgres")]
struct PgListener {
    conn: NonNull<pq_sys::PGconn>,
    /// `"<schema>:"`: payloads for this installation start with it.
    prefix: String,
}

// SAFETY: the connection is owned by this value and used by one thread at a
// time (`&mut self`); libpq connections may move between threads.
#[cfg(feature = "postgres")]
unsafe impl Send for PgListener {}

#[cfg(feature = "postgres")]
fn lost(message: String) -> Error {
    Error::Database {
        operation: "listen",
        source: Box::new(DieselError::DatabaseError(
            DatabaseErrorKind::ClosedConnection,
            Box::new(message),
        )),
    }
}

#[cfg(feature = "postgres")]
impl PgListener {
    fn connect(url: &DatabaseUrl) -> Result<PgListener> {
        let listen = url.listen_conninfo().unwrap_or_default();
        let conninfo = CString::new(listen).map_err(|_| Error::InvalidDatabaseUrl {
            url: url.redacted(),
            reason: "contains a NUL byte".into(),
        })?;
        // SAFETY: a valid C string; PQconnectdb returns an owned connection
        // (possibly in a failed state), or null when out of memory.
        let raw = unsafe { pq_sys::PQconnectdb(conninfo.as_ptr()) };
        let conn = NonNull::new(raw)
            .ok_or_else(|| lost("libpq could not allocate a connection".into()))?;
        let mut listener = PgListener {
            conn,
            prefix: String::new(),
        };
        // SAFETY: conn is a live connection owned by `listener`.
        if unsafe { pq_sys::PQstatus(conn.as_ptr()) } != pq_sys::ConnStatusType::CONNECTION_OK {
            return Err(Error::Connect {
                url: url.redacted(),
                source: listener.error_message().into(),
            });
        }
        let schema = listener.query_one("SELECT current_schema()")?;
        listener.prefix = format!("{schema}:");
        listener.query_one(&format!("LISTEN {CHANNEL}"))?;
        Ok(listener)
    }

    fn error_message(&self) -> String {
        // SAFETY: libpq returns a string owned by the connection.
        unsafe { CStr::from_ptr(pq_sys::PQerrorMessage(self.conn.as_ptr())) }
            .to_string_lossy()
            .trim()
            .to_string()
    }

    /// Runs `sql`; returns the first column of the first row, if any.
    fn query_one(&mut self, sql: &str) -> Result<String> {
        let sql = CString::new(sql).expect("static SQL has no NUL");
        // SAFETY: live connection, valid C string; the result is cleared below.
        unsafe {
            let result = pq_sys::PQexec(self.conn.as_ptr(), sql.as_ptr());
            let status = pq_sys::PQresultStatus(result);
            let ok = matches!(
                status,
                pq_sys::ExecStatusType::PGRES_COMMAND_OK | pq_sys::ExecStatusType::PGRES_TUPLES_OK
            );
            let value = if ok && pq_sys::PQntuples(result) > 0 {
                CStr::from_ptr(pq_sys::PQgetvalue(result, 0, 0))
                    .to_string_lossy()
                    .into_owned()
            } else {
                String::new()
            };
            pq_sys::PQclear(result);
            if ok {
                Ok(value)
            } else {
                Err(lost(self.error_message()))
            }
        }
    }

    /// Reads what the socket has and returns this installation's queues.
    fn drain(&mut self, queues: &mut Vec<String>) -> Result<()> {
        // SAFETY: live connection; every notification is freed with PQfreemem.
        unsafe {
            if pq_sys::PQconsumeInput(self.conn.as_ptr()) == 0 {
                return Err(lost(self.error_message()));
            }
            loop {
                let notify = pq_sys::PQnotifies(self.conn.as_ptr());
                if notify.is_null() {
                    break;
                }
                let payload = CStr::from_ptr((*notify).extra).to_string_lossy();
                if let Some(queue) = payload.strip_prefix(&self.prefix) {
                    queues.push(queue.to_string());
                }
                pq_sys::PQfreemem(notify.cast());
            }
        }
        Ok(())
    }
}

#[cfg(feature = "postgres")]
impl Listener for PgListener {
    fn wait(&mut self, timeout: Duration) -> Result<Heard> {
        let mut queues = Vec::new();
        self.drain(&mut queues)?;
        if queues.is_empty() {
            // SAFETY: live connection.
            let fd = unsafe { pq_sys::PQsocket(self.conn.as_ptr()) };
            if fd < 0 {
                return Err(lost("the listener's connection has no socket".into()));
            }
            let mut poll = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            let millis = timeout.as_millis().min(i32::MAX as u128) as i32;
            // SAFETY: one valid pollfd.
            let ready = unsafe { libc::poll(&mut poll, 1, millis) };
            if ready < 0 {
                let error = std::io::Error::last_os_error();
                if error.kind() != std::io::ErrorKind::Interrupted {
                    return Err(lost(format!("poll on the listener's socket: {error}")));
                }
            }
            if ready > 0 {
                self.drain(&mut queues)?;
            }
        }
        // SAFETY: live connection.
        if unsafe { pq_sys::PQstatus(self.conn.as_ptr()) } != pq_sys::ConnStatusType::CONNECTION_OK
        {
            return Err(lost(self.error_message()));
        }
        Ok(if queues.is_empty() {
            Heard::Nothing
        } else {
            Heard::Queues(queues)
        })
    }
}

#[cfg(feature = "postgres")]
impl Drop for PgListener {
    fn drop(&mut self) {
        // SAFETY: the connection is owned and not used afterwards.
        unsafe { pq_sys::PQfinish(self.conn.as_ptr()) }
    }
}

#[cfg(feature = "sqlite")]
struct SqliteWatcher {
    conn: SqliteConnection,
    version: i64,
    interval: Duration,
}

#[cfg(feature = "sqlite")]
#[derive(QueryableByName)]
struct DataVersion {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    data_version: i64,
}

#[cfg(feature = "sqlite")]
impl SqliteWatcher {
    fn open(store: &Store, interval: Duration) -> Result<SqliteWatcher> {
        #[allow(clippy::infallible_destructuring_match)]
        let mut conn = match store.dedicated_connection()? {
            super::AnyConnection::Sqlite(conn) => conn,
            #[allow(unreachable_patterns)]
            _ => unreachable!("the backend is SQLite"),
        };
        conn.batch_execute("PRAGMA query_only = ON")
            .map_err(Error::db("listen"))?;
        let version = read_version(&mut conn)?;
        Ok(SqliteWatcher {
            conn,
            version,
            interval: interval.max(Duration::from_millis(1)),
        })
    }
}

#[cfg(feature = "sqlite")]
fn read_version(conn: &mut SqliteConnection) -> Result<i64> {
    let row: DataVersion = diesel::sql_query("PRAGMA data_version")
        .get_result(conn)
        .map_err(Error::db("listen"))?;
    Ok(row.data_version)
}

#[cfg(feature = "sqlite")]
impl Listener for SqliteWatcher {
    fn wait(&mut self, timeout: Duration) -> Result<Heard> {
        let deadline = Instant::now() + timeout;
        loop {
            let version = read_version(&mut self.conn)?;
            if version != self.version {
                self.version = version;
                return Ok(Heard::Changes);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(Heard::Nothing);
            }
            std::thread::sleep(self.interval.min(deadline - now));
        }
    }
}

/// How often a MySQL worker reads the ready jobs' signature: the pickup
/// latency of a job enqueued by another process is about half of it.
#[cfg(feature = "mysql")]
pub(crate) const MYSQL_WATCH_INTERVAL: Duration = Duration::from_millis(50);

#[cfg(feature = "mysql")]
struct MysqlWatcher {
    conn: diesel::MysqlConnection,
    signature: Signature,
}

#[cfg(feature = "mysql")]
#[derive(diesel::QueryableByName, PartialEq, Eq)]
struct Signature {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    last: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    first: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    paused: i64,
}

#[cfg(feature = "mysql")]
impl MysqlWatcher {
    fn open(store: &Store) -> Result<MysqlWatcher> {
        let mut conn = match store.dedicated_connection()? {
            super::AnyConnection::Mysql(conn) => conn,
            #[allow(unreachable_patterns)]
            _ => unreachable!("the backend is MySQL"),
        };
        let signature = read_signature(&mut conn)?;
        Ok(MysqlWatcher { conn, signature })
    }
}

#[cfg(feature = "mysql")]
fn read_signature(conn: &mut diesel::MysqlConnection) -> Result<Signature> {
    use diesel::RunQueryDsl;
    super::Cached(diesel::sql_query(
        "SELECT CAST(COALESCE((SELECT MAX(job_id) FROM solidq_ready_executions), 0) AS SIGNED) AS last,
                CAST(COALESCE((SELECT job_id FROM solidq_ready_executions
                               ORDER BY priority, position LIMIT 1), 0) AS SIGNED) AS first,
                CAST((SELECT COUNT(*) FROM solidq_pauses) AS SIGNED) AS paused",
    ))
    .get_result(conn)
    .map_err(Error::db("listen"))
}

#[cfg(feature = "mysql")]
impl Listener for MysqlWatcher {
    fn wait(&mut self, timeout: Duration) -> Result<Heard> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let signature = read_signature(&mut self.conn)?;
            if signature != self.signature {
                self.signature = signature;
                return Ok(Heard::Changes);
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return Ok(Heard::Nothing);
            }
            std::thread::sleep(MYSQL_WATCH_INTERVAL.min(deadline - now));
        }
    }
}
