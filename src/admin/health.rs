//! Database health for an operator's dashboard: solidq's tables with
//! their rows and sizes, and what each backend can tell about itself; see
//! [`DatabaseHealth`].

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::client::Queue;
use crate::store::HorizonFacts;
use crate::types::Backend;
use crate::types::Result;

/// What [`Queue::database_health`] found. Reading it costs the same
/// however many jobs the tables hold (SQLite's per-table sizes excepted:
/// see [`TableHealth::total_bytes`]); no count of a big table is made.
///
/// Nothing in it shows the database password: the URL is redacted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DatabaseHealth {
    /// `sqlite` or `postgres`.
    pub backend: String,
    /// The database URL, its password replaced by `***`.
    pub database: String,
    /// When it was read (the database's clock on PostgreSQL).
    pub checked_at: DateTime<Utc>,
    /// Every table of solidq's (named `solidq_*`), by name.
    pub tables: Vec<TableHealth>,
    /// SQLite's file and pages; `None` on PostgreSQL.
    pub sqlite: Option<SqliteHealth>,
    /// PostgreSQL's database and server; `None` on SQLite.
    pub postgres: Option<PostgresHealth>,
    /// The oldest transaction held open elsewhere and the rows waiting
    /// behind it; see [`Queue::horizon`].
    pub horizon: Horizon,
}

/// What keeps the database server from reclaiming the rows solidq deletes
/// for every job: a transaction held open in another session (a console's
/// forgotten `BEGIN`, a report, `pg_dump`, a replica's feedback). While it
/// is open, every row deleted after it began stays, and claims walk them:
/// the cost per job grows with the length of the hold. SQLite keeps no old
/// row versions (a long read holds back the write-ahead log's checkpoint
/// instead: [`SqliteHealth::wal_bytes`]), so there every field is `None`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Horizon {
    /// The oldest transaction another session holds open, if any.
    ///
    /// PostgreSQL: a session of this database with a snapshot or a
    /// transaction id (`pg_stat_activity`; other roles' sessions show only
    /// to superusers and members of `pg_read_all_stats`). MySQL: the
    /// oldest InnoDB transaction of the whole server
    /// (`information_schema.INNODB_TRX`, every user's with the `PROCESS`
    /// privilege; InnoDB serves it from a cache that it refreshes only
    /// after 100 ms without a read of it).
    pub oldest_transaction: Option<OpenTransaction>,
    /// The rows waiting to be reclaimed. PostgreSQL: dead rows in solidq's
    /// tables (`n_dead_tup`); MySQL: InnoDB's history list length, the
    /// server's undo records not purged yet.
    pub dead_rows: Option<u64>,
    /// Set when the oldest transaction has been open longer than a minute:
    /// what it holds back and how to end it.
    pub warning: Option<String>,
}

/// A transaction open in another session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OpenTransaction {
    /// How long it has been open, in milliseconds.
    pub age_ms: u64,
    /// Its session: PostgreSQL's backend pid, MySQL's connection id.
    pub session: i64,
    /// Who holds it: PostgreSQL's `application_name`, MySQL's `user@host`.
    pub holder: String,
    /// What the session is doing: `idle in transaction`, `Sleep`, ….
    pub state: String,
}

/// A transaction open longer than this gets [`Horizon::warning`]: at 2,000
/// jobs a second PostgreSQL's jobs cost 2.6× the machine's CPU by the end
/// of a two-minute hold (`bench --only mvcc`); solidq's own transactions
/// last milliseconds.
const HOLD_WARNING: Duration = Duration::from_secs(60);

impl Horizon {
    fn from_facts(facts: HorizonFacts, backend: Backend) -> Horizon {
        let oldest_transaction = facts.age_ms.map(|age| OpenTransaction {
            age_ms: unsigned(age),
            session: facts.pid.unwrap_or_default(),
            holder: facts.holder.unwrap_or_default(),
            state: facts.state.unwrap_or_default(),
        });
        let dead_rows = facts.backlog.map(unsigned);
        let warning = oldest_transaction
            .as_ref()
            .filter(|t| Duration::from_millis(t.age_ms) >= HOLD_WARNING)
            .map(|t| hold_warning(t, dead_rows, backend));
        Horizon {
            oldest_transaction,
            dead_rows,
            warning,
        }
    }
}

fn hold_warning(t: &OpenTransaction, dead_rows: Option<u64>, backend: Backend) -> String {
    let age = humantime::format_duration(Duration::from_secs(t.age_ms / 1000));
    let session = t.session;
    let (rows, end) = match backend {
        Backend::Mysql => (
            "undo records not purged (history list length)",
            format!("KILL {session}"),
        ),
        _ => (
            "dead rows in solidq's tables",
            format!("SELECT pg_terminate_backend({session})"),
        ),
    };
    let held = dead_rows.map_or(String::new(), |n| format!(", with {n} {rows}"));
    format!(
        "a transaction has been open for {age} in session {session} ({}, {}){held}: the \
         database keeps every row deleted since it began, and every claim walks them; end it \
         (`{end}`, or a commit by its client) or see the guide's operating chapter",
        t.holder, t.state
    )
}

/// One of solidq's tables.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TableHealth {
    /// The table's name.
    pub name: String,
    /// How many rows it holds, exactly or estimated (see `rows_exact`).
    ///
    /// PostgreSQL: always an estimate, from the statistics
    /// (`pg_stat_user_tables.n_live_tup`, which every insert and delete
    /// moves, shortly after its commit), or `pg_class.reltuples` (as of the
    /// last VACUUM or ANALYZE) when the statistics were reset and have seen
    /// nothing since.
    ///
    /// SQLite: exact up to 100,000 rows (a count stopped after that many);
    /// above, an estimate between 100,001 and `max(rowid) - min(rowid) + 1`:
    /// the count the last `ANALYZE` recorded in `sqlite_stat1` (the
    /// maintenance round's `PRAGMA optimize` refreshes it when a table has
    /// changed a lot), else that upper bound. A million finished jobs cost
    /// no more to count than a hundred thousand.
    pub rows: u64,
    /// Whether `rows` is an exact count.
    pub rows_exact: bool,
    /// The table with its indexes (and TOAST data on PostgreSQL), in
    /// bytes: `pg_total_relation_size` on PostgreSQL; on SQLite the pages
    /// of its b-tree and its indexes' from the `dbstat` virtual table,
    /// which reads the whole file, so it is measured only for files up to
    /// 128 MiB (`None` above). On a 300 MB file of a million finished jobs
    /// the whole call took 90 ms here, 80 of them in `dbstat`.
    pub total_bytes: Option<u64>,
    /// PostgreSQL: dead rows waiting for a vacuum; `None` on SQLite, which
    /// reuses freed pages (see [`SqliteHealth::freelist_pages`]).
    pub dead_rows: Option<u64>,
    /// PostgreSQL: the last manual VACUUM, if any.
    pub last_vacuum: Option<DateTime<Utc>>,
    /// PostgreSQL: the last autovacuum, if any.
    pub last_autovacuum: Option<DateTime<Utc>>,
}

/// SQLite's file and pages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SqliteHealth {
    /// The database file.
    pub path: String,
    /// The database file's size, in bytes.
    pub file_bytes: u64,
    /// The write-ahead log's size (`<path>-wal`), in bytes: it grows while
    /// a long read keeps checkpoints from finishing.
    pub wal_bytes: u64,
    /// Bytes per page.
    pub page_size: u64,
    /// Pages in the database.
    pub page_count: u64,
    /// Free pages (of deleted rows), reused before the file grows; a
    /// `VACUUM` would give them back to the file system.
    pub freelist_pages: u64,
}

/// PostgreSQL's database and server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PostgresHealth {
    /// The schema solidq's tables are in (the connection's current one).
    pub schema: String,
    /// The whole database's size (`pg_database_size`), in bytes: solidq's
    /// tables and anything else it holds.
    pub database_bytes: u64,
    /// The server's version (`server_version`).
    pub server_version: String,
}

fn unsigned(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

impl Queue {
    /// The oldest transaction held open in another session and the rows
    /// waiting behind it, with a warning past a minute: one cheap read of
    /// the server's activity and statistics views (what `/metrics` shows);
    /// see [`Horizon`].
    pub fn horizon(&self) -> Result<Horizon> {
        let facts = self.store().horizon()?;
        Ok(Horizon::from_facts(facts, self.backend()))
    }

    /// solidq's tables with their rows (estimated where counting would be
    /// slow) and sizes, PostgreSQL's dead rows and last vacuums, SQLite's
    /// file, WAL and pages; see [`DatabaseHealth`] and [`TableHealth::rows`]
    /// for how each is read.
    pub fn database_health(&self) -> Result<DatabaseHealth> {
        let facts = self.store().database_health()?;
        let horizon = self.horizon()?;
        Ok(DatabaseHealth {
            horizon,
            backend: self.backend().to_string(),
            database: self.url().redacted(),
            checked_at: facts.now.and_utc(),
            tables: facts
                .tables
                .into_iter()
                .map(|t| TableHealth {
                    name: t.name,
                    rows: unsigned(t.rows),
                    rows_exact: t.rows_exact,
                    total_bytes: t.bytes.map(unsigned),
                    dead_rows: t.dead_rows.map(unsigned),
                    last_vacuum: t.last_vacuum.map(|t| t.and_utc()),
                    last_autovacuum: t.last_autovacuum.map(|t| t.and_utc()),
                })
                .collect(),
            sqlite: facts.sqlite.map(|s| SqliteHealth {
                path: s.path,
                file_bytes: s.file_bytes,
                wal_bytes: s.wal_bytes,
                page_size: unsigned(s.page_size),
                page_count: unsigned(s.page_count),
                freelist_pages: unsigned(s.freelist_pages),
            }),
            postgres: facts.postgres.map(|p| PostgresHealth {
                schema: p.schema,
                database_bytes: unsigned(p.database_bytes),
                server_version: p.server_version,
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(age_ms: i64) -> HorizonFacts {
        HorizonFacts {
            age_ms: Some(age_ms),
            pid: Some(4242),
            holder: Some("psql".into()),
            state: Some("idle in transaction".into()),
            backlog: Some(180_000),
        }
    }

    #[test]
    fn a_transaction_open_a_minute_is_warned_of_naming_its_session_and_the_rows() {
        let young = Horizon::from_facts(facts(59_999), Backend::Postgres);
        assert_eq!(young.warning, None);
        assert_eq!(young.oldest_transaction.unwrap().age_ms, 59_999);
        let old = Horizon::from_facts(facts(125_000), Backend::Postgres);
        let warning = old.warning.unwrap();
        for part in [
            "open for 2m 5s",
            "session 4242 (psql, idle in transaction)",
            "180000 dead rows in solidq's tables",
            "`SELECT pg_terminate_backend(4242)`",
        ] {
            assert!(warning.contains(part), "{part:?} not in {warning:?}");
        }
        let mysql = Horizon::from_facts(facts(60_000), Backend::Mysql)
            .warning
            .unwrap();
        assert!(
            mysql.contains("history list length") && mysql.contains("`KILL 4242`"),
            "{mysql}"
        );
    }

    #[test]
    fn nothing_held_is_nothing_reported() {
        let none = Horizon::from_facts(HorizonFacts::default(), Backend::Sqlite);
        assert_eq!(
            none,
            Horizon {
                oldest_transaction: None,
                dead_rows: None,
                warning: None
            }
        );
    }
}
