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
//!   `PRAGMA data_version`: a counter in shared memory that changes when
//!   another connection commits. No table is read until it changes. On
//!   Linux an inotify watch on the database's directory reports every
//!   write to the file or its WAL (every process that commits to the file
//!   runs on this host: WAL needs shared memory), and the counter is read
//!   at once and every 0.5 ms for the next 5 ms, while the commit's last
//!   frame is synced and counted; `sqlite_watch_interval` (100 ms there,
//!   10 ms elsewhere) is how often it is read when nothing was written.
//! * MySQL: no notifications either, and no change counter. A dedicated
//!   connection reads a signature every `mysql_watch_interval` (10 ms):
//!   the highest job id, the claims' counter of jobs made ready below the
//!   tail (`store::mysql::floor`), and the number of paused queues — three
//!   index probes, no lock, no transaction. It changes when a job is
//!   enqueued (a higher id; a delayed one too, which wakes workers for
//!   nothing), when one is made ready anywhere else (dispatched, retried,
//!   released, snoozed, given a slot, a dependant released: the counter),
//!   and when a queue is paused or resumed. It reads no ready row: the
//!   first ready job in claim order, which it read before, sat behind
//!   every claimed row InnoDB's purge had not removed yet, and under a
//!   transaction held open elsewhere each read walked them all (MariaDB at
//!   500 jobs/s: a third of the machine's CPU per job under a hold).
//!   Since a claim's commit no longer changes it, the poller is woken once
//!   more [`SECOND_LOOK`] after each change.

#[cfg(feature = "postgres")]
use std::ffi::CStr;
#[cfg(any(feature = "postgres", all(feature = "sqlite", target_os = "linux")))]
use std::ffi::CString;
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
    /// Opens a listener on this database; `interval` is how often SQLite's
    /// change counter or MySQL's signature is read (PostgreSQL is told).
    pub(crate) fn listener(&self, interval: Duration) -> Result<Box<dyn Listener>> {
        match self.backend() {
            #[cfg(feature = "postgres")]
            Backend::Postgres => Ok(Box::new(PgListener::connect(self.url())?)),
            #[cfg(feature = "sqlite")]
            Backend::Sqlite => Ok(Box::new(SqliteWatcher::open(self, interval)?)),
            #[cfg(feature = "mysql")]
            Backend::Mysql => Ok(Box::new(MysqlWatcher::open(self, interval)?)),
            #[allow(unreachable_patterns)]
            _ => {
                let _ = interval;
                unreachable!("DatabaseUrl::parse refuses a backend left out of the build")
            }
        }
    }
}

/// A libpq connection of its own (diesel does not expose its socket, nor
/// a way to cancel a statement from another thread).
#[cfg(feature = "postgres")]
struct RawPg {
    conn: NonNull<pq_sys::PGconn>,
}

// SAFETY: the connection is owned by this value and used by one thread at a
// time (`&mut self`); libpq connections may move between threads.
#[cfg(feature = "postgres")]
unsafe impl Send for RawPg {}

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
impl RawPg {
    /// Connects to where the URL's `LISTEN` connection goes (a session of
    /// its own: through a transaction pooler it goes to `listen_host`).
    fn connect(url: &DatabaseUrl) -> Result<RawPg> {
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
        let pg = RawPg { conn };
        // SAFETY: conn is a live connection owned by `pg`.
        if unsafe { pq_sys::PQstatus(conn.as_ptr()) } != pq_sys::ConnStatusType::CONNECTION_OK {
            return Err(Error::Connect {
                url: url.redacted(),
                source: pg.error_message().into(),
            });
        }
        Ok(pg)
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
        let sql = CString::new(sql).map_err(|_| lost("a statement with a NUL byte".into()))?;
        // SAFETY: live connection, valid C string; the result is cleared below.
        unsafe {
            let result = pq_sys::PQexec(self.conn.as_ptr(), sql.as_ptr());
            self.take(result)
        }
    }

    /// The first column of `result`'s first row, if any; clears it.
    ///
    /// # Safety
    /// `result` is null or a result of this connection not yet cleared.
    unsafe fn take(&self, result: *mut pq_sys::PGresult) -> Result<String> {
        // SAFETY: per the contract; libpq accepts a null result.
        unsafe {
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
            let error = if ok || result.is_null() {
                String::new()
            } else {
                CStr::from_ptr(pq_sys::PQresultErrorMessage(result))
                    .to_string_lossy()
                    .trim()
                    .to_string()
            };
            pq_sys::PQclear(result);
            if ok {
                Ok(value)
            } else if error.is_empty() {
                Err(lost(self.error_message()))
            } else {
                Err(lost(error))
            }
        }
    }

    /// Waits up to `timeout` for the socket to have something to read;
    /// returns whether it has.
    fn readable(&self, timeout: Duration) -> Result<bool> {
        // SAFETY: live connection.
        let fd = unsafe { pq_sys::PQsocket(self.conn.as_ptr()) };
        if fd < 0 {
            return Err(lost("the connection has no socket".into()));
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
                return Err(lost(format!("poll on the socket: {error}")));
            }
        }
        Ok(ready > 0)
    }

    /// Reads what the socket has.
    fn consume(&mut self) -> Result<()> {
        // SAFETY: live connection.
        if unsafe { pq_sys::PQconsumeInput(self.conn.as_ptr()) } == 0 {
            return Err(lost(self.error_message()));
        }
        Ok(())
    }

    fn check(&self) -> Result<()> {
        // SAFETY: live connection.
        if unsafe { pq_sys::PQstatus(self.conn.as_ptr()) } != pq_sys::ConnStatusType::CONNECTION_OK
        {
            return Err(lost(self.error_message()));
        }
        Ok(())
    }
}

#[cfg(feature = "postgres")]
impl Drop for RawPg {
    fn drop(&mut self) {
        // SAFETY: the connection is owned and not used afterwards; a
        // statement still running (a lock wait) is cancelled first, so the
        // server does not go on waiting for a client that left.
        unsafe {
            if pq_sys::PQisBusy(self.conn.as_ptr()) != 0 {
                let cancel = pq_sys::PQgetCancel(self.conn.as_ptr());
                if !cancel.is_null() {
                    let mut buf = [0 as std::ffi::c_char; 256];
                    pq_sys::PQcancel(cancel, buf.as_mut_ptr(), buf.len() as i32);
                    pq_sys::PQfreeCancel(cancel);
                }
            }
            pq_sys::PQfinish(self.conn.as_ptr())
        }
    }
}

#[cfg(feature = "postgres")]
struct PgListener {
    pg: RawPg,
    /// `"<schema>:"`: payloads for this installation start with it.
    prefix: String,
}

#[cfg(feature = "postgres")]
impl PgListener {
    fn connect(url: &DatabaseUrl) -> Result<PgListener> {
        let mut pg = RawPg::connect(url)?;
        let schema = pg.query_one("SELECT current_schema()")?;
        pg.query_one(&format!("LISTEN {CHANNEL}"))?;
        Ok(PgListener {
            pg,
            prefix: format!("{schema}:"),
        })
    }

    /// Reads what the socket has and returns this installation's queues.
    fn drain(&mut self, queues: &mut Vec<String>) -> Result<()> {
        self.pg.consume()?;
        // SAFETY: live connection; every notification is freed with PQfreemem.
        unsafe {
            loop {
                let notify = pq_sys::PQnotifies(self.pg.conn.as_ptr());
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
        if queues.is_empty() && self.pg.readable(timeout)? {
            self.drain(&mut queues)?;
        }
        self.pg.check()?;
        Ok(if queues.is_empty() {
            Heard::Nothing
        } else {
            Heard::Queues(queues)
        })
    }
}

/// Takes turns at acting on new-job notifications with the other workers
/// of the same queue list (see `worker/duty.rs`): a PostgreSQL session
/// advisory lock, waited for in line. The server grants a lock to its
/// waiters one at a time, in the order they asked, as a blocking pop
/// hands an item to one waiting client.
pub(crate) trait Duty: Send {
    /// Gets in line for the lock (the answer comes through `granted`).
    fn ask(&mut self) -> Result<()>;
    /// Waits up to `timeout` for the lock asked for; true once it is held.
    fn granted(&mut self, timeout: Duration) -> Result<bool>;
    /// Proves the holder alive: a holder idle for longer than
    /// [`DUTY_LEASE`] (a frozen or partitioned process) has its session
    /// ended by the server, which passes the lock on.
    fn ping(&mut self) -> Result<()>;
    /// Lets the lock go to the next in line.
    fn release(&mut self) -> Result<()>;
}

/// How long the server keeps the duty of a holder that sends nothing
/// (`idle_session_timeout` of the duty's session, set while it holds the
/// lock): a frozen holder hands the duty on after this.
pub(crate) const DUTY_LEASE: Duration = Duration::from_secs(3);

/// The longest one wait in line for the duty lasts before it is asked
/// again (`statement_timeout` of the duty's session). A statement waiting
/// for a lock holds a snapshot, and while it does the database keeps every
/// row deleted since it began, in every table of the database: a worker
/// waiting in line for as long as another held the duty kept vacuum from
/// removing anything, for hours in an idle fleet. Asked again each second,
/// no wait holds rows longer than that.
#[cfg(feature = "postgres")]
const DUTY_WAIT: Duration = Duration::from_secs(1);

impl Store {
    /// A duty session for the workers of queue list `queues` (its text
    /// names the lock), where the backend has one (PostgreSQL, with
    /// notifications on and `idle_session_timeout`, PostgreSQL 14 and
    /// later); `None` where every worker acts on what it hears.
    pub(crate) fn duty(&self, queues: &str) -> Result<Option<Box<dyn Duty>>> {
        match self.backend() {
            #[cfg(feature = "postgres")]
            Backend::Postgres if self.url().listens() => PgDuty::connect(self.url(), queues),
            _ => {
                let _ = queues;
                Ok(None)
            }
        }
    }
}

#[cfg(feature = "postgres")]
struct PgDuty {
    pg: RawPg,
    /// `pg_advisory_lock`'s argument: the schema and the queue list.
    key: String,
    /// A lock asked for and not yet granted.
    asked: bool,
}

#[cfg(feature = "postgres")]
impl PgDuty {
    fn connect(url: &DatabaseUrl, queues: &str) -> Result<Option<Box<dyn Duty>>> {
        let mut pg = RawPg::connect(url)?;
        let version: u32 = pg
            .query_one("SHOW server_version_num")?
            .parse()
            .unwrap_or(0);
        if version < 140_000 {
            log::info!(
                "PostgreSQL {version} has no idle_session_timeout: every worker acts on every notification"
            );
            return Ok(None);
        }
        pg.query_one(&format!(
            "SET statement_timeout = {}",
            DUTY_WAIT.as_millis()
        ))?;
        let schema = pg.query_one("SELECT current_schema()")?;
        let name = format!("solidq duty {schema} {queues}");
        let key = format!("hashtextextended('{}', 0)", name.replace('\'', "''"));
        Ok(Some(Box::new(PgDuty {
            pg,
            key,
            asked: false,
        })))
    }
}

#[cfg(feature = "postgres")]
impl Duty for PgDuty {
    fn ask(&mut self) -> Result<()> {
        // The lease applies while it holds the lock: a session idle
        // without it (its worker busy) is left alone.
        let sql = CString::new(format!(
            "SELECT pg_advisory_lock({}), set_config('idle_session_timeout', '{}', false)",
            self.key,
            DUTY_LEASE.as_millis()
        ))
        .map_err(|_| lost("a queue list with a NUL byte".into()))?;
        // SAFETY: live connection, valid C string.
        if unsafe { pq_sys::PQsendQuery(self.pg.conn.as_ptr(), sql.as_ptr()) } == 0 {
            return Err(lost(self.pg.error_message()));
        }
        self.asked = true;
        Ok(())
    }

    fn granted(&mut self, timeout: Duration) -> Result<bool> {
        if !self.asked {
            return Ok(true);
        }
        self.pg.readable(timeout)?;
        self.pg.consume()?;
        // SAFETY: live connection; every result is taken (and cleared).
        unsafe {
            if pq_sys::PQisBusy(self.pg.conn.as_ptr()) != 0 {
                self.pg.check()?;
                return Ok(false);
            }
            let mut outcome = Ok(true);
            loop {
                let result = pq_sys::PQgetResult(self.pg.conn.as_ptr());
                if result.is_null() {
                    break;
                }
                // A wait cut at `DUTY_WAIT` (query_canceled): not granted
                // yet; asked again below.
                let code = pq_sys::PQresultErrorField(result, pq_sys::PG_DIAG_SQLSTATE.into());
                let cut = !code.is_null() && CStr::from_ptr(code).to_bytes() == b"57014";
                match self.pg.take(result) {
                    Err(_) if cut => outcome = outcome.map(|_| false),
                    Err(error) => outcome = Err(error),
                    Ok(_) => {}
                }
            }
            self.asked = false;
            if let Ok(false) = outcome {
                // In line again, with a fresh snapshot.
                self.ask()?;
            }
            outcome
        }
    }

    fn ping(&mut self) -> Result<()> {
        self.pg.query_one("SELECT 1").map(drop)
    }

    fn release(&mut self) -> Result<()> {
        self.pg
            // All of this session's: a wait cut at the very moment it was
            // granted leaves the lock held (a session's advisory lock
            // outlives its statement's failure), and the next ask takes it
            // once more.
            .query_one(
                "SELECT pg_advisory_unlock_all(), set_config('idle_session_timeout', '0', false)",
            )
            .map(drop)
    }
}

/// The least time between two changes an SQLite watcher reports: at most
/// 500 wake-ups a second while others write without pause; the first
/// change after a quiet spell is reported at once. A wake-up for nothing
/// costs the poller a read (its claim looks without the write lock
/// first). It was 10 ms: while a cleaner deleted old jobs, every commit
/// of its batches was a change, and a new job waited out the gap (pickup
/// p50 7.0 ms against 1.3 ms before it); at 2 ms the work-down and mixed
/// runs did not move (`guide/performance.md`, Big tables).
#[cfg(feature = "sqlite")]
const SQLITE_CHANGES_GAP: Duration = Duration::from_millis(2);

#[cfg(feature = "sqlite")]
struct SqliteWatcher {
    conn: SqliteConnection,
    version: i64,
    interval: Duration,
    /// When it last reported a change.
    reported: Option<Instant>,
    /// Linux: told of every write to the database file or its WAL, so the
    /// counter is read at once instead of at the next interval.
    #[cfg(target_os = "linux")]
    writes: Option<WriteWatch>,
    /// Until when the counter is read every [`AFTER_WRITE_CHECK`]: a
    /// commit's last write reaches the WAL before the counter moves.
    #[cfg(target_os = "linux")]
    checking_until: Option<Instant>,
}

/// How often the counter is read in the moments after a write was seen.
#[cfg(all(feature = "sqlite", target_os = "linux"))]
const AFTER_WRITE_CHECK: Duration = Duration::from_micros(500);

/// How long after a write the counter is read that often: a commit's last
/// frame is written, synced (`synchronous = FULL`), then counted. A sync
/// slower than this is found at the next interval.
#[cfg(all(feature = "sqlite", target_os = "linux"))]
const AFTER_WRITE_WINDOW: Duration = Duration::from_millis(5);

/// An inotify watch on the database's directory for writes (`IN_MODIFY`)
/// to the database file or its `-wal`: every commit of any process on this
/// host writes one of them with `write(2)`, which inotify reports.
#[cfg(all(feature = "sqlite", target_os = "linux"))]
struct WriteWatch {
    fd: std::os::fd::OwnedFd,
    /// The database file's name and its WAL's.
    names: [Vec<u8>; 2],
}

#[cfg(all(feature = "sqlite", target_os = "linux"))]
impl WriteWatch {
    /// The watch, or why not (inotify's limits, a directory it cannot
    /// read): then the interval alone finds commits.
    fn open(db: &std::path::Path) -> std::io::Result<WriteWatch> {
        use std::io::{Error, ErrorKind};
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        use std::os::unix::ffi::OsStrExt;
        // The real file: SQLite puts the WAL beside it, through symlinks.
        let db = std::fs::canonicalize(db)?;
        let odd = || Error::new(ErrorKind::InvalidInput, "an odd path");
        let dir =
            CString::new(db.parent().ok_or_else(odd)?.as_os_str().as_bytes()).map_err(|_| odd())?;
        let name = db.file_name().ok_or_else(odd)?.as_bytes().to_vec();
        let mut wal = name.clone();
        wal.extend_from_slice(b"-wal");
        // SAFETY: a plain system call; the descriptor is owned at once.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return Err(Error::last_os_error());
        }
        // SAFETY: a descriptor just opened and owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: a valid descriptor and NUL-terminated path.
        let watch =
            unsafe { libc::inotify_add_watch(fd.as_raw_fd(), dir.as_ptr(), libc::IN_MODIFY) };
        if watch < 0 {
            return Err(Error::last_os_error());
        }
        Ok(WriteWatch {
            fd,
            names: [name, wal],
        })
    }

    /// Waits up to `timeout` for a write to the database or its WAL;
    /// whether one came (a queue overflow counts as one).
    fn wait(&mut self, timeout: Duration) -> bool {
        use std::os::fd::AsRawFd;
        let mut poll = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let timeout = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: one valid pollfd and timespec; no signal mask.
        let ready = unsafe { libc::ppoll(&mut poll, 1, &timeout, std::ptr::null()) };
        ready > 0 && self.drain()
    }

    /// Reads every queued event; whether one names the database or its WAL.
    fn drain(&mut self) -> bool {
        use std::os::fd::AsRawFd;
        const HEADER: usize = std::mem::size_of::<libc::inotify_event>();
        // Aligned for the events' header.
        let mut buffer = [0u64; 512];
        let mut seen = false;
        loop {
            // SAFETY: reads into a buffer of the length given.
            let read = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    buffer.as_mut_ptr().cast(),
                    std::mem::size_of_val(&buffer),
                )
            };
            if read <= 0 {
                // EAGAIN: nothing more queued.
                return seen;
            }
            // SAFETY: the bytes the kernel wrote, within the buffer.
            let bytes =
                unsafe { std::slice::from_raw_parts(buffer.as_ptr().cast::<u8>(), read as usize) };
            let mut at = 0;
            while at + HEADER <= bytes.len() {
                // SAFETY: a whole header lies at `at`, read unaligned.
                let event: libc::inotify_event =
                    unsafe { std::ptr::read_unaligned(bytes[at..].as_ptr().cast()) };
                let end = (at + HEADER + event.len as usize).min(bytes.len());
                let name = &bytes[at + HEADER..end];
                let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
                if event.mask & libc::IN_Q_OVERFLOW != 0
                    || self.names.iter().any(|n| n.as_slice() == name)
                {
                    seen = true;
                }
                at = end;
            }
        }
    }
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
            reported: None,
            #[cfg(target_os = "linux")]
            writes: store.url().sqlite_path().and_then(|path| {
                WriteWatch::open(path)
                    .inspect_err(|error| {
                        log::info!(
                            "cannot watch {} for writes (inotify: {error}); reading its change counter every {interval:?}",
                            path.display()
                        )
                    })
                    .ok()
            }),
            #[cfg(target_os = "linux")]
            checking_until: None,
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
            // A change right after the last one waits out the gap: every
            // change wakes the poller, whose claim reads even when there
            // is nothing for it (jobs of queues it does not serve,
            // others' heartbeats).
            if let Some(next) = self.reported.map(|at| at + SQLITE_CHANGES_GAP) {
                let now = Instant::now();
                if now < next {
                    std::thread::sleep(next - now);
                }
            }
            let version = read_version(&mut self.conn)?;
            if version != self.version {
                self.version = version;
                self.reported = Some(Instant::now());
                return Ok(Heard::Changes);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(Heard::Nothing);
            }
            self.nap(now, deadline - now);
        }
    }
}

#[cfg(feature = "sqlite")]
impl SqliteWatcher {
    /// Waits at most `left` before the counter is read again: the
    /// interval, or until a write is seen (Linux), and only briefly in the
    /// moments after one.
    #[cfg(target_os = "linux")]
    fn nap(&mut self, now: Instant, left: Duration) {
        let Some(writes) = self.writes.as_mut() else {
            std::thread::sleep(self.interval.min(left));
            return;
        };
        let wait = match self.checking_until {
            Some(until) if now < until => AFTER_WRITE_CHECK,
            _ => self.interval,
        };
        if writes.wait(wait.min(left)) {
            self.checking_until = Some(Instant::now() + AFTER_WRITE_WINDOW);
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn nap(&mut self, _now: Instant, left: Duration) {
        std::thread::sleep(self.interval.min(left));
    }
}

#[cfg(feature = "mysql")]
struct MysqlWatcher {
    conn: diesel::MysqlConnection,
    signature: Signature,
    /// After a change, when to look again, which of [`SECOND_LOOKS`] that
    /// is, and the highest job id before the change.
    again_at: Option<(std::time::Instant, usize, i64)>,
    /// How often the signature is read (`mysql_watch_interval`): the
    /// pickup latency of a job enqueued by another process is about half
    /// of it, plus the claim.
    interval: Duration,
}

#[cfg(feature = "mysql")]
#[derive(diesel::QueryableByName, PartialEq, Eq)]
struct Signature {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    last: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    below: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    paused: i64,
}

#[cfg(feature = "mysql")]
impl MysqlWatcher {
    fn open(store: &Store, interval: Duration) -> Result<MysqlWatcher> {
        let mut conn = match store.dedicated_connection()? {
            super::AnyConnection::Mysql(conn) => conn,
            #[allow(unreachable_patterns)]
            _ => unreachable!("the backend is MySQL"),
        };
        let signature = read_signature(&mut conn)?;
        Ok(MysqlWatcher {
            conn,
            signature,
            again_at: None,
            interval: interval.max(Duration::from_millis(1)),
        })
    }
}

#[cfg(feature = "mysql")]
fn read_signature(conn: &mut diesel::MysqlConnection) -> Result<Signature> {
    use diesel::RunQueryDsl;
    super::Cached(crate::store::prepared(
        "SELECT CAST(COALESCE((SELECT MAX(id) FROM solidq_jobs), 0) AS SIGNED) AS last,
                CAST(COALESCE((SELECT MAX(id) FROM solidq_ready_below), 0) AS SIGNED) AS below,
                CAST((SELECT COUNT(*) FROM solidq_pauses) AS SIGNED) AS paused",
    ))
    .get_result(conn)
    .map_err(Error::db("listen"))
}

/// When, after a change, the watcher looks again (each delay counted from
/// the look before). A worker's claim may have run beside another
/// worker's, whose claim held the new rows locked while it looked at them
/// (`SKIP LOCKED` skipped them), and nothing changes the signature when
/// that claim commits: the first ready job, which it read before, did. So
/// the first look wakes the poller again whatever it finds, and the later
/// ones while a job enqueued since the change is still ready (a loaded
/// server's claim commits in tens of milliseconds). One look 30 ms after
/// the change was not enough: `hoarding::mysql` saw, in `.ci/run` on a
/// loaded machine, one of two idle workers get none of 40 new jobs in 4 s
/// (the fallback poll is 5 s) before it, and again with it.
#[cfg(feature = "mysql")]
const SECOND_LOOKS: [Duration; 3] = [
    Duration::from_millis(30),
    Duration::from_millis(120),
    Duration::from_millis(480),
];

/// Whether a job whose id is above `since` is ready (on any queue): a
/// range of the ready table's primary key from `since`, so a transaction
/// held open elsewhere, which keeps the entry of every row claimed since
/// it began, makes it walk only those of jobs enqueued since the change.
#[cfg(feature = "mysql")]
fn ready_since(conn: &mut diesel::MysqlConnection, since: i64) -> Result<bool> {
    use diesel::RunQueryDsl;
    const READY_SINCE: &str =
        crate::store::named::named(include_str!("mysql/claims.sql"), "ready_since");
    let found: super::mysql::Scalar = super::Cached(
        crate::store::prepared(READY_SINCE).bind::<diesel::sql_types::BigInt, _>(since),
    )
    .get_result(conn)
    .map_err(Error::db("listen"))?;
    Ok(found.v != 0)
}

#[cfg(feature = "mysql")]
impl Listener for MysqlWatcher {
    fn wait(&mut self, timeout: Duration) -> Result<Heard> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let signature = read_signature(&mut self.conn)?;
            if signature != self.signature {
                let since = self.signature.last;
                self.signature = signature;
                self.again_at = Some((std::time::Instant::now() + SECOND_LOOKS[0], 0, since));
                return Ok(Heard::Changes);
            }
            if let Some((at, look, since)) = self.again_at
                && std::time::Instant::now() >= at
            {
                self.again_at = None;
                if look == 0 || ready_since(&mut self.conn, since)? {
                    if let Some(next) = SECOND_LOOKS.get(look + 1) {
                        self.again_at = Some((std::time::Instant::now() + *next, look + 1, since));
                    }
                    return Ok(Heard::Changes);
                }
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return Ok(Heard::Nothing);
            }
            let mut nap = self.interval.min(deadline - now);
            if let Some((at, _, _)) = self.again_at {
                nap = nap.min(at.saturating_duration_since(now));
            }
            std::thread::sleep(nap);
        }
    }
}

#[cfg(all(test, feature = "sqlite", target_os = "linux"))]
mod tests {
    use std::time::{Duration, Instant};

    use diesel::connection::SimpleConnection;
    use diesel::{Connection, SqliteConnection};

    use super::WriteWatch;

    /// A connection to a new WAL database at `path` holding a table `t`.
    fn wal_database(path: &std::path::Path) -> SqliteConnection {
        let mut writer = SqliteConnection::establish(path.to_str().unwrap()).expect("open");
        writer
            // A busy timeout: the store's own connection may hold the
            // write lock for a moment (the full lib run once failed a
            // commit here with the lock taken).
            .batch_execute(
                "PRAGMA busy_timeout = 5000; PRAGMA journal_mode = WAL; CREATE TABLE t (v INTEGER);",
            )
            .expect("setup");
        writer
    }

    /// A commit by another connection is seen as a write to the WAL; a
    /// write to another file of the same directory is not; a quiet
    /// database waits out the timeout.
    #[test]
    fn a_commit_elsewhere_is_seen_and_other_files_are_not() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("jobs.db");
        let mut writer = wal_database(&path);
        let mut watch = WriteWatch::open(&path).expect("inotify watches the directory");
        watch.drain();

        let started = Instant::now();
        assert!(
            !watch.wait(Duration::from_millis(50)),
            "nothing was written"
        );
        assert!(started.elapsed() >= Duration::from_millis(50), "it waited");

        std::fs::write(dir.path().join("jobs.db.other"), b"x").expect("other file");
        assert!(
            !watch.wait(Duration::from_millis(50)),
            "another file's write"
        );

        writer
            .batch_execute("INSERT INTO t VALUES (1)")
            .expect("commit");
        assert!(watch.wait(Duration::from_secs(5)), "the commit's WAL write");
    }

    /// A path that does not lead to a file is an error (the watcher then
    /// reads the counter at its interval), not a panic.
    #[test]
    fn a_missing_file_is_an_error() {
        let dir = tempfile::tempdir().expect("dir");
        assert!(WriteWatch::open(&dir.path().join("nothing/here.db")).is_err());
    }

    /// An idle watcher hears one commit by another connection long before
    /// its interval (5 s here) would have read the counter; commits without
    /// pause wake it at most once per `SQLITE_CHANGES_GAP`.
    #[test]
    fn one_commit_is_heard_at_once_and_a_stream_at_most_every_gap() {
        use crate::store::connection::SqliteSettings;
        use crate::store::{Heard, PoolOptions, Store};
        use crate::types::DatabaseUrl;

        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("jobs.db");
        let mut writer = wal_database(&path);
        let url = DatabaseUrl::parse(path.to_str().unwrap()).expect("url");
        let store = Store::connect(
            &url,
            &PoolOptions {
                size: 1,
                timeout: Duration::from_secs(5),
                sqlite: SqliteSettings {
                    busy_timeout: Duration::from_secs(5),
                    synchronous: crate::config::DEFAULT_SQLITE_SYNCHRONOUS,
                },
            },
        )
        .expect("store");
        let interval = Duration::from_secs(5);
        let mut watcher = store.listener(interval).expect("watcher");
        // Whatever opening the store wrote is behind it.
        while watcher.wait(Duration::from_millis(50)).expect("wait") != Heard::Nothing {}

        writer
            .batch_execute("INSERT INTO t VALUES (1)")
            .expect("commit");
        let started = Instant::now();
        assert_eq!(watcher.wait(interval * 2).expect("wait"), Heard::Changes);
        assert!(
            started.elapsed() < interval / 2,
            "heard after {:?}: the interval's read, not the write watch",
            started.elapsed()
        );

        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stream = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                // Commits faster than the gap, whatever the disk's sync
                // costs.
                writer
                    .batch_execute("PRAGMA synchronous = OFF")
                    .expect("pragma");
                let mut commits = 0u32;
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    writer
                        .batch_execute("INSERT INTO t VALUES (2)")
                        .expect("commit");
                    commits += 1;
                }
                commits
            })
        };
        let window = Instant::now();
        let mut heard = 0u32;
        while window.elapsed() < Duration::from_millis(300) {
            if watcher.wait(Duration::from_millis(50)).expect("wait") == Heard::Changes {
                heard += 1;
            }
        }
        let elapsed = window.elapsed();
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let commits = stream.join().expect("writer");
        let most = (elapsed.as_millis() / super::SQLITE_CHANGES_GAP.as_millis()) as u32 + 1;
        assert!(
            commits > most,
            "the stream committed more often than the gap: {commits}"
        );
        assert!(
            (1..=most).contains(&heard),
            "{heard} changes heard in {elapsed:?} of {commits} commits (at most {most})"
        );
    }

    /// A database reached through a symlink is watched where SQLite writes
    /// its WAL: beside the real file.
    #[test]
    fn a_symlinked_database_is_watched_beside_the_real_file() {
        let real = tempfile::tempdir().expect("dir");
        let links = tempfile::tempdir().expect("dir");
        let path = real.path().join("jobs.db");
        let link = links.path().join("link.db");
        std::os::unix::fs::symlink(&path, &link).expect("symlink");
        let mut writer = wal_database(&link);
        let mut watch = WriteWatch::open(&link).expect("inotify watches the directory");
        watch.drain();
        writer
            .batch_execute("INSERT INTO t VALUES (1)")
            .expect("commit");
        assert!(watch.wait(Duration::from_secs(5)), "the commit's WAL write");
    }
}

/// A store of two connections on `url`, for the tests below.
#[cfg(all(test, any(feature = "postgres", feature = "mysql")))]
fn store_of_two(url: &str) -> Store {
    let options = super::PoolOptions {
        size: 2,
        timeout: Duration::from_secs(30),
        sqlite: super::SqliteSettings::default(),
    };
    Store::connect(&DatabaseUrl::parse(url).unwrap(), &options).unwrap()
}

#[cfg(all(test, feature = "postgres"))]
mod duty_tests {
    use std::time::Instant;

    use super::*;
    use diesel::RunQueryDsl;

    /// A worker waiting in line for the duty never holds a statement (and
    /// its snapshot, which keeps every row deleted since from vacuum)
    /// open longer than [`DUTY_WAIT`]; the lock still passes to it as soon
    /// as the holder lets go.
    #[test]
    fn a_worker_waiting_for_the_duty_holds_no_snapshot_past_a_second() {
        #[derive(diesel::QueryableByName)]
        struct Waiting {
            #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Double>)]
            oldest: Option<f64>,
        }
        let Some(url) = super::super::conformance::postgres_url() else {
            return;
        };
        let store = store_of_two(&url);
        let mut holder = store.duty("mail").unwrap().expect("PostgreSQL 14 or later");
        holder.ask().unwrap();
        assert!(holder.granted(Duration::from_secs(5)).unwrap());
        let mut waiter = store.duty("mail").unwrap().unwrap();
        waiter.ask().unwrap();
        let mut observer = <diesel::PgConnection as diesel::Connection>::establish(&url).unwrap();
        let oldest_wait = |c: &mut diesel::PgConnection| -> f64 {
            let row: Waiting = diesel::sql_query(
                "SELECT max(extract(epoch FROM now() - query_start))::float8 AS oldest
                 FROM pg_stat_activity
                 WHERE datname = current_database() AND wait_event = 'advisory'
                   AND query LIKE '%solidq duty ' || current_schema() || ' mail%'",
            )
            .get_result(c)
            .unwrap();
            row.oldest.unwrap_or(0.0)
        };
        let until = Instant::now() + DUTY_WAIT * 3;
        let mut longest: f64 = 0.0;
        while Instant::now() < until {
            // Within its lease, as its worker would.
            holder.ping().unwrap();
            assert!(
                !waiter.granted(Duration::from_millis(100)).unwrap(),
                "held by the other"
            );
            longest = longest.max(oldest_wait(&mut observer));
        }
        assert!(longest > 0.5, "the waiter was seen waiting: {longest} s");
        assert!(
            longest < DUTY_WAIT.as_secs_f64() + 0.5,
            "a wait in line lasted {longest} s"
        );
        holder.release().unwrap();
        let released = Instant::now();
        while !waiter.granted(Duration::from_millis(100)).unwrap() {
            assert!(
                released.elapsed() < Duration::from_secs(2),
                "the duty passed on"
            );
        }
        // Released whole: a new waiter gets it once this holder lets go.
        waiter.release().unwrap();
        holder.ask().unwrap();
        assert!(holder.granted(Duration::from_secs(2)).unwrap());
    }
}

#[cfg(all(test, feature = "mysql"))]
mod mysql_watcher_tests {
    use super::*;
    use crate::store::{JobsDriver, NewJob};
    use diesel::RunQueryDsl;

    /// After a change the watcher wakes its poller again, up to three
    /// times ([`SECOND_LOOKS`]), while a job enqueued since is still
    /// ready (a claim may have skipped it locked by another's, whose
    /// commit changes nothing it reads), and only at the first look once
    /// none is (it was claimed). A job ready from before the change (here
    /// the first, left ready) does not keep the looks going.
    #[test]
    fn after_a_change_it_looks_again_only_while_a_job_is_ready() {
        let Some(url) = super::super::conformance::mysql_url() else {
            return;
        };
        let store = store_of_two(&url);
        store.migrate().unwrap();
        let super::super::AnyConnection::Mysql(mut conn) = store.dedicated_connection().unwrap()
        else {
            panic!("a MySQL connection");
        };
        let mut watcher = MysqlWatcher::open(&store, Duration::from_millis(5)).unwrap();
        let heard = |watcher: &mut MysqlWatcher| {
            let mut changes = 0;
            // Longer than the three looks together (630 ms).
            let until = std::time::Instant::now() + Duration::from_millis(1_500);
            while std::time::Instant::now() < until {
                if matches!(
                    watcher.wait(Duration::from_millis(100)).unwrap(),
                    Heard::Changes
                ) {
                    changes += 1;
                }
            }
            changes
        };

        conn.jobs_insert(&[NewJob::plain("mail", "noop")], false)
            .unwrap();
        assert_eq!(
            heard(&mut watcher),
            1 + SECOND_LOOKS.len(),
            "the change, then a look each time while the job stays ready"
        );

        // A job enqueued and claimed before the watcher reads, the first
        // still ready: the change and the first look, no more.
        conn.jobs_insert(&[NewJob::plain("mail", "noop")], false)
            .unwrap();
        diesel::sql_query("DELETE FROM solidq_ready_executions ORDER BY job_id DESC LIMIT 1")
            .execute(&mut conn)
            .unwrap();
        assert_eq!(
            heard(&mut watcher),
            2,
            "the change and the first look only: no job enqueued since is ready"
        );
    }
}
