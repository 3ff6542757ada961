//! SQLite statement of the audit log: the entry's time is this host's
//! clock, which is the database's.

use diesel::sql_types::{BigInt, Text, Timestamp};
use diesel::{QueryResult, RunQueryDsl, SqliteConnection, sql_query};

use crate::store::named::named;
use crate::store::{AuditRow, Cached, NewAudit, utc_now};

const SQL: &str = include_str!("audit.sql");
const INSERT: &str = named(SQL, "insert_entry");

/// One statement: atomic on its own, so no `BEGIN IMMEDIATE` is needed.
pub(super) fn audit_insert(
    conn: &mut SqliteConnection,
    entry: &NewAudit<'_>,
) -> QueryResult<AuditRow> {
    Cached(
        sql_query(INSERT)
            .bind::<Timestamp, _>(utc_now())
            .bind::<Text, _>(entry.actor)
            .bind::<Text, _>(entry.source)
            .bind::<Text, _>(entry.action)
            .bind::<Text, _>(entry.target)
            .bind::<BigInt, _>(entry.rows),
    )
    .get_result(conn)
}
