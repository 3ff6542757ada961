//! EXPLAIN of the hot statements, for `tests/it/plans.rs` and `docs/query-plans.md`.

use super::claims::{DELETE_CLAIMS_FENCED, DISPATCH_SCHEDULED, SUCCEED_FENCED};
use super::jobs::{JOBS_DELETE_EXPIRED, JOBS_FIND_BY_UNIQUE_KEYS};
use super::processes::PROCESS_HEARTBEAT;
use super::*;

#[derive(QueryableByName)]
struct PlanLine {
    #[diesel(sql_type = Text, column_name = "QUERY PLAN")]
    line: String,
}

/// The plans of the hot statements, with representative parameters, as a
/// prepared statement runs them (`plan_cache_mode = force_generic_plan`:
/// our statements are cached, and cached statements end up on generic
/// plans). EXPLAIN without ANALYZE runs nothing.
pub(in crate::store) fn explain(conn: &mut PgConnection) -> QueryResult<Vec<(String, String)>> {
    use crate::types::QueuePattern::{All, Exact, Prefix};
    let claim = |patterns| claim_sql(&ClaimQuery::new(patterns));
    let one_job = InsertShape {
        many: false,
        notify: false,
        keyed: false,
        immediate: true,
        fair: false,
    };
    let many_jobs = InsertShape {
        many: true,
        ..one_job
    };
    let many_fair_jobs = InsertShape {
        fair: true,
        ..many_jobs
    };
    // 16 jobs for idle threads, 84 ahead if they are `noop`.
    const CLAIM_ARGS: &str = "(16, 1, 84, ARRAY['noop'])";
    // A single pattern's claim also takes the counter of jobs made ready
    // below the tail as last seen and the floor (floor.rs).
    const ONE_PATTERN_ARGS: &str = "(16, 1, 84, ARRAY['noop'], 1, 0, false)";
    let statements: Vec<(&str, String, &str)> = vec![
        (
            "enqueue one job",
            one_job.sql(),
            "('default', 'noop', 'null', 0, NULL, NULL, '{}', 'at_least_once', 1, NULL, NULL)",
        ),
        (
            "enqueue many jobs",
            many_jobs.sql(),
            "(ARRAY['default'], ARRAY['noop'], ARRAY['null'], ARRAY[0], ARRAY[NULL::text], ARRAY[NULL::text], \
              ARRAY['{}'], ARRAY['at_least_once'], ARRAY[1], ARRAY[NULL::int], ARRAY[NULL::text])",
        ),
        (
            "enqueue many jobs with fairness keys",
            many_fair_jobs.sql(),
            "(ARRAY['default'], ARRAY['noop'], ARRAY['null'], ARRAY[0], ARRAY[NULL::text], ARRAY[NULL::text], \
              ARRAY['{}'], ARRAY['at_least_once'], ARRAY[1], ARRAY[NULL::int], ARRAY['tenant-1'])",
        ),
        ("claim from *", claim(vec![All]), ONE_PATTERN_ARGS),
        (
            "claim from one queue",
            claim(vec![Exact("default".into())]),
            ONE_PATTERN_ARGS,
        ),
        (
            "claim from a prefix",
            claim(vec![Prefix("def".into())]),
            ONE_PATTERN_ARGS,
        ),
        (
            "claim from a list",
            claim(vec![Exact("critical".into()), Prefix("mail".into()), All]),
            CLAIM_ARGS,
        ),
        (
            "claim from listed queues",
            claim(vec![Exact("critical".into()), Exact("default".into())]),
            "(16, 1, 84, ARRAY['noop'], 1)",
        ),
        // A worker's look below its floor (`store::floor`), without locks.
        (
            "look below a floor in one queue",
            super::floor::below_sql(&ClaimQuery::new(vec![Exact("default".into())])),
            "(84)",
        ),
        ("dispatch due jobs", DISPATCH_SCHEDULED.into(), "(500)"),
        (
            "finish (fence and succeed)",
            SUCCEED_FENCED.into(),
            "(1, ARRAY[1, 2]::bigint[], ARRAY[NULL, NULL]::text[], ARRAY[1, 1]::bigint[], ARRAY[3]::bigint[], ARRAY[5, 5]::bigint[])",
        ),
        (
            "fence before a failure",
            DELETE_CLAIMS_FENCED.into(),
            "(1, ARRAY[1, 2]::bigint[])",
        ),
        ("heartbeat", PROCESS_HEARTBEAT.into(), "(1)"),
        ("clean finished jobs", JOBS_DELETE_EXPIRED.into(), "(1000)"),
        (
            "dashboard: count discarded jobs",
            super::jobs::JOBS_COUNT_DISCARDED.into(),
            "",
        ),
        (
            "find unique keys",
            JOBS_FIND_BY_UNIQUE_KEYS.into(),
            "(ARRAY['order-42'])",
        ),
    ];
    conn.batch_execute("SET plan_cache_mode = force_generic_plan")?;
    let mut plans = Vec::new();
    for (i, (name, sql, args)) in statements.iter().enumerate() {
        let plan = |conn: &mut PgConnection| -> QueryResult<Vec<PlanLine>> {
            conn.batch_execute(&format!("PREPARE solidq_explain_{i} AS {sql}"))?;
            let lines =
                sql_query(format!("EXPLAIN EXECUTE solidq_explain_{i}{args}")).load(conn)?;
            conn.batch_execute(&format!("DEALLOCATE solidq_explain_{i}"))?;
            Ok(lines)
        };
        // A claim is planned in its transaction, with its settings, and
        // the statements that find rows by key with sequential scans off.
        let keyed = [
            "finish (fence and succeed)",
            "fence before a failure",
            "dispatch due jobs",
        ];
        let lines = if name.starts_with("claim from") {
            super::claims::claim_transaction(conn, plan)?
        } else if keyed.contains(name) {
            super::claims::keyed_transaction(conn, plan)?
        } else {
            plan(conn)?
        };
        plans.push((
            name.to_string(),
            lines
                .into_iter()
                .map(|l| l.line)
                .collect::<Vec<_>>()
                .join("\n"),
        ));
    }
    conn.batch_execute("RESET plan_cache_mode")?;
    Ok(plans)
}
