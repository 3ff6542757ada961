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
use crate::audit::{Actor, record};
use crate::{MAX_BULK_ENQUEUE, Shared};
use solidq::Error;
use solidq::Name;
use solidq::{JobRequest, Queue};

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
    /// Names that could not be checked (the database knows no kind or
    /// queue yet) or that `force` let through; left out when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
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
    /// One entry per job asked for (each with its own `warnings`).
    pub jobs: Vec<Created>,
}

/// The names of `requests` checked by the library's rule
/// ([`Queue::check_names`]), once per distinct kind, queue and `force`:
/// the warnings of each request, or a 422 naming the field of the first
/// request that holds an unknown name (under `prefix[i]` in a bulk).
fn check_names(
    queue: &Queue,
    requests: &[EnqueueRequest],
    raw: &Value,
    prefix: Option<&str>,
) -> Result<Vec<Vec<String>>, ApiError> {
    let default_queue = queue.config().default_queue.as_str();
    fn target<'a>(r: &'a EnqueueRequest, default_queue: &'a str) -> &'a str {
        r.options.queue.as_deref().unwrap_or(default_queue)
    }
    let mut said: HashMap<(&str, &str, bool), Vec<String>> = HashMap::new();
    let mut warnings = Vec::with_capacity(requests.len());
    for (i, r) in requests.iter().enumerate() {
        let key = (r.kind.as_str(), target(r, default_queue), r.force);
        if let std::collections::hash_map::Entry::Vacant(slot) = said.entry(key) {
            let names = [Name::Kind(key.0), Name::Target(key.1)];
            let checked = queue.check_names(&names, r.force).map_err(|e| {
                let field = match &e {
                    Error::Unknown { what: "queue", .. }
                    | Error::InvalidOption {
                        option: "queue name",
                        ..
                    } => "options.queue",
                    _ => "kind",
                };
                let error = match &e {
                    Error::Unknown { .. } => ApiError::unprocessable(format!(
                        "{e}; send \"force\": true to enqueue it anyway"
                    )),
                    Error::InvalidOption { .. } => ApiError::unprocessable(e.to_string()),
                    _ => return ApiError::from(e),
                };
                let path = match prefix {
                    Some(prefix) => format!("{prefix}[{i}].{field}"),
                    None => field.to_string(),
                };
                if field == "options.queue" && r.options.queue.is_none() {
                    // The default queue: not in the request.
                    error.field(path, key.1)
                } else {
                    error.field_in(path, raw)
                }
            })?;
            slot.insert(checked);
        }
        warnings.push(said[&key].clone());
    }
    Ok(warnings)
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
        .check_request(&job)
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
        (status = 400, description = "Malformed JSON, a wrong type or an unknown key; `field` names it", body = ErrorBody),
        (status = 409, description = "The uniqueId is taken: `existingId` is the job holding it", body = ErrorBody),
        (status = 413, description = "The body is over 2 MiB, or `args` over the queue's max_payload_bytes (1 MiB by default): `field` is `args`, `value` its size in bytes", body = ErrorBody),
        (status = 422, description = "A value solidq refuses (an empty kind, a bad queue name, a zero timeout…), or a kind or queue the database does not know (unless `force`); `field` names it", body = ErrorBody),
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
        let warnings = check_names(queue, std::slice::from_ref(&value), &raw, None)?
            .pop()
            .unwrap_or_default();
        let ids = queue
            .enqueue_all_with(std::slice::from_ref(&job))
            .map_err(|e| taken(e, "uniqueId".into()))?;
        Ok(Created {
            id: ids[0],
            unique_id,
            warnings,
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
        (status = 413, description = "The body is over 16 MiB, or a job's `args` over max_payload_bytes (`field` is `jobs[i].args`, `value` its size); nothing was enqueued", body = ErrorBody),
        (status = 422, description = "No jobs, more than 1,000, the same uniqueId twice, a value solidq refuses, or a kind or queue the database does not know (unless that job's `force`); nothing was enqueued", body = ErrorBody),
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
        let warnings = check_names(queue, &value.jobs, &raw, Some("jobs"))?;
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
                .zip(warnings)
                .map(|((id, unique_id), warnings)| Created {
                    id,
                    unique_id,
                    warnings,
                })
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
