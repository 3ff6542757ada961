//! EXPLAIN of the hot statements, for `tests/it/plans.rs` and
//! `docs/query-plans.md`. MySQL cannot explain a statement with unbound
//! `?`, so each is explained with representative literal values in their
//! place. The plan is read as `FORMAT=JSON` (one text column, `EXPLAIN`,
//! on MySQL 8 and MariaDB alike, whose tabular forms differ in columns
//! and types) and rendered one line per table: `table: access type`, the
//! index used, the rows expected, and `filesort` / `temporary` where the
//! plan sorts or materializes.

use diesel::sql_types::Text;
use diesel::{MysqlConnection, QueryResult, QueryableByName, RunQueryDsl, sql_query};
use serde_json::Value;

use super::statement::{READY_AFTER_INSERT, insert_job_now_sql};
use super::{IDS, MOVE_DUE, STRINGS};
use crate::store::ClaimQuery;

#[derive(QueryableByName)]
struct Plan {
    #[diesel(sql_type = Text, column_name = "EXPLAIN")]
    json: String,
}

/// `sql` with each `?` replaced, in order, by the next of `values` (SQL
/// literals). Our statements have no `?` but placeholders.
fn with_literals(sql: &str, values: &[&str]) -> String {
    let mut parts = sql.split('?');
    let mut out = parts.next().unwrap_or_default().to_string();
    for (i, part) in parts.enumerate() {
        out.push_str(values.get(i).copied().unwrap_or("NULL"));
        out.push_str(part);
    }
    out
}

/// The plans of the hot statements, with representative values. EXPLAIN
/// runs nothing.
pub(in crate::store) fn explain(conn: &mut MysqlConnection) -> QueryResult<Vec<(String, String)>> {
    use crate::types::QueuePattern::{All, Exact, Prefix};
    // The claim's own statements, the limit (and the ahead part's ids and
    // kinds) in place of each pattern's `?`s.
    // From a floor (`store::floor`), its position before the limit.
    let candidates_from = |patterns: Vec<_>, floor: bool| {
        let claim = ClaimQuery::new(patterns);
        let values = if floor { vec!["84", "16"] } else { vec!["16"] }.repeat(claim.parts());
        with_literals(claim.mysql_candidates(floor), &values)
    };
    let candidates = |patterns| candidates_from(patterns, false);
    let ahead_from = |patterns: Vec<_>, floor: bool| {
        // JSON_ARRAY: MariaDB prints a condition's string literals in the
        // JSON plan without escaping their double quotes.
        let claim = ClaimQuery::new(patterns);
        let mut values = vec!["'[1]'", "JSON_ARRAY('echo')"];
        if floor {
            values.push("84");
        }
        values.push("16");
        with_literals(
            claim.mysql_candidates_ahead(floor),
            &values.repeat(claim.parts()),
        )
    };
    let ahead = |patterns| ahead_from(patterns, false);
    let ids = "'[1, 2, 3]'";
    let statements: Vec<(&str, String)> = vec![
        (
            "enqueue one job",
            with_literals(
                &insert_job_now_sql(),
                &[
                    "'default'",
                    "'noop'",
                    "'null'",
                    "0",
                    "NULL",
                    "NULL",
                    "'{}'",
                    "'at_least_once'",
                    "1",
                    "NULL",
                    "NULL",
                ],
            ),
        ),
        ("enqueue: its ready row", READY_AFTER_INSERT.to_string()),
        (
            "dispatch: make them ready",
            with_literals(&MOVE_DUE, &[ids]),
        ),
        ("claim from *", candidates(vec![All])),
        (
            "claim from one queue",
            candidates(vec![Exact("default".into())]),
        ),
        (
            "claim from one queue, from a floor",
            candidates_from(vec![Exact("default".into())], true),
        ),
        ("claim from *, from a floor", candidates_from(vec![All], true)),
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
        // A worker's look below its floor (`store::floor`), without locks.
        (
            "look below a floor in one queue",
            with_literals(
                &super::floor::below_sql(&ClaimQuery::new(vec![Exact("default".into())])),
                &["84"],
            ),
        ),
        ("claim ahead from *", ahead(vec![All])),
        (
            "claim ahead from listed queues",
            ahead(vec![Exact("critical".into()), Exact("default".into())]),
        ),
        (
            "claim ahead from one queue",
            ahead(vec![Exact("default".into())]),
        ),
        (
            "claim ahead from one queue, from a floor",
            ahead_from(vec![Exact("default".into())], true),
        ),
        (
            "claim: lock the picked rows",
            with_literals(
                &format!(
                    "SELECT job_id FROM solidq_ready_executions
                     WHERE job_id IN (SELECT value FROM {IDS}) ORDER BY job_id FOR UPDATE SKIP LOCKED"
                ),
                &[ids],
            ),
        ),
        (
            "claim: read the jobs",
            with_literals(
                &format!("SELECT * FROM solidq_jobs WHERE id IN (SELECT value FROM {IDS})"),
                &[ids],
            ),
        ),
        (
            "dispatch: find due jobs",
            "SELECT job_id, queue_name, priority FROM solidq_scheduled_executions
             WHERE scheduled_at <= UTC_TIMESTAMP(6) AND concurrency_key IS NULL
             ORDER BY scheduled_at, priority, job_id LIMIT 500 FOR UPDATE SKIP LOCKED"
                .into(),
        ),
        (
            "dispatch: move them",
            with_literals(
                &format!(
                    "DELETE x FROM {IDS} STRAIGHT_JOIN solidq_scheduled_executions x
                     ON x.job_id = ids.value"
                ),
                &[ids],
            ),
        ),
        (
            "dispatch limited jobs",
            with_literals(super::concurrency::LOCK_DUE, &["500"]),
        ),
        (
            "finish: fence",
            with_literals(
                &format!(
                    "SELECT job_id FROM solidq_claimed_executions
                     WHERE process_id = ? AND job_id IN (SELECT value FROM {IDS})
                     ORDER BY job_id FOR UPDATE"
                ),
                &["1", ids],
            ),
        ),
        (
            "finish: succeed",
            with_literals(
                &format!(
                    "UPDATE {IDS} STRAIGHT_JOIN solidq_jobs j ON j.id = ids.value
                     SET j.finished_at = UTC_TIMESTAMP(6), j.result = NULL,
                         j.expires_at = UTC_TIMESTAMP(6), j.updated_at = UTC_TIMESTAMP(6)"
                ),
                &[ids],
            ),
        ),
        (
            "heartbeat",
            "UPDATE solidq_processes SET last_heartbeat_at = UTC_TIMESTAMP(6) WHERE id = 1".into(),
        ),
        (
            "dashboard: count discarded jobs",
            super::jobs::JOBS_COUNT_DISCARDED.into(),
        ),
        (
            "clean finished jobs",
            with_literals(super::jobs::JOBS_DELETE_EXPIRED, &["1000"]),
        ),
        (
            "find unique keys",
            with_literals(
                &format!(
                    "SELECT unique_key, id FROM solidq_jobs
                     WHERE unique_key IN (SELECT value FROM {STRINGS})"
                ),
                &["'[\"order-42\"]'"],
            ),
        ),
        (
            "release a blocked job",
            with_literals(super::concurrency::BLOCKED_NEXT, &["'key-1'"]),
        ),
    ];
    statements
        .into_iter()
        .map(|(name, sql)| {
            let plans: Vec<Plan> = sql_query(format!("EXPLAIN FORMAT=JSON {sql}")).load(conn)?;
            let text = plans
                .iter()
                .map(|p| render(&p.json))
                .collect::<Vec<_>>()
                .join("\n");
            Ok((name.to_string(), text))
        })
        .collect()
}

/// One line per table of a JSON plan (the JSON itself if it has none).
fn render(json: &str) -> String {
    let Ok(plan) = serde_json::from_str::<Value>(json) else {
        return json.to_string();
    };
    let mut lines = Vec::new();
    walk(&plan, &mut lines);
    if lines.is_empty() {
        json.to_string()
    } else {
        lines.join("\n")
    }
}

fn walk(value: &Value, lines: &mut Vec<String>) {
    match value {
        Value::Object(fields) => {
            // MariaDB nests a "filesort" or "temporary_table" object; MySQL
            // 8 flags "using_filesort" / "using_temporary_table".
            if fields.contains_key("filesort") || fields.get("using_filesort") == Some(&true.into())
            {
                lines.push("filesort".to_string());
            }
            if fields.contains_key("temporary_table")
                || fields.get("using_temporary_table") == Some(&true.into())
            {
                lines.push("temporary".to_string());
            }
            if let Some(Value::String(message)) = fields.get("message") {
                lines.push(message.clone());
            }
            if let Some(Value::String(table)) = fields.get("table_name") {
                let mut line = match fields.get("access_type").and_then(Value::as_str) {
                    Some(access) => format!("{table}: {access}"),
                    None => table.clone(),
                };
                if let Some(key) = fields.get("key").and_then(Value::as_str) {
                    line.push_str(&format!(" USING {key}"));
                }
                if let Some(rows) = fields.get("rows").or(fields.get("rows_examined_per_scan")) {
                    line.push_str(&format!(" rows={rows}"));
                }
                if let Some(Value::String(condition)) = fields.get("attached_condition") {
                    line.push_str(&format!(" WHERE {condition}"));
                }
                lines.push(line);
            }
            for (_, child) in fields {
                walk(child, lines);
            }
        }
        Value::Array(items) => {
            for item in items {
                walk(item, lines);
            }
        }
        _ => {}
    }
}
