//! SQLite statement of the audit log: the entry's time is this host's
//! clock, which is the database's.

use diesel::sql_types::{BigInt, Text, Timestamp};
use diesel::{QueryResult, RunQueryDsl, SqliteConnection};

use crate::store::named::named;
use crate::store::{AuditDriver, AuditRow, Cached, NewAudit, prepared, utc_now};

const SQL: &str = include_str!("audit.sql");
const INSERT: &str = named(SQL, "insert_entry");

impl AuditDriver for SqliteConnection {
    /// One statement: atomic on its own, so no `BEGIN IMMEDIATE` is needed.
    fn audit_insert(&mut self, entry: &NewAudit<'_>) -> QueryResult<AuditRow> {
        let conn = self;
        Cached(
            prepared(INSERT)
                .bind::<Timestamp, _>(utc_now())
                .bind::<Text, _>(entry.actor)
                .bind::<Text, _>(entry.source)
                .bind::<Text, _>(entry.action)
                .bind::<Text, _>(entry.target)
                .bind::<BigInt, _>(entry.rows),
        )
        .get_result(conn)
    }
}
