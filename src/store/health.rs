//! Database health: solidq's tables with their row counts and sizes, and
//! the backend's own facts (PostgreSQL's vacuum statistics, SQLite's files
//! and pages), each read the cheap way its backend offers (see the backend
//! `health.rs` files): never a `count(*)` over a big table.

use chrono::NaiveDateTime;

use super::{Store, driver};
use crate::types::Result;

/// One of solidq's tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TableFacts {
    pub name: String,
    /// Rows, exact or estimated.
    pub rows: i64,
    pub rows_exact: bool,
    /// The table with its indexes (and TOAST on PostgreSQL), in bytes;
    /// `None` when not measured.
    pub bytes: Option<i64>,
    /// PostgreSQL: dead rows not vacuumed yet.
    pub dead_rows: Option<i64>,
    /// PostgreSQL: the last manual vacuum (UTC).
    pub last_vacuum: Option<NaiveDateTime>,
    /// PostgreSQL: the last autovacuum (UTC).
    pub last_autovacuum: Option<NaiveDateTime>,
}

/// SQLite's file and pages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SqliteFacts {
    pub path: String,
    pub file_bytes: u64,
    pub wal_bytes: u64,
    pub page_size: i64,
    pub page_count: i64,
    pub freelist_pages: i64,
}

/// PostgreSQL's database and server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PostgresFacts {
    pub schema: String,
    pub database_bytes: i64,
    pub server_version: String,
}

/// What keeps the server from reclaiming the rows solidq deletes: the
/// oldest transaction another session holds open, and the rows waiting
/// behind it (see [`HealthDriver::horizon`](super::HealthDriver::horizon)).
/// One row: every field `None` where the backend has nothing to say.
#[derive(Debug, Clone, PartialEq, Eq, Default, diesel::QueryableByName)]
pub(crate) struct HorizonFacts {
    /// How long the oldest one has been open, in milliseconds.
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::BigInt>)]
    pub age_ms: Option<i64>,
    /// Its session: PostgreSQL's backend pid, MySQL's connection id.
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::BigInt>)]
    pub pid: Option<i64>,
    /// Who holds it: PostgreSQL's `application_name`, MySQL's user@host.
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    pub holder: Option<String>,
    /// What that session is doing ("idle in transaction", "Sleep").
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    pub state: Option<String>,
    /// PostgreSQL: dead rows in solidq's tables; MySQL: InnoDB's history
    /// list length (the whole server's undo not purged yet).
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::BigInt>)]
    pub backlog: Option<i64>,
}

/// Everything [`Store::database_health`] reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HealthFacts {
    /// By name.
    pub tables: Vec<TableFacts>,
    pub sqlite: Option<SqliteFacts>,
    pub postgres: Option<PostgresFacts>,
    /// The backend's clock when read.
    pub now: NaiveDateTime,
}

impl Store {
    /// solidq's tables and the backend's facts.
    pub(crate) fn database_health(&self) -> Result<HealthFacts> {
        self.with_read("database_health", |conn| driver(conn).database_health())
    }

    /// The oldest transaction held open elsewhere and the rows behind it.
    pub(crate) fn horizon(&self) -> Result<HorizonFacts> {
        self.with_read("horizon", |conn| driver(conn).horizon())
    }
}
