//! The crate's error type: one variant per cause, each carrying the offending
//! values, never a flattened string where a typed cause exists.

/// Convenience alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The boxed source of an [`Error`] raised by a library solidq uses (the
/// database driver, the connection pool, the signal handler): read it
/// through [`std::error::Error::source`] and its message; act on
/// [`Error::kind`], which classifies it.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Everything that can go wrong in solidq's library calls.
///
/// The enum is `#[non_exhaustive]`: match the variants you handle and keep a
/// catch-all arm. [`Error::is_transient`] tells whether retrying the same call
/// later can succeed (a dropped connection, a locked SQLite file).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The database URL names no backend solidq supports, or is malformed.
    /// The URL is stored with its password removed.
    #[error("invalid database URL {url:?}: {reason}")]
    InvalidDatabaseUrl {
        /// The URL as given, password redacted.
        url: String,
        /// What is wrong with it.
        reason: String,
    },

    /// The URL names a backend this build of solidq leaves out: it was
    /// compiled without that backend's Cargo feature (`sqlite` and
    /// `postgres` are on by default, `mysql` is not).
    #[error(
        "database URL {url:?} ({scheme}) needs solidq's `{feature}` Cargo feature, \
         which this build leaves out"
    )]
    BackendNotCompiled {
        /// The URL as given, password redacted.
        url: String,
        /// How the URL named its backend: `postgres://`, `sqlite://` or
        /// `a file path`.
        scheme: String,
        /// The Cargo feature that would enable it.
        feature: &'static str,
    },

    /// A connection to the database could not be established.
    #[error("cannot connect to {url}: {source}")]
    Connect {
        /// The URL, password redacted.
        url: String,
        /// The driver's connection error.
        #[source]
        source: BoxError,
    },

    /// No connection could be checked out of the pool in time.
    #[error("no database connection available for {url} (pool of {pool_size}): {source}")]
    Pool {
        /// The URL, password redacted.
        url: String,
        /// The pool's maximum size.
        pool_size: u32,
        /// The pool's error (usually a timeout).
        #[source]
        source: BoxError,
    },

    /// A query failed. `operation` names the store operation (for example
    /// `ready_claim`), so logs say what was being done.
    #[error("database error in {operation}: {source}")]
    Database {
        /// The store operation that failed.
        operation: &'static str,
        /// The database's error; [`Error::kind`] classifies it.
        #[source]
        source: BoxError,
    },

    /// The database is out of storage (a full disk, a table at its size
    /// limit, the server out of memory): nothing was written. An outage,
    /// not a verdict: the same call may work once space is freed.
    #[error(
        "the database {database} is full: {operation} wrote nothing ({source}); retry once space is freed"
    )]
    StorageFull {
        /// The database, its URL with the password redacted.
        database: String,
        /// The store operation that failed.
        operation: &'static str,
        /// The database's error.
        #[source]
        source: BoxError,
    },

    /// The database lacks migrations this build needs: it was not migrated
    /// since solidq was upgraded (deploy order: migrate first).
    #[error(
        "the database at {database} lacks migrations {}: run `solidq migrate` (or `Queue::migrate`) first",
        pending.join(", ")
    )]
    SchemaBehind {
        /// The database, its URL with the password redacted.
        database: String,
        /// The versions this build has and the database has not applied.
        pending: Vec<String>,
    },

    /// Running the embedded migrations failed.
    #[error("migration failed: {source}")]
    Migration {
        /// The migration harness's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// A job's arguments could not be serialized to JSON.
    #[error("cannot serialize the arguments of job kind {kind:?}: {source}")]
    SerializeArguments {
        /// The job kind.
        kind: String,
        /// serde_json's error.
        #[source]
        source: serde_json::Error,
    },

    /// An option or setting has a value solidq cannot use.
    #[error("invalid {option} {value:?}: {reason}")]
    InvalidOption {
        /// The option's name, as documented.
        option: &'static str,
        /// The offending value, rendered.
        value: String,
        /// Why it is rejected.
        reason: String,
    },

    /// A job's arguments or result are larger than solidq takes (see
    /// [`QueueConfig::max_payload_bytes`](crate::QueueConfig::max_payload_bytes)).
    /// Nothing was written: the enqueue is refused; a result over it fails
    /// its job instead of being stored.
    #[error(
        "the {what} of job kind {kind:?} take {bytes} bytes, over the limit of {limit} bytes ({setting})"
    )]
    TooLarge {
        /// "arguments" or "result".
        what: &'static str,
        /// The job's kind.
        kind: String,
        /// The size of its JSON text.
        bytes: usize,
        /// The limit it is over.
        limit: usize,
        /// Where the limit comes from: `max_payload_bytes`, or on MySQL
        /// the server's `max_allowed_packet`.
        setting: String,
    },

    /// A configuration file or value is wrong. `origin` names the file (or
    /// "configuration"), `message` the problem, on one line.
    #[error("{origin}: {message}")]
    Config {
        /// Where the configuration came from.
        origin: String,
        /// What is wrong, with the offending key and value.
        message: String,
    },

    /// A recurring task's schedule is wrong: the cron expression (with the
    /// bad field named) or its time zone.
    #[error("recurring task {task:?}: {source}")]
    Schedule {
        /// The task's key.
        task: String,
        /// What is wrong with its schedule.
        #[source]
        source: super::ScheduleError,
    },

    /// A job with the same `unique_key` already exists (waiting, running, or
    /// finished and still kept).
    #[error("a job with unique key {unique_key:?} already exists (job {existing_id})")]
    Duplicate {
        /// The key that collided.
        unique_key: String,
        /// The id of the job that holds the key.
        existing_id: i64,
    },

    /// No job has this id (or unique key).
    #[error("job {0} not found")]
    JobNotFound(String),

    /// A batch refused members, closing or a child: it does not exist, or
    /// it finished. Nothing was written.
    #[error("batch {batch} {reason}")]
    BatchRefused {
        /// The batch's id.
        batch: i64,
        /// "not found", or "finished: it takes no more members".
        reason: &'static str,
    },

    /// A job's dependencies cannot be met (see [`crate::workflow`]): a
    /// parent no job of the call is named, two jobs of one name, a cycle,
    /// a parent that is not a member of the batch, or dependencies outside
    /// a batch. Nothing was written.
    #[error("dependencies of {job}: {reason}")]
    Dependency {
        /// The job: its name, or its place and kind.
        job: String,
        /// What is wrong, with the offending parent.
        reason: String,
    },

    /// An operator action found nothing it applies to (jobs that exist but
    /// are not in a state it acts on).
    #[error("nothing to {action}: {reason}")]
    NothingToDo {
        /// What was asked, e.g. "run now".
        action: &'static str,
        /// Why nothing applied, naming the jobs.
        reason: String,
    },

    /// A name given to an operator command matches nothing the database
    /// knows of, so it is most likely a typo: a queue no job was ever on,
    /// a kind no registered worker runs, a job id that is not failed.
    #[error("unknown {what} {value:?}: {reason}")]
    Unknown {
        /// What the value names ("queue", "kind", "failed job").
        what: &'static str,
        /// The value as given.
        value: String,
        /// Why it is unknown, with what is known instead.
        reason: String,
    },

    /// The caller rolled its own transaction back on purpose
    /// ([`Error::rollback`]): returned from the closure of
    /// [`AnyConnection::write_transaction`](crate::AnyConnection::write_transaction)
    /// (or diesel's `transaction`), it rolls everything back, the jobs
    /// enqueued on that connection included, and comes back out unchanged.
    #[error("transaction rolled back: {reason}")]
    RolledBack {
        /// Why the caller rolled back, as it said.
        reason: String,
    },

    /// The worker was built without any job types registered.
    #[error("the worker has no job types registered; call Worker::register::<YourJob>()")]
    NoJobTypes,

    /// Installing the SIGTERM/SIGINT handler failed.
    #[error("cannot install signal handlers: {0}")]
    Signals(#[source] BoxError),

    /// A thread could not be spawned.
    #[error("cannot spawn thread {name}: {source}")]
    Thread {
        /// The thread's name.
        name: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },

    /// An OS operation other than a thread's spawn failed (the web
    /// server's listening socket, its runtime).
    #[error("cannot {context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Lets `solidq::Error` be the error type of a caller's diesel transaction
/// around [`crate::Queue::enqueue_on`].
impl From<diesel::result::Error> for Error {
    fn from(source: diesel::result::Error) -> Error {
        Error::Database {
            operation: "caller transaction",
            source: Box::new(source),
        }
    }
}

impl Error {
    /// An error that rolls back the caller's transaction on purpose, with
    /// the caller's reason as its message:
    ///
    /// ```
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Serialize, Deserialize)] struct ShipOrder { id: i64 }
    /// # impl solidq::Job for ShipOrder { const KIND: &'static str = "ship";
    /// #   fn perform(&self, _: &solidq::JobContext) -> solidq::JobResult { Ok(serde_json::Value::Null) } }
    /// # let in_stock = false;
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let url = format!("sqlite://{}", dir.path().join("app.sqlite3").display());
    /// let queue = solidq::Queue::connect(&url)?;
    /// # queue.migrate()?;
    /// let mut conn: solidq::AnyConnection = queue.open_connection()?;
    /// let outcome = conn.write_transaction(|conn| {
    ///     queue.enqueue_on(conn, &ShipOrder { id: 7 })?;
    ///     if !in_stock {
    ///         return Err(solidq::Error::rollback("order 7 is out of stock"));
    ///     }
    ///     Ok(())
    /// });
    /// // Nothing was enqueued, and the message is the caller's own.
    /// let error = outcome.unwrap_err();
    /// assert_eq!(error.to_string(), "transaction rolled back: order 7 is out of stock");
    /// assert!(queue.jobs(&solidq::JobFilter::default())?.is_empty());
    /// # Ok::<(), solidq::Error>(())
    /// ```
    pub fn rollback(reason: impl Into<String>) -> Error {
        Error::RolledBack {
            reason: reason.into(),
        }
    }

    /// Wraps a diesel error with the store operation that raised it.
    pub(crate) fn db(operation: &'static str) -> impl FnOnce(diesel::result::Error) -> Error {
        move |source| Error::Database {
            operation,
            source: Box::new(source),
        }
    }

    /// The diesel error inside a database error, for the classifier.
    fn diesel_source(&self) -> Option<&diesel::result::Error> {
        match self {
            Error::Database { source, .. } | Error::StorageFull { source, .. } => {
                source.downcast_ref::<diesel::result::Error>()
            }
            _ => None,
        }
    }

    /// What kind of trouble this is, classified once from the backend's
    /// error (see [`ErrorKind`]); [`ErrorKind::Other`] for errors that are
    /// not the database's (bad input, configuration, threads).
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Pool { .. } => ErrorKind::ConnectionLost,
            Error::Connect { source, .. } => {
                let message = source.to_string();
                match classify(&message) {
                    _ if refuses_config(&message) => ErrorKind::Other,
                    ErrorKind::Other => ErrorKind::ConnectionLost,
                    kind => kind,
                }
            }
            Error::StorageFull { .. } => ErrorKind::StorageFull,
            Error::SchemaBehind { .. } => ErrorKind::SchemaMismatch,
            Error::Database { source, .. } => match self.diesel_source() {
                Some(diesel) => Error::kind_of(diesel),
                None => classify(&source.to_string()),
            },
            _ => ErrorKind::Other,
        }
    }

    /// The kind of a diesel error, by its code or its message.
    pub(crate) fn kind_of(source: &diesel::result::Error) -> ErrorKind {
        use diesel::result::{DatabaseErrorKind as K, Error as D};
        match source {
            D::DatabaseError(kind, info) => match kind {
                K::ClosedConnection => ErrorKind::ConnectionLost,
                K::ReadOnlyTransaction => ErrorKind::ReadOnly,
                K::SerializationFailure => ErrorKind::LockConflict,
                K::UniqueViolation => ErrorKind::UniqueViolation,
                K::ForeignKeyViolation | K::NotNullViolation | K::CheckViolation => {
                    ErrorKind::Other
                }
                _ => classify(info.message()),
            },
            D::QueryBuilderError(_)
            | D::DeserializationError(_)
            | D::SerializationError(_)
            | D::NotFound
            | D::RollbackTransaction => ErrorKind::Other,
            other => classify(&other.to_string()),
        }
    }

    /// Whether the connection that raised this error must not be reused:
    /// it is dead ([`ErrorKind::ConnectionLost`]: closed by the server,
    /// SQLSTATE class 08 or 57P01/57P02, or by the network), or its server
    /// no longer takes writes ([`ErrorKind::ReadOnly`], a standby after a
    /// failover). solidq drops such a connection from its pool, and the
    /// next one is opened through the URL's list of hosts.
    pub fn is_connection_lost(&self) -> bool {
        matches!(self, Error::Database { .. })
            && matches!(self.kind(), ErrorKind::ConnectionLost | ErrorKind::ReadOnly)
    }

    /// Whether the server refused a write because it is read-only
    /// (SQLSTATE 25006, MySQL's `--read-only`): after a failover, a
    /// connection still open to the old primary come back as a standby,
    /// or a URL that reached a standby. Nothing was written; solidq runs
    /// its own operations again on a fresh connection, so callers see this
    /// only from their own connections.
    pub fn is_read_only(&self) -> bool {
        matches!(self, Error::Database { .. }) && self.kind() == ErrorKind::ReadOnly
    }

    /// Whether a write that failed with this error may nevertheless have
    /// been committed: the connection was lost while the statement or the
    /// `COMMIT` was in flight, so the server may have committed it and died
    /// (or the network did) before it could answer. Nothing tells the
    /// client which; only reading the database again can.
    ///
    /// For an enqueue: `false` means the job was not enqueued (a pool
    /// timeout, a refused connection, a read-only server, a full disk, a
    /// constraint), so when [`Error::is_transient`] says so, enqueue it
    /// again. `true` means it may or may not exist: enqueuing it again is
    /// safe only with a `unique_key` (a second enqueue of a committed one
    /// returns [`Error::Duplicate`] with its id); without one, a retry may
    /// run the job twice, and not retrying may lose it.
    pub fn may_have_committed(&self) -> bool {
        matches!(self, Error::Database { .. }) && self.kind() == ErrorKind::ConnectionLost
    }

    /// Whether the same call may succeed if retried later: lost connections,
    /// pool timeouts, a read-only server (a failover under way), lock
    /// conflicts (SQLite's `database is locked`, serialization failures,
    /// deadlocks), and a full disk or an exhausted server
    /// ([`ErrorKind::StorageFull`]). Logic errors (constraint violations,
    /// bad input, a value the database cannot store) are not. (Whether a
    /// failed write may have been committed anyway is
    /// [`Error::may_have_committed`].)
    pub fn is_transient(&self) -> bool {
        use diesel::result::Error as D;
        if matches!(self, Error::Database { .. })
            && let Some(D::BrokenTransactionManager | D::AlreadyInTransaction) =
                self.diesel_source()
        {
            return true;
        }
        self.kind().is_transient()
    }
}

/// What kind of trouble an [`Error`] is ([`Error::kind`]): database errors
/// classified once, from each backend's error codes and messages, into
/// what a caller can act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The connection broke, or none could be made or checked out in
    /// time. Retry later; a write in flight may have committed
    /// ([`Error::may_have_committed`]).
    ConnectionLost,
    /// A lock conflict: SQLite's `database is locked`, a deadlock, a
    /// serialization failure, a lock wait timeout. Nothing was committed;
    /// retry.
    LockConflict,
    /// The server takes no writes (a standby after a failover). Nothing
    /// was written; retry on a fresh connection.
    ReadOnly,
    /// The server is out of space or memory: SQLite's `SQLITE_FULL` (and
    /// I/O errors, which a full disk also gives), PostgreSQL's SQLSTATE
    /// class 53 (`disk_full`, `out_of_memory`, `configuration_limit_exceeded`)
    /// and "No space left on device", MySQL's 1021 (disk full), 1114 (table
    /// is full), 1041 (out of memory) and 3 (error writing a file). Nothing
    /// was written; an outage, not a verdict: retry when space returns.
    StorageFull,
    /// A unique index refused the row.
    UniqueViolation,
    /// The database refused a value itself: too large (SQLite's "string or
    /// blob too big", MySQL's packet or column limits), bytes or JSON the
    /// backend cannot store. Retrying the same value cannot help.
    ValueRejected,
    /// A table or column this build uses is missing: the database lacks
    /// migrations (run `solidq migrate`).
    SchemaMismatch,
    /// Anything else: bad input, configuration, a bug.
    Other,
}

impl ErrorKind {
    /// Whether retrying the same call later may succeed.
    pub fn is_transient(self) -> bool {
        matches!(
            self,
            ErrorKind::ConnectionLost
                | ErrorKind::LockConflict
                | ErrorKind::ReadOnly
                | ErrorKind::StorageFull
        )
    }
}

/// The one classifier of backend messages (lower case substrings), for
/// errors diesel reports without a precise kind. Checked in this order:
/// the first table with a match gives the kind.
const MESSAGES: &[(ErrorKind, &[&str])] = &[
    (
        ErrorKind::LockConflict,
        &[
            // SQLite: SQLITE_BUSY, SQLITE_LOCKED.
            "database is locked",
            "database table is locked",
            "database is busy",
            // PostgreSQL: 40P01, 40001.
            "deadlock detected",
            "could not serialize access",
            // MySQL/MariaDB: 1213, 1205.
            "deadlock found when trying to get lock",
            "lock wait timeout exceeded",
        ],
    ),
    (
        ErrorKind::StorageFull,
        &[
            // SQLite: SQLITE_FULL, SQLITE_NOMEM, and SQLITE_IOERR (a write
            // that met ENOSPC may be reported as an I/O error).
            "database or disk is full",
            "disk i/o error",
            // PostgreSQL: 53100 ("could not extend file …: No space left on
            // device", "could not write to file …"), 53200, 53400.
            "no space left on device",
            "could not extend file",
            "could not write to file",
            "out of memory",
            "configuration limit exceeded",
            "out of shared memory",
            // MySQL/MariaDB: 1021, 1114, 1041, 3 and errno 28 in others.
            "disk full",
            "' is full",
            "out of resources",
            "error writing file",
            "errcode: 28",
            "error 28",
        ],
    ),
    (
        ErrorKind::ConnectionLost,
        &[
            // MySQL and MariaDB client libraries (2006, 2013, 2002/2003).
            "server has gone away",
            "lost connection to",
            "can't connect to",
            // PostgreSQL (libpq and the server).
            "the database system is",
            "server closed the connection",
            "terminating connection",
            "no connection to the server",
            "could not receive data from server",
            "could not send data to server",
            "connection to server",
            "ssl syscall error",
            "connection has been closed unexpectedly",
            "too many clients",
            "remaining connection slots are reserved",
        ],
    ),
    (
        ErrorKind::ReadOnly,
        &[
            // PostgreSQL 25006 (diesel's ReadOnlyTransaction, usually).
            "read-only transaction",
            // MySQL/MariaDB 1290 and 1836.
            "--read-only option",
            "running in read-only mode",
        ],
    ),
    (
        ErrorKind::SchemaMismatch,
        &[
            // PostgreSQL 42P01, 42703.
            "relation \"",
            "column \"",
            // SQLite.
            "no such table",
            "no such column",
            "has no column named",
            // MySQL/MariaDB 1146, 1054.
            "doesn't exist",
            "unknown column",
        ],
    ),
    (
        ErrorKind::ValueRejected,
        &[
            // SQLite: SQLITE_TOOBIG, malformed JSON.
            "string or blob too big",
            "malformed json",
            // PostgreSQL: 22021, 22P05, 22001, 22P02 (json).
            "invalid byte sequence",
            "unsupported unicode escape sequence",
            "value too long",
            "invalid input syntax for type json",
            // MySQL/MariaDB: 1153, 1406, 1366, 3140, 1118.
            "max_allowed_packet",
            "data too long",
            "incorrect string value",
            "invalid json text",
            "row size too large",
        ],
    ),
];

/// The kind a backend message says, by [`MESSAGES`].
fn classify(message: &str) -> ErrorKind {
    let lower = message.to_ascii_lowercase();
    // "relation \"x\" does not exist" and "column \"x\" does not exist":
    // only with "does not exist" (other messages name relations too).
    MESSAGES
        .iter()
        .find(|(kind, needles)| {
            needles.iter().any(|n| lower.contains(n))
                && (*kind != ErrorKind::SchemaMismatch
                    || !(lower.contains("relation \"") || lower.contains("column \""))
                    || lower.contains("does not exist"))
        })
        .map_or(ErrorKind::Other, |(kind, _)| *kind)
}

/// Whether a refused connection names a configuration mistake (a wrong
/// password, user or database), which no retry mends, rather than a server
/// that is away.
fn refuses_config(message: &str) -> bool {
    const CONFIG: [&str; 6] = [
        "authentication failed",
        "access denied for user",
        "unknown database",
        "no pg_hba.conf entry",
        "role \"",
        "database \"",
    ];
    let lower = message.to_ascii_lowercase();
    CONFIG.iter().any(|n| lower.contains(n))
}

/// The text of a caught panic's payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use diesel::result::{DatabaseErrorKind, Error as D};

    fn db_error(kind: DatabaseErrorKind, message: &str) -> Error {
        Error::Database {
            operation: "test",
            source: Box::new(D::DatabaseError(kind, Box::new(message.to_string()))),
        }
    }

    #[test]
    fn locked_sqlite_is_transient_and_constraints_are_not() {
        assert!(db_error(DatabaseErrorKind::Unknown, "database is locked").is_transient());
        assert!(db_error(DatabaseErrorKind::ClosedConnection, "gone").is_transient());
        assert!(!db_error(DatabaseErrorKind::UniqueViolation, "duplicate key").is_transient());
        assert!(!db_error(DatabaseErrorKind::Unknown, "syntax error").is_transient());
    }

    #[test]
    fn a_read_only_server_is_dropped_and_retried_and_a_lost_write_may_have_committed() {
        let read_only = db_error(
            DatabaseErrorKind::ReadOnlyTransaction,
            "cannot execute INSERT in a read-only transaction",
        );
        assert!(read_only.is_read_only() && read_only.is_connection_lost());
        assert!(read_only.is_transient() && !read_only.may_have_committed());
        for lost in [
            db_error(
                DatabaseErrorKind::ClosedConnection,
                "server closed the connection",
            ),
            db_error(
                DatabaseErrorKind::Unknown,
                "terminating connection due to administrator command",
            ),
            db_error(
                DatabaseErrorKind::Unknown,
                "FATAL: the database system is shutting down",
            ),
        ] {
            assert!(lost.is_connection_lost() && lost.is_transient(), "{lost}");
            assert!(lost.may_have_committed() && !lost.is_read_only(), "{lost}");
        }
        let constraint = db_error(DatabaseErrorKind::UniqueViolation, "duplicate key");
        assert!(!constraint.may_have_committed() && !constraint.is_connection_lost());
    }

    #[test]
    fn mysql_deadlocks_lock_waits_and_lost_connections_are_transient() {
        // 1213 (diesel's SerializationFailure) and 1205 (Unknown).
        let deadlock = db_error(
            DatabaseErrorKind::SerializationFailure,
            "Deadlock found when trying to get lock; try restarting transaction",
        );
        let lock_wait = db_error(
            DatabaseErrorKind::Unknown,
            "Lock wait timeout exceeded; try restarting transaction",
        );
        for conflict in [&deadlock, &lock_wait] {
            assert!(conflict.is_transient(), "{conflict}");
            assert!(!conflict.is_connection_lost(), "{conflict}");
        }
        for lost in [
            db_error(DatabaseErrorKind::Unknown, "MySQL server has gone away"),
            db_error(
                DatabaseErrorKind::Unknown,
                "Lost connection to server during query",
            ),
            db_error(
                DatabaseErrorKind::Unknown,
                "Can't connect to server on '127.0.0.1' (111)",
            ),
        ] {
            assert!(lost.is_connection_lost() && lost.is_transient(), "{lost}");
        }
    }

    /// The texts each backend really gives (copied from their sources and
    /// from runs on a full disk), each read as the kind a caller acts on.
    #[test]
    fn backend_messages_are_classified_once() {
        use DatabaseErrorKind::Unknown;
        let cases = [
            // SQLite.
            ("database or disk is full", ErrorKind::StorageFull),
            ("disk I/O error", ErrorKind::StorageFull),
            ("database is locked", ErrorKind::LockConflict),
            ("no such table: solidq_jobs", ErrorKind::SchemaMismatch),
            (
                "table solidq_jobs has no column named step",
                ErrorKind::SchemaMismatch,
            ),
            ("string or blob too big", ErrorKind::ValueRejected),
            // PostgreSQL.
            (
                "could not extend file \"base/16384/16402\": No space left on device",
                ErrorKind::StorageFull,
            ),
            (
                "could not write to file \"pg_wal/xlogtemp.123\": No space left on device",
                ErrorKind::StorageFull,
            ),
            ("out of memory", ErrorKind::StorageFull),
            (
                "relation \"solidq_steps\" does not exist",
                ErrorKind::SchemaMismatch,
            ),
            (
                "column \"fairness_key\" of relation \"solidq_jobs\" does not exist",
                ErrorKind::SchemaMismatch,
            ),
            (
                "new row for relation \"solidq_jobs\" violates check constraint \"c\"",
                ErrorKind::Other,
            ),
            (
                "invalid byte sequence for encoding \"UTF8\": 0x00",
                ErrorKind::ValueRejected,
            ),
            ("deadlock detected", ErrorKind::LockConflict),
            // MySQL and MariaDB.
            ("The table 'solidq_jobs' is full", ErrorKind::StorageFull),
            (
                "Disk full (/tmp/#sql_1.MAI); waiting for someone to free some space...",
                ErrorKind::StorageFull,
            ),
            (
                "Error writing file './test/solidq_jobs.ibd' (Errcode: 28 \"No space left on device\")",
                ErrorKind::StorageFull,
            ),
            (
                "Table 'test.solidq_steps' doesn't exist",
                ErrorKind::SchemaMismatch,
            ),
            (
                "Unknown column 'fairness_key' in 'field list'",
                ErrorKind::SchemaMismatch,
            ),
            (
                "Got a packet bigger than 'max_allowed_packet' bytes",
                ErrorKind::ValueRejected,
            ),
            ("syntax error at or near \"x\"", ErrorKind::Other),
        ];
        for (message, kind) in cases {
            let error = db_error(Unknown, message);
            assert_eq!(error.kind(), kind, "{message}");
            assert_eq!(error.is_transient(), kind.is_transient(), "{message}");
        }
    }
}
