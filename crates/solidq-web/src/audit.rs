//! Who took an action through the dashboard or the API, and its record
//! in the audit log.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use super::Shared;
use super::access::Access;
use solidq::{AuditSource, NewAuditEntry};

/// The caller of an action: who (by credential) and through what (`web`
/// or `api`).
#[derive(Debug, Clone)]
pub struct Actor {
    /// The credential's name: the basic auth user, "admin token"…
    pub name: String,
    /// `web` for the dashboard, `api` for `/api/`.
    pub source: &'static str,
}

impl Actor {
    /// Who and through what, for a cancellation's reason: "ops from the
    /// dashboard", "admin token through the HTTP API".
    pub fn describe(&self) -> String {
        match self.source {
            "api" => format!("{} through the HTTP API", self.name),
            _ => format!("{} from the dashboard", self.name),
        }
    }
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

/// Records an action that was taken (`rows` rows changed) in the audit
/// log. A failure to record is logged, never turned into a failed
/// action: the action is done.
pub async fn record(app: &Shared, actor: &Actor, action: &str, target: &str, rows: u64) {
    let source = if actor.source == "api" {
        AuditSource::Api
    } else {
        AuditSource::Web
    };
    let mut target = target.to_string();
    if target.len() > NewAuditEntry::MAX_TARGET_LEN {
        let mut end = NewAuditEntry::MAX_TARGET_LEN - 3;
        while !target.is_char_boundary(end) {
            end -= 1;
        }
        target.truncate(end);
        target.push('…');
    }
    let entry = NewAuditEntry::new(source, actor.name.clone(), action, target, rows);
    let queue = app.queue.clone();
    let written = tokio::task::spawn_blocking(move || queue.record_audit(&entry)).await;
    match written {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => log::warn!("web: {action} was done but not recorded in the audit log: {e}"),
        Err(e) => log::warn!("web: {action} was done but not recorded in the audit log: {e}"),
    }
}
