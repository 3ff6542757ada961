//! The dashboard's actions as JSON endpoints: retry, discard, cancel and
//! run-now on one job, on a list of ids or on everything a filter names;
//! pause and resume a queue; run a recurring task now. Each goes through
//! the dashboard's own code ([`apply`]) and, once done, into the audit
//! log with source `api`.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::blocking;
use super::error::{ApiError, ApiJson, ApiPath, ErrorBody, optional_object};
use super::task::not_found;
use crate::Shared;
use crate::audit::{Actor, record};
use crate::filter::{ListQuery, Listing, status_name};
use crate::pages::jobs::apply;
use solidq::{Error, JobStatus};

/// The most ids one `POST /api/jobs/actions/{action}` takes.
pub const MAX_ACTION_IDS: usize = 1_000;

/// An action on jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum JobAction {
    /// A failed job back to ready (one more attempt).
    Retry,
    /// A failed job deleted; a waiting one discarded, as cancel.
    Discard,
    /// A waiting job discarded; a running one asked to stop.
    Cancel,
    /// A scheduled, retrying or blocked job due now.
    RunNow,
}

impl JobAction {
    const ALL: [JobAction; 4] = [
        JobAction::Retry,
        JobAction::Discard,
        JobAction::Cancel,
        JobAction::RunNow,
    ];

    /// The action a path names; a 400 naming `action` otherwise.
    fn parse(text: &str) -> Result<JobAction, ApiError> {
        JobAction::ALL
            .into_iter()
            .find(|a| a.name() == text)
            .ok_or_else(|| {
                ApiError::bad_request(format!(
                    "no action {text:?}: expected retry, discard, cancel or run-now"
                ))
                .field("action", text)
            })
    }

    fn name(self) -> &'static str {
        match self {
            JobAction::Retry => "retry",
            JobAction::Discard => "discard",
            JobAction::Cancel => "cancel",
            JobAction::RunNow => "run-now",
        }
    }
}

/// What an action did.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActionDone {
    /// The action.
    pub action: JobAction,
    /// Jobs it changed (running jobs asked to stop included).
    pub rows: u64,
    /// The same in words.
    pub message: String,
    /// Ids of the request that name no job (`ids` requests only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_found: Vec<i64>,
}

/// `{id}/{action}`.
#[derive(Debug, Deserialize)]
pub struct JobActionPath {
    id: i64,
    action: String,
}

/// `{action}`.
#[derive(Debug, Deserialize)]
pub struct ActionPath {
    action: String,
}

/// Which jobs a bulk action is on: `ids`, or a `filter`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ActionRequest {
    /// These jobs, up to 1,000; each is acted on as its own state allows.
    pub ids: Option<Vec<i64>>,
    /// Everything this filter names (up to 100,000 jobs).
    #[serde(default, deserialize_with = "optional_object")]
    pub filter: Option<ActionFilter>,
}

/// The dashboard's listing filter.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ActionFilter {
    /// The jobs' status: scheduled, ready, blocked, claimed, running,
    /// succeeded (or finished), failed, retrying, discarded.
    #[schema(example = "failed")]
    pub status: String,
    /// Only this queue.
    pub queue: Option<String>,
    /// Only this kind.
    pub kind: Option<String>,
    /// Finished (or failed) at or after this time (RFC 3339, or
    /// `YYYY-MM-DDTHH:MM` UTC).
    pub from: Option<String>,
    /// Finished (or failed) before this time.
    pub to: Option<String>,
}

/// Whether `action` can change a job in `status`.
fn applies(action: JobAction, status: JobStatus) -> bool {
    use JobStatus::*;
    match action {
        JobAction::Retry => status == Failed,
        JobAction::RunNow => matches!(status, Scheduled | Retrying | Blocked),
        JobAction::Discard => matches!(
            status,
            Failed | Scheduled | Waiting | Retrying | Blocked | Ready
        ),
        JobAction::Cancel => matches!(
            status,
            Scheduled | Waiting | Retrying | Blocked | Ready | Claimed | Running
        ),
    }
}

fn listing(status: JobStatus) -> Listing {
    Listing {
        status,
        queue: None,
        kind: None,
        from: None,
        to: None,
    }
}

/// `POST /api/jobs/{id}/{action}`.
#[utoipa::path(
    post,
    path = "/api/jobs/{id}/{action}",
    tag = "actions",
    summary = "Retry, discard, cancel or run one job now",
    params(
        ("id" = i64, Path, description = "The job's id"),
        ("action" = JobAction, Path, description = "retry (failed jobs), discard (failed or waiting), cancel (waiting or running), run-now (scheduled, retrying, blocked)"),
    ),
    responses(
        (status = 200, description = "Done", body = ActionDone),
        (status = 400, description = "The id is not a number, or no such action", body = ErrorBody),
        (status = 404, description = "No such job", body = ErrorBody),
        (status = 409, description = "The job's state does not allow the action (`value` is its status); nothing changed", body = ErrorBody),
    ),
    security(("adminToken" = []), ("basicAuth" = []))
)]
pub async fn one(
    State(app): State<Shared>,
    actor: Actor,
    ApiPath(JobActionPath { id, action }): ApiPath<JobActionPath>,
) -> Result<Json<ActionDone>, ApiError> {
    let action = JobAction::parse(&action)?;
    let who = actor.describe();
    let outcome = blocking(&app, move |queue| {
        let job = queue.job(id).map_err(|e| not_found(e, "id", id))?;
        if !applies(action, job.status) {
            return Err(ApiError::conflict(format!(
                "job {id} is {}: it cannot be {}",
                job.status,
                done_verb(action)
            ))
            .field("action", status_name(job.status)));
        }
        let outcome = apply(
            queue,
            action.name(),
            &listing(job.status),
            Some(vec![id]),
            &who,
        )?;
        if outcome.rows == 0 {
            // It changed state between the read and the action.
            let now = queue.job(id).map(|j| j.status).unwrap_or(job.status);
            return Err(ApiError::conflict(format!(
                "job {id} is {now}: it cannot be {}",
                done_verb(action)
            ))
            .field("action", status_name(now)));
        }
        Ok(outcome)
    })
    .await?;
    record(
        &app,
        &actor,
        action.name(),
        &format!("job {id}"),
        outcome.rows,
    )
    .await;
    Ok(Json(ActionDone {
        action,
        rows: outcome.rows,
        message: format!("Job {id}: {}", outcome.message),
        not_found: Vec::new(),
    }))
}

fn done_verb(action: JobAction) -> &'static str {
    match action {
        JobAction::Retry => "retried",
        JobAction::Discard => "discarded",
        JobAction::Cancel => "cancelled",
        JobAction::RunNow => "run now",
    }
}

/// `POST /api/jobs/actions/{action}`.
#[utoipa::path(
    post,
    path = "/api/jobs/actions/{action}",
    tag = "actions",
    summary = "An action on many jobs: by ids, or everything a filter names",
    description = "Give `ids` or `filter`, not both. With ids, each job is acted on as its state \
                   allows (the others are left; `rows` counts the changed ones) and ids naming no \
                   job come back in `notFound`. With a filter, the action must apply to its \
                   status (422 otherwise): retry and discard of failed jobs, run-now of \
                   scheduled, retrying or blocked ones, cancel (and discard) of waiting or \
                   running ones.",
    params(("action" = JobAction, Path, description = "retry, discard, cancel or run-now")),
    request_body = ActionRequest,
    responses(
        (status = 200, description = "Done", body = ActionDone),
        (status = 400, description = "Malformed body, or no such action", body = ErrorBody),
        (status = 422, description = "Neither or both of ids and filter, too many ids, a bad filter value (a kind or queue the database does not know included: `field` is `filter.kind` or `filter.queue`), or an action its status does not allow", body = ErrorBody),
    ),
    security(("adminToken" = []), ("basicAuth" = []))
)]
pub async fn many(
    State(app): State<Shared>,
    actor: Actor,
    ApiPath(ActionPath { action }): ApiPath<ActionPath>,
    body: ApiJson<ActionRequest>,
) -> Result<Json<ActionDone>, ApiError> {
    let action = JobAction::parse(&action)?;
    let ApiJson { raw, value } = body;
    let who = actor.describe();
    let (done, target) = match (value.ids, value.filter) {
        (Some(ids), None) => {
            if ids.is_empty() || ids.len() > MAX_ACTION_IDS {
                return Err(ApiError::unprocessable(format!(
                    "{} ids: an action takes 1 to {MAX_ACTION_IDS}",
                    ids.len()
                ))
                .field("ids", ids.len()));
            }
            let target = format!("jobs {ids:?}");
            let done = blocking(&app, move |queue| by_ids(queue, action, ids, &who)).await?;
            (done, target)
        }
        (None, Some(filter)) => {
            let listing = ListQuery {
                status: Some(filter.status),
                queue: filter.queue,
                kind: filter.kind,
                from: filter.from,
                to: filter.to,
                ..ListQuery::default()
            }
            .listing()
            .map_err(|e| ApiError::from_solidq(e, |o| Some(format!("filter.{o}")), &raw))?;
            if !applies(action, listing.status) {
                return Err(ApiError::unprocessable(format!(
                    "{} jobs cannot be {}",
                    status_name(listing.status),
                    done_verb(action)
                ))
                .field_in("filter.status", &raw));
            }
            let (names, r) = (listing.clone(), raw.clone());
            blocking(&app, move |queue| {
                names.check_names(queue).map_err(|e| match e {
                    Error::Unknown { what, .. } => ApiError::unprocessable(e.to_string())
                        .field_in(format!("filter.{what}"), &r),
                    other => ApiError::from_solidq(
                        other,
                        |o| {
                            Some(
                                if o == "queue name" {
                                    "filter.queue"
                                } else {
                                    "filter.kind"
                                }
                                .into(),
                            )
                        },
                        &r,
                    ),
                })
            })
            .await?;
            let target = format!(
                "all {} jobs matching {}",
                status_name(listing.status),
                listing.query(listing.status)
            );
            let outcome = blocking(&app, move |queue| {
                Ok(apply(queue, action.name(), &listing, None, &who)?)
            })
            .await?;
            let done = ActionDone {
                action,
                rows: outcome.rows,
                message: outcome.message,
                not_found: Vec::new(),
            };
            (done, target)
        }
        _ => {
            return Err(
                ApiError::unprocessable("give ids or filter, one of them").field_in(
                    if raw.get("ids").is_some() {
                        "filter"
                    } else {
                        "ids"
                    },
                    &raw,
                ),
            );
        }
    };
    record(&app, &actor, action.name(), &target, done.rows).await;
    Ok(Json(done))
}

/// Acts on each listed job as its state allows, grouped by state.
fn by_ids(
    queue: &solidq::Queue,
    action: JobAction,
    ids: Vec<i64>,
    who: &str,
) -> Result<ActionDone, ApiError> {
    let mut groups: BTreeMap<JobStatus, Vec<i64>> = BTreeMap::new();
    let mut missing = Vec::new();
    for id in ids {
        match queue.job(id) {
            Ok(job) => groups.entry(job.status).or_default().push(id),
            Err(Error::JobNotFound(_)) => missing.push(id),
            Err(e) => return Err(e.into()),
        }
    }
    let mut rows = 0;
    for (status, ids) in groups {
        if applies(action, status) {
            rows += apply(queue, action.name(), &listing(status), Some(ids), who)?.rows;
        }
    }
    Ok(ActionDone {
        action,
        rows,
        message: format!(
            "{rows} job{} {}.",
            if rows == 1 { "" } else { "s" },
            done_verb(action)
        ),
        not_found: missing,
    })
}

/// `{name}`.
#[derive(Debug, Deserialize)]
pub struct QueueName {
    name: String,
}

/// A queue's state after pause or resume.
#[derive(Debug, Serialize, ToSchema)]
pub struct QueuePaused {
    /// The queue.
    pub queue: String,
    /// Whether it is paused now.
    pub paused: bool,
    /// Whether this request changed it (false: it was so already).
    pub changed: bool,
    /// The queue could not be checked (the database knows no queue yet),
    /// or `force` let an unknown one through; left out when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// The optional body of pause and resume.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PauseRequest {
    /// Pause (or resume) it even if the database knows no such queue.
    #[serde(default)]
    pub force: bool,
}

/// [`PauseRequest`], or its defaults when the body is empty.
pub struct OptionalPause(PauseRequest);

impl<S: Send + Sync> axum::extract::FromRequest<S> for OptionalPause {
    type Rejection = ApiError;

    async fn from_request(request: axum::extract::Request, state: &S) -> Result<Self, ApiError> {
        let (parts, body) = request.into_parts();
        let bytes = axum::body::to_bytes(body, 64 * 1024)
            .await
            .map_err(|e| ApiError::bad_request(format!("cannot read the body: {e}")))?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalPause(PauseRequest::default()));
        }
        let request = axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes));
        let ApiJson { value, .. } = ApiJson::<PauseRequest>::from_request(request, state).await?;
        Ok(OptionalPause(value))
    }
}

async fn set_paused(
    app: Shared,
    actor: Actor,
    name: String,
    paused: bool,
    force: bool,
) -> Result<Json<QueuePaused>, ApiError> {
    let queue_name = name.clone();
    let (changed, warnings) = blocking(&app, move |queue| {
        let named = |e: Error| match e {
            Error::InvalidOption { .. } => {
                ApiError::unprocessable(e.to_string()).field("name", queue_name.clone())
            }
            Error::Unknown { .. } => ApiError::not_found(format!(
                "{e}; send {{\"force\": true}} to {} it anyway",
                if paused { "pause" } else { "resume" }
            ))
            .field("name", queue_name.clone()),
            other => other.into(),
        };
        let warnings = queue
            .check_names(&[solidq::Name::Queue(&queue_name)], force)
            .map_err(named)?;
        let result = if paused {
            queue.pause(&queue_name)
        } else {
            queue.resume(&queue_name)
        };
        Ok((result.map_err(named)?, warnings))
    })
    .await?;
    let action = if paused { "pause" } else { "resume" };
    record(&app, &actor, action, &name, u64::from(changed)).await;
    Ok(Json(QueuePaused {
        queue: name,
        paused,
        changed,
        warnings,
    }))
}

/// `POST /api/queues/{name}/pause`.
#[utoipa::path(
    post,
    path = "/api/queues/{name}/pause",
    tag = "queues",
    summary = "Pause a queue: workers stop claiming from it",
    params(("name" = String, Path, description = "The queue")),
    request_body(content = Option<PauseRequest>, description = "Optional: `{\"force\": true}` pauses a queue the database does not know"),
    responses(
        (status = 200, description = "Paused", body = QueuePaused),
        (status = 404, description = "A queue the database does not know (no job, pause, recurring task or worker names it): `field` is `name`, the message lists the known queues; nothing changed", body = ErrorBody),
        (status = 422, description = "Not a queue name", body = ErrorBody),
    ),
    security(("adminToken" = []), ("basicAuth" = []))
)]
pub async fn pause(
    State(app): State<Shared>,
    actor: Actor,
    ApiPath(QueueName { name }): ApiPath<QueueName>,
    OptionalPause(body): OptionalPause,
) -> Result<Json<QueuePaused>, ApiError> {
    set_paused(app, actor, name, true, body.force).await
}

/// `POST /api/queues/{name}/resume`.
#[utoipa::path(
    post,
    path = "/api/queues/{name}/resume",
    tag = "queues",
    summary = "Resume a paused queue",
    params(("name" = String, Path, description = "The queue")),
    request_body(content = Option<PauseRequest>, description = "Optional: `{\"force\": true}` resumes a queue the database does not know"),
    responses(
        (status = 200, description = "Resumed", body = QueuePaused),
        (status = 404, description = "A queue the database does not know: `field` is `name`; nothing changed", body = ErrorBody),
        (status = 422, description = "Not a queue name", body = ErrorBody),
    ),
    security(("adminToken" = []), ("basicAuth" = []))
)]
pub async fn resume(
    State(app): State<Shared>,
    actor: Actor,
    ApiPath(QueueName { name }): ApiPath<QueueName>,
    OptionalPause(body): OptionalPause,
) -> Result<Json<QueuePaused>, ApiError> {
    set_paused(app, actor, name, false, body.force).await
}

/// `{key}`.
#[derive(Debug, Deserialize)]
pub struct TaskKey {
    key: String,
}

/// A recurring task run now.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecurringRun {
    /// The task.
    pub key: String,
    /// The job enqueued; `null` when this second's run exists already.
    pub job_id: Option<i64>,
    /// The same in words.
    pub message: String,
}

/// `POST /api/recurring/{key}/run`.
#[utoipa::path(
    post,
    path = "/api/recurring/{key}/run",
    tag = "recurring",
    summary = "Enqueue a recurring task's job now",
    params(("key" = String, Path, description = "The task's key")),
    responses(
        (status = 200, description = "Enqueued (or already run this second: `jobId` null)", body = RecurringRun),
        (status = 404, description = "No such task (schedulers declare tasks when they start)", body = ErrorBody),
    ),
    security(("adminToken" = []), ("basicAuth" = []))
)]
pub async fn run_recurring(
    State(app): State<Shared>,
    actor: Actor,
    ApiPath(TaskKey { key }): ApiPath<TaskKey>,
) -> Result<Json<RecurringRun>, ApiError> {
    let k = key.clone();
    let job_id = blocking(&app, move |queue| {
        if !queue.recurring_tasks()?.iter().any(|t| t.key == k) {
            return Err(ApiError::not_found(format!(
                "no recurring task {k:?} (schedulers declare tasks when they start)"
            ))
            .field("key", k));
        }
        Ok(queue.run_recurring(&k)?)
    })
    .await?;
    record(
        &app,
        &actor,
        "run_recurring",
        &key,
        u64::from(job_id.is_some()),
    )
    .await;
    let message = match job_id {
        Some(id) => format!("Task {key} enqueued as job {id}."),
        None => format!("Task {key} already ran this second."),
    };
    Ok(Json(RecurringRun {
        key,
        job_id,
        message,
    }))
}
