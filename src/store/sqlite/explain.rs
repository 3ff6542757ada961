//! EXPLAIN of the hot statements, for `tests/it/plans.rs` and `docs/query-plans.md`.

use super::claims::{DELETE_CLAIMS_FENCED, FIND_DUE, SUCCEED_GROUP};
use super::jobs::{JOBS_DELETE_EXPIRED, JOBS_FIND_BY_UNIQUE_KEYS};
use super::processes::PROCESS_HEARTBEAT;
use super::*;

#[derive(QueryableByName)]
struct PlanRow {
    #[diesel(sql_type = Text)]
    detail: String,
}

/// The plans of the hot statements (`EXPLAIN QUERY PLAN`, parameters
/// unbound). Runs nothing.
pub(in crate::store) fn explain(conn: &mut SqliteConnection) -> QueryResult<Vec<(String, String)>> {
    use crate::types::QueuePattern::{All, Exact, Prefix};
    let candidates = |patterns| ClaimQuery::new(patterns).candidates_sql("?1", "");
    let statements: Vec<(&str, String)> = vec![
        ("enqueue one job", INSERT_JOB.into()),
        ("enqueue: its ready row", INSERT_READY.into()),
        ("enqueue: keyed jobs' ready rows", MOVE_DUE.to_string()),
        ("claim from *", candidates(vec![All])),
        (
            "claim from one queue",
            candidates(vec![Exact("default".into())]),
        ),
        (
            "claim from a prefix",
            candidates(vec![Prefix("def".into())]),
        ),
        (
            "claim from a list",
            candidates(vec![Exact("critical".into()), Prefix("mail".into()), All]),
        ),
        (
            "claim from listed queues",
            candidates(vec![Exact("critical".into()), Exact("default".into())]),
        ),
        ("claim: process alive", PROCESS_ALIVE.into()),
        ("claim: out of ready", DELETE_READY_CLAIMED.into()),
        ("claim: into claimed", INSERT_CLAIMED.into()),
        ("claim: read the jobs", SELECT_CLAIMED_JOBS.into()),
        ("dispatch: find due jobs", FIND_DUE.into()),
        ("dispatch: move them", MOVE_DUE.to_string()),
        ("finish: fence", DELETE_CLAIMS_FENCED.into()),
        ("finish: succeed", SUCCEED_GROUP.into()),
        ("heartbeat", PROCESS_HEARTBEAT.into()),
        ("clean finished jobs", JOBS_DELETE_EXPIRED.into()),
        (
            "dashboard: count discarded jobs",
            super::jobs::JOBS_COUNT_DISCARDED.into(),
        ),
        ("find unique keys", JOBS_FIND_BY_UNIQUE_KEYS.into()),
    ];
    statements
        .into_iter()
        .map(|(name, sql)| {
            let rows: Vec<PlanRow> = sql_query(format!("EXPLAIN QUERY PLAN {sql}")).load(conn)?;
            Ok((
                name.to_string(),
                rows.into_iter()
                    .map(|r| r.detail)
                    .collect::<Vec<_>>()
                    .join("\n"),
            ))
        })
        .collect()
}
