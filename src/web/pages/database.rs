//! Placeholder.

use axum::extract::State;
use maud::html;

use super::Page;
use crate::web::Shared;
use crate::web::layout::{Ctx, shell};

/// `GET /database`.
pub async fn page(State(_app): State<Shared>, ctx: Ctx) -> Page {
    Ok(shell(
        &ctx,
        "database",
        "database",
        html! { h1 { "database" } },
    ))
}
