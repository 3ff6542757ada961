//! Recurring tasks: key, kind, schedule in plain words, time zone, last
//! and next run, run now; and each task's cron ledger.

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use maud::html;

use super::queues::enc;
use super::{Page, PageError, db, done};
use crate::Shared;
use crate::audit::{Actor, record};
use crate::filter::status_name;
use crate::layout::{Ctx, filtered, maybe_time, shell, time};
use solidq::Schedule;

/// Ticks the ledger page shows.
pub const LEDGER_TICKS: usize = 100;

/// The schedule in plain words, or why it cannot be read.
pub fn describe(schedule: &str, timezone: &str) -> String {
    match Schedule::parse(schedule, timezone) {
        Ok(s) => s.describe(),
        Err(e) => format!("unreadable: {e}"),
    }
}

/// `GET /recurring`.
pub async fn page(State(app): State<Shared>, ctx: Ctx) -> Page {
    let tasks = db(&app, |q| q.recurring_tasks()).await?;
    let body = html! {
        h1 { "Recurring tasks" }
        @if tasks.is_empty() {
            p class="muted" { "No recurring task is declared (a scheduler declares its tasks when it starts)." }
        } @else {
            table id="recurring" {
                thead { tr {
                    th { "Key" } th { "Kind" } th { "Schedule" } th { "Time zone" } th { "Queue" }
                    th { "Last run" } th { "Next run" } th {}
                } }
                tbody {
                    @for t in &tasks {
                        tr data-task=(t.key) {
                            td { a href=(ctx.url(&format!("/recurring/{}", enc(&t.key)))) { (t.key) }
                                @if let Some(d) = &t.description { br; span class="muted" { (d) } } }
                            td { (t.kind) }
                            td { code { (t.schedule) } br; span class="muted" { (describe(&t.schedule, &t.timezone)) } }
                            td { (t.timezone) }
                            td { (t.queue.as_deref().unwrap_or("default")) }
                            td {
                                (maybe_time(t.last_run_at))
                                @if let Some(id) = t.last_job_id { " · " a href=(ctx.url(&format!("/jobs/{id}"))) { "job " (id) } }
                            }
                            td { (maybe_time(t.next_run_at)) }
                            td {
                                @if ctx.access.may_write() {
                                    button hx-post=(ctx.url(&format!("/recurring/{}/run", enc(&t.key))))
                                        hx-confirm=(format!("Enqueue {} now?", t.key)) data-action="run" { "Run now" }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    Ok(shell(&ctx, "Recurring tasks", "recurring", body))
}

/// `GET /recurring/{key}`: the task's ticks, each with its job, and the
/// ticks no scheduler fired.
pub async fn ledger(State(app): State<Shared>, ctx: Ctx, Path(key): Path<String>) -> Page {
    let k = key.clone();
    let (task, ticks) = db(&app, move |q| {
        let task = q.recurring_tasks()?.into_iter().find(|t| t.key == k);
        let ticks = q.recurring_ledger(&k, LEDGER_TICKS)?;
        Ok((task, ticks))
    })
    .await?;
    let task = task.ok_or_else(|| PageError::NotFound(format!("no recurring task {key:?}")))?;
    let missed = ticks.iter().filter(|t| t.missed).count();
    let body = html! {
        h1 { "Recurring task " (task.key) }
        dl class="kv" {
            dt { "Kind" } dd { (task.kind) }
            dt { "Schedule" } dd { code { (task.schedule) } " — " (describe(&task.schedule, &task.timezone)) " (" (task.timezone) ")" }
            dt { "Arguments" } dd { code { (filtered(&task.arguments, &app.config.filtered_keys)) } }
            dt { "Next run" } dd { (maybe_time(task.next_run_at)) }
        }
        h2 { "Ledger: the latest " (ticks.len()) " ticks" }
        p {
            @if missed == 0 {
                span class="badge ok" id="ledger-verdict" { "every tick fired once" }
            } @else {
                span class="badge bad" id="ledger-verdict" { (missed) " missed ticks" }
                " — no scheduler fired them (none was running, or none reached the database)."
            }
        }
        table id="ledger" {
            thead { tr { th { "Tick" } th { "Fired at" } th { "Job" } th { "Status" } } }
            tbody {
                @for t in &ticks {
                    tr class=[t.missed.then_some("missed")] {
                        td { (time(t.run_at)) @if t.manual { " " span class="badge" { "run now" } } }
                        td { (maybe_time(t.fired_at)) }
                        td { @if let Some(id) = t.job_id { a href=(ctx.url(&format!("/jobs/{id}"))) { (id) } } @else { "—" } }
                        td {
                            @if t.missed { span class="badge bad" { "missed" } }
                            @else if let Some(s) = t.status { span class=(format!("badge {s}")) { (status_name(s)) } }
                            @else { span class="muted" { "job cleaned" } }
                        }
                    }
                }
            }
        }
    };
    Ok(shell(
        &ctx,
        &format!("Recurring task {}", task.key),
        "recurring",
        body,
    ))
}

/// `POST /recurring/{key}/run`.
pub async fn run(
    State(app): State<Shared>,
    actor: Actor,
    headers: HeaderMap,
    Path(key): Path<String>,
) -> Result<Response, PageError> {
    let k = key.clone();
    let job = db(&app, move |q| q.run_recurring(&k)).await?;
    record(
        &app,
        &actor,
        "run_recurring",
        &key,
        u64::from(job.is_some()),
    )
    .await;
    Ok(done(
        &headers,
        &match job {
            Some(id) => format!("Task {key} enqueued as job {id}."),
            None => format!("Task {key} already ran this second."),
        },
    ))
}
