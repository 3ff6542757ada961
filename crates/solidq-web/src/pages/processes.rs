//! Processes: each one's kind, name, host, pid, heartbeat age against its
//! lease, the jobs it holds and its configuration, as the supervisor
//! tree.

use std::time::Duration;

use axum::extract::State;
use maud::{Markup, html};

use super::{Page, db};
use crate::Shared;
use crate::layout::{Ctx, age, live_trigger, shell, time};
use solidq::ProcessInfo;
use solidq::config::DEFAULT_PROCESS_ALIVE_THRESHOLD;

/// `GET /processes`.
pub async fn page(State(app): State<Shared>, ctx: Ctx) -> Page {
    let processes = db(&app, |q| q.processes()).await?;
    let body = html! {
        h1 { "Processes" }
        p class="muted" {
            "A process whose heartbeat is older than its alive threshold is pruned by a \
             dispatcher or supervisor, and the jobs it holds are released (counted as stalled)."
        }
        div hx-get=(ctx.url("/processes")) hx-select="#processes" hx-target="this" hx-swap="innerHTML"
            hx-trigger=(live_trigger()) {
            (table(&ctx, &processes))
        }
    };
    Ok(shell(&ctx, "Processes", "processes", body))
}

/// The alive threshold a process registered with (older processes did
/// not say: the default).
pub fn threshold(p: &ProcessInfo) -> Duration {
    p.metadata["alive_threshold_ms"]
        .as_u64()
        .map(Duration::from_millis)
        .unwrap_or(DEFAULT_PROCESS_ALIVE_THRESHOLD)
}

/// "pruned in 42 s if silent", or overdue.
pub fn lease(p: &ProcessInfo) -> Markup {
    let threshold = threshold(p);
    html! {
        @match threshold.checked_sub(p.heartbeat_age) {
            Some(left) => {
                span class=(if left < threshold / 3 { "badge warn" } else { "badge ok" }) {
                    "pruned in " (age(left)) " if silent"
                }
            }
            None => { span class="badge bad" { "overdue by " (age(p.heartbeat_age - threshold)) ": to be pruned" } }
        }
    }
}

fn config(p: &ProcessInfo) -> String {
    let m = &p.metadata;
    let list = |key: &str| {
        m[key].as_array().map(|a| {
            a.iter()
                .map(|v| {
                    v.as_str()
                        .map(String::from)
                        .unwrap_or_else(|| v.to_string())
                })
                .collect::<Vec<_>>()
                .join(", ")
        })
    };
    let mut parts = Vec::new();
    if let Some(q) = list("queues") {
        parts.push(format!("queues {q}"));
    }
    if let Some(t) = m["threads"].as_u64() {
        parts.push(format!("{t} thread{}", if t == 1 { "" } else { "s" }));
    }
    if let Some(b) = m["batch_size"].as_u64() {
        parts.push(format!("batch {b}"));
    }
    if let Some(t) = list("tasks") {
        parts.push(format!("tasks {t}"));
    }
    if let Some(w) = m["workers"].as_array() {
        parts.push(format!("{} worker groups", w.len()));
    }
    parts.join(" · ")
}

fn table(ctx: &Ctx, processes: &[ProcessInfo]) -> Markup {
    // Supervisors first, each followed by its children; then the rest.
    let mut ordered: Vec<(&ProcessInfo, bool)> = Vec::new();
    for sup in processes.iter().filter(|p| p.kind == "supervisor") {
        ordered.push((sup, false));
        for child in processes.iter().filter(|p| p.supervisor_id == Some(sup.id)) {
            ordered.push((child, true));
        }
    }
    for p in processes {
        if !ordered.iter().any(|(o, _)| o.id == p.id) {
            ordered.push((p, false));
        }
    }
    html! {
        @if processes.is_empty() {
            p class="muted" id="processes" { "No process is registered." }
        } @else {
            table id="processes" {
                thead { tr {
                    th { "Id" } th { "Kind" } th { "Name" } th { "Host" } th class="n" { "Pid" }
                    th { "Heartbeat" } th { "Lease" } th { "Jobs held" } th { "Configuration" } th { "Started" }
                } }
                tbody {
                    @for (p, child) in ordered {
                        tr data-process=(p.id) {
                            td { (p.id) }
                            td { @if child { "└ " } (p.kind) }
                            td { (p.name) }
                            td { (p.hostname) }
                            td class="n" { (p.pid) }
                            td { (age(p.heartbeat_age)) " ago" }
                            td { (lease(p)) }
                            td {
                                @for (i, id) in p.jobs.iter().take(20).enumerate() {
                                    @if i > 0 { ", " }
                                    a href=(ctx.url(&format!("/jobs/{id}"))) { (id) }
                                }
                                @if p.jobs.len() > 20 { " … (" (p.jobs.len()) ")" }
                            }
                            td { (config(p)) }
                            td { (time(p.created_at)) }
                        }
                    }
                }
            }
        }
    }
}
