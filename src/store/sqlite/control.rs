//! SQLite statements of job control: cancelling waiting jobs, running
//! scheduled or blocked ones now, asking running ones to stop. Callers hold
//! the write lock (a transaction opened with `BEGIN IMMEDIATE`).

use diesel::sql_types::{BigInt, Text, Timestamp};
use diesel::{QueryResult, QueryableByName, RunQueryDsl, SqliteConnection, sql_query};

use super::json_ids;
use crate::store::named::named;
use crate::store::{Cached, ControlDriver, RemovedPending, prepared, utc_now};

const SQL: &str = include_str!("control.sql");
const DELETE_READY: &str = named(SQL, "pending_remove/delete_ready");
const DELETE_SCHEDULED: &str = named(SQL, "pending_remove/delete_scheduled");
const DELETE_BLOCKED: &str = named(SQL, "pending_remove/delete_blocked");
const REMOVED_JOBS: &str = named(SQL, "pending_remove/jobs");
const MAKE_DUE: &str = named(SQL, "scheduled_make_due/executions");
const MAKE_JOBS_DUE: &str = named(SQL, "scheduled_make_due/jobs");
const DELETE_BLOCKED_TO_RUN: &str = named(SQL, "blocked_run_now/delete");
const UNLIMIT_JOBS: &str = named(SQL, "blocked_run_now/unlimit");
const READY_FROM_JOBS: &str = named(SQL, "blocked_run_now/ready");
const REQUEST_CANCEL: &str = named(SQL, "jobs_request_cancel");

#[derive(QueryableByName)]
struct IdRow {
    #[diesel(sql_type = BigInt)]
    id: i64,
}

impl ControlDriver for SqliteConnection {
    fn pending_remove(&mut self, ids: &[i64]) -> QueryResult<Vec<RemovedPending>> {
        let conn = self;
        let ids = json_ids(ids);
        let ready: Vec<IdRow> = Cached(prepared(DELETE_READY).bind::<Text, _>(&ids)).load(conn)?;
        let mut removed = ready.iter().map(|r| r.id).collect::<Vec<_>>();
        for delete in [DELETE_SCHEDULED, DELETE_BLOCKED] {
            let rows: Vec<IdRow> = sql_query(delete).bind::<Text, _>(&ids).load(conn)?;
            removed.extend(rows.iter().map(|r| r.id));
        }
        let ready_json = json_ids(&ready.iter().map(|r| r.id).collect::<Vec<_>>());
        Cached(
            prepared(REMOVED_JOBS)
                .bind::<Text, _>(json_ids(&removed))
                .bind::<Text, _>(ready_json),
        )
        .load(conn)
    }

    fn scheduled_make_due(&mut self, ids: &[i64]) -> QueryResult<usize> {
        let conn = self;
        let now = utc_now();
        let ids = json_ids(ids);
        let moved = Cached(
            prepared(MAKE_DUE)
                .bind::<Text, _>(&ids)
                .bind::<Timestamp, _>(now),
        )
        .execute(conn)?;
        Cached(
            prepared(MAKE_JOBS_DUE)
                .bind::<Text, _>(&ids)
                .bind::<Timestamp, _>(now),
        )
        .execute(conn)?;
        Ok(moved)
    }

    fn blocked_run_now(&mut self, ids: &[i64]) -> QueryResult<Vec<String>> {
        let conn = self;
        #[derive(QueryableByName)]
        struct Moved {
            #[diesel(sql_type = BigInt)]
            id: i64,
            #[diesel(sql_type = Text)]
            queue_name: String,
        }
        let now = utc_now();
        let moved: Vec<Moved> =
            Cached(prepared(DELETE_BLOCKED_TO_RUN).bind::<Text, _>(json_ids(ids))).load(conn)?;
        let moved_ids = json_ids(&moved.iter().map(|m| m.id).collect::<Vec<_>>());
        Cached(
            prepared(UNLIMIT_JOBS)
                .bind::<Text, _>(&moved_ids)
                .bind::<Timestamp, _>(now),
        )
        .execute(conn)?;
        Cached(
            prepared(READY_FROM_JOBS)
                .bind::<Text, _>(&moved_ids)
                .bind::<Timestamp, _>(now),
        )
        .execute(conn)?;
        Ok(moved.into_iter().map(|m| m.queue_name).collect())
    }

    fn jobs_request_cancel(&mut self, ids: &[i64]) -> QueryResult<Vec<i64>> {
        let conn = self;
        let rows: Vec<IdRow> = Cached(
            prepared(REQUEST_CANCEL)
                .bind::<Text, _>(json_ids(ids))
                .bind::<Timestamp, _>(utc_now()),
        )
        .load(conn)?;
        Ok(rows.into_iter().map(|r| r.id).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::fair::{READY_COLUMNS, ready_rows_sql};

    fn words(sql: &str) -> String {
        sql.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    /// control.sql holds the text store::fair makes for these arguments:
    /// a change there must be made here too.
    #[test]
    fn the_ready_rows_of_blocked_jobs_run_now_are_placed_as_store_fair_places_them() {
        let fair = format!(
            "INSERT INTO solidq_ready_executions ({READY_COLUMNS}) {}",
            ready_rows_sql(
                "j",
                "?2",
                "FROM solidq_jobs j WHERE j.id IN (SELECT value FROM json_each(?1))"
            )
        );
        assert_eq!(words(READY_FROM_JOBS), words(&fair));
    }
}
