//! The dashboard's pages, one module each, and what they share: running
//! a database call off the async threads, and rendering its errors.

pub mod audit;
pub mod charts;
pub mod concurrency;
pub mod database;
pub mod job;
pub mod jobs;
pub mod processes;
pub mod queues;
pub mod recurring;

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};

use super::Shared;
use super::layout::{Ctx, flash, shell};
use solidq::Error;
use solidq::Queue;

/// A page or action that could not be served.
#[derive(Debug)]
pub enum PageError {
    /// No such job, queue or task.
    NotFound(String),
    /// Bad input: the field and what is wrong with it.
    BadRequest(String),
    /// The database (or solidq) failed.
    Failed(Error),
}

impl From<Error> for PageError {
    fn from(e: Error) -> PageError {
        match e {
            Error::JobNotFound(what) => PageError::NotFound(format!("no job {what}")),
            Error::InvalidOption { .. } | Error::Unknown { .. } | Error::NothingToDo { .. } => {
                PageError::BadRequest(e.to_string())
            }
            other => PageError::Failed(other),
        }
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let (status, message) = match self {
            PageError::NotFound(m) => (StatusCode::NOT_FOUND, m),
            PageError::BadRequest(m) => (StatusCode::BAD_REQUEST, m),
            PageError::Failed(e) => {
                log::warn!("solidq web: {e}");
                (StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
            }
        };
        // To htmx: the message into the flash of the page it came from.
        // A page loaded by the browser itself gets the whole layout
        // around it from `error_pages`, which reads `Failure`.
        let body = html! {
            (flash(&message, true))
        };
        let mut response = (
            status,
            [("HX-Retarget", "#flash"), ("HX-Reswap", "innerHTML")],
            body,
        )
            .into_response();
        response.extensions_mut().insert(Failure(message));
        response
    }
}

/// The message of a [`PageError`], for a full error page.
#[derive(Debug, Clone)]
pub struct Failure(pub String);

/// The result of a page handler.
pub type Page = Result<Markup, PageError>;

/// Runs `f` on tokio's blocking threads: every solidq call is synchronous.
pub async fn db<T, F>(app: &Shared, f: F) -> Result<T, PageError>
where
    T: Send + 'static,
    F: FnOnce(&Queue) -> solidq::Result<T> + Send + 'static,
{
    let queue = app.queue.clone();
    match tokio::task::spawn_blocking(move || f(&queue)).await {
        Ok(result) => result.map_err(PageError::from),
        Err(e) => Err(PageError::Failed(Error::Io {
            context: "run a database call".into(),
            source: std::io::Error::other(e.to_string()),
        })),
    }
}

/// `GET /`: the queues.
pub async fn root(ctx: Ctx) -> Redirect {
    Redirect::to(&ctx.url("/queues"))
}

/// An action's answer to htmx: reload the page it was taken on (so counts
/// and rows show the change) with `message` as its flash (`?done=`).
pub fn done(headers: &HeaderMap, message: &str) -> Response {
    let current = headers
        .get("hx-current-url")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    done_at(current, message)
}

/// As [`done`], to the page at `current` (a URL or a path of this server).
pub fn done_at(current: &str, message: &str) -> Response {
    let (path, query) = current.split_once('?').unwrap_or((current, ""));
    // Only the path of this server: never a redirect elsewhere.
    let path = path
        .split_once("://")
        .and_then(|(_, rest)| rest.find('/').map(|i| &rest[i..]))
        .unwrap_or(path);
    let mut params = form_urlencoded::Serializer::new(String::new());
    for (k, v) in form_urlencoded::parse(query.as_bytes()) {
        if k != "done" {
            params.append_pair(&k, &v);
        }
    }
    params.append_pair("done", message);
    let target = format!("{path}?{}", params.finish());
    ([("HX-Redirect", target)], flash(message, false)).into_response()
}

/// The middleware inside `access::check` (which put the caller's access in
/// the request): a page the browser loaded itself (not htmx) that failed,
/// marked with [`Failure`], shows its error in the whole layout, with its
/// status.
pub(super) async fn error_pages(
    axum::extract::State(app): axum::extract::State<Shared>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let api = super::access::is_api(request.uri().path());
    let htmx = request.headers().contains_key("hx-request");
    let (parts, body) = request.into_parts();
    let ctx = Ctx::of(&parts, &app);
    let response = next
        .run(axum::extract::Request::from_parts(parts, body))
        .await;
    match response.extensions().get::<Failure>() {
        Some(Failure(message)) if !htmx && !api => {
            let status = response.status();
            let page = shell(
                &ctx,
                "Error",
                "",
                html! { h1 { "Error " (status.as_u16()) } (flash(message, true)) },
            );
            (status, page).into_response()
        }
        _ => response,
    }
}
