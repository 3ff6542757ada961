//! `GET /api/jobs/{id}` and `GET /api/tasks/{uniqueId}`: LeanCloud's
//! `Cloud.getTaskInfo`, a job's outcome in LeanCloud's three states, with
//! everything solidq knows of it beside.
//!
//! | solidq status                                      | `status`  | also set                         |
//! |----------------------------------------------------|-----------|----------------------------------|
//! | scheduled, ready, blocked, claimed, running        | `queued`  |                                  |
//! | succeeded                                          | `success` | `finishedAt`, `result`           |
//! | retrying (an attempt failed, another is scheduled) | `failed`  | `finishedAt`, `error`, `retryAt` |
//! | failed (for good)                                  | `failed`  | `finishedAt`, `error`            |
//! | discarded (cancelled, or refused by its limit)     | `failed`  | `finishedAt`, `error`            |
//!
//! As LeanCloud documents it, a failed task carries `retryAt` when it
//! will be retried: a client waiting for the final outcome waits while
//! `status` is `queued`, or `failed` with a `retryAt`.

use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::blocking;
use super::error::{ApiError, ApiPath, ErrorBody};
use super::schema::JobSchema;
use crate::Shared;
use crate::layout::filtered;
use solidq::{Error, JobInfo, JobStatus};

/// LeanCloud's three task states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TaskStatus {
    /// Waiting or running.
    Queued,
    /// Ran successfully.
    Success,
    /// Its last run failed (retried when `retryAt` is set), or it was
    /// discarded.
    Failed,
}

/// LeanCloud's TaskInfo (`statusCode` aside: solidq runs no HTTP
/// function), and solidq's whole job under `job`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskInfo {
    /// The job's id.
    #[schema(example = 42)]
    pub id: i64,
    /// The job's unique id (`null` for a job enqueued without one, not
    /// through the API).
    pub unique_id: Option<String>,
    /// queued, success or failed (see the mapping in the README).
    pub status: TaskStatus,
    /// When its last run ended (succeeded or failed); absent while
    /// queued.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<DateTime<Utc>>,
    /// What the job returned; present on success only.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Object)]
    pub result: Option<Value>,
    /// The last error, `kind: message`; present when failed only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When the next retry runs; present when failed and retried only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<DateTime<Utc>>,
    /// Everything solidq stores about the job, as the library's `JobInfo`
    /// serializes it (snake_case), its arguments filtered.
    #[schema(value_type = JobSchema)]
    pub job: JobInfo,
}

/// LeanCloud's status of a solidq status.
pub fn task_status(status: JobStatus) -> TaskStatus {
    match status {
        JobStatus::Scheduled
        | JobStatus::Waiting
        | JobStatus::Ready
        | JobStatus::Blocked
        | JobStatus::Claimed
        | JobStatus::Running => TaskStatus::Queued,
        JobStatus::Succeeded => TaskStatus::Success,
        JobStatus::Retrying | JobStatus::Failed | JobStatus::Discarded => TaskStatus::Failed,
    }
}

/// A job as the API shows it: its arguments with `keys` filtered.
pub fn shown(job: &JobInfo, keys: &[String]) -> JobInfo {
    JobInfo {
        arguments: filtered(&job.arguments, keys),
        ..job.clone()
    }
}

/// The task info of `job`.
pub fn task_info(job: &JobInfo, keys: &[String]) -> TaskInfo {
    let status = task_status(job.status);
    let last_error_at = job.error.as_ref().and_then(|e| e.at);
    let (finished_at, error, retry_at) = match job.status {
        JobStatus::Succeeded => (job.finished_at, None, None),
        JobStatus::Retrying => (last_error_at, Some(error_text(job)), job.retry_at),
        JobStatus::Failed | JobStatus::Discarded => (
            job.finished_at.or(job.failed_at).or(last_error_at),
            Some(error_text(job)),
            None,
        ),
        _ => (None, None, None),
    };
    TaskInfo {
        id: job.id,
        unique_id: job.unique_key.clone(),
        status,
        finished_at,
        result: match job.status {
            JobStatus::Succeeded => Some(job.result.clone().unwrap_or(Value::Null)),
            _ => None,
        },
        error,
        retry_at,
        job: shown(job, keys),
    }
}

fn error_text(job: &JobInfo) -> String {
    match &job.error {
        Some(e) => format!("{}: {}", e.kind, e.message),
        None if job.status == JobStatus::Discarded => "discarded".into(),
        None => "failed".into(),
    }
}

/// A missing job's 404 naming the parameter that named it; other errors
/// as they are.
pub fn not_found(e: Error, field: &str, value: impl Into<Value>) -> ApiError {
    match e {
        Error::JobNotFound(_) => ApiError::from(e).field(field, value),
        other => ApiError::from(other),
    }
}

/// `{id}`.
#[derive(Debug, Deserialize)]
pub struct JobId {
    /// The job's id.
    pub id: i64,
}

/// `{uniqueId}`.
#[derive(Debug, Deserialize)]
pub struct UniqueId {
    /// The job's unique id.
    #[serde(rename = "uniqueId")]
    pub unique_id: String,
}

/// `GET /api/jobs/{id}`.
#[utoipa::path(
    get,
    path = "/api/jobs/{id}",
    tag = "tasks",
    summary = "A job's task info, by id",
    params(("id" = i64, Path, description = "The job's id")),
    responses(
        (status = 200, description = "The task info", body = TaskInfo),
        (status = 400, description = "The id is not a number", body = ErrorBody),
        (status = 404, description = "No such job (never enqueued, or cleaned after keepResult)", body = ErrorBody),
    ),
    security(("readToken" = []), ("adminToken" = []), ("basicAuth" = []))
)]
pub async fn by_id(
    State(app): State<Shared>,
    ApiPath(JobId { id }): ApiPath<JobId>,
) -> Result<Json<TaskInfo>, ApiError> {
    let keys = app.config.filtered_keys.clone();
    blocking(&app, move |queue| {
        let job = queue.job(id).map_err(|e| not_found(e, "id", id))?;
        Ok(Json(task_info(&job, &keys)))
    })
    .await
}

/// `GET /api/tasks/{uniqueId}`.
#[utoipa::path(
    get,
    path = "/api/tasks/{uniqueId}",
    tag = "tasks",
    summary = "A job's task info, by unique id (LeanCloud's Cloud.getTaskInfo)",
    params(("uniqueId" = String, Path, description = "The job's unique id")),
    responses(
        (status = 200, description = "The task info", body = TaskInfo),
        (status = 404, description = "No job holds this unique id", body = ErrorBody),
    ),
    security(("readToken" = []), ("adminToken" = []), ("basicAuth" = []))
)]
pub async fn by_unique_id(
    State(app): State<Shared>,
    ApiPath(UniqueId { unique_id }): ApiPath<UniqueId>,
) -> Result<Json<TaskInfo>, ApiError> {
    if unique_id.contains('\0') {
        return Err(
            ApiError::bad_request("a unique id cannot hold a NUL character")
                .field("uniqueId", unique_id),
        );
    }
    let keys = app.config.filtered_keys.clone();
    blocking(&app, move |queue| {
        let job = queue
            .job_by_unique_key(&unique_id)
            .map_err(|e| not_found(e, "uniqueId", unique_id.clone()))?;
        Ok(Json(task_info(&job, &keys)))
    })
    .await
}
