//! Queues: each queue's jobs by status, latency, paused; pause and resume.

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use maud::{Markup, html};

use super::{Page, PageError, db, done};
use crate::Shared;
use crate::audit::{Actor, record};
use crate::layout::{Ctx, age, live_trigger, shell, thousands};
use solidq::QueueStats;

/// `GET /queues`.
pub async fn page(State(app): State<Shared>, ctx: Ctx) -> Page {
    let queues = db(&app, |q| q.queues()).await?;
    let body = html! {
        h1 { "Queues" }
        div hx-get=(ctx.url("/queues/live")) hx-trigger=(live_trigger()) hx-swap="innerHTML" {
            (table(&ctx, &queues))
        }
    };
    Ok(shell(&ctx, "Queues", "queues", body))
}

/// `GET /queues/live`: the table alone, for the live refresh.
pub async fn live(State(app): State<Shared>, ctx: Ctx) -> Page {
    let queues = db(&app, |q| q.queues()).await?;
    Ok(table(&ctx, &queues))
}

fn table(ctx: &Ctx, queues: &[QueueStats]) -> Markup {
    let jobs = |queue: &str, status: &str| {
        let mut query = form_urlencoded::Serializer::new(String::new());
        query.append_pair("queue", queue);
        query.append_pair("status", status);
        ctx.url(&format!("/jobs?{}", query.finish()))
    };
    html! {
        @if queues.is_empty() {
            p class="muted" { "No queue has jobs yet." }
        } @else {
            table id="queues" {
                thead { tr {
                    th { "Queue" } th class="n" { "Ready" } th class="n" { "Scheduled" }
                    th class="n" { "Retrying" } th class="n" { "Running" } th class="n" { "Blocked" }
                    th class="n" { "Failed" } th class="n" { "Waiting" } th class="n" { "Latency" } th { "State" } th {}
                } }
                tbody {
                    @for q in queues {
                        tr data-queue=(q.name) {
                            td { a href=(jobs(&q.name, "ready")) { (q.name) } }
                            td.n { a href=(jobs(&q.name, "ready")) { (thousands(q.ready)) } }
                            td.n { a href=(jobs(&q.name, "scheduled")) { (thousands(q.scheduled)) } }
                            td.n { a href=(jobs(&q.name, "retrying")) { (thousands(q.retrying)) } }
                            td.n { a href=(jobs(&q.name, "running")) { (thousands(q.running + q.claimed)) } }
                            td.n { a href=(jobs(&q.name, "blocked")) { (thousands(q.blocked)) } }
                            td.n { a href=(jobs(&q.name, "failed")) { (thousands(q.failed)) } }
                            td.n { a href=(jobs(&q.name, "waiting")) { (thousands(q.waiting)) } }
                            td.n { (q.latency.map(age).unwrap_or_else(|| "—".into())) }
                            td {
                                @if q.paused { span class="badge paused" { "paused" } }
                                @else { span class="badge ok" { "active" } }
                            }
                            td {
                                @if ctx.access.may_write() {
                                    @if q.paused {
                                        button hx-post=(ctx.url(&format!("/queues/{}/resume", enc(&q.name)))) data-action="resume" { "Resume" }
                                    } @else {
                                        button hx-post=(ctx.url(&format!("/queues/{}/pause", enc(&q.name))))
                                            hx-confirm=(format!("Pause queue {}? Workers stop claiming from it.", q.name)) data-action="pause" { "Pause" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A path segment, percent-encoded.
pub fn enc(segment: &str) -> String {
    form_urlencoded::byte_serialize(segment.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

/// `POST /queues/{name}/pause` and `POST /queues/{name}/resume`.
pub async fn set_paused(
    State(app): State<Shared>,
    actor: Actor,
    headers: HeaderMap,
    Path((name, action)): Path<(String, String)>,
) -> Result<Response, PageError> {
    let pause = match action.as_str() {
        "pause" => true,
        "resume" => false,
        other => {
            return Err(PageError::NotFound(format!(
                "no queue action {other:?} (pause or resume)"
            )));
        }
    };
    let queue = name.clone();
    // A queue the database does not know is most likely a typo (the page
    // offers only listed queues): 404, naming the known ones.
    let changed = db(&app, move |q| {
        q.check_names(&[solidq::Name::Queue(&queue)], false)?;
        if pause {
            q.pause(&queue)
        } else {
            q.resume(&queue)
        }
    })
    .await
    .map_err(|e| match e {
        PageError::BadRequest(message) if message.starts_with("unknown queue") => {
            PageError::NotFound(message)
        }
        other => other,
    })?;
    record(&app, &actor, &action, &name, u64::from(changed)).await;
    let done_to = if pause { "paused" } else { "resumed" };
    Ok(done(&headers, &format!("Queue {name} {done_to}.")))
}
