//! `POST /api/jobs` and `POST /api/jobs/bulk`: LeanCloud's
//! `Cloud.enqueue`, one job or many in one transaction.

use std::collections::HashMap;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::blocking;
use super::error::{ApiError, ApiJson, ErrorBody, objects};
use super::options::{EnqueueRequest, field_of_option, random_unique_id};
use crate::client::{JobRequest, Queue};
use crate::types::Error;
use crate::web::audit::{Actor, record};
use crate::web::{MAX_BULK_ENQUEUE, Shared};

/// An enqueued job.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Created {
    /// The job's id.
    #[schema(example = 42)]
    pub id: i64,
    /// Its unique id: the one given, or the one made up for it. Its
    /// task info is at `/api/tasks/{uniqueId}`.
    #[schema(example = "9f86d081884c7d659a2feaa0c55ad015")]
    pub unique_id: String,
}

/// Many jobs to enqueue at once.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkRequest {
    /// The jobs, 1 to `MAX_BULK_ENQUEUE` (1,000) of them, each as
    /// `POST /api/jobs` takes one.
    #[serde(deserialize_with = "objects")]
    pub jobs: Vec<EnqueueRequest>,
}

/// The jobs a bulk enqueue made, in the order asked.
#[derive(Debug, Serialize, ToSchema)]
pub struct BulkCreated {
    /// One entry per job asked for.
    pub jobs: Vec<Created>,
}

/// A request checked the way solidq checks it before writing anything,
/// with its unique id (given or made up).
fn prepare(
    queue: &Queue,
    request: &EnqueueRequest,
    raw: &Value,
) -> Result<(JobRequest, String), ApiError> {
    let unique_id = match &request.options.unique_id {
        Some(id) => id.clone(),
        None => random_unique_id()?,
    };
    let options = request.options.to_enqueue(&unique_id)?;
    let job = JobRequest::untyped(request.kind.clone(), &request.args, options);
    queue
        .build(&job)
        .map_err(|e| ApiError::from_solidq(e, field_of_option, raw))?;
    Ok((job, unique_id))
}

/// A 409 for a taken unique id.
fn taken(e: Error, field: String) -> ApiError {
    let value = match &e {
        Error::Duplicate { unique_key, .. } => unique_key.clone(),
        _ => String::new(),
    };
    let mut error = ApiError::from(e);
    if error.field_name() == Some("uniqueId") {
        error = error.field(field, value);
    }
    error
}

/// `POST /api/jobs`.
#[utoipa::path(
    post,
    path = "/api/jobs",
    tag = "jobs",
    summary = "Enqueue a job (LeanCloud's Cloud.enqueue)",
    request_body = EnqueueRequest,
    responses(
        (status = 201, description = "Enqueued", body = Created),
        (status = 400, description = "Malformed JSON, a wrong type, an unknown key or a NUL character; `field` names it", body = ErrorBody),
        (status = 409, description = "The uniqueId is taken: `existingId` is the job holding it", body = ErrorBody),
        (status = 422, description = "A value solidq refuses (an empty kind, a bad queue name, a zero timeout…); `field` names it", body = ErrorBody),
    ),
    security(("adminToken" = []), ("basicAuth" = []))
)]
pub async fn enqueue(
    State(app): State<Shared>,
    actor: Actor,
    body: ApiJson<EnqueueRequest>,
) -> Result<(StatusCode, Json<Created>), ApiError> {
    let ApiJson { raw, value } = body;
    let kind = value.kind.clone();
    let created = blocking(&app, move |queue| {
        let (job, unique_id) = prepare(queue, &value, &raw)?;
        let ids = queue
            .enqueue_all_with(std::slice::from_ref(&job))
            .map_err(|e| taken(e, "uniqueId".into()))?;
        Ok(Created {
            id: ids[0],
            unique_id,
        })
    })
    .await?;
    record(
        &app,
        &actor,
        "enqueue",
        &format!("job {} ({kind})", created.id),
        1,
    )
    .await;
    Ok((StatusCode::CREATED, Json(created)))
}

/// `POST /api/jobs/bulk`.
#[utoipa::path(
    post,
    path = "/api/jobs/bulk",
    tag = "jobs",
    summary = "Enqueue up to 1,000 jobs, all or none",
    description = "Every job is checked before anything is written; then all are inserted in one \
                   transaction. Any error (a bad job, a taken uniqueId) enqueues none, and names \
                   the job by its index: `jobs[3].options.delay`.",
    request_body = BulkRequest,
    responses(
        (status = 201, description = "Every job enqueued, in the order asked", body = BulkCreated),
        (status = 400, description = "A job is malformed; `field` names it", body = ErrorBody),
        (status = 409, description = "A uniqueId is taken by an existing job (`field` is `jobs[i].uniqueId`, `existingId` the holder); nothing was enqueued", body = ErrorBody),
        (status = 422, description = "No jobs, more than 1,000, the same uniqueId twice, or a value solidq refuses; nothing was enqueued", body = ErrorBody),
    ),
    security(("adminToken" = []), ("basicAuth" = []))
)]
pub async fn bulk(
    State(app): State<Shared>,
    actor: Actor,
    body: ApiJson<BulkRequest>,
) -> Result<(StatusCode, Json<BulkCreated>), ApiError> {
    let ApiJson { raw, value } = body;
    let count = value.jobs.len();
    if count == 0 || count > MAX_BULK_ENQUEUE {
        return Err(ApiError::unprocessable(format!(
            "{count} jobs: a bulk enqueue takes 1 to {MAX_BULK_ENQUEUE}"
        ))
        .field("jobs", count));
    }
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (i, job) in value.jobs.iter().enumerate() {
        if let Some(id) = &job.options.unique_id
            && let Some(first) = seen.insert(id, i)
        {
            return Err(ApiError::unprocessable(format!(
                "jobs[{first}] and jobs[{i}] have the same uniqueId"
            ))
            .field(format!("jobs[{i}].options.uniqueId"), id.clone()));
        }
    }
    let created = blocking(&app, move |queue| {
        let mut jobs = Vec::with_capacity(count);
        let mut unique_ids = Vec::with_capacity(count);
        for (i, request) in value.jobs.iter().enumerate() {
            let (job, unique_id) = prepare(queue, request, &raw["jobs"][i])
                .map_err(|e| e.under(&format!("jobs[{i}]")))?;
            jobs.push(job);
            unique_ids.push(unique_id);
        }
        let ids = queue.enqueue_all_with(&jobs).map_err(|e| {
            let index = match &e {
                Error::Duplicate { unique_key, .. } => {
                    unique_ids.iter().position(|u| u == unique_key)
                }
                _ => None,
            };
            let field = match index {
                Some(i) => format!("jobs[{i}].uniqueId"),
                None => "uniqueId".into(),
            };
            taken(e, field)
        })?;
        Ok(BulkCreated {
            jobs: ids
                .into_iter()
                .zip(unique_ids)
                .map(|(id, unique_id)| Created { id, unique_id })
                .collect(),
        })
    })
    .await?;
    let (first, last) = (created.jobs[0].id, created.jobs[count - 1].id);
    record(
        &app,
        &actor,
        "enqueue",
        &format!("{count} jobs ({first}…{last})"),
        count as u64,
    )
    .await;
    Ok((StatusCode::CREATED, Json(created)))
}
