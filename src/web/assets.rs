//! The vendored scripts and styles, compiled in (see `assets/VENDORED.md`).

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

/// Each file served under `/assets/`: name, content type, bytes.
const FILES: &[(&str, &str, &str)] = &[
    (
        "htmx.min.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/htmx.min.js"),
    ),
    (
        "uPlot.iife.min.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/uPlot.iife.min.js"),
    ),
    (
        "uPlot.min.css",
        "text/css; charset=utf-8",
        include_str!("assets/uPlot.min.css"),
    ),
    (
        "LICENSE-htmx",
        "text/plain; charset=utf-8",
        include_str!("assets/LICENSE-htmx"),
    ),
    (
        "LICENSE-uplot",
        "text/plain; charset=utf-8",
        include_str!("assets/LICENSE-uplot"),
    ),
];

/// `GET /assets/{file}`: cached for a day (the files change only with
/// solidq's version).
pub(super) async fn file(Path(name): Path<String>) -> Response {
    match FILES.iter().find(|(n, _, _)| *n == name) {
        Some((_, content_type, body)) => (
            [
                (header::CONTENT_TYPE, *content_type),
                (header::CACHE_CONTROL, "public, max-age=86400"),
            ],
            *body,
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "no such asset\n").into_response(),
    }
}
