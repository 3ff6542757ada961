//! The scripts and styles, compiled in: the vendored htmx and uPlot (see
//! `assets/VENDORED.md`) and the dashboard's own stylesheet and charts
//! script (the pages hold no inline style or script: their
//! Content-Security-Policy allows only these files).

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
        "dashboard.css",
        "text/css; charset=utf-8",
        include_str!("assets/dashboard.css"),
    ),
    (
        "charts.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/charts.js"),
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
