//! PostgreSQL statement of the audit log: the entry's time is the
//! database's clock.

use diesel::sql_types::{BigInt, Text};
use diesel::{PgConnection, QueryResult, RunQueryDsl};

use crate::store::named::named;
use crate::store::{AuditDriver, AuditRow, Cached, NewAudit, prepared};

const SQL: &str = include_str!("audit.sql");
const INSERT: &str = named(SQL, "insert_entry");

impl AuditDriver for PgConnection {
    fn audit_insert(&mut self, entry: &NewAudit<'_>) -> QueryResult<AuditRow> {
        let conn = self;
        Cached(
            prepared(INSERT)
                .bind::<Text, _>(entry.actor)
                .bind::<Text, _>(entry.source)
                .bind::<Text, _>(entry.action)
                .bind::<Text, _>(entry.target)
                .bind::<BigInt, _>(entry.rows),
        )
        .get_result(conn)
    }
}
