//! The HTTP API under `/api/`: LeanCloud's Cloud Queue (`enqueue` with
//! its options, `getTaskInfo` by unique id) and the dashboard's reads and
//! actions, in JSON; described by the OpenAPI 3.1 document at
//! `/api/openapi.json`.
//!
//! Each route is registered together with its documentation (utoipa-axum
//! reads the path and method from the handler's `#[utoipa::path]`), so a
//! route cannot exist undocumented, nor a documented one be missing.
//!
//! Every answer is JSON, errors included: `{error, code, field, value}`
//! ([`ErrorBody`]), whether the fault was found by solidq, by the JSON
//! reading, or by axum itself (a 405, a body over the limit).

mod actions;
mod enqueue;
mod error;
mod listings;
mod options;
mod schema;
mod task;

use std::sync::OnceLock;

use axum::Router;
use axum::extract::{DefaultBodyLimit, OriginalUri};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::openapi::{OpenApi as Document, ServerBuilder};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::Shared;
pub use error::{ApiError, ErrorBody};
use solidq::Queue;

/// The largest body of a bulk enqueue (1,000 jobs of 16 KiB each); other
/// requests keep axum's 2 MiB.
pub const MAX_BULK_BODY: usize = 16 * 1024 * 1024;

/// Runs `f` on tokio's blocking threads: every solidq call is synchronous.
pub(crate) async fn blocking<T, F>(app: &Shared, f: F) -> Result<T, ApiError>
where
    T: Send + 'static,
    F: FnOnce(&Queue) -> Result<T, ApiError> + Send + 'static,
{
    let queue = app.queue.clone();
    tokio::task::spawn_blocking(move || f(&queue))
        .await
        .map_err(|e| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("the database call did not finish: {e}"),
            )
        })?
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "solidq HTTP API",
        description = "Enqueue jobs and read their outcome as LeanCloud's Cloud Queue does \
                       (`enqueue` options, `getTaskInfo`), and operate the queue as solidq's \
                       dashboard does. Authenticate with `Authorization: Bearer <token>`: the \
                       admin token may do everything, the read token only GET. Every error is \
                       JSON: `{error, code, field, value}`; `field` names the offending request \
                       field (`options.delay`, `jobs[3].args`), `value` is what was sent. \
                       400: malformed JSON, a wrong type, an unknown key, a NUL character in a query \
                       or path parameter (arguments may hold NUL: they are stored as the JSON \
                       escape and returned exactly); 404: \
                       no such job or task; 409: a taken uniqueId, or a job whose state refuses \
                       the action; 422: a value solidq refuses.",
        license(name = "MIT OR Apache-2.0"),
    ),
    modifiers(&Credentials),
    components(schemas(ErrorBody)),
    tags(
        (name = "jobs", description = "Enqueue (LeanCloud's Cloud.enqueue) and list jobs"),
        (name = "tasks", description = "A job's outcome (LeanCloud's Cloud.getTaskInfo)"),
        (name = "actions", description = "The dashboard's job actions"),
        (name = "queues", description = "Queues: counts, pause, resume"),
        (name = "processes", description = "Registered workers, dispatchers, schedulers, supervisors"),
        (name = "recurring", description = "Recurring tasks"),
        (name = "meta", description = "This document"),
    )
)]
struct ApiDoc;

/// The credentials the access check takes, as security schemes.
struct Credentials;

impl Modify for Credentials {
    fn modify(&self, openapi: &mut Document) {
        let components = openapi.components.get_or_insert_with(Default::default);
        let bearer = |description: &str| {
            let mut http = Http::new(HttpAuthScheme::Bearer);
            http.description = Some(description.to_string());
            SecurityScheme::Http(http)
        };
        components.add_security_scheme(
            "adminToken",
            bearer("The admin token ([web] admin_token, SOLIDQ_WEB_ADMIN_TOKEN): everything"),
        );
        components.add_security_scheme(
            "readToken",
            bearer("The read token ([web] read_token, SOLIDQ_WEB_READ_TOKEN): GET only"),
        );
        let mut basic = Http::new(HttpAuthScheme::Basic);
        basic.description = Some(
            "The dashboard's user and password: everything, but a POST must carry the \
             dashboard's X-CSRF-Token (use the admin token from scripts)"
                .into(),
        );
        components.add_security_scheme("basicAuth", SecurityScheme::Http(basic));
    }
}

/// The routes and the document, built from the same declarations.
fn build() -> (Router<Shared>, Document) {
    let (schemas, paths, bulk) = routes!(enqueue::bulk);
    let bulk = (
        schemas,
        paths,
        bulk.layer(DefaultBodyLimit::max(MAX_BULK_BODY)),
    );
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(enqueue::enqueue, listings::jobs))
        .routes(bulk)
        .routes(routes!(task::by_id))
        .routes(routes!(task::by_unique_id))
        .routes(routes!(actions::one))
        .routes(routes!(actions::many))
        .routes(routes!(actions::pause))
        .routes(routes!(actions::resume))
        .routes(routes!(actions::run_recurring))
        .routes(routes!(listings::queues))
        .routes(routes!(listings::processes))
        .routes(routes!(listings::recurring))
        .routes(routes!(openapi))
        .split_for_parts()
}

/// The OpenAPI document (built once).
pub(crate) fn document() -> &'static Document {
    static DOCUMENT: OnceLock<Document> = OnceLock::new();
    DOCUMENT.get_or_init(|| build().1)
}

/// The `/api/` routes: each endpoint, a JSON 404 for any other path
/// under `/api/`, and axum's own errors turned into the API's shape.
pub(super) fn routes() -> Router<Shared> {
    build()
        .0
        .route("/api/{*rest}", any(no_such_endpoint))
        .layer(axum::middleware::from_fn(error::json_errors))
}

async fn no_such_endpoint(uri: Uri) -> ApiError {
    ApiError::not_found(format!(
        "no API endpoint {}: see /api/openapi.json",
        uri.path()
    ))
}

/// `GET /api/openapi.json`.
#[utoipa::path(
    get,
    path = "/api/openapi.json",
    tag = "meta",
    summary = "This OpenAPI 3.1 document (no credential needed)",
    responses((status = 200, description = "The document", content_type = "application/json")),
    security(())
)]
async fn openapi(uri: Uri, OriginalUri(original): OriginalUri) -> Response {
    let mut document = document().clone();
    // Mounted under a prefix (`Router::nest("/jobs", …)`), the paths are
    // relative to it.
    let base = original
        .path()
        .strip_suffix(uri.path())
        .unwrap_or("")
        .trim_end_matches('/');
    if !base.is_empty() {
        document.servers = Some(vec![ServerBuilder::new().url(base).build()]);
    }
    axum::Json(document).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn document_is_openapi_3_1_with_every_operation_secured_or_public_on_purpose() {
        let json = serde_json::to_value(document()).unwrap();
        assert_eq!(json["openapi"], "3.1.0");
        let paths = json["paths"].as_object().unwrap();
        assert!(paths.len() >= 12, "{paths:?}");
        for (path, item) in paths {
            for (method, operation) in item.as_object().unwrap() {
                let security = operation["security"].as_array();
                assert!(security.is_some(), "{method} {path} says nothing of access");
                let schemes: Vec<&str> = security
                    .unwrap()
                    .iter()
                    .flat_map(|s| s.as_object().unwrap().keys().map(String::as_str))
                    .collect();
                match method.as_str() {
                    "get" if path == "/api/openapi.json" => assert!(schemes.is_empty()),
                    "get" => assert!(schemes.contains(&"readToken"), "{method} {path}"),
                    _ => assert!(
                        !schemes.contains(&"readToken") && schemes.contains(&"adminToken"),
                        "{method} {path}"
                    ),
                }
            }
        }
    }
}
