//! One job: everything stored about it, every attempt's error with its
//! backtrace, its process, its raw JSON; and the actions its state allows.

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use maud::html;

use super::jobs::{apply, duration, progress};
use super::{Page, PageError, db, done, done_at};
use crate::Shared;
use crate::audit::{Actor, record};
use crate::filter::{Listing, status_name};
use crate::layout::{Ctx, filtered, maybe_time, shell, thousands, time};
use solidq::JobStatus;

/// The most of one value (arguments, result, the raw JSON) a job's page
/// shows, in bytes of its pretty-printed JSON: past it the text is cut,
/// with a link to the whole job as JSON (`/api/jobs/{id}`), so a large
/// value never makes a page of megabytes.
pub const MAX_SHOWN_VALUE: usize = 64 * 1024;

/// `text` in a `<pre>`, cut at [`MAX_SHOWN_VALUE`] with a link to the
/// whole job's JSON.
fn shown(ctx: &Ctx, job: i64, text: &str, id: Option<&str>) -> maud::Markup {
    if text.len() <= MAX_SHOWN_VALUE {
        return html! { pre id=[id] { (text) } };
    }
    let mut cut = MAX_SHOWN_VALUE;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    html! {
        pre id=[id] class="cut" { (&text[..cut]) "…" }
        p class="muted" {
            "Cut at " (MAX_SHOWN_VALUE / 1024) " KiB of " (thousands(text.len() as u64)) " bytes: "
            a href=(ctx.url(&format!("/api/jobs/{job}"))) data-whole="json" { "the whole job as JSON" } "."
        }
    }
}

/// `GET /jobs/{id}`.
pub async fn page(State(app): State<Shared>, ctx: Ctx, Path(id): Path<String>) -> Page {
    let id: i64 = id
        .parse()
        .map_err(|_| PageError::BadRequest(format!("id: {id:?} is not a job id")))?;
    let job = db(&app, move |q| q.job(id)).await?;
    let process = match job.process_id {
        Some(pid) => db(&app, move |q| q.processes())
            .await?
            .into_iter()
            .find(|p| p.id == pid),
        None => None,
    };
    let keys = &app.config.filtered_keys;
    let arguments = filtered(&job.arguments, keys);
    let mut raw = serde_json::to_value(&job).unwrap_or_default();
    raw["arguments"] = arguments.clone();
    let pretty = |v: &serde_json::Value| serde_json::to_string_pretty(v).unwrap_or_default();
    let actions: &[(&str, &str)] = match job.status {
        JobStatus::Failed => &[("retry", "Retry"), ("discard", "Discard")],
        JobStatus::Scheduled | JobStatus::Retrying | JobStatus::Blocked => {
            &[("run-now", "Run now"), ("discard", "Discard")]
        }
        JobStatus::Ready | JobStatus::Claimed | JobStatus::Running => &[("cancel", "Cancel")],
        _ => &[],
    };
    let body = html! {
        h1 { "Job " (job.id) " " span class=(format!("badge {}", job.status)) data-status=(status_name(job.status)) { (job.status) } }
        @if ctx.access.may_write() && !actions.is_empty() {
            div class="actions" {
                @for (action, label) in actions {
                    button hx-post=(ctx.url(&format!("/jobs/{}/{action}", job.id)))
                        hx-confirm=(match *action {
                            "run-now" => format!("Run job {} now?", job.id),
                            _ => format!("{label} job {}?", job.id),
                        }) data-action=(action)
                        class=[(*action != "retry" && *action != "run-now").then_some("danger")] { (label) }
                }
            }
        }
        dl class="kv" {
            dt { "Kind" } dd { (job.kind) }
            dt { "Queue" } dd { (job.queue) }
            dt { "Priority" } dd { (job.priority) }
            dt { "Attempts" } dd {
                @if matches!(job.status, JobStatus::Running | JobStatus::Claimed) {
                    "attempt " (job.attempts + 1) " of " (job.max_attempts) " under way"
                } @else {
                    (job.attempts) " of " (job.max_attempts) " made"
                }
                @if job.snoozes > 0 { " · " (job.snoozes) " snoozes" }
                @if job.stalled_count > 0 { " · " span class="badge warn" { "stalled " (job.stalled_count) "×" } " (its process died)" } }
            dt { "Delivery" } dd { (job.delivery) }
            dt { "Unique key" } dd { (job.unique_key.as_deref().unwrap_or("—")) }
            dt { "Concurrency key" } dd { (job.concurrency_key.as_deref().unwrap_or("—")) }
            dt { "Enqueued" } dd { (time(job.created_at)) }
            dt { "Scheduled" } dd { (time(job.scheduled_at)) }
            dt { "Started" } dd { (maybe_time(job.started_at)) }
            dt { "Finished" } dd { (maybe_time(job.finished_at)) }
            @if job.failed_at.is_some() { dt { "Failed" } dd { (maybe_time(job.failed_at)) } }
            @if job.retry_at.is_some() { dt { "Retry at" } dd { (maybe_time(job.retry_at)) } }
            dt { "Duration" } dd { (duration(&job)) }
            dt { "Progress" } dd { (progress(&job)) }
            dt { "Process" } dd {
                @match (&process, job.process_id) {
                    (Some(p), _) => { a href=(ctx.url("/processes")) { (p.kind) " " (p.name) } " on " (p.hostname) " pid " (p.pid) }
                    (None, Some(pid)) => { "process " (pid) " (gone)" }
                    (None, None) => { "—" }
                }
            }
            dt { "Arguments" } dd { (shown(&ctx, job.id, &pretty(&arguments), None)) }
            @if let Some(result) = &job.result { dt { "Result" } dd { (shown(&ctx, job.id, &pretty(result), None)) } }
        }
        h2 { "Errors and stalls (" (job.errors.len()) ")" }
        @if job.errors.is_empty() {
            p class="muted" { "No attempt failed." }
        } @else {
            table id="errors" {
                thead { tr { th { "Attempt" } th { "At" } th { "Error" } } }
                tbody {
                    @for e in &job.errors {
                        tr {
                            td class="n" { (e.attempt.map(|a| a.to_string()).unwrap_or_else(|| "—".into())) }
                            td { (maybe_time(e.at)) }
                            td {
                                b { (e.kind) } ": " (e.message)
                                @if let Some(bt) = &e.backtrace {
                                    details {
                                        summary { "Backtrace" }
                                        pre { (e.user_backtrace().unwrap_or_default().replace("--full shows them", "the whole backtrace below shows them")) }
                                        details { summary { "Whole backtrace (solidq, std and runtime frames too)" } pre { (bt) } }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        h2 { "Raw JSON" }
        details { summary { "Show" } (shown(&ctx, job.id, &pretty(&raw), Some("raw"))) }
    };
    Ok(shell(&ctx, &format!("Job {}", job.id), "jobs", body))
}

/// `POST /jobs/{id}/{action}`: retry, discard, run-now, cancel.
pub async fn action(
    State(app): State<Shared>,
    ctx: Ctx,
    actor: Actor,
    headers: HeaderMap,
    Path((id, action)): Path<(i64, String)>,
) -> Result<Response, PageError> {
    let (a, who) = (action.clone(), actor.describe());
    let (outcome, was) = db(&app, move |q| {
        let job = q.job(id)?;
        let was = job.status;
        let listing = Listing {
            status: job.status,
            queue: None,
            kind: None,
            from: None,
            to: None,
        };
        Ok((apply(q, &a, &listing, Some(vec![id]), &who)?, was))
    })
    .await?;
    record(&app, &actor, &action, &format!("job {id}"), outcome.rows).await;
    let message = format!("Job {id}: {}", outcome.message);
    if action == "discard" && was == JobStatus::Failed {
        // The job is gone: back to the failed jobs.
        return Ok(done_at(&ctx.url("/jobs?status=failed"), &message));
    }
    Ok(done(&headers, &message))
}
