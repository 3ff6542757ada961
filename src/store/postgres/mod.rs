//! PostgreSQL half of the store: `FOR UPDATE SKIP LOCKED` claims, batches
//! passed as arrays and expanded with `unnest`, every time taken from the
//! database clock (`LOCALTIMESTAMP`; diesel sets the session to UTC), and
//! each operation in as few statements (round trips) as the SQL allows.

use chrono::NaiveDateTime;
use diesel::connection::SimpleConnection;
use diesel::sql_types::{Array, BigInt, Integer, Nullable, Text, Timestamp};
use diesel::{Connection, PgConnection, QueryResult, QueryableByName, RunQueryDsl, sql_query};

use std::time::Duration;

mod audit;
mod claims;
mod concurrency;
mod control;
mod explain;
pub(in crate::store) mod floor;
mod health;
mod jobs;
mod processes;
mod recurring;
mod statement;
mod stats;

pub(in crate::store) use explain::explain;
pub(in crate::store) use statement::enqueue_statement;

use super::{
    AdminDriver, AttemptStarted, Cached, ClaimLimits, ClaimQuery, ClaimedJob, ClaimsDriver, Driver,
    Failed, JobsDriver, NewJob, NewProcess, ProcessRow, ProcessesDriver, Progress, Released,
    ReleasedJob, Retried, Snoozed, Succeeded, micros, prepared,
};
use crate::store::fair::{ready_rows_sql, ready_values_of};

/// The statements of queue pauses (`pauses.sql`).
const PAUSES: &str = include_str!("pauses.sql");
const PAUSE_INSERT: &str = crate::store::named::named(PAUSES, "pause_insert");
const PAUSE_DELETE: &str = crate::store::named::named(PAUSES, "pause_delete");

#[derive(QueryableByName)]
struct IdRow {
    #[diesel(sql_type = BigInt)]
    id: i64,
}

#[derive(QueryableByName)]
struct InsertedRow {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = Nullable<Text>)]
    unique_key: Option<String>,
}

#[derive(QueryableByName)]
struct KeyRow {
    #[diesel(sql_type = Text)]
    unique_key: String,
    #[diesel(sql_type = BigInt)]
    id: i64,
}

#[derive(QueryableByName)]
struct MovedRow {
    #[diesel(sql_type = BigInt)]
    moved: i64,
}

#[derive(QueryableByName)]
struct QueueRow {
    #[diesel(sql_type = Text)]
    queue_name: String,
}

/// Which insert statement a batch needs. Each variant leaves out what the
/// batch does not use: ON CONFLICT makes every row a speculative insertion
/// (an extra WAL record each), and jobs that are all ready now need no
/// run-time arrays and no scheduled rows.
#[derive(Clone, Copy)]
struct InsertShape {
    many: bool,
    notify: bool,
    keyed: bool,
    immediate: bool,
    /// Some job has a fairness key: ready rows are placed by `store::fair`.
    fair: bool,
}

impl InsertShape {
    fn of(jobs: &[NewJob], notify: bool) -> InsertShape {
        InsertShape {
            many: jobs.len() > 1,
            notify,
            keyed: jobs.iter().any(|j| j.unique_key.is_some()),
            // Jobs under a concurrency limit go to scheduled (due now) and
            // are placed by the caller: the general statement handles that.
            immediate: jobs
                .iter()
                .all(|j| j.run_at.is_none() && j.delay.is_zero() && j.concurrency_key.is_none()),
            fair: jobs.iter().any(|j| j.fairness_key.is_some()),
        }
    }

    /// The shape of [`InsertShape::index`] `i`.
    fn of_index(i: usize) -> InsertShape {
        InsertShape {
            fair: i & 16 != 0,
            many: i & 8 != 0,
            notify: i & 4 != 0,
            keyed: i & 2 != 0,
            immediate: i & 1 != 0,
        }
    }

    fn index(self) -> usize {
        usize::from(self.fair) * 16
            + usize::from(self.many) * 8
            + usize::from(self.notify) * 4
            + usize::from(self.keyed) * 2
            + usize::from(self.immediate)
    }

    /// One statement: the jobs, then their ready (and scheduled)
    /// executions; duplicates of a unique key are skipped (not an error,
    /// which would abort the caller's transaction); with `notify`,
    /// listeners of the queues with ready jobs are told at commit.
    fn sql(self) -> String {
        let run_time = if self.immediate {
            "LOCALTIMESTAMP"
        } else {
            "COALESCE(run_at, LOCALTIMESTAMP + delay_us * INTERVAL '1 microsecond')"
        };
        let rows = match (self.many, self.immediate) {
            (false, true) => "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, LOCALTIMESTAMP, LOCALTIMESTAMP, LOCALTIMESTAMP)".to_string(),
            (false, false) => "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11,
                 COALESCE($12::timestamp, LOCALTIMESTAMP + $13::bigint * INTERVAL '1 microsecond'), LOCALTIMESTAMP, LOCALTIMESTAMP)"
                .to_string(),
            (true, immediate) => {
                let (run_arrays, run_columns) = if immediate {
                    ("", "")
                } else {
                    (", $12::timestamp[], $13::bigint[]", ", run_at, delay_us")
                };
                // A lone function scan feeding an INSERT yields, inserts and
                // returns its rows in array order, which `align_inserted`
                // relies on: no sort is needed.
                format!(
                    "SELECT queue_name, kind, arguments, priority, unique_key, concurrency_key, options,
                            delivery, max_attempts, max_stalled_count, fairness_key, {run_time},
                            LOCALTIMESTAMP, LOCALTIMESTAMP
                     FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::text[], $6::text[],
                                 $7::text[], $8::text[], $9::int[], $10::int[], $11::text[]{run_arrays})
                         AS i(queue_name, kind, arguments, priority, unique_key, concurrency_key,
                              options, delivery, max_attempts, max_stalled_count, fairness_key{run_columns})"
                )
            }
        };
        let on_conflict = if self.keyed {
            "ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL DO NOTHING"
        } else {
            ""
        };
        let (ready_filter, scheduled) = if self.immediate {
            ("", "")
        } else {
            (
                "WHERE scheduled_at <= LOCALTIMESTAMP AND concurrency_key IS NULL",
                ", scheduled AS (
                     INSERT INTO solidq_scheduled_executions
                         (job_id, queue_name, priority, scheduled_at, created_at, concurrency_key)
                     SELECT id, queue_name, priority, scheduled_at, LOCALTIMESTAMP, concurrency_key
                     FROM inserted
                     WHERE scheduled_at > LOCALTIMESTAMP OR concurrency_key IS NOT NULL)",
            )
        };
        let result = if self.notify {
            format!(
                ", notified AS (
                     SELECT count(pg_notify('solidq', current_schema() || ':' || q.queue_name)) AS n
                     FROM (SELECT DISTINCT queue_name FROM inserted {ready_filter}) q)
                 SELECT id, unique_key, (SELECT n FROM notified) AS notified FROM inserted"
            )
        } else {
            " SELECT id, unique_key FROM inserted".to_string()
        };
        let ready_rows = match (self.fair, self.many) {
            (false, _) => format!(
                "SELECT id, queue_name, priority, LOCALTIMESTAMP, NULL, id, kind, delivery FROM inserted {ready_filter}"
            ),
            (true, false) => format!(
                "SELECT {} FROM inserted {ready_filter}",
                ready_values_of("inserted", "LOCALTIMESTAMP")
            ),
            (true, true) => ready_rows_sql(
                "inserted",
                "LOCALTIMESTAMP",
                &format!("FROM inserted {ready_filter}"),
            ),
        };
        let ready_columns = crate::store::fair::READY_COLUMNS;
        format!(
            "WITH inserted AS (
                 INSERT INTO solidq_jobs (queue_name, kind, arguments, priority, unique_key, concurrency_key,
                                          options, delivery, max_attempts, max_stalled_count, fairness_key,
                                          scheduled_at, created_at, updated_at)
                 {rows}
                 {on_conflict}
                 RETURNING id, queue_name, priority, scheduled_at, unique_key, concurrency_key, fairness_key,
                           kind, delivery
             ), ready AS (
                 INSERT INTO solidq_ready_executions ({ready_columns})
                 {ready_rows}
             ){scheduled}{result}"
        )
    }

    /// The statement, built once per shape.
    fn statement(self) -> &'static str {
        static STATEMENTS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
        let all =
            STATEMENTS.get_or_init(|| (0..32).map(|i| InsertShape::of_index(i).sql()).collect());
        &all[self.index()]
    }
}

/// The claim statement for a queue list: lock candidates with SKIP LOCKED,
/// move them from ready to claimed, return the jobs (the caller puts them
/// in claim order: [`ClaimQuery::sort`]). Up to `$1` jobs go to idle
/// threads and are recorded as started; up to `$3` more are claimed ahead,
/// only of the kinds in `$4` and at-least-once, recorded as not started.
///
/// Every row locked is a row claimed: the ahead candidates are filtered
/// (on their job's kind and delivery) before they are locked, not after.
/// A row locked and left behind would be skipped by every concurrent
/// claimer, who would then sleep while it waits. The filter is a scalar
/// subquery, one primary-key probe per candidate in the ready index's
/// order, because an `EXISTS` was flattened into a join: on a generic plan
/// with the jobs table's statistics behind its growth, PostgreSQL drove
/// it from a sequential scan of every job (kept ones included) and sorted
/// the result, 7,455 buffers per claim under a stream of single enqueues.
pub(super) fn claim_sql(claim: &ClaimQuery) -> String {
    const LOCK: &str = " FOR UPDATE SKIP LOCKED";
    // A single pattern's claim starts its index scan at the floor (`$6`)
    // while the counter of jobs made ready below the tail reads as the
    // worker last saw it (`$5`), and at the head otherwise (floor.rs).
    let floored = crate::store::floor::applies(claim);
    let (floor_cte, from_floor, ahead_from_cte, ahead_from_floor, below) = if floored {
        (
            floor::CTE,
            floor::CONDITION,
            floor::AHEAD_FROM,
            floor::AHEAD_CONDITION,
            floor::BELOW,
        )
    } else {
        ("", "", "", "", "")
    };
    let immediate = claim.candidates_where_sql("$1", from_floor, LOCK);
    // The ahead part is not read at all when the immediate part came back
    // short: each of its scans then reached the end of what it may claim,
    // and the ahead part reads the same rows, or fewer, with the same
    // snapshot. (A one-time filter: without it a claim of a drained queue
    // read the index to its end twice, the second time through every row
    // claimed since the last vacuum; under single enqueues beside 2 × 16
    // workers that was 3.6 ms of a claim's 3.9.)
    let ahead = claim.candidates_where_sql(
        "$3",
        &format!(
            "{ahead_from_floor} AND (SELECT count(*) FROM immediate) >= $1 \
             AND job_id <> ALL ((SELECT ids FROM started)::bigint[]) \
             AND COALESCE(r.kind = ANY ($4) AND r.delivery = 'at_least_once', \
                          (SELECT j.kind = ANY ($4) AND j.delivery = 'at_least_once' \
                           FROM solidq_jobs j WHERE j.id = r.job_id))"
        ),
        LOCK,
    );
    // Ahead candidates exclude the jobs picked for idle threads, not every
    // row the immediate part locked: with several patterns it locks up to
    // `$1` per pattern, and a row locked but not picked (the next in claim
    // order) must stay a candidate, or the claim order breaks.
    // With several patterns a job can match more than one (`mail` and `*`):
    // keep its first. Nothing is picked unless the claiming process's row
    // exists; locking it (KEY SHARE) makes a concurrent prune of that row
    // skip it until this claim is committed.
    let pick = |from: &str, limit: &str| {
        if claim.patterns.len() == 1 {
            format!("SELECT job_id FROM {from} WHERE EXISTS (SELECT 1 FROM alive)")
        } else {
            format!(
                "SELECT job_id FROM {from} WHERE EXISTS (SELECT 1 FROM alive) \
                 GROUP BY job_id ORDER BY min(ord), min(priority), min(position), job_id LIMIT {limit}"
            )
        }
    };
    let (pick_immediate, pick_ahead) = (pick("immediate", "$1"), pick("ahead", "$3"));
    // The rows to delete and to read are looked up by `= ANY(ARRAY(...))`,
    // not joined: a cached statement runs on a generic plan, which cannot
    // see `LIMIT $1`, assumes a tenth of the table, and would hash-join
    // against full scans of ready and jobs (or, with other statistics,
    // nested-loop every claimed row against every picked one). An array
    // lookup is an index lookup whatever the array's size. The jobs are
    // read row by row of `deleted` through a LATERAL subquery that cannot
    // be flattened (`OFFSET 0`): one primary key probe per claimed job,
    // whatever the plan guesses, with each row's place at hand. A
    // correlated `(SELECT position FROM deleted WHERE job_id = j.id)` per
    // job scanned all of `deleted` each time: a claim of 139 jobs compared
    // 19,000 pairs, and the work-down ran at 35,200 jobs/s against 45,500.
    format!(
        "WITH alive AS (SELECT id FROM solidq_processes WHERE id = $2 FOR KEY SHARE),{floor_cte}
         immediate AS ({immediate}),
         started AS (SELECT ARRAY({pick_immediate}) AS ids),{ahead_from_cte}
         ahead AS ({ahead}),
         picked AS (SELECT unnest(ids) AS job_id FROM started UNION ALL ({pick_ahead})),
         deleted AS (DELETE FROM solidq_ready_executions
                     WHERE job_id = ANY (ARRAY(SELECT job_id FROM picked)) RETURNING job_id, position),
         claimed AS (INSERT INTO solidq_claimed_executions (job_id, process_id, created_at, started_at)
                     SELECT job_id, $2, LOCALTIMESTAMP,
                            CASE WHEN job_id = ANY ((SELECT ids FROM started)::bigint[])
                                 THEN LOCALTIMESTAMP END
                     FROM deleted RETURNING job_id)
         SELECT j.id, j.queue_name, j.kind, j.arguments, j.concurrency_key, j.priority, j.options, j.delivery,
                j.max_attempts, j.attempts, j.stalled_count, j.snoozes, j.checkpoint, j.batch_id,
                j.cancel_requested_at IS NOT NULL AS cancel_requested, j.created_at,
                GREATEST(j.scheduled_at, j.updated_at) AS due_at, LOCALTIMESTAMP AS claimed_at,
                0::bigint AS ord, d.position,
                j.id = ANY ((SELECT ids FROM started)::bigint[]) AS started, j.run_alone{below}
         FROM deleted d,
              LATERAL (SELECT * FROM solidq_jobs j WHERE j.id = d.job_id OFFSET 0) j
         WHERE EXISTS (SELECT 1 FROM claimed)"
    )
}

impl Driver for PgConnection {
    fn transaction(
        &mut self,
        body: &mut dyn FnMut(&mut dyn Driver) -> QueryResult<()>,
    ) -> QueryResult<()> {
        Connection::transaction(self, |c| body(c))
    }

    fn claim_transaction(
        &mut self,
        body: &mut dyn FnMut(&mut dyn Driver) -> QueryResult<()>,
    ) -> QueryResult<()> {
        claims::claim_transaction(self, |c| body(c))
    }
}

impl AdminDriver for PgConnection {
    fn pause_set(&mut self, queue: &str, paused: bool) -> QueryResult<bool> {
        // Resuming wakes the workers that skipped the queue.
        let sql = if paused { PAUSE_INSERT } else { PAUSE_DELETE };
        let row: MovedRow = Cached(prepared(sql).bind::<Text, _>(queue)).get_result(self)?;
        Ok(row.moved > 0)
    }

    fn db_now(&mut self) -> QueryResult<NaiveDateTime> {
        #[derive(QueryableByName)]
        struct Now {
            #[diesel(sql_type = Timestamp)]
            now: NaiveDateTime,
        }
        let row: Now = Cached(prepared("SELECT LOCALTIMESTAMP AS now")).get_result(self)?;
        Ok(row.now)
    }
}

/// Maps `RETURNING` rows (inserted rows only, in input order) back onto the
/// inputs: a keyed input whose key is not next in line was a duplicate.
fn align_inserted(jobs: &[NewJob], rows: Vec<InsertedRow>) -> Vec<Option<i64>> {
    let mut rows = rows.into_iter().peekable();
    jobs.iter()
        .map(|job| match rows.peek() {
            Some(row) if job.unique_key.is_none() || row.unique_key == job.unique_key => {
                rows.next().map(|r| r.id)
            }
            _ => None,
        })
        .collect()
}

/// A migrated schema of its own (`None`: PostgreSQL is not there, the
/// test skipped loudly) and two connections to it: one to work on, and
/// one holding a snapshot open (`REPEATABLE READ`), so vacuum can remove
/// no row deleted from now on: a transaction held open elsewhere.
#[cfg(test)]
pub(super) fn migrated_under_a_held_snapshot() -> Option<(PgConnection, PgConnection)> {
    let url = crate::store::conformance::postgres_url()?;
    let options = crate::store::PoolOptions {
        size: 1,
        timeout: Duration::from_secs(30),
        sqlite: crate::store::SqliteSettings::default(),
    };
    let store =
        crate::store::Store::connect(&crate::types::DatabaseUrl::parse(&url).unwrap(), &options)
            .unwrap();
    store.migrate().unwrap();
    drop(store);
    let conn = PgConnection::establish(&url).unwrap();
    let mut holder = PgConnection::establish(&url).unwrap();
    holder
        .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1")
        .unwrap();
    Some((conn, holder))
}
