//! The audit log: every action taken through the dashboard, the HTTP API
//! and the CLI (who, through what, what, on what, how many rows, when),
//! newest first.

use axum::extract::{Query, State};
use maud::html;
use serde::Deserialize;

use super::{Page, db};
use crate::Shared;
use crate::layout::{Ctx, shell, thousands, time};

/// Entries per page.
pub const AUDIT_PAGE: usize = 50;

/// `?before=ID`: the page of entries older than this one.
#[derive(Debug, Default, Deserialize)]
pub struct AuditQuery {
    /// Only entries older than this id.
    pub before: Option<i64>,
}

/// `GET /audit`.
pub async fn page(State(app): State<Shared>, ctx: Ctx, Query(query): Query<AuditQuery>) -> Page {
    let entries = db(&app, move |q| q.audit_log(AUDIT_PAGE, query.before)).await?;
    let body = html! {
        h1 { "Audit log" }
        @if entries.is_empty() {
            p class="muted" { "No action was recorded yet." }
        } @else {
            table id="audit" {
                thead { tr { th { "When (UTC)" } th { "Who" } th { "Through" } th { "Action" } th { "Target" } th class="n" { "Rows" } } }
                tbody {
                    @for e in &entries {
                        tr data-entry=(e.id) {
                            td { (time(e.created_at)) }
                            td { (e.actor) }
                            td { span class="badge" { (e.source) } }
                            td { (e.action) }
                            td { code { (e.target) } }
                            td class="n" { (thousands(e.rows)) }
                        }
                    }
                }
            }
            @if entries.len() == AUDIT_PAGE {
                @if let Some(last) = entries.last() {
                    nav class="pager" { a rel="next" href=(ctx.url(&format!("/audit?before={}", last.id))) { "Older ›" } }
                }
            }
        }
    };
    Ok(shell(&ctx, "Audit log", "audit", body))
}
