//! Concurrency keys: each semaphore's slots left, its holders and the
//! jobs waiting for it.

use axum::extract::State;
use maud::html;

use super::{Page, db};
use crate::Shared;
use crate::layout::{Ctx, maybe_time, shell};

/// `GET /concurrency`.
pub async fn page(State(app): State<Shared>, ctx: Ctx) -> Page {
    let keys = db(&app, |q| q.concurrency_keys()).await?;
    let body = html! {
        h1 { "Concurrency keys" }
        @if keys.is_empty() {
            p class="muted" { "No job holds or waits for a concurrency slot." }
        } @else {
            table id="concurrency" {
                thead { tr { th { "Key" } th class="n" { "Slots left" } th { "Expires" } th { "Holders" } th class="n" { "Blocked" } } }
                tbody {
                    @for k in &keys {
                        tr data-key=(k.key) {
                            td { code { (k.key) } }
                            td class="n" { (k.slots_left.map(|v| v.to_string()).unwrap_or_else(|| "—".into())) }
                            td { (maybe_time(k.expires_at)) }
                            td {
                                @for (i, id) in k.holders.iter().enumerate() {
                                    @if i > 0 { ", " }
                                    a href=(ctx.url(&format!("/jobs/{id}"))) { (id) }
                                }
                            }
                            td class="n" { (k.blocked) }
                        }
                    }
                }
            }
        }
    };
    Ok(shell(&ctx, "Concurrency", "concurrency", body))
}
