//! PostgreSQL's claims area: claiming ready jobs, dispatching due ones, the fence
//! that keeps a claim its process's, and releasing claims. Its statements
//! are in `claims.sql`, but the claim's, composed from the worker's queue
//! list (`mod.rs`'s `claim_sql`).

// The backend's statements, row types and helpers, which its areas share.
use super::*;
use crate::store::named::named;

const SQL: &str = include_str!("claims.sql");
pub(super) const DISPATCH_SCHEDULED: &str = named(SQL, "scheduled_dispatch");
const CLAIMS_HELD: &str = named(SQL, "claimed_held");
pub(super) const DELETE_CLAIMS_FENCED: &str = named(SQL, "claimed_delete_fenced");
pub(super) const MARK_STARTED: &str = named(SQL, "claimed_mark_started");
pub(super) const MARK_UNSTARTED: &str = named(SQL, "claimed_mark_unstarted");
const DELETE_CLAIMS_OF_PROCESS: &str = named(SQL, "claimed_delete_by_process");
const DELETE_ORPHANED_CLAIMS: &str = named(SQL, "claimed_delete_orphans");
pub(super) const SUCCEED_FENCED: &str = named(SQL, "jobs_succeed_fenced");
/// A claim's transaction: opened with bitmap and sequential scans off, the
/// claim on its generic plan and no JIT compilation ([`claim_transaction`]
/// says why). Not in `claims.sql`: it opens a transaction, where each
/// `.sql` file's names are statements every backend names alike and
/// PostgreSQL prepares.
const CLAIM_BEGIN: &str = "BEGIN; SET LOCAL enable_bitmapscan = off; \
     SET LOCAL enable_seqscan = off; SET LOCAL plan_cache_mode = force_generic_plan; \
     SET LOCAL jit = off";
/// The settings of a statement that finds its rows by key
/// ([`keyed_transaction`] says why).
const KEYED: &str = "SET LOCAL enable_seqscan = off; SET LOCAL jit = off";

/// Runs a claim, `body`, in a transaction with bitmap and sequential scans
/// off, cached statements on their generic plans and JIT off, opened in
/// the round trip of its `BEGIN` (diesel's transaction manager knows it as
/// its own).
///
/// The generic plan: the claim statement is written for it (ids handed
/// on as arrays, no join a plan could turn into a scan; docs/query-plans.md
/// shows it, `tests/it/plans.rs` checks it), but PostgreSQL chose a
/// custom plan at every call, because a plan that sees `LIMIT $1` prices
/// lower than one that does not. Planning a statement of this size took
/// 0.43 ms a claim, 3 µs per job of a work-down's 24 µs of server CPU
/// (`pg_stat_statements`: 714 plans in 709 claims).
///
/// An `ANALYZE` (ours, or autovacuum's) that finds the ready table empty,
/// as a drained queue is most of the time, records 0 rows, and the
/// planner then prices a scan of a whole index at one page. The claim of
/// every queue (`*`) has no condition on the queue, and its index,
/// `solidq_ready_poll_all (priority, position)`, and a bitmap scan of
/// `solidq_ready_poll_by_queue (queue_name, priority, position)` read
/// whole, then sorted, were priced the same: the plan went either way
/// with each new one. Without a hold the second costs a few pages more.
/// Under a transaction held open elsewhere the index keeps an entry for
/// every row claimed since, and each claim read them all: through a
/// ten-minute hold at 1,000 jobs/s, claims of 100 jobs took 17 ms after a
/// minute and 45 ms after five (auto_explain: a bitmap scan of
/// `solidq_ready_poll_by_queue` reading 1,230 pages), and the pickup p50
/// went from 8 to 45 ms in the windows where that plan held. With bitmap
/// scans off the only plans left read the index in claim order from the
/// floor. Set for every planning of the claim: PostgreSQL does not
/// re-plan a cached statement when a setting changes, so the claim runs
/// nowhere else on a connection of this driver's claims.
///
/// No JIT: the generic plan is priced for a tenth of the ready table,
/// not for the claim's `LIMIT`, so behind a backlog of a few hundred
/// thousand jobs its price passed `jit_above_cost` (100,000 by default)
/// and every claim compiled its expressions with LLVM, about 13 ms a
/// claim (`pg_stat_statements`' `jit_*` columns: 38 s of JIT in 2,903
/// claims of a 400,000-job work-down, which ran at 12,500 jobs/s, 31,500
/// with JIT off). A claim reads a few hundred rows; compiling never pays.
///
/// No sequential scan: see [`keyed_transaction`]. The claim's delete of
/// the ready rows it took is such a lookup; a plan cached while a drained
/// queue's ready table held a few pages read the table whole once it had
/// grown (a mixed run: 478 buffers and 4.5 ms of a claim's 4.6).
pub(super) fn claim_transaction<T>(
    conn: &mut PgConnection,
    body: impl FnOnce(&mut PgConnection) -> QueryResult<T>,
) -> QueryResult<T> {
    use diesel::connection::{AnsiTransactionManager, TransactionManager};
    let depth = AnsiTransactionManager::transaction_manager_status_mut(conn).transaction_depth()?;
    if depth.is_some() {
        // Inside the caller's transaction (none of solidq's claims is):
        // a savepoint, as `Driver::transaction`.
        return Connection::transaction(conn, body);
    }
    begun(conn, CLAIM_BEGIN, body)
}

/// Runs `body`, statements that find their rows by key (the finish, the
/// fence before a failure, the dispatch of due jobs, the marks of claims
/// taken ahead as started and back),
/// planned with sequential scans off and JIT off: in a transaction of its
/// own opened in the round trip of its `BEGIN`, or to the end of the
/// caller's (only solidq's own statements follow them in any transaction
/// they run in, and those find their rows by key too).
///
/// PostgreSQL caches a statement's generic plan, and plans it again only
/// when the table's statistics change. A plan made while a table held a
/// few pages (a new database; the ready and claimed tables of a drained
/// queue, most of the time) reads it whole, and goes on doing so as it
/// grows until the next `VACUUM` or `ANALYZE`: the finish of a mixed run
/// read all of `solidq_jobs` each time (4–6 ms a finish of 15 to 46 jobs,
/// `auto_explain`). With sequential scans off the plan is the primary key's
/// whatever the sizes were; the penalty PostgreSQL puts on a scan it
/// cannot avoid would price the statement past `jit_above_cost`, so JIT
/// is off too.
pub(super) fn keyed_transaction<T>(
    conn: &mut PgConnection,
    body: impl FnOnce(&mut PgConnection) -> QueryResult<T>,
) -> QueryResult<T> {
    use diesel::connection::{AnsiTransactionManager, TransactionManager};
    let depth = AnsiTransactionManager::transaction_manager_status_mut(conn).transaction_depth()?;
    if depth.is_some() {
        conn.batch_execute(KEYED)?;
        return body(conn);
    }
    begun(conn, &format!("BEGIN; {KEYED}"), body)
}

/// Opens a transaction by `begin` (its `BEGIN` and settings, one round
/// trip), runs `body`, and commits, or rolls back on an error.
fn begun<T>(
    conn: &mut PgConnection,
    begin: &str,
    body: impl FnOnce(&mut PgConnection) -> QueryResult<T>,
) -> QueryResult<T> {
    use diesel::connection::{AnsiTransactionManager, TransactionManager};
    AnsiTransactionManager::begin_transaction_sql(conn, begin)?;
    match body(conn) {
        Ok(value) => {
            AnsiTransactionManager::commit_transaction(conn)?;
            Ok(value)
        }
        Err(error) => match AnsiTransactionManager::rollback_transaction(conn) {
            Ok(()) | Err(diesel::result::Error::BrokenTransactionManager) => Err(error),
            Err(rollback) => Err(rollback),
        },
    }
}

/// Runs `sql`, a mark of process `process_id`'s claims among `job_ids`
/// as started or not, in a keyed transaction: it finds them by key
/// whatever the claimed table held when its plan was made.
fn mark_claims(
    conn: &mut PgConnection,
    sql: &'static str,
    process_id: i64,
    job_ids: &[i64],
) -> QueryResult<()> {
    keyed_transaction(conn, |conn| {
        Cached(
            prepared(sql)
                .bind::<BigInt, _>(process_id)
                .bind::<Array<BigInt>, _>(job_ids),
        )
        .execute(conn)
    })
    .map(drop)
}

/// A claimed job with the counter of jobs made ready below the tail as
/// the claim read it (`floor.rs`).
#[derive(QueryableByName)]
struct FloorClaimed {
    #[diesel(embed)]
    job: ClaimedJob,
    #[diesel(sql_type = BigInt)]
    below: i64,
}

#[derive(QueryableByName)]
struct BelowRow {
    #[diesel(sql_type = BigInt)]
    below: i64,
}

impl ClaimsDriver for PgConnection {
    fn ready_claim(
        &mut self,
        claim: &ClaimQuery,
        process_id: i64,
        limits: &ClaimLimits,
    ) -> QueryResult<Vec<ClaimedJob>> {
        let query = sql_query(claim.postgres_sql())
            .bind::<BigInt, _>(limits.immediate as i64)
            .bind::<BigInt, _>(process_id)
            .bind::<BigInt, _>((limits.total() - limits.immediate) as i64)
            .bind::<Array<Text>, _>(&limits.fast_kinds);
        let mut jobs: Vec<ClaimedJob> = if claim.is_listed() {
            let from = i32::try_from(limits.from + 1).unwrap_or(i32::MAX);
            Cached(query.bind::<diesel::sql_types::Integer, _>(from)).load(self)?
        } else if crate::store::floor::applies(claim) {
            let mut state = claim
                .floor
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let at = std::time::Instant::now();
            let bound = state.bound(at);
            let rows: Vec<FloorClaimed> = Cached(
                query
                    .bind::<BigInt, _>(bound.seen)
                    .bind::<BigInt, _>(bound.floor)
                    .bind::<diesel::sql_types::Bool, _>(bound.head),
            )
            .load(self)?;
            let took = at.elapsed();
            let below = match rows.first() {
                Some(row) => row.below,
                None => {
                    Cached(prepared(floor::READ_BELOW))
                        .get_result::<BelowRow>(self)?
                        .below
                }
            };
            let jobs: Vec<ClaimedJob> = rows.into_iter().map(|r| r.job).collect();
            state.claimed(at, took, (bound, limits.immediate), below, &jobs);
            jobs
        } else {
            Cached(query).load(self)?
        };
        claim.sort(&mut jobs);
        Ok(jobs)
    }

    fn ready_below_floor(&mut self, claim: &ClaimQuery, floor: i64) -> QueryResult<bool> {
        let rows: Vec<crate::store::ReadyJobId> =
            Cached(sql_query(floor::below_sql(claim)).bind::<BigInt, _>(floor)).load(self)?;
        Ok(!rows.is_empty())
    }

    fn scheduled_dispatch(&mut self, batch: usize) -> QueryResult<Vec<String>> {
        let rows: Vec<QueueRow> = keyed_transaction(self, |conn| {
            Cached(prepared(DISPATCH_SCHEDULED).bind::<BigInt, _>(batch as i64)).load(conn)
        })?;
        Ok(rows.into_iter().map(|r| r.queue_name).collect())
    }

    fn claimed_held(&mut self, process_id: i64, job_ids: &[i64]) -> QueryResult<Vec<i64>> {
        let rows: Vec<IdRow> = Cached(
            prepared(CLAIMS_HELD)
                .bind::<BigInt, _>(process_id)
                .bind::<Array<BigInt>, _>(job_ids),
        )
        .load(self)?;
        Ok(rows.into_iter().map(|r| r.id).collect())
    }

    fn claimed_delete_fenced(&mut self, process_id: i64, job_ids: &[i64]) -> QueryResult<Vec<i64>> {
        let rows: Vec<IdRow> = keyed_transaction(self, |conn| {
            Cached(
                prepared(DELETE_CLAIMS_FENCED)
                    .bind::<BigInt, _>(process_id)
                    .bind::<Array<BigInt>, _>(job_ids),
            )
            .load(conn)
        })?;
        Ok(rows.into_iter().map(|r| r.id).collect())
    }

    fn claimed_mark_started(&mut self, process_id: i64, job_ids: &[i64]) -> QueryResult<()> {
        mark_claims(self, MARK_STARTED, process_id, job_ids)
    }

    fn claimed_mark_unstarted(&mut self, process_id: i64, job_ids: &[i64]) -> QueryResult<()> {
        mark_claims(self, MARK_UNSTARTED, process_id, job_ids)
    }

    fn claimed_delete_by_process(&mut self, process_id: i64) -> QueryResult<Vec<ReleasedJob>> {
        Cached(prepared(DELETE_CLAIMS_OF_PROCESS).bind::<BigInt, _>(process_id)).load(self)
    }

    fn claimed_delete_orphans(&mut self, limit: usize) -> QueryResult<Vec<ReleasedJob>> {
        Cached(prepared(DELETE_ORPHANED_CLAIMS).bind::<BigInt, _>(limit as i64)).load(self)
    }

    fn jobs_succeed_fenced(
        &mut self,
        process_id: i64,
        rows: &[Succeeded],
        starts: &[i64],
    ) -> QueryResult<Vec<i64>> {
        // Sorted by id: the statement binary-searches the ids.
        let mut rows: Vec<&Succeeded> = rows.iter().collect();
        rows.sort_unstable_by_key(|r| r.id);
        let written: Vec<IdRow> = keyed_transaction(self, |conn| {
            Cached(
                prepared(SUCCEED_FENCED)
                    .bind::<BigInt, _>(process_id)
                    .bind::<Array<BigInt>, _>(rows.iter().map(|r| r.id).collect::<Vec<_>>())
                    .bind::<Array<Nullable<Text>>, _>(
                        rows.iter().map(|r| r.result.as_deref()).collect::<Vec<_>>(),
                    )
                    .bind::<Array<BigInt>, _>(
                        rows.iter().map(|r| micros(r.keep)).collect::<Vec<_>>(),
                    )
                    .bind::<Array<BigInt>, _>(starts)
                    .bind::<Array<BigInt>, _>(
                        rows.iter()
                            .map(|r| micros(r.started_ago))
                            .collect::<Vec<_>>(),
                    ),
            )
            .load(conn)
        })?;
        Ok(written.into_iter().map(|r| r.id).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::fair::{READY_COLUMNS, ready_rows_sql};

    fn words(sql: &str) -> String {
        sql.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    /// claims.sql holds the text store::fair makes for these arguments:
    /// a change there must be made here too.
    #[test]
    fn the_ready_rows_of_dispatched_jobs_are_placed_as_store_fair_places_them() {
        let fair = format!(
            "INSERT INTO solidq_ready_executions ({READY_COLUMNS}) {} RETURNING queue_name, {}",
            ready_rows_sql(
                "j",
                "LOCALTIMESTAMP",
                "FROM solidq_jobs j WHERE j.id = ANY (ARRAY(SELECT job_id FROM moved))"
            ),
            crate::store::postgres::floor::READY_BELOW
        );
        assert!(words(DISPATCH_SCHEDULED).contains(&words(&fair)));
    }
}
