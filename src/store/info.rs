//! Result queries: a job's row and the execution table it sits in, read in
//! one statement so the status is a consistent snapshot. Backend-neutral:
//! written once with diesel's DSL on [`AnyConnection`].

use chrono::{DateTime, NaiveDateTime, Utc};
use diesel::prelude::*;

use super::schema::{
    solidq_blocked_executions as blocked, solidq_claimed_executions as claimed,
    solidq_failed_executions as failed, solidq_jobs as jobs, solidq_ready_executions as ready,
    solidq_scheduled_executions as scheduled,
};
use super::{AnyConnection, Store};
use crate::types::{Delivery, Error, ErrorInfo, JobInfo, JobStatus, Result};

/// The error kind a discarded job's last error carries.
pub(crate) const DISCARDED: &str = "discarded";

#[derive(Queryable, Selectable)]
#[diesel(table_name = jobs)]
struct JobRow {
    id: i64,
    queue_name: String,
    kind: String,
    arguments: String,
    priority: i32,
    unique_key: Option<String>,
    concurrency_key: Option<String>,
    fairness_key: Option<String>,
    delivery: String,
    max_attempts: i32,
    attempts: i32,
    stalled_count: i32,
    snoozes: i32,
    progress: Option<String>,
    checkpoint: Option<String>,
    batch_id: Option<i64>,
    result: Option<String>,
    errors: Option<String>,
    scheduled_at: NaiveDateTime,
    finished_at: Option<NaiveDateTime>,
    created_at: NaiveDateTime,
    /// When its last attempt started, once that attempt ended.
    started_at: Option<NaiveDateTime>,
}

/// Which execution table holds the job, as `LEFT JOIN`s found it: the
/// failed error and when it failed, the claiming process and when the
/// claim's job started, the ready, scheduled and blocked rows.
type Placement = (
    Option<String>,
    Option<NaiveDateTime>,
    Option<i64>,
    Option<NaiveDateTime>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
);

/// How to find the job.
pub(crate) enum JobLookup<'a> {
    Id(i64),
    UniqueKey(&'a str),
}

/// Which jobs a listing shows: conditions combine with AND; newest first.
#[derive(Debug, Clone, Default)]
pub(crate) struct JobSelection {
    pub status: Option<JobStatus>,
    pub queue: Option<String>,
    pub kind: Option<String>,
    /// Only jobs enqueued at or after this time.
    pub since: Option<NaiveDateTime>,
    /// Only jobs with ids below this one (the next page, newest first).
    pub before: Option<i64>,
    /// Only jobs with ids above this one (the page before, newest first).
    pub newer_than: Option<i64>,
    /// List the oldest first (the last page, or the page before) instead
    /// of the newest.
    pub oldest_first: bool,
    /// Only jobs finished (or failed) at or after this time.
    pub finished_from: Option<NaiveDateTime>,
    /// Only jobs finished (or failed) before this time.
    pub finished_to: Option<NaiveDateTime>,
    /// Only jobs whose arguments' JSON text contains this (any case).
    pub arguments: Option<String>,
    /// Only jobs whose stored errors' JSON text contains this (any case).
    pub error: Option<String>,
    pub limit: usize,
}

diesel::define_sql_function! {
    /// SQL's `lower`, on every backend.
    fn lower(x: diesel::sql_types::Text) -> diesel::sql_types::Text;
}

diesel::define_sql_function! {
    /// SQL's `lower` on a nullable column.
    #[sql_name = "lower"]
    fn lower_nullable(x: diesel::sql_types::Nullable<diesel::sql_types::Text>) -> diesel::sql_types::Nullable<diesel::sql_types::Text>;
}

/// The `LIKE` pattern for "contains `text`, any case": `%`, `_` and `\`
/// in it match themselves.
fn contains_pattern(text: &str) -> String {
    let mut pattern = String::from("%");
    for c in text.to_lowercase().chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

/// How a discarded job's errors text shows it: its last error is of kind
/// [`DISCARDED`], and a discard is final, so no other job's errors hold
/// such an object. Written compact by serde (SQLite) or as `jsonb` text
/// (PostgreSQL stamps the time through `jsonb`), hence two spellings;
/// inside a JSON string the quotes would be escaped, so neither matches
/// message text. Written exactly as the partial index
/// `solidq_jobs_discarded` states it (migration 2026-11-26-000001): a
/// query uses the index only with the same condition. A job without
/// errors is not discarded (`coalesce`).
pub(super) const DISCARDED_SQL: &str = "(coalesce(solidq_jobs.errors, '') LIKE '%\"kind\":\"discarded\"%' \
     OR coalesce(solidq_jobs.errors, '') LIKE '%\"kind\": \"discarded\"%')";

/// The condition that a finished job was discarded, as `conn`'s
/// database finds the few discarded among the finished through an index:
/// MySQL has no partial index, so its discarded jobs' ids are kept in a
/// table of their own, `solidq_discarded_jobs` (migration
/// 2026-12-04-000001, written by `jobs_discard`), which drives the tab as
/// the execution tables drive theirs.
fn discarded_sql(conn: &AnyConnection) -> diesel::expression::SqlLiteral<diesel::sql_types::Bool> {
    #[cfg(feature = "mysql")]
    #[allow(irrefutable_let_patterns)] // a build with MySQL alone
    if let AnyConnection::Mysql(_) = conn {
        return held_in("solidq_discarded_jobs");
    }
    let _ = conn;
    diesel::dsl::sql::<diesel::sql_types::Bool>(DISCARDED_SQL)
}

impl Store {
    /// Everything known about one job, or `JobNotFound`.
    pub(crate) fn job_info(&self, lookup: JobLookup<'_>) -> Result<JobInfo> {
        let row = self.with_read("job_info", |conn| load(conn, &lookup))?;
        let not_found = || match lookup {
            JobLookup::Id(id) => Error::JobNotFound(id.to_string()),
            JobLookup::UniqueKey(key) => Error::JobNotFound(format!("with unique key {key:?}")),
        };
        row.map(to_info).ok_or_else(not_found)
    }
}

impl Store {
    /// Jobs `selection` names, newest first, at most `selection.limit`.
    pub(crate) fn jobs_list(&self, selection: &JobSelection) -> Result<Vec<JobInfo>> {
        // Succeeded and discarded are told apart by the job's last error,
        // after the rows are read: page until the limit is met.
        let filtered_later = matches!(
            selection.status,
            Some(JobStatus::Succeeded | JobStatus::Discarded)
        );
        let page_size = if filtered_later {
            selection.limit.max(100)
        } else {
            selection.limit
        };
        let mut found = Vec::new();
        let mut cursor = if selection.oldest_first {
            selection.newer_than.unwrap_or(i64::MIN)
        } else {
            selection.before.unwrap_or(i64::MAX)
        };
        while found.len() < selection.limit {
            let page = self.with_read("jobs_list", |conn| {
                load_page(conn, selection, cursor, page_size)
            })?;
            let Some((last, _)) = page.last() else { break };
            cursor = last.id;
            let last_page = page.len() < page_size;
            found.extend(
                page.into_iter()
                    .map(to_info)
                    .filter(|info| selection.status.is_none_or(|s| info.status == s)),
            );
            if last_page {
                break;
            }
        }
        found.truncate(selection.limit);
        Ok(found)
    }
}

/// Jobs with the execution tables they sit in.
macro_rules! joined_jobs {
    () => {
        jobs::table
            .left_join(failed::table.on(failed::job_id.eq(jobs::id)))
            .left_join(claimed::table.on(claimed::job_id.eq(jobs::id)))
            .left_join(ready::table.on(ready::job_id.eq(jobs::id)))
            .left_join(scheduled::table.on(scheduled::job_id.eq(jobs::id)))
            .left_join(blocked::table.on(blocked::job_id.eq(jobs::id)))
    };
}

/// [`joined_jobs!`] selecting each job's row and its placement.
macro_rules! placed_jobs {
    () => {
        joined_jobs!().select((
            JobRow::as_select(),
            (
                failed::error.nullable(),
                failed::created_at.nullable(),
                claimed::process_id.nullable(),
                claimed::started_at.nullable(),
                ready::job_id.nullable(),
                scheduled::job_id.nullable(),
                blocked::job_id.nullable(),
            ),
        ))
    };
}

/// `query` (boxed, over [`joined_jobs!`]) narrowed to the conditions of
/// `selection` that SQL can check: all but its limit.
macro_rules! filtered {
    ($query:expr, $selection:expr, $discarded:expr) => {{
        let discarded = $discarded;
        let selection: &JobSelection = $selection;
        let mut query = $query;
        if let Some(before) = selection.before {
            query = query.filter(jobs::id.lt(before));
        }
        if let Some(newer_than) = selection.newer_than {
            query = query.filter(jobs::id.gt(newer_than));
        }
        if let Some(from) = selection.finished_from {
            query = query.filter(
                jobs::finished_at
                    .ge(from)
                    .or(failed::created_at.nullable().ge(from)),
            );
        }
        if let Some(to) = selection.finished_to {
            query = query.filter(
                jobs::finished_at
                    .lt(to)
                    .or(failed::created_at.nullable().lt(to)),
            );
        }
        if let Some(queue) = &selection.queue {
            query = query.filter(jobs::queue_name.eq(queue.clone()));
        }
        if let Some(kind) = &selection.kind {
            query = query.filter(jobs::kind.eq(kind.clone()));
        }
        if let Some(since) = selection.since {
            query = query.filter(jobs::created_at.ge(since));
        }
        if let Some(text) = &selection.arguments {
            query = query.filter(
                lower(jobs::arguments)
                    .like(contains_pattern(text))
                    .escape('\\'),
            );
        }
        if let Some(text) = &selection.error {
            let pattern = contains_pattern(text);
            query = query.filter(
                lower_nullable(jobs::errors)
                    .like(pattern.clone())
                    .escape('\\')
                    .or(lower_nullable(failed::error.nullable())
                        .like(pattern)
                        .escape('\\')),
            );
        }
        // Statuses kept in an execution table: its (small) set of ids
        // drives the query (`id IN (…)`), so that a large table of
        // finished jobs is never scanned for a few waiting ones.
        match selection.status {
            None => query,
            Some(JobStatus::Ready) => query
                .filter(held_in("solidq_ready_executions"))
                .filter(ready::job_id.is_not_null()),
            Some(JobStatus::Scheduled) => query
                .filter(held_in("solidq_scheduled_executions"))
                .filter(scheduled::job_id.is_not_null())
                .filter(jobs::attempts.eq(0)),
            Some(JobStatus::Retrying) => query
                .filter(held_in("solidq_scheduled_executions"))
                .filter(scheduled::job_id.is_not_null())
                .filter(jobs::attempts.gt(0)),
            Some(JobStatus::Waiting) => query.filter(held_in("solidq_waiting_executions")),
            Some(JobStatus::Blocked) => query
                .filter(held_in("solidq_blocked_executions"))
                .filter(blocked::job_id.is_not_null()),
            Some(JobStatus::Claimed) => query
                .filter(held_in("solidq_claimed_executions"))
                .filter(claimed::job_id.is_not_null())
                .filter(claimed::started_at.is_null()),
            Some(JobStatus::Running) => query
                .filter(held_in("solidq_claimed_executions"))
                .filter(claimed::started_at.is_not_null()),
            Some(JobStatus::Failed) => query
                .filter(held_in("solidq_failed_executions"))
                .filter(failed::job_id.is_not_null()),
            Some(JobStatus::Succeeded) => {
                query
                    .filter(jobs::finished_at.is_not_null())
                    .filter(diesel::dsl::not(
                        diesel::dsl::sql::<diesel::sql_types::Bool>(DISCARDED_SQL),
                    ))
            }
            // Found by an index on every backend (see `discarded_sql`);
            // succeeded jobs, the many, are read newest first and the
            // discarded among them skipped by their errors.
            Some(JobStatus::Discarded) => query
                .filter(jobs::finished_at.is_not_null())
                .filter(discarded),
        }
    }};
}

/// `solidq_jobs.id IN (SELECT job_id FROM <table>)`: the ids of an
/// execution table (`table` may carry a `WHERE`) drive a listing or a
/// count, so a large table of finished jobs is never scanned for a few
/// waiting ones — whatever statistics the planner has (SQLite, without
/// them or with some taken while a queue was empty, otherwise scans
/// every job of a join). Literal SQL: diesel refuses a subselect of a
/// table already joined.
pub(super) fn held_in(table: &str) -> diesel::expression::SqlLiteral<diesel::sql_types::Bool> {
    diesel::dsl::sql::<diesel::sql_types::Bool>(&format!(
        "solidq_jobs.id IN (SELECT job_id FROM {table})"
    ))
}

impl Store {
    /// How many jobs `selection` names, its limit aside.
    pub(crate) fn jobs_count(&self, selection: &JobSelection) -> Result<u64> {
        let n: i64 = self.with_read("jobs_count", |conn| {
            let query = joined_jobs!()
                .select(diesel::dsl::count_star())
                .into_boxed();
            filtered!(query, selection, discarded_sql(conn)).first(conn)
        })?;
        Ok(n.max(0) as u64)
    }
}

/// Up to `limit` jobs past `cursor` (ids below it newest first, above it
/// oldest first), with the conditions SQL can check (the status's table).
fn load_page(
    conn: &mut AnyConnection,
    selection: &JobSelection,
    cursor: i64,
    limit: usize,
) -> QueryResult<Vec<(JobRow, Placement)>> {
    let query = placed_jobs!().limit(limit as i64).into_boxed();
    let query = if selection.oldest_first {
        query.filter(jobs::id.gt(cursor)).order(jobs::id.asc())
    } else {
        query.filter(jobs::id.lt(cursor)).order(jobs::id.desc())
    };
    filtered!(query, selection, discarded_sql(conn)).load(conn)
}

impl Store {
    /// How many jobs `selection` names, its limit aside, counting no
    /// further than `cap + 1`: the cost is bounded however many match.
    pub(crate) fn jobs_count_capped(&self, selection: &JobSelection, cap: u64) -> Result<u64> {
        let ids: Vec<i64> = self.with_read("jobs_count_capped", |conn| {
            let query = joined_jobs!()
                .select(jobs::id)
                .order(jobs::id.desc())
                .limit(i64::try_from(cap.saturating_add(1)).unwrap_or(i64::MAX))
                .into_boxed();
            filtered!(query, selection, discarded_sql(conn)).load(conn)
        })?;
        Ok(ids.len() as u64)
    }
}

fn load(
    conn: &mut AnyConnection,
    lookup: &JobLookup<'_>,
) -> QueryResult<Option<(JobRow, Placement)>> {
    let query = placed_jobs!().into_boxed();
    let query = match lookup {
        JobLookup::Id(id) => query.filter(jobs::id.eq(*id)),
        JobLookup::UniqueKey(key) => query.filter(jobs::unique_key.eq(key.to_string())),
    };
    query.first(conn).optional()
}

fn utc(t: NaiveDateTime) -> DateTime<Utc> {
    t.and_utc()
}

fn to_info(
    (row, (failed_error, failed_at, process_id, started_at, in_ready, in_scheduled, in_blocked)): (
        JobRow,
        Placement,
    ),
) -> JobInfo {
    let errors: Vec<ErrorInfo> = row
        .errors
        .as_deref()
        .and_then(|e| serde_json::from_str(e).ok())
        .unwrap_or_default();
    let status = if row.finished_at.is_some() {
        if errors.last().is_some_and(|e| e.kind == DISCARDED) {
            JobStatus::Discarded
        } else {
            JobStatus::Succeeded
        }
    } else if failed_error.is_some() {
        JobStatus::Failed
    } else if process_id.is_some() && started_at.is_some() {
        JobStatus::Running
    } else if process_id.is_some() {
        JobStatus::Claimed
    } else if in_ready.is_some() {
        JobStatus::Ready
    } else if in_blocked.is_some() {
        JobStatus::Blocked
    } else if in_scheduled.is_some() && row.attempts > 0 {
        JobStatus::Retrying
    } else if in_scheduled.is_some() {
        JobStatus::Scheduled
    } else {
        // In no execution table and not finished: waiting for its parents
        // (`solidq_waiting_executions`, not joined).
        JobStatus::Waiting
    };
    // The error that put the job where it is: none once it succeeded or
    // while an attempt is under way (earlier attempts' are in `errors`).
    let error = match status {
        JobStatus::Succeeded | JobStatus::Running | JobStatus::Claimed => None,
        _ => failed_error
            .as_deref()
            .and_then(|e| serde_json::from_str(e).ok())
            .or_else(|| errors.last().cloned()),
    };
    JobInfo {
        id: row.id,
        kind: row.kind,
        queue: row.queue_name,
        priority: row.priority,
        arguments: serde_json::from_str(&row.arguments).unwrap_or(serde_json::Value::Null),
        status,
        attempts: row.attempts.max(0) as u32,
        max_attempts: row.max_attempts.max(0) as u32,
        stalled_count: row.stalled_count.max(0) as u32,
        delivery: Delivery::from_column(&row.delivery),
        unique_key: row.unique_key,
        concurrency_key: row.concurrency_key,
        fairness_key: row.fairness_key,
        created_at: utc(row.created_at),
        scheduled_at: utc(row.scheduled_at),
        // The running attempt's start while it runs, else the last one's.
        started_at: started_at.or(row.started_at).map(utc),
        finished_at: row.finished_at.map(utc),
        failed_at: failed_at.filter(|_| status == JobStatus::Failed).map(utc),
        retry_at: (status == JobStatus::Retrying).then(|| utc(row.scheduled_at)),
        result: row
            .result
            .as_deref()
            .and_then(|r| serde_json::from_str(r).ok()),
        error,
        errors,
        process_id,
        snoozes: row.snoozes.max(0) as u32,
        progress: row
            .progress
            .as_deref()
            .and_then(|p| serde_json::from_str(p).ok()),
        checkpoint: row
            .checkpoint
            .as_deref()
            .and_then(|c| serde_json::from_str(c).ok()),
        batch_id: row.batch_id,
    }
}
