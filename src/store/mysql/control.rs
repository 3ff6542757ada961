//! MySQL statements of job control: cancelling waiting jobs, running
//! scheduled or blocked ones now, asking running ones to stop. MySQL has
//! no `DELETE … RETURNING` nor a `WITH` that writes, so each step locks
//! and reads its rows (`FOR UPDATE`, in id order, waiting for other
//! holders as PostgreSQL's `DELETE` and `UPDATE` wait), then changes
//! exactly those. No notification of cancellation: MySQL has no `NOTIFY`,
//! workers find it when they poll.

use diesel::sql_types::{BigInt, Text};
use diesel::{MysqlConnection, QueryResult, QueryableByName, RunQueryDsl};

use super::{IdRow, json_ids, write_tx};
use crate::store::named::named;
use crate::store::{Cached, ControlDriver, RemovedPending, prepared};

const SQL: &str = include_str!("control.sql");
const LOCK_READY: &str = named(SQL, "pending_remove/lock_ready");
const DELETE_READY: &str = named(SQL, "pending_remove/delete_ready");
const LOCK_SCHEDULED: &str = named(SQL, "pending_remove/lock_scheduled");
const DELETE_SCHEDULED: &str = named(SQL, "pending_remove/delete_scheduled");
const LOCK_BLOCKED: &str = named(SQL, "pending_remove/lock_blocked");
const DELETE_BLOCKED: &str = named(SQL, "pending_remove/delete_blocked");
const REMOVED_JOBS: &str = named(SQL, "pending_remove/jobs");
const MAKE_DUE: &str = named(SQL, "scheduled_make_due/executions");
const MAKE_JOBS_DUE: &str = named(SQL, "scheduled_make_due/jobs");
const LOCK_BLOCKED_TO_RUN: &str = named(SQL, "blocked_run_now/lock");
const DELETE_BLOCKED_TO_RUN: &str = named(SQL, "blocked_run_now/delete");
const UNLIMIT_JOBS: &str = named(SQL, "blocked_run_now/unlimit");
const READY_FROM_JOBS: &str = named(SQL, "blocked_run_now/ready");
const LOCK_ASKABLE: &str = named(SQL, "jobs_request_cancel/lock");
const ASK: &str = named(SQL, "jobs_request_cancel/ask");

/// The execution tables a waiting job can be in, as the statements that
/// lock a list's rows in one and delete them; the first is ready.
const PENDING_TABLES: [(&str, &str); 3] = [
    (LOCK_READY, DELETE_READY),
    (LOCK_SCHEDULED, DELETE_SCHEDULED),
    (LOCK_BLOCKED, DELETE_BLOCKED),
];

impl ControlDriver for MysqlConnection {
    /// Per execution table: lock the rows of `ids`, delete them. Then the
    /// jobs' facts. Inside a transaction.
    fn pending_remove(&mut self, ids: &[i64]) -> QueryResult<Vec<RemovedPending>> {
        let conn = self;
        let ids = json_ids(ids);
        let mut ready = Vec::new();
        let mut removed = Vec::new();
        for (i, (lock, delete)) in PENDING_TABLES.into_iter().enumerate() {
            let rows: Vec<IdRow> = Cached(prepared(lock).bind::<Text, _>(&ids)).load(conn)?;
            if rows.is_empty() {
                continue;
            }
            let locked: Vec<i64> = rows.into_iter().map(|r| r.id).collect();
            Cached(prepared(delete).bind::<Text, _>(json_ids(&locked))).execute(conn)?;
            if i == 0 {
                ready.extend_from_slice(&locked);
            }
            removed.extend(locked);
        }
        if removed.is_empty() {
            return Ok(Vec::new());
        }
        let mut jobs: Vec<RemovedPending> =
            Cached(prepared(REMOVED_JOBS).bind::<Text, _>(json_ids(&removed))).load(conn)?;
        for job in &mut jobs {
            job.was_ready = ready.contains(&job.id);
        }
        Ok(jobs)
    }

    /// Two updates: the executions (their count, of rows matched under
    /// `CLIENT_FOUND_ROWS`, is the answer), then their jobs. Inside a
    /// transaction.
    fn scheduled_make_due(&mut self, ids: &[i64]) -> QueryResult<usize> {
        let conn = self;
        let ids = json_ids(ids);
        let moved = Cached(prepared(MAKE_DUE).bind::<Text, _>(&ids)).execute(conn)?;
        if moved > 0 {
            Cached(prepared(MAKE_JOBS_DUE).bind::<Text, _>(&ids)).execute(conn)?;
        }
        Ok(moved)
    }

    /// Locks the blocked rows, deletes them, takes their jobs out of their
    /// limit, and inserts their ready rows (created at the jobs' new
    /// `scheduled_at`, the same instant); returns their queues.
    /// Inside a transaction.
    fn blocked_run_now(&mut self, ids: &[i64]) -> QueryResult<Vec<String>> {
        let conn = self;
        #[derive(QueryableByName)]
        struct Locked {
            #[diesel(sql_type = BigInt)]
            job_id: i64,
            #[diesel(sql_type = Text)]
            queue_name: String,
        }
        let locked: Vec<Locked> =
            Cached(prepared(LOCK_BLOCKED_TO_RUN).bind::<Text, _>(json_ids(ids))).load(conn)?;
        if locked.is_empty() {
            return Ok(Vec::new());
        }
        let moved = json_ids(&locked.iter().map(|l| l.job_id).collect::<Vec<_>>());
        Cached(prepared(DELETE_BLOCKED_TO_RUN).bind::<Text, _>(&moved)).execute(conn)?;
        Cached(prepared(UNLIMIT_JOBS).bind::<Text, _>(&moved)).execute(conn)?;
        let ready = Cached(prepared(READY_FROM_JOBS).bind::<Text, _>(&moved)).execute(conn)?;
        super::floor::moved(conn, ready)?;
        Ok(locked.into_iter().map(|l| l.queue_name).collect())
    }

    /// Its own transaction (the store runs it outside one): lock the jobs to
    /// ask (claimed, not asked yet), then ask them.
    fn jobs_request_cancel(&mut self, ids: &[i64]) -> QueryResult<Vec<i64>> {
        let conn = self;
        write_tx(conn, |conn| {
            let rows: Vec<IdRow> =
                Cached(prepared(LOCK_ASKABLE).bind::<Text, _>(json_ids(ids))).load(conn)?;
            let asked: Vec<i64> = rows.into_iter().map(|r| r.id).collect();
            if !asked.is_empty() {
                Cached(prepared(ASK).bind::<Text, _>(json_ids(&asked))).execute(conn)?;
            }
            Ok(asked)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::fair::{READY_COLUMNS, ready_rows_sql};
    use crate::store::mysql::IDS;

    fn words(sql: &str) -> String {
        sql.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    /// control.sql holds the text store::fair makes for these arguments:
    /// a change there must be made here too.
    #[test]
    fn the_ready_rows_of_blocked_jobs_run_now_are_placed_as_store_fair_places_them() {
        let fair = format!(
            "INSERT INTO solidq_ready_executions ({READY_COLUMNS}) {} ORDER BY id",
            ready_rows_sql(
                "j",
                "j.scheduled_at",
                &format!("FROM {IDS} STRAIGHT_JOIN solidq_jobs j ON j.id = ids.value")
            )
        );
        assert_eq!(words(READY_FROM_JOBS), words(&fair));
    }
}
