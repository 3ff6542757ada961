//! `GET /metrics`.

use axum::extract::State;

use super::Shared;

/// `GET /metrics`.
pub(super) async fn metrics(State(_app): State<Shared>) -> String {
    String::new()
}
