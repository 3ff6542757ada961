//! Placeholder.

use axum::extract::State;
use maud::html;

use super::Page;
use crate::web::Shared;
use crate::web::layout::{Ctx, shell};

/// `GET /charts`.
pub async fn page(State(_app): State<Shared>, ctx: Ctx) -> Page {
    Ok(shell(&ctx, "charts", "charts", html! { h1 { "charts" } }))
}

/// `GET /charts/data`.
pub async fn data(State(_app): State<Shared>) -> axum::Json<serde_json::Value> {
    axum::Json(serde_json::json!({}))
}
