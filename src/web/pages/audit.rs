//! Placeholder.

use axum::extract::State;
use maud::html;

use super::Page;
use crate::web::Shared;
use crate::web::layout::{Ctx, shell};

/// `GET /audit`.
pub async fn page(State(_app): State<Shared>, ctx: Ctx) -> Page {
    Ok(shell(&ctx, "audit", "audit", html! { h1 { "audit" } }))
}
