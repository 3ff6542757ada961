//! The crate's error type: one variant per cause, each carrying the offending
//! values, never a flattened string where a typed cause exists.

use std::time::Duration;

/// Convenience alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

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
    /// compiled without that backend's Cargo feature (`sqlite` or
    /// `postgres`, both on by default).
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
        /// diesel's connection error.
        #[source]
        source: diesel::ConnectionError,
    },

    /// No connection could be checked out of the pool in time.
    #[error("no database connection available for {url} (pool of {pool_size}): {source}")]
    Pool {
        /// The URL, password redacted.
        url: String,
        /// The pool's maximum size.
        pool_size: u32,
        /// r2d2's error (usually a timeout).
        #[source]
        source: r2d2::Error,
    },

    /// A query failed. `operation` names the store operation (for example
    /// `ready_claim`), so logs say what was being done.
    #[error("database error in {operation}: {source}")]
    Database {
        /// The store operation that failed.
        operation: &'static str,
        /// diesel's error.
        #[source]
        source: diesel::result::Error,
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

    /// The worker was built without any job types registered.
    #[error("the worker has no job types registered; call Worker::register::<YourJob>()")]
    NoJobTypes,

    /// A process could not keep its heartbeat for longer than the alive
    /// threshold: peers consider it dead, so it stopped itself.
    #[error(
        "heartbeats failed for {elapsed:?} (alive threshold {threshold:?}); stopped so a fresh process can take over: {source}"
    )]
    HeartbeatLost {
        /// How long heartbeats had been failing.
        elapsed: Duration,
        /// The configured alive threshold.
        threshold: Duration,
        /// The last heartbeat error.
        #[source]
        source: Box<Error>,
    },

    /// Installing the SIGTERM/SIGINT handler failed.
    #[error("cannot install signal handlers: {0}")]
    Signals(#[from] ctrlc::Error),

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
            source,
        }
    }
}

impl Error {
    /// Wraps a diesel error with the store operation that raised it.
    pub(crate) fn db(operation: &'static str) -> impl FnOnce(diesel::result::Error) -> Error {
        move |source| Error::Database { operation, source }
    }

    /// Whether the connection that raised this error must not be reused:
    /// it is dead (closed by the server, SQLSTATE class 08 or 57P01/57P02,
    /// or by the network), or its server no longer takes writes (25006, a
    /// standby after a failover; see [`Error::is_read_only`]). solidq drops
    /// such a connection from its pool, and the next one is opened through
    /// the URL's list of hosts.
    pub fn is_connection_lost(&self) -> bool {
        use diesel::result::{DatabaseErrorKind as K, Error as D};
        match self {
            Error::Database { source, .. } => match source {
                D::DatabaseError(K::ClosedConnection | K::ReadOnlyTransaction, _) => true,
                D::DatabaseError(K::UnableToSendCommand, info) => {
                    is_connection_message(info.message())
                }
                D::DatabaseError(_, info) => is_connection_message(info.message()),
                other => is_connection_message(&other.to_string()),
            },
            _ => false,
        }
    }

    /// Whether the server refused a write because it is read-only
    /// (SQLSTATE 25006): after a failover, a connection still open to the
    /// old primary come back as a standby, or a URL that reached a
    /// standby. Nothing was written; solidq runs its own operations again
    /// on a fresh connection, so callers see this only from their own
    /// connections.
    pub fn is_read_only(&self) -> bool {
        use diesel::result::{DatabaseErrorKind as K, Error as D};
        matches!(
            self,
            Error::Database {
                source: D::DatabaseError(K::ReadOnlyTransaction, _),
                ..
            }
        )
    }

    /// Whether a write that failed with this error may nevertheless have
    /// been committed: the connection was lost while the statement or the
    /// `COMMIT` was in flight, so the server may have committed it and died
    /// (or the network did) before it could answer. Nothing tells the
    /// client which; only reading the database again can.
    ///
    /// For an enqueue: `false` means the job was not enqueued (a pool
    /// timeout, a refused connection, a read-only server, a constraint), so
    /// when [`Error::is_transient`] says so, enqueue it again. `true` means
    /// it may or may not exist: enqueuing it again is safe only with a
    /// `unique_key` (a second enqueue of a committed one returns
    /// [`Error::Duplicate`] with its id); without one, a retry may run the
    /// job twice, and not retrying may lose it.
    pub fn may_have_committed(&self) -> bool {
        matches!(self, Error::Database { .. }) && self.is_connection_lost() && !self.is_read_only()
    }

    /// Whether the same call may succeed if retried later: lost connections,
    /// pool timeouts, a read-only server (a failover under way), SQLite's
    /// `database is locked`, serialization failures and deadlocks. Logic
    /// errors (constraint violations, bad input) are not. (Whether a failed
    /// write may have been committed anyway is
    /// [`Error::may_have_committed`].)
    pub fn is_transient(&self) -> bool {
        use diesel::result::{DatabaseErrorKind as K, Error as D};
        match self {
            Error::Pool { .. } | Error::Connect { .. } => true,
            Error::HeartbeatLost { .. } => false,
            Error::Database { source, .. } => match source {
                D::DatabaseError(kind, info) => match kind {
                    K::ClosedConnection | K::SerializationFailure | K::ReadOnlyTransaction => true,
                    K::UniqueViolation
                    | K::ForeignKeyViolation
                    | K::NotNullViolation
                    | K::CheckViolation => false,
                    _ => is_transient_message(info.message()),
                },
                D::BrokenTransactionManager | D::AlreadyInTransaction => true,
                D::QueryBuilderError(_) | D::DeserializationError(_) | D::SerializationError(_) => {
                    false
                }
                D::NotFound | D::RollbackTransaction => false,
                other => is_transient_message(&other.to_string()),
            },
            _ => false,
        }
    }
}

/// Messages libpq gives when the connection itself is gone.
fn is_connection_message(message: &str) -> bool {
    const LOST: [&str; 12] = [
        // MySQL and MariaDB client libraries (2006, 2013, 2002/2003).
        "server has gone away",
        "lost connection to",
        "can't connect to",
        "the database system is",
        "server closed the connection",
        "terminating connection",
        "no connection to the server",
        "could not receive data from server",
        "could not send data to server",
        "connection to server",
        "ssl syscall error",
        "connection has been closed unexpectedly",
    ];
    let lower = message.to_ascii_lowercase();
    LOST.iter().any(|needle| lower.contains(needle))
}

/// Messages of errors that diesel reports without a precise kind but that a
/// retry can cure: SQLite's busy/locked family, PostgreSQL connection loss
/// or deadlock detection, MySQL deadlocks, lock wait timeouts and lost
/// connections.
fn is_transient_message(message: &str) -> bool {
    const TRANSIENT: [&str; 15] = [
        "deadlock found when trying to get lock",
        "lock wait timeout exceeded",
        "server has gone away",
        "lost connection to",
        "can't connect to",
        "the database system is",
        "database is locked",
        "database table is locked",
        "database is busy",
        "deadlock detected",
        "server closed the connection",
        "terminating connection",
        "connection to server",
        "could not serialize access",
        "no connection to the server",
    ];
    let lower = message.to_ascii_lowercase();
    TRANSIENT.iter().any(|needle| lower.contains(needle))
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
            source: D::DatabaseError(kind, Box::new(message.to_string())),
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
}
