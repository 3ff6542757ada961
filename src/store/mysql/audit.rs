//! MySQL statements of the audit log: the entry's time is the database's
//! clock. MySQL has no `RETURNING`, so the entry is inserted, then read
//! back by `LAST_INSERT_ID()` (this session's, whatever others insert),
//! both in one transaction so a failure between them leaves no entry.

use diesel::sql_types::{BigInt, Text};
use diesel::{MysqlConnection, QueryResult, RunQueryDsl};

use super::write_tx;
use crate::store::named::named;
use crate::store::{AuditDriver, AuditRow, Cached, NewAudit, prepared};

const SQL: &str = include_str!("audit.sql");
const INSERT: &str = named(SQL, "insert_entry");
const INSERTED: &str = named(SQL, "insert_entry/inserted");

impl AuditDriver for MysqlConnection {
    /// Two statements in a transaction (a savepoint inside the caller's): the
    /// insert, then the row it made.
    fn audit_insert(&mut self, entry: &NewAudit<'_>) -> QueryResult<AuditRow> {
        let conn = self;
        write_tx(conn, |conn| {
            Cached(
                prepared(INSERT)
                    .bind::<Text, _>(entry.actor)
                    .bind::<Text, _>(entry.source)
                    .bind::<Text, _>(entry.action)
                    .bind::<Text, _>(entry.target)
                    .bind::<BigInt, _>(entry.rows),
            )
            .execute(conn)?;
            Cached(prepared(INSERTED)).get_result(conn)
        })
    }
}
