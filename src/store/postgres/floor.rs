//! PostgreSQL's side of the claim floor (`store::floor`, which says why
//! and when a claim starts at a floor): its counter, the sequence
//! `solidq_ready_below`, and the claim's fragments that read it.
//!
//! Every statement that makes jobs ready below the tail calls `nextval`
//! on it once per ready row: a sequence, not a row, because `nextval`
//! writes no row version (no dead row of its own) and is seen at once,
//! outside any transaction. The claim reads it in its `floor` CTE and
//! starts its index scan at `(0, floor)` while it reads as the worker
//! last saw it (37 buffers, 0.05 ms for a claim of an empty queue after a
//! minute's hold at 2,000 jobs/s, against 765 buffers from the head).

/// The text that the `.sql` files' statements making jobs ready below
/// the tail put in their `RETURNING` list: it moves the sequence on, once
/// per ready row (their unit tests compare).
#[cfg(test)]
pub(in crate::store) const READY_BELOW: &str = "nextval('solidq_ready_below') AS below";

/// Moves the sequence on after an enqueue of jobs that may be ready below
/// the tail ([`moves_on`]), in its transaction: a statement of its own,
/// so the enqueue's statement reads nothing the previous release's
/// schema lacks (a producer of this build before `migrate` still
/// enqueues).
pub(in crate::store) const MOVE_ON: &str = "SELECT nextval('solidq_ready_below')";

/// The claim's `floor` CTE, after `alive`: the sequence as it reads now,
/// and where the scans start. While it reads `$5` (the value the worker
/// last saw) at `(0, $6)`, but the jobs for idle threads at the head when
/// `$7`; at the head otherwise.
pub(super) const CTE: &str = "
         floor AS (SELECT last_value,
                          CASE WHEN last_value = $5 AND NOT $7 THEN 0
                               ELSE CAST(-2147483648 AS integer) END AS priority,
                          CASE WHEN last_value = $5 AND NOT $7 THEN $6::bigint
                               ELSE CAST(-9223372036854775807 AS bigint) END AS position,
                          CASE WHEN last_value = $5 THEN 0
                               ELSE CAST(-2147483648 AS integer) END AS ahead_priority,
                          CASE WHEN last_value = $5 THEN $6::bigint
                               ELSE CAST(-9223372036854775807 AS bigint) END AS ahead_position
                   FROM solidq_ready_below),";

/// The candidates' condition: at or after the floor in claim order, an
/// index range (both claim indexes end in priority, position).
pub(super) const CONDITION: &str =
    " AND (r.priority, r.position) >= ((SELECT priority FROM floor), (SELECT position FROM floor))";

/// Where the candidates claimed ahead (of fast kinds, for threads not
/// idle yet) start: at the floor even when the jobs for idle threads are
/// looked for from the head, and at the last row those took when it is
/// further on. The ahead part runs only when the idle threads' part took
/// all it asked for, so every row before its last one in claim order was
/// taken by it, held by another claim, or on a paused queue: nothing the
/// ahead part may take (it takes fewer kinds, never more). Started there,
/// it does not walk again what the first part walked: from the head,
/// under a trickle whose claimed rows vacuum has not removed yet, that was
/// every one of them, twice a claim (`pg_stat_statements` over a mixed
/// run: 620 buffers a claim of 9 jobs). The last row itself, which this
/// claim holds, is left out by the ahead part's filter of the ids taken.
pub(super) const AHEAD_FROM: &str = "
         ahead_from AS (SELECT CASE WHEN i.priority IS NULL
                                      OR (f.ahead_priority, f.ahead_position) > (i.priority, i.position)
                                    THEN f.ahead_priority ELSE i.priority END AS priority,
                               CASE WHEN i.priority IS NULL
                                      OR (f.ahead_priority, f.ahead_position) > (i.priority, i.position)
                                    THEN f.ahead_position ELSE i.position END AS position
                        FROM floor f
                        LEFT JOIN (SELECT priority, position FROM immediate
                                   ORDER BY priority DESC, position DESC LIMIT 1) i ON true),";

/// The condition of the candidates claimed ahead: at or after
/// [`AHEAD_FROM`] in claim order, an index range.
pub(super) const AHEAD_CONDITION: &str = " AND (r.priority, r.position) >= \
     ((SELECT priority FROM ahead_from), (SELECT position FROM ahead_from))";

/// The claim's column of the sequence's value as it read it.
pub(super) const BELOW: &str = ", (SELECT last_value FROM floor) AS below";

/// The sequence's value, read after a claim that took nothing (one that
/// took jobs returns it with each).
pub(super) const READ_BELOW: &str = "SELECT last_value AS below FROM solidq_ready_below";

/// The look below a floor (`store::floor`): the first ready row of the
/// claim's pattern before `(0, $1)` in claim order, without locks.
pub(super) fn below_sql(claim: &crate::store::ClaimQuery) -> String {
    claim.candidates_where_sql("1", " AND (r.priority, r.position) < (0, $1)", "")
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use diesel::connection::SimpleConnection;
    use diesel::{PgConnection, QueryableByName, RunQueryDsl};

    use super::*;
    use crate::store::ClaimQuery;
    use crate::store::floor::moves_on;
    use crate::store::portable::Portable;
    use crate::store::{
        ClaimLimits, ClaimsDriver, JobsDriver, NewJob, NewProcess, ProcessesDriver,
    };
    use crate::types::QueuePattern;

    /// Every statement that inserts ready rows moves the counter on, and
    /// so does a resume; an enqueue does, by a statement of its own, when a
    /// job may be ready below the tail (a negative priority, a fair place).
    #[test]
    fn every_statement_that_makes_jobs_ready_moves_the_counter() {
        let files = [
            include_str!("audit.sql"),
            include_str!("claims.sql"),
            include_str!("concurrency.sql"),
            include_str!("control.sql"),
            include_str!("health.sql"),
            include_str!("jobs.sql"),
            include_str!("pauses.sql"),
            include_str!("processes.sql"),
            include_str!("recurring.sql"),
            include_str!("stats.sql"),
        ];
        let mut inserting = 0;
        for statement in files.iter().flat_map(|f| f.split("-- name:")) {
            if statement.contains("INSERT INTO solidq_ready_executions")
                || statement.contains("DELETE FROM solidq_pauses")
            {
                inserting += 1;
                assert!(statement.contains(READY_BELOW), "{statement}");
            }
        }
        assert_eq!(
            inserting, 6,
            "dispatch, snooze, release, retry, run now, resume"
        );
        assert_eq!(
            <PgConnection as Portable>::READY_INSERTED,
            format!(" RETURNING {READY_BELOW}")
        );
        let job = |priority, key: Option<&str>| NewJob {
            priority,
            fairness_key: key.map(Into::into),
            ..NewJob::plain("floor", "noop")
        };
        assert!(!moves_on(&[job(0, None), job(5, None)]), "at the tail");
        assert!(
            moves_on(&[job(0, None), job(-1, None)]),
            "a negative priority"
        );
        assert!(moves_on(&[job(0, Some("tenant"))]), "a fair place");
        let statements = super::super::enqueue_statement(&job(-1, None));
        assert_eq!(
            statements.last().unwrap().sql,
            MOVE_ON,
            "in the caller's transaction too"
        );
        assert_eq!(super::super::enqueue_statement(&job(0, None)).len(), 1);
    }

    #[derive(QueryableByName)]
    struct Read {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }

    /// A worker process and 2,000 ready jobs of the queue `floor`; returns
    /// the process's id and 500 more such jobs to insert.
    fn two_thousand_ready(conn: &mut PgConnection) -> (i64, Vec<NewJob>) {
        let p = conn
            .process_insert(&NewProcess {
                kind: "worker".into(),
                name: "floor".into(),
                pid: 4711,
                hostname: "host".into(),
                supervisor_id: None,
                metadata: "{}".into(),
            })
            .unwrap();
        let jobs: Vec<NewJob> = (0..500).map(|_| NewJob::plain("floor", "noop")).collect();
        for _ in 0..4 {
            conn.jobs_insert(&jobs, false).unwrap();
        }
        (p, jobs)
    }

    /// [`two_thousand_ready`] under a held snapshot
    /// (`migrated_under_a_held_snapshot`), all claimed by claims of 100 of
    /// queue `floor`: vacuum can remove none of their rows. The working
    /// connection, the holder's, the process, the jobs to enqueue again,
    /// and the claim's query (its floor where the claims ended).
    fn two_thousand_claimed_under_a_hold()
    -> Option<(PgConnection, PgConnection, i64, Vec<NewJob>, ClaimQuery)> {
        let (mut conn, holder) = super::super::migrated_under_a_held_snapshot()?;
        let (p, jobs) = two_thousand_ready(&mut conn);
        let query = ClaimQuery::new(vec![QueuePattern::Exact("floor".into())]);
        for _ in 0..20 {
            assert_eq!(
                conn.ready_claim(&query, p, &ClaimLimits::idle(100))
                    .unwrap()
                    .len(),
                100
            );
        }
        Some((conn, holder, p, jobs, query))
    }

    /// [`two_thousand_ready`] on a migrated schema of its own, with no
    /// snapshot held (`None`: PostgreSQL is not there, the test skipped
    /// loudly).
    fn two_thousand_ready_unheld() -> Option<(PgConnection, i64, Vec<NewJob>)> {
        let (mut conn, mut holder) = super::super::migrated_under_a_held_snapshot()?;
        holder.batch_execute("ROLLBACK").unwrap();
        let (p, jobs) = two_thousand_ready(&mut conn);
        Some((conn, p, jobs))
    }

    /// A claim's arguments for `EXPLAIN EXECUTE`: 16 jobs for idle
    /// threads, 84 ahead if they are `noop`, the counter and floor as
    /// `explain.rs` gives them.
    const CLAIM_ARGS: &str = "(16, 1, 84, ARRAY['noop'], 1, 0, false)";

    /// The plan of the prepared statement `name` for `args`, from its
    /// cache where it has one (`EXPLAIN EXECUTE`, which runs nothing).
    fn explain_prepared(
        conn: &mut PgConnection,
        name: &str,
        args: &str,
    ) -> diesel::QueryResult<String> {
        #[derive(QueryableByName)]
        struct PlanLine {
            #[diesel(sql_type = diesel::sql_types::Text, column_name = "QUERY PLAN")]
            line: String,
        }
        let lines: Vec<PlanLine> =
            diesel::sql_query(format!("EXPLAIN EXECUTE {name}{args}")).load(conn)?;
        Ok(lines
            .into_iter()
            .map(|l| l.line)
            .collect::<Vec<_>>()
            .join("\n"))
    }

    /// The index entries a claim of every queue (`*`) reads from the floor
    /// under a held snapshot, after an `ANALYZE` found the ready table
    /// empty (a drained queue; autovacuum's does the same): a handful, in
    /// a claim's transaction, where bitmap scans are off. The planner
    /// prices a whole index at a page then, and a bitmap scan of the queue
    /// index, read whole, came out as cheap as the claim order's index
    /// (`claims::claim_transaction`).
    #[test]
    fn a_claim_of_every_queue_reads_from_the_floor_whatever_the_statistics_say() {
        let Some((mut conn, mut holder)) = super::super::migrated_under_a_held_snapshot() else {
            return;
        };
        let (p, jobs) = two_thousand_ready(&mut conn);
        let query = ClaimQuery::new(vec![QueuePattern::All]);
        for _ in 0..20 {
            let claimed = super::super::claims::claim_transaction(&mut conn, |c| {
                c.ready_claim(&query, p, &ClaimLimits::idle(100))
            });
            assert_eq!(claimed.unwrap().len(), 100);
        }
        // The statistics of an empty queue, as a drained one has.
        conn.batch_execute("ANALYZE solidq_ready_executions")
            .unwrap();
        conn.jobs_insert(&jobs[..2], false).unwrap();
        // What one claim of one job reads of both indexes, in a claim's
        // transaction rolled back so the next claim finds the same.
        let read = |conn: &mut PgConnection| -> i64 {
            let counter = "SELECT pg_stat_get_xact_tuples_returned('solidq_ready_poll_by_queue'::regclass)
                                + pg_stat_get_xact_tuples_returned('solidq_ready_poll_all'::regclass) AS n";
            let mut read = 0;
            let rolled_back = super::super::claims::claim_transaction(conn, |c| {
                // Whether the planner would take the bitmap scan here
                // depends on sizes this test does not reach (a claim of
                // 100 jobs under a five-minute hold did): what shows is
                // that no claim is planned with it.
                #[derive(QueryableByName)]
                struct Setting {
                    #[diesel(sql_type = diesel::sql_types::Text)]
                    bitmap: String,
                }
                let setting = "SELECT current_setting('enable_bitmapscan') AS bitmap";
                let bitmap = diesel::sql_query(setting).get_result::<Setting>(c)?.bitmap;
                assert_eq!(bitmap, "off", "bitmap scans in a claim's transaction");
                let before = diesel::sql_query(counter).get_result::<Read>(c)?.n;
                let claimed = c.ready_claim(&query, p, &ClaimLimits::idle(1))?;
                assert_eq!(claimed.len(), 1);
                read = diesel::sql_query(counter).get_result::<Read>(c)?.n - before;
                Err::<(), _>(diesel::result::Error::RollbackTransaction)
            });
            assert!(rolled_back.is_err());
            read
        };
        let bound = query.floor.lock().unwrap().bound(Instant::now());
        assert!(!bound.head, "claims start at a floor: {bound:?}");
        // Often enough for the statement's generic plan, cached after five.
        let from_floor: Vec<i64> = (0..8).map(|_| read(&mut conn)).collect();
        query.floor.lock().unwrap().forget();
        let from_head = read(&mut conn);
        holder.batch_execute("ROLLBACK").unwrap();
        eprintln!(
            "index entries read by a claim of one job: {from_floor:?} from the floor, {from_head} from the head"
        );
        assert!(
            from_floor.iter().all(|n| *n < 20) && from_head >= 2_000,
            "index entries read: {from_floor:?} from the floor, {from_head} from the head"
        );
    }

    /// A connection plans its claim statement once: a claim's transaction
    /// keeps it on its generic plan, where PostgreSQL chose a custom plan
    /// at every call and planning took 3 µs per job of a work-down's 24 µs
    /// of server CPU (`claims::claim_transaction`).
    #[test]
    fn a_connection_plans_its_claim_once() {
        let Some((mut conn, p, _)) = two_thousand_ready_unheld() else {
            return;
        };
        let query = ClaimQuery::new(vec![QueuePattern::All]);
        for _ in 0..12 {
            let claimed = super::super::claims::claim_transaction(&mut conn, |c| {
                c.ready_claim(&query, p, &ClaimLimits::idle(10))
            });
            assert_eq!(claimed.unwrap().len(), 10);
        }
        #[derive(QueryableByName, Debug)]
        struct Plans {
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            generic_plans: i64,
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            custom_plans: i64,
        }
        let plans: Vec<Plans> = diesel::sql_query(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements
             WHERE statement LIKE 'WITH alive AS%'",
        )
        .load(&mut conn)
        .unwrap();
        let [plans] = &plans[..] else {
            panic!("one prepared claim statement: {plans:?}");
        };
        assert_eq!(
            (plans.generic_plans, plans.custom_plans),
            (12, 0),
            "a claim's plans, generic and custom"
        );
    }

    /// A claim is never compiled by JIT: its generic plan is priced for a
    /// tenth of the ready table, and behind a backlog of 400,000 jobs every
    /// claim passed `jit_above_cost` and compiled for about 13 ms
    /// (`claims::claim_transaction`). Here `jit_above_cost = 0` puts any
    /// plan past it: the same claim explained outside a claim's
    /// transaction is compiled.
    #[test]
    fn a_claim_is_never_compiled_by_jit() {
        let Some((mut conn, _, _)) = two_thousand_ready_unheld() else {
            return;
        };
        #[derive(QueryableByName)]
        struct Available {
            #[diesel(sql_type = diesel::sql_types::Bool)]
            available: bool,
        }
        let jit = diesel::sql_query("SELECT pg_jit_available() AS available")
            .get_result::<Available>(&mut conn)
            .unwrap();
        if !jit.available {
            eprintln!("SKIPPED a_claim_is_never_compiled_by_jit: this PostgreSQL has no JIT");
            return;
        }
        let sql = super::super::claim_sql(&ClaimQuery::new(vec![QueuePattern::All]));
        let explain = |conn: &mut PgConnection| -> diesel::QueryResult<String> {
            conn.batch_execute(&format!("PREPARE jit_claim AS {sql}"))?;
            let plan = explain_prepared(conn, "jit_claim", CLAIM_ARGS)?;
            conn.batch_execute("DEALLOCATE jit_claim")?;
            Ok(plan)
        };
        conn.batch_execute("SET jit_above_cost = 0").unwrap();
        let outside = explain(&mut conn).unwrap();
        assert!(
            outside.contains("JIT:"),
            "outside a claim's transaction:\n{outside}"
        );
        let inside = super::super::claims::claim_transaction(&mut conn, explain).unwrap();
        assert!(
            !inside.contains("JIT:"),
            "in a claim's transaction:\n{inside}"
        );
    }

    /// The statements of a worker and its dispatcher that
    /// find their rows by key do so whatever size their tables had when
    /// the plan was made (`claims::keyed_transaction`): the claim (its
    /// delete of the ready rows it took, its read of the jobs), the finish,
    /// the fence before a failure, the dispatch of due jobs, and the marks
    /// of claims taken ahead as started (and back).
    /// PostgreSQL caches a generic plan and makes it again only
    /// when the table's statistics change, so a plan made on small tables
    /// is the one that runs as they grow (a mixed run's finish read every
    /// job, 4-6 ms a finish). Each is planned here on tables of one job:
    /// as it runs, by key; outside its transaction, its table read whole.
    /// (Not explained again from the cache after the tables grow: under
    /// `.ci/run` the plan was made again on the grown tables, most likely
    /// because other tests' DDL overflowed the server's invalidation
    /// queue, which plans every cached statement again.)
    #[test]
    fn plans_cached_on_a_small_table_read_by_key_once_it_has_grown() {
        let Some((mut conn, mut holder)) = super::super::migrated_under_a_held_snapshot() else {
            return;
        };
        holder.batch_execute("ROLLBACK").unwrap();
        const TABLES: [&str; 4] = [
            "solidq_jobs",
            "solidq_ready_executions",
            "solidq_scheduled_executions",
            "solidq_claimed_executions",
        ];
        // No ANALYZE but these, which would plan the statements again.
        for table in TABLES {
            conn.batch_execute(&format!(
                "ALTER TABLE {table} SET (autovacuum_enabled = false); ANALYZE {table}"
            ))
            .unwrap();
        }
        conn.batch_execute("SET plan_cache_mode = force_generic_plan")
            .unwrap();
        conn.jobs_insert(&[NewJob::plain("floor", "noop")], false)
            .unwrap();
        let explain = explain_prepared;
        let claim = super::super::claim_sql(&ClaimQuery::new(vec![QueuePattern::All]));
        // Name, text, arguments, the table the plan made on one job reads
        // whole.
        let statements = [
            (
                "claim",
                claim.as_str(),
                CLAIM_ARGS,
                "solidq_ready_executions",
            ),
            (
                "finish",
                super::super::claims::SUCCEED_FENCED,
                "(1, ARRAY[1, 2]::bigint[], ARRAY[NULL, NULL]::text[], \
                  ARRAY[1, 1]::bigint[], ARRAY[3]::bigint[], ARRAY[5, 5]::bigint[])",
                "solidq_jobs",
            ),
            (
                "fence",
                super::super::claims::DELETE_CLAIMS_FENCED,
                "(1, ARRAY[1, 2]::bigint[])",
                "solidq_claimed_executions",
            ),
            (
                "dispatch",
                super::super::claims::DISPATCH_SCHEDULED,
                "(500)",
                "solidq_scheduled_executions",
            ),
            (
                "mark_started",
                super::super::claims::MARK_STARTED,
                "(1, ARRAY[1, 2]::bigint[])",
                "solidq_claimed_executions",
            ),
            (
                "mark_unstarted",
                super::super::claims::MARK_UNSTARTED,
                "(1, ARRAY[1, 2]::bigint[])",
                "solidq_claimed_executions",
            ),
        ];
        for (name, sql, _, _) in &statements {
            conn.batch_execute(&format!(
                "PREPARE plain_{name} AS {sql}; PREPARE {name} AS {sql}"
            ))
            .unwrap();
        }
        // Each statement's plan outside its transaction and in it.
        let plans = |conn: &mut PgConnection| {
            statements.map(|(name, _, args, table)| {
                let plain = explain(conn, &format!("plain_{name}"), args).unwrap();
                let run = |c: &mut PgConnection| explain(c, name, args);
                let keyed = if name == "claim" {
                    super::super::claims::claim_transaction(conn, run)
                } else {
                    super::super::claims::keyed_transaction(conn, run)
                };
                (name, plain, keyed.unwrap(), table)
            })
        };
        for (name, plain, keyed, table) in plans(&mut conn) {
            assert!(
                plain.contains(&format!("Seq Scan on {table} ")),
                "{name} planned outside its transaction:\n{plain}"
            );
            for table in TABLES {
                assert!(
                    !keyed.contains(&format!("Seq Scan on {table} ")),
                    "{name} planned as it runs:\n{keyed}"
                );
            }
        }
    }

    /// The driver marks claims taken ahead as started, and back, in a
    /// keyed transaction: a plan made while the claimed table held one
    /// row reads it by key, not whole (it read it whole before, and went on
    /// doing so as the table grew). The marks run inside a transaction of
    /// the test's: `pg_stat_xact_user_tables` counts its scans (with those
    /// of earlier transactions not yet reported, hence the difference).
    #[test]
    fn marks_of_claims_taken_ahead_are_planned_by_key_on_a_small_table() {
        let Some((mut conn, mut holder)) = super::super::migrated_under_a_held_snapshot() else {
            return;
        };
        holder.batch_execute("ROLLBACK").unwrap();
        conn.batch_execute(
            "ALTER TABLE solidq_claimed_executions SET (autovacuum_enabled = false);
             INSERT INTO solidq_claimed_executions (job_id, process_id, created_at)
             VALUES (1, 1, LOCALTIMESTAMP);
             ANALYZE solidq_claimed_executions;
             SET plan_cache_mode = force_generic_plan",
        )
        .unwrap();
        #[derive(diesel::QueryableByName)]
        struct Scans {
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            seq: i64,
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            idx: i64,
        }
        let scans = |conn: &mut PgConnection| -> Scans {
            diesel::sql_query(
                "SELECT seq_scan AS seq, coalesce(idx_scan, 0) AS idx FROM pg_stat_xact_user_tables
                 WHERE relname = 'solidq_claimed_executions' AND schemaname = current_schema()",
            )
            .get_result(conn)
            .unwrap()
        };
        for (name, mark) in [
            (
                "started",
                ClaimsDriver::claimed_mark_started as fn(&mut PgConnection, i64, &[i64]) -> _,
            ),
            ("unstarted", ClaimsDriver::claimed_mark_unstarted),
        ] {
            conn.batch_execute("BEGIN").unwrap();
            let before = scans(&mut conn);
            mark(&mut conn, 1, &[1]).unwrap();
            let after = scans(&mut conn);
            conn.batch_execute("ROLLBACK").unwrap();
            assert_eq!(
                (after.seq - before.seq, after.idx - before.idx),
                (0, 1),
                "marking {name}: sequential and index scans of the claimed table"
            );
        }
    }

    /// A claim that comes back short of jobs for its idle threads reads
    /// the queue's index once: its ahead part, which could find nothing
    /// more, is not run (`claim_sql`). A claim that fills them reads it
    /// twice and takes jobs ahead too.
    #[test]
    fn a_claim_that_comes_back_short_reads_the_queue_once() {
        let Some((mut conn, p, jobs)) = two_thousand_ready_unheld() else {
            return;
        };
        let query = ClaimQuery::new(vec![QueuePattern::All]);
        assert_eq!(
            conn.ready_claim(&query, p, &ClaimLimits::idle(1_995))
                .unwrap()
                .len(),
            1_995
        );
        let ahead = ClaimLimits {
            immediate: 10,
            ahead: 10,
            fast_kinds: vec!["noop".into()],
            from: 0,
        };
        // The claim's scans of the index, and the jobs it took.
        let claim = |conn: &mut PgConnection| -> (i64, usize) {
            let counter =
                "SELECT pg_stat_get_xact_numscans('solidq_ready_poll_all'::regclass) AS n";
            super::super::claims::claim_transaction(conn, |c| {
                let before = diesel::sql_query(counter).get_result::<Read>(c)?.n;
                let claimed = c.ready_claim(&query, p, &ahead)?.len();
                Ok((
                    diesel::sql_query(counter).get_result::<Read>(c)?.n - before,
                    claimed,
                ))
            })
            .unwrap()
        };
        assert_eq!(claim(&mut conn), (1, 5), "a claim of the last 5 jobs");
        conn.jobs_insert(&jobs[..30], false).unwrap();
        assert_eq!(claim(&mut conn), (2, 20), "a claim of 10 and 10 ahead");
    }

    /// A claim from the head that takes jobs ahead walks the rows claimed
    /// behind it once, not twice: its ahead part starts at the last row
    /// its first part took (`AHEAD_FROM`). 2,000 rows claimed under a
    /// held snapshot (vacuum can remove none of them), then 30 new jobs:
    /// a claim of 10 and 10 ahead from the head reads the 2,000 dead
    /// entries and the new ones once (it read them twice before).
    #[test]
    fn a_claim_from_the_head_walks_the_rows_claimed_behind_it_once() {
        let Some((mut conn, mut holder, p, jobs, query)) = two_thousand_claimed_under_a_hold()
        else {
            return;
        };
        conn.jobs_insert(&jobs[..30], false).unwrap();
        query.floor.lock().unwrap().forget();
        let ahead = ClaimLimits {
            immediate: 10,
            ahead: 10,
            fast_kinds: vec!["noop".into()],
            from: 0,
        };
        let counter =
            "SELECT pg_stat_get_xact_tuples_returned('solidq_ready_poll_by_queue'::regclass) AS n";
        let (read, claimed) = super::super::claims::claim_transaction(&mut conn, |c| {
            let before = diesel::sql_query(counter).get_result::<Read>(c)?.n;
            let claimed = c.ready_claim(&query, p, &ahead)?;
            let after = diesel::sql_query(counter).get_result::<Read>(c)?.n;
            Ok((after - before, claimed))
        })
        .unwrap();
        holder.batch_execute("ROLLBACK").unwrap();
        assert_eq!(claimed.len(), 20, "10 for idle threads and 10 ahead");
        assert_eq!(
            claimed.iter().filter(|j| j.started).count(),
            10,
            "10 started"
        );
        eprintln!("index entries read by a claim of 10 and 10 ahead from the head: {read}");
        assert!(
            (2_000..3_000).contains(&read),
            "index entries read: {read} (the 2,000 dead ones once, and the new ones)"
        );
    }

    /// The entries of the claim's index a claim of one job reads, while
    /// another session holds a snapshot from before 2,000 jobs were
    /// claimed (vacuum can remove none of their rows): from the floor a
    /// handful, from the head every one of them.
    #[test]
    fn a_claim_from_the_floor_reads_none_of_the_rows_claimed_behind_it() {
        let Some((mut conn, mut holder, p, jobs, query)) = two_thousand_claimed_under_a_hold()
        else {
            return;
        };
        conn.jobs_insert(&jobs[..2], false).unwrap();
        // What one claim of one job reads of the index, in a transaction
        // rolled back so the next claim finds the same.
        let read = |conn: &mut PgConnection| -> i64 {
            conn.batch_execute("BEGIN").unwrap();
            let counter = "SELECT pg_stat_get_xact_tuples_returned('solidq_ready_poll_by_queue'::regclass) AS n";
            let before = diesel::sql_query(counter)
                .get_result::<Read>(conn)
                .unwrap()
                .n;
            let claimed = conn.ready_claim(&query, p, &ClaimLimits::idle(1)).unwrap();
            assert_eq!(claimed.len(), 1);
            let after = diesel::sql_query(counter)
                .get_result::<Read>(conn)
                .unwrap()
                .n;
            conn.batch_execute("ROLLBACK").unwrap();
            after - before
        };
        let bound = query.floor.lock().unwrap().bound(Instant::now());
        assert!(!bound.head, "claims start at a floor: {bound:?}");
        let from_floor = read(&mut conn);
        query.floor.lock().unwrap().forget();
        let from_head = read(&mut conn);
        holder.batch_execute("ROLLBACK").unwrap();
        eprintln!(
            "index entries read by a claim of one job: {from_floor} from the floor, {from_head} from the head"
        );
        assert!(
            from_floor < 20 && from_head >= 2_000,
            "index entries read: {from_floor} from the floor, {from_head} from the head"
        );
    }
}
