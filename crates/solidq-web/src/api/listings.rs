//! What the dashboard shows, as JSON: queues, a page of jobs, processes,
//! recurring tasks.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use super::blocking;
use super::error::{ApiError, ApiQuery, ErrorBody};
use super::schema::{JobSchema, ProcessSchema, QueueSchema, RecurringSchema};
use super::task::shown;
use crate::filter::status;
use crate::layout::filtered;
use crate::{PAGE_SIZE, Shared};
use solidq::JobInfo;
use solidq::{JobFilter, ProcessInfo, QueueStats, RecurringInfo};

/// The most jobs one page of `GET /api/jobs` holds.
pub const MAX_PAGE: usize = 500;

/// Every queue.
#[derive(Debug, Serialize, ToSchema)]
pub struct Queues {
    /// By name: those with jobs in any state, the paused ones, and those
    /// registered workers name.
    #[schema(value_type = Vec<QueueSchema>)]
    pub queues: Vec<QueueStats>,
}

/// `GET /api/queues`.
#[utoipa::path(
    get,
    path = "/api/queues",
    tag = "queues",
    summary = "Every queue with its counts, latency and pause state",
    responses((status = 200, description = "The queues", body = Queues)),
    security(("readToken" = []), ("adminToken" = []), ("basicAuth" = []))
)]
pub async fn queues(State(app): State<Shared>) -> Result<Json<Queues>, ApiError> {
    let queues = blocking(&app, |queue| Ok(queue.queues()?)).await?;
    Ok(Json(Queues { queues }))
}

/// A page of jobs.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobsPage {
    /// The jobs, newest first, arguments filtered.
    #[schema(value_type = Vec<JobSchema>)]
    pub jobs: Vec<JobInfo>,
    /// Pass it as `after` for the next page; `null` on the last one.
    pub next_after: Option<i64>,
    /// How many jobs the query names in all (pages before and after
    /// included), counted no further than the dashboard's count cap.
    pub total: u64,
    /// Whether `total` stopped at the cap (there are more).
    pub total_capped: bool,
}

/// `GET /api/jobs`.
#[utoipa::path(
    get,
    path = "/api/jobs",
    tag = "jobs",
    summary = "A page of jobs, newest first",
    params(
        ("status" = Option<String>, Query, description = "scheduled, ready, blocked, claimed, running, succeeded (or finished), failed, retrying or discarded; any when absent"),
        ("queue" = Option<String>, Query, description = "Only this queue"),
        ("kind" = Option<String>, Query, description = "Only this kind"),
        ("after" = Option<i64>, Query, description = "The next page: jobs older than this id (the previous page's nextAfter)"),
        ("limit" = Option<usize>, Query, description = "Jobs per page, 1 to 500; 25 when absent"),
    ),
    responses(
        (status = 200, description = "The page", body = JobsPage),
        (status = 400, description = "An unknown parameter, or one that is not a number; `field` names it", body = ErrorBody),
        (status = 422, description = "No such status, or a limit out of range", body = ErrorBody),
    ),
    security(("readToken" = []), ("adminToken" = []), ("basicAuth" = []))
)]
pub async fn jobs(
    State(app): State<Shared>,
    ApiQuery(query): ApiQuery,
) -> Result<Json<JobsPage>, ApiError> {
    let mut filter = JobFilter::new();
    let mut limit = PAGE_SIZE;
    for (name, value) in &query {
        let number = || {
            value.parse::<i64>().map_err(|_| {
                ApiError::bad_request(format!("{name} must be a whole number"))
                    .field(name.clone(), value.clone())
            })
        };
        match name.as_str() {
            _ if value.is_empty() => {}
            "status" => {
                filter = filter.status(
                    status(value).map_err(|e| ApiError::from(e).field("status", value.clone()))?,
                )
            }
            "queue" => filter = filter.queue(value.clone()),
            "kind" => filter = filter.kind(value.clone()),
            "after" => filter = filter.after(number()?),
            "limit" => {
                limit = usize::try_from(number()?)
                    .ok()
                    .filter(|n| (1..=MAX_PAGE).contains(n))
                    .ok_or_else(|| {
                        ApiError::unprocessable(format!("limit must be 1 to {MAX_PAGE}"))
                            .field("limit", value.clone())
                    })?;
            }
            _ => {
                return Err(ApiError::bad_request(format!(
                    "unknown query parameter {name:?}: expected status, queue, kind, after or limit"
                ))
                .field(name.clone(), value.clone()));
            }
        }
    }
    let keys = app.config.filtered_keys.clone();
    let cap = app.config.count_cap;
    let page = blocking(&app, move |queue| {
        let mut jobs = queue.jobs(&filter.clone().limit(limit + 1))?;
        let more = jobs.len() > limit;
        jobs.truncate(limit);
        let total = queue.jobs_count_capped(&filter, cap)?;
        Ok(JobsPage {
            next_after: if more {
                jobs.last().map(|j| j.id)
            } else {
                None
            },
            jobs: jobs.iter().map(|j| shown(j, &keys)).collect(),
            total: total.min(cap),
            total_capped: total > cap,
        })
    })
    .await?;
    Ok(Json(page))
}

/// Every registered process.
#[derive(Debug, Serialize, ToSchema)]
pub struct Processes {
    /// By kind, then id, each with the jobs it holds.
    #[schema(value_type = Vec<ProcessSchema>)]
    pub processes: Vec<ProcessInfo>,
}

/// `GET /api/processes`.
#[utoipa::path(
    get,
    path = "/api/processes",
    tag = "processes",
    summary = "Every registered process, its heartbeat and the jobs it holds",
    responses((status = 200, description = "The processes", body = Processes)),
    security(("readToken" = []), ("adminToken" = []), ("basicAuth" = []))
)]
pub async fn processes(State(app): State<Shared>) -> Result<Json<Processes>, ApiError> {
    let processes = blocking(&app, |queue| Ok(queue.processes()?)).await?;
    Ok(Json(Processes { processes }))
}

/// Every recurring task.
#[derive(Debug, Serialize, ToSchema)]
pub struct Recurring {
    /// By key, arguments filtered.
    #[schema(value_type = Vec<RecurringSchema>)]
    pub tasks: Vec<RecurringInfo>,
}

/// `GET /api/recurring`.
#[utoipa::path(
    get,
    path = "/api/recurring",
    tag = "recurring",
    summary = "Every recurring task the schedulers declared, with its next and last runs",
    responses((status = 200, description = "The tasks", body = Recurring)),
    security(("readToken" = []), ("adminToken" = []), ("basicAuth" = []))
)]
pub async fn recurring(State(app): State<Shared>) -> Result<Json<Recurring>, ApiError> {
    let keys = app.config.filtered_keys.clone();
    let tasks = blocking(&app, |queue| Ok(queue.recurring_tasks()?)).await?;
    Ok(Json(Recurring {
        tasks: tasks
            .into_iter()
            .map(|t| RecurringInfo {
                arguments: filtered(&t.arguments, &keys),
                ..t
            })
            .collect(),
    }))
}
