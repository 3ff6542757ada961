//! PostgreSQL statements of job control: cancelling waiting jobs, running
//! scheduled or blocked ones now, asking running ones to stop (notified to
//! the workers on the `solidq` channel as the reserved queue name
//! `!cancel`, which no real queue can have).

use diesel::sql_types::{Array, BigInt, Text};
use diesel::{PgConnection, QueryResult, QueryableByName, RunQueryDsl};

use crate::store::named::named;
use crate::store::{Cached, ControlDriver, RemovedPending, prepared};

const SQL: &str = include_str!("control.sql");
const PENDING_REMOVE: &str = named(SQL, "pending_remove");
const SCHEDULED_MAKE_DUE: &str = named(SQL, "scheduled_make_due");
const BLOCKED_RUN_NOW: &str = named(SQL, "blocked_run_now");
const REQUEST_CANCEL: &str = named(SQL, "jobs_request_cancel");

#[derive(QueryableByName)]
struct IdRow {
    #[diesel(sql_type = BigInt)]
    id: i64,
}

impl ControlDriver for PgConnection {
    fn pending_remove(&mut self, ids: &[i64]) -> QueryResult<Vec<RemovedPending>> {
        let conn = self;
        Cached(prepared(PENDING_REMOVE).bind::<Array<BigInt>, _>(ids)).load(conn)
    }

    fn scheduled_make_due(&mut self, ids: &[i64]) -> QueryResult<usize> {
        let conn = self;
        Cached(prepared(SCHEDULED_MAKE_DUE).bind::<Array<BigInt>, _>(ids)).execute(conn)
    }

    fn blocked_run_now(&mut self, ids: &[i64]) -> QueryResult<Vec<String>> {
        let conn = self;
        #[derive(QueryableByName)]
        struct Queue {
            #[diesel(sql_type = Text)]
            queue_name: String,
        }
        let rows: Vec<Queue> =
            Cached(prepared(BLOCKED_RUN_NOW).bind::<Array<BigInt>, _>(ids)).load(conn)?;
        Ok(rows.into_iter().map(|r| r.queue_name).collect())
    }

    fn jobs_request_cancel(&mut self, ids: &[i64]) -> QueryResult<Vec<i64>> {
        let conn = self;
        let rows: Vec<IdRow> =
            Cached(prepared(REQUEST_CANCEL).bind::<Array<BigInt>, _>(ids)).load(conn)?;
        Ok(rows.into_iter().map(|r| r.id).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::CANCEL_CHANNEL_QUEUE;
    use crate::store::fair::{READY_COLUMNS, ready_rows_sql};

    fn words(sql: &str) -> String {
        sql.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    /// control.sql holds the text store::fair makes for these arguments:
    /// a change there must be made here too.
    #[test]
    fn the_ready_rows_of_blocked_jobs_run_now_are_placed_as_store_fair_places_them() {
        let fair = format!(
            "INSERT INTO solidq_ready_executions ({READY_COLUMNS}) {} RETURNING queue_name, {}",
            ready_rows_sql("upd", "LOCALTIMESTAMP", "FROM upd"),
            crate::store::postgres::floor::READY_BELOW
        );
        assert!(words(BLOCKED_RUN_NOW).ends_with(&words(&fair)));
    }

    /// The workers hear a cancellation under the reserved queue name.
    #[test]
    fn a_cancellation_is_notified_as_the_reserved_queue_name() {
        let payload = format!("current_schema() || ':{CANCEL_CHANNEL_QUEUE}')");
        assert!(REQUEST_CANCEL.contains(&payload));
    }
}
