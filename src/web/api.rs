//! The HTTP API.

use axum::Router;

use super::Shared;

/// The `/api/` routes.
pub(super) fn routes() -> Router<Shared> {
    Router::new()
}
