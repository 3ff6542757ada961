//! SQLite's side of database health, with a bounded cost whatever the
//! tables hold:
//!
//! * **Rows**: counted exactly up to [`EXACT_ROWS`] (a `count(*)` over at
//!   most that many rows). A bigger table gets an estimate between that
//!   lower bound and `max(rowid) - min(rowid) + 1` (two index probes, an
//!   upper bound: rowids are unique): its row count in `sqlite_stat1`, as
//!   of the last `ANALYZE` (the maintenance round's `PRAGMA optimize`
//!   refreshes it when a table has grown or shrunk a lot), else the upper
//!   bound. A table of a million finished jobs costs the same as one of a
//!   hundred thousand.
//! * **Sizes**: the `dbstat` virtual table (compiled into the bundled
//!   SQLite), summed per table over the table's b-tree and its indexes'.
//!   `dbstat` reads every page of the file, so it is skipped (sizes
//!   `None`) for a file larger than [`SIZES_MAX_FILE_BYTES`] (128 MiB). On a 300 MB
//!   file of a million finished jobs the whole health read took 90 ms
//!   here, 80 of them in `dbstat`, a few in the row counts.
//! * **Files and pages**: the file's and its `-wal`'s sizes from the file
//!   system; `page_size`, `page_count` and `freelist_count` pragmas.

use std::collections::HashMap;

use diesel::connection::SimpleConnection;
use diesel::sql_types::{BigInt, Text};
use diesel::{QueryResult, QueryableByName, RunQueryDsl, SqliteConnection, sql_query};

use crate::store::named::named;
use crate::store::{
    Cached, HealthDriver, HealthFacts, HorizonFacts, SqliteFacts, TableFacts, prepared, utc_now,
};

const SQL: &str = include_str!("health.sql");
const HORIZON: &str = named(SQL, "horizon");

/// Tables up to this many rows are counted exactly.
pub(in crate::store) const EXACT_ROWS: i64 = 100_000;
/// Per-table sizes are measured (reading the whole file) only up to this
/// file size: 128 MiB, so the dashboard's database page stays under 100 ms
/// (it took 76 ms with a file of 200 MB here, and 176–302 ms with one of
/// 1 GB, below 1 GiB, the limit before: about 0.2 ms per MB read, on top
/// of 35 ms; about 60 ms at this limit).
pub(in crate::store) const SIZES_MAX_FILE_BYTES: u64 = 128 << 20;

#[derive(QueryableByName)]
struct Name {
    #[diesel(sql_type = Text)]
    name: String,
}

#[derive(QueryableByName)]
struct Scalar {
    #[diesel(sql_type = BigInt)]
    v: i64,
}

#[derive(QueryableByName)]
struct Pages {
    #[diesel(sql_type = BigInt)]
    page_size: i64,
    #[diesel(sql_type = BigInt)]
    page_count: i64,
    #[diesel(sql_type = BigInt)]
    freelist_count: i64,
    #[diesel(sql_type = Text)]
    file: String,
}

#[derive(QueryableByName)]
struct Btree {
    #[diesel(sql_type = Text)]
    tbl: String,
    #[diesel(sql_type = BigInt)]
    bytes: i64,
}

#[derive(QueryableByName)]
struct Stat {
    #[diesel(sql_type = Text)]
    stat: String,
}

const TABLES: &str = named(SQL, "tables");
const PAGES: &str = named(SQL, "database");
const SIZES: &str = named(SQL, "tables/sizes");
const HAS_STAT1: &str = named(SQL, "tables/has_stat1");
const ANALYZED_ROWS: &str = named(SQL, "tables/analyzed_rows");

/// A table's rows and whether the count is exact (see the module docs).
/// `table` comes from `sqlite_master` and matches `solidq_%`: safe to
/// quote into the statement.
fn rows(conn: &mut SqliteConnection, table: &str) -> QueryResult<(i64, bool)> {
    let counted: Scalar = sql_query(format!(
        "SELECT count(*) AS v FROM (SELECT 1 FROM \"{table}\" LIMIT {})",
        EXACT_ROWS + 1
    ))
    .get_result(conn)?;
    if counted.v <= EXACT_ROWS {
        return Ok((counted.v, true));
    }
    // Two subqueries: SQLite answers a lone min() or max() with one index
    // probe, but scans the whole table for both in one SELECT.
    let span: Scalar = sql_query(format!(
        "SELECT coalesce((SELECT max(rowid) FROM \"{table}\") - (SELECT min(rowid) FROM \"{table}\") + 1, 0) AS v"
    ))
    .get_result(conn)?;
    let upper = span.v.max(counted.v);
    let analyzed = analyzed_rows(conn, table)?;
    Ok((analyzed.unwrap_or(upper).clamp(counted.v, upper), false))
}

/// The row count `ANALYZE` last recorded for `table`: the first number of
/// its `sqlite_stat1` rows (the table's own, or its fullest index's).
fn analyzed_rows(conn: &mut SqliteConnection, table: &str) -> QueryResult<Option<i64>> {
    let exists: Vec<Name> = sql_query(HAS_STAT1).load(conn)?;
    if exists.is_empty() {
        return Ok(None);
    }
    let stats: Vec<Stat> = sql_query(ANALYZED_ROWS).bind::<Text, _>(table).load(conn)?;
    Ok(stats
        .iter()
        .filter_map(|s| s.stat.split_whitespace().next()?.parse::<i64>().ok())
        .max())
}

/// Bytes per table (its b-tree and its indexes'), or `None` when `dbstat`
/// is not available.
fn table_sizes(conn: &mut SqliteConnection) -> Option<HashMap<String, i64>> {
    match sql_query(SIZES).load::<Btree>(conn) {
        Ok(btrees) => {
            let mut sizes = HashMap::new();
            for b in btrees {
                *sizes.entry(b.tbl).or_insert(0) += b.bytes;
            }
            Some(sizes)
        }
        Err(error) => {
            log::debug!("no table sizes: dbstat failed ({error})");
            None
        }
    }
}

/// A file's size, 0 when it does not exist (no WAL yet).
fn file_size(path: &str) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

impl HealthDriver for SqliteConnection {
    fn database_health(&mut self) -> QueryResult<HealthFacts> {
        let conn = self;
        let pages: Pages = Cached(prepared(PAGES)).get_result(conn)?;
        let names: Vec<Name> = Cached(prepared(TABLES)).load(conn)?;
        let file_bytes = file_size(&pages.file);
        let sizes = if file_bytes <= SIZES_MAX_FILE_BYTES {
            table_sizes(conn)
        } else {
            None
        };
        let mut tables = Vec::with_capacity(names.len());
        for Name { name } in names {
            let (rows, rows_exact) = rows(conn, &name)?;
            tables.push(TableFacts {
                bytes: sizes
                    .as_ref()
                    .map(|sizes| sizes.get(&name).copied().unwrap_or(0)),
                name,
                rows,
                rows_exact,
                dead_rows: None,
                last_vacuum: None,
                last_autovacuum: None,
            });
        }
        Ok(HealthFacts {
            tables,
            sqlite: Some(SqliteFacts {
                wal_bytes: file_size(&format!("{}-wal", pages.file)),
                file_bytes,
                path: pages.file,
                page_size: pages.page_size,
                page_count: pages.page_count,
                freelist_pages: pages.freelist_count,
            }),
            postgres: None,
            now: utc_now(),
        })
    }

    fn horizon(&mut self) -> QueryResult<HorizonFacts> {
        Cached(prepared(HORIZON)).get_result(self)
    }

    fn tables_tend(&mut self) -> QueryResult<Vec<String>> {
        // No dead rows to vacuum in SQLite (freed pages are reused); keep
        // the planner's statistics current: `PRAGMA optimize` analyzes the
        // tables (of every connection, 0x10000) whose size changed enough
        // since their last analysis. Reported: the tables it analyzed.
        let before = table_stats(self)?;
        self.batch_execute("PRAGMA optimize = 0x10002")?;
        let after = table_stats(self)?;
        let mut analyzed: Vec<String> = after
            .into_iter()
            .filter(|(table, stat)| before.get(table) != Some(stat))
            .map(|(table, _)| format!("ANALYZE {table} "))
            .collect();
        analyzed.sort();
        Ok(analyzed)
    }
}

#[derive(QueryableByName)]
struct TableStat {
    #[diesel(sql_type = Text)]
    tbl: String,
    #[diesel(sql_type = Text)]
    stat: String,
}

/// solidq's tables' planner statistics (`sqlite_stat1`, once it exists),
/// one string per table.
fn table_stats(conn: &mut SqliteConnection) -> QueryResult<HashMap<String, String>> {
    let exists: Vec<Name> = sql_query(HAS_STAT1).load(conn)?;
    if exists.is_empty() {
        return Ok(HashMap::new());
    }
    let rows: Vec<TableStat> = sql_query(
        "SELECT tbl, group_concat(coalesce(idx, '') || '=' || stat, ';') AS stat
         FROM sqlite_stat1 WHERE tbl LIKE 'solidq\\_%' ESCAPE '\\' GROUP BY tbl",
    )
    .load(conn)?;
    Ok(rows.into_iter().map(|r| (r.tbl, r.stat)).collect())
}
