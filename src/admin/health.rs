//! Database health for an operator's dashboard: solidq's tables with
//! their rows and sizes, and what each backend can tell about itself; see
//! [`DatabaseHealth`].

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::client::Queue;
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
    /// 1 GiB (`None` above). On a 300 MB file of a million finished jobs
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
    /// solidq's tables with their rows (estimated where counting would be
    /// slow) and sizes, PostgreSQL's dead rows and last vacuums, SQLite's
    /// file, WAL and pages; see [`DatabaseHealth`] and [`TableHealth::rows`]
    /// for how each is read.
    pub fn database_health(&self) -> Result<DatabaseHealth> {
        let facts = self.store().database_health()?;
        Ok(DatabaseHealth {
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
