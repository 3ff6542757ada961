//! Jobs by status: tabs with (capped) counts, filters by queue, kind and
//! finished time with suggestions, first/previous/next/last pages, and
//! actions on one job, a selection, or everything the filter names.

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use maud::{Markup, html};

use super::{Page, PageError, db, done};
use crate::audit::{Actor, record};
use crate::filter::{ListQuery, Listing, TABS, status_name};
use crate::layout::{Ctx, age, count, filtered, live_trigger, maybe_time, shell};
use crate::{PAGE_SIZE, Shared};
use solidq::{JobInfo, JobStatus};

/// The most jobs an "all matching" action on a time range acts on (it
/// lists their ids first).
pub const MAX_RANGE_ACTION: usize = 100_000;

struct Listed {
    jobs: Vec<JobInfo>,
    counts: Vec<u64>,
    /// Whether an older page exists.
    older: bool,
    /// Whether a newer page exists.
    newer: bool,
    queues: Vec<String>,
    kinds: Vec<String>,
}

fn load(
    queue: &solidq::Queue,
    listing: &Listing,
    cursor: &ListQuery,
    cap: u64,
    suggestions: bool,
) -> solidq::Result<Listed> {
    let base = listing.filter(PAGE_SIZE + 1);
    let last = cursor.last.is_some();
    let (mut jobs, reversed) = if let Some(newer) = cursor.newer {
        (
            queue.jobs(&base.clone().newer_than(newer).oldest_first())?,
            true,
        )
    } else if last {
        (queue.jobs(&base.clone().oldest_first())?, true)
    } else if let Some(after) = cursor.after {
        (queue.jobs(&base.clone().after(after))?, false)
    } else {
        (queue.jobs(&base)?, false)
    };
    let more = jobs.len() > PAGE_SIZE;
    jobs.truncate(PAGE_SIZE);
    if reversed {
        jobs.reverse();
    }
    let (older, newer) = if reversed {
        // Reading toward newer jobs: more ones beyond are newer; older
        // ones exist unless this is the last page.
        (!last && cursor.newer.is_some(), more)
    } else {
        (more, cursor.after.is_some())
    };
    let mut counts = Vec::with_capacity(TABS.len());
    for (status, _) in TABS {
        let mut tab = listing.clone();
        tab.status = *status;
        counts.push(queue.jobs_count_capped(&tab.filter(1), cap)?);
    }
    let (mut queues, mut kinds) = (Vec::new(), Vec::new());
    if suggestions {
        (queues, kinds) = names(queue)?;
    }
    Ok(Listed {
        jobs,
        counts,
        older,
        newer,
        queues,
        kinds,
    })
}

/// Queue and kind suggestions from what is cheap to read: the queues
/// with waiting or failed jobs, the workers' registered kinds and
/// queues, the recurring tasks. Never a scan of every job.
fn names(queue: &solidq::Queue) -> solidq::Result<(Vec<String>, Vec<String>)> {
    let mut queues: Vec<String> = queue.queues()?.into_iter().map(|q| q.name).collect();
    let mut kinds = Vec::new();
    for process in queue.processes()? {
        for (key, out) in [("kinds", &mut kinds), ("queues", &mut queues)] {
            if let Some(list) = process.metadata[key].as_array() {
                out.extend(
                    list.iter()
                        .filter_map(|v| v.as_str())
                        .filter(|s| !s.contains('*'))
                        .map(String::from),
                );
            }
        }
    }
    for task in queue.recurring_tasks()? {
        kinds.push(task.kind);
        queues.extend(task.queue);
    }
    for list in [&mut queues, &mut kinds] {
        list.sort();
        list.dedup();
    }
    Ok((queues, kinds))
}

/// `GET /jobs`.
pub async fn page(State(app): State<Shared>, ctx: Ctx, Query(query): Query<ListQuery>) -> Page {
    let listing = query.listing()?;
    let cap = app.config.count_cap;
    let (l, q) = (listing.clone(), query.clone());
    let listed = db(&app, move |queue| load(queue, &l, &q, cap, true)).await?;
    let tab_counts = tabs(&ctx, &listing, &listed.counts, cap);
    let body = html! {
        h1 { "Jobs" }
        div id="tabs" hx-get=(ctx.url(&format!("/jobs/live?{}", listing.query(listing.status))))
            hx-trigger=(live_trigger()) hx-swap="innerHTML" {
            (tab_counts)
        }
        form class="filters" method="get" action=(ctx.url("/jobs")) {
            input type="hidden" name="status" value=(status_name(listing.status));
            label { "Queue" input name="queue" list="queue-names" value=[listing.queue.as_deref()] placeholder="any"; }
            label { "Kind" input name="kind" list="kind-names" value=[listing.kind.as_deref()] placeholder="any"; }
            label { "Finished from (UTC)" input type="datetime-local" name="from"
                value=[listing.from.map(|t| t.format("%Y-%m-%dT%H:%M").to_string())]; }
            label { "Finished before (UTC)" input type="datetime-local" name="to"
                value=[listing.to.map(|t| t.format("%Y-%m-%dT%H:%M").to_string())]; }
            button class="primary" type="submit" { "Filter" }
            a href=(ctx.url(&format!("/jobs?status={}", status_name(listing.status)))) { "Clear" }
            datalist id="queue-names" { @for n in &listed.queues { option value=(n) {} } }
            datalist id="kind-names" { @for n in &listed.kinds { option value=(n) {} } }
        }
        (bulk_actions(&ctx, &listing, listed.counts[tab_index(listing.status)], cap))
        @if live_rows(listing.status) {
            // Running jobs and their progress bars, refreshed in place.
            div hx-get=(ctx.url(&format!("/jobs?{}", listing.query(listing.status))))
                hx-select="#job-list" hx-target="this" hx-swap="innerHTML" hx-trigger=(live_trigger()) {
                (table(&ctx, &listing, &listed.jobs, &app.config.filtered_keys))
            }
        } @else {
            (table(&ctx, &listing, &listed.jobs, &app.config.filtered_keys))
        }
        (pager(&ctx, &listing, &listed))
    };
    Ok(shell(&ctx, "Jobs", "jobs", body))
}

/// `GET /jobs/live`: the tabs with fresh counts.
pub async fn live(State(app): State<Shared>, ctx: Ctx, Query(query): Query<ListQuery>) -> Page {
    let listing = query.listing()?;
    let cap = app.config.count_cap;
    let l = listing.clone();
    let counts = db(&app, move |queue| {
        TABS.iter()
            .map(|(status, _)| {
                let mut tab = l.clone();
                tab.status = *status;
                queue.jobs_count_capped(&tab.filter(1), cap)
            })
            .collect::<solidq::Result<Vec<u64>>>()
    })
    .await?;
    Ok(tabs(&ctx, &listing, &counts, cap))
}

fn tab_index(status: JobStatus) -> usize {
    TABS.iter().position(|(s, _)| *s == status).unwrap_or(0)
}

fn tabs(ctx: &Ctx, listing: &Listing, counts: &[u64], cap: u64) -> Markup {
    html! {
        nav class="tabs" {
            @for ((status, label), n) in TABS.iter().zip(counts) {
                a href=(ctx.url(&format!("/jobs?{}", listing.query(*status))))
                    class=[(*status == listing.status).then_some("on")]
                    data-status=(status_name(*status)) {
                    (label) " " span class="count" { (count(*n, cap)) }
                }
            }
        }
    }
}

fn actions_for(status: JobStatus) -> &'static [(&'static str, &'static str)] {
    match status {
        JobStatus::Failed => &[("retry", "Retry"), ("discard", "Discard")],
        JobStatus::Scheduled | JobStatus::Retrying | JobStatus::Blocked => {
            &[("run-now", "Run now"), ("discard", "Discard")]
        }
        JobStatus::Ready | JobStatus::Claimed | JobStatus::Running => &[("cancel", "Cancel")],
        _ => &[],
    }
}

fn bulk_actions(ctx: &Ctx, listing: &Listing, total: u64, cap: u64) -> Markup {
    let actions = actions_for(listing.status);
    html! {
        @if ctx.access.may_write() && !actions.is_empty() && total > 0 {
            div class="actions" {
                @if !live_rows(listing.status) {
                    span class="muted" { "Selected:" }
                    @for (action, label) in actions {
                        button hx-post=(ctx.url(&format!("/jobs/action/{action}?{}", listing.query(listing.status))))
                            hx-include="#job-list" data-action=(action) data-scope="selected"
                            hx-confirm=(format!("{label} the selected jobs?"))
                            class=[(*action == "discard" || *action == "cancel").then_some("danger")] {
                            (label) " selected"
                        }
                    }
                }
                span class="muted apart" { "Everything matching the filter:" }
                @for (action, label) in actions {
                    button hx-post=(ctx.url(&format!("/jobs/action/{action}?{}&all=1", listing.query(listing.status))))
                        hx-confirm=(format!("{label} all {} {} jobs matching the filter?", count(total, cap), status_name(listing.status)))
                        data-action=(action) data-scope="all"
                        class=[(*action == "discard" || *action == "cancel").then_some("danger")] {
                        (label) " all (" (count(total, cap)) ")"
                    }
                }
            }
        }
    }
}

/// Whether the tab's rows refresh live: running and claimed jobs (their
/// progress). Those rows have no selection (a refresh would clear it):
/// cancel one from its page, or all of them.
fn live_rows(status: JobStatus) -> bool {
    matches!(status, JobStatus::Running | JobStatus::Claimed)
}

fn table(ctx: &Ctx, listing: &Listing, jobs: &[JobInfo], keys: &[String]) -> Markup {
    let selectable = ctx.access.may_write()
        && !actions_for(listing.status).is_empty()
        && !live_rows(listing.status);
    html! {
        @if jobs.is_empty() {
            p class="muted" id="job-list" { "No " (status_name(listing.status)) " jobs." }
        } @else {
            form id="job-list" {
                table id="jobs" {
                    thead { tr {
                        @if selectable { th {} }
                        th { "Id" } th { "Kind" } th { "Queue" } th { "Arguments" }
                        th { "Attempts" } th { "Enqueued" }
                        @match listing.status {
                            JobStatus::Failed => { th { "Failed" } th { "Error" } }
                            JobStatus::Succeeded | JobStatus::Discarded => { th { "Finished" } th { "Duration" } }
                            JobStatus::Running | JobStatus::Claimed => { th { "Started" } th { "Progress" } }
                            JobStatus::Retrying => { th { "Retry at" } th { "Last error" } }
                            _ => { th { "Due" } th { "Priority" } }
                        }
                    } }
                    tbody {
                        @for job in jobs {
                            tr data-job=(job.id) {
                                @if selectable { td { input type="checkbox" name="id" value=(job.id) aria-label=(format!("select job {}", job.id)); } }
                                td { a href=(ctx.url(&format!("/jobs/{}", job.id))) { (job.id) } }
                                td { (job.kind) }
                                td { (job.queue) }
                                td { code { (short(&filtered(&job.arguments, keys).to_string(), 80)) } }
                                td class="n" { (job.attempts) "/" (job.max_attempts) }
                                td { (crate::layout::time(job.created_at)) }
                                @match listing.status {
                                    JobStatus::Failed => {
                                        td { (maybe_time(job.failed_at)) }
                                        td { (job.error.as_ref().map(|e| short(&format!("{}: {}", e.kind, e.message), 100)).unwrap_or_default()) }
                                    }
                                    JobStatus::Succeeded | JobStatus::Discarded => {
                                        td { (maybe_time(job.finished_at)) }
                                        td { (duration(job)) }
                                    }
                                    JobStatus::Running | JobStatus::Claimed => {
                                        td { (maybe_time(job.started_at)) }
                                        td { (progress(job)) }
                                    }
                                    JobStatus::Retrying => {
                                        td { (maybe_time(job.retry_at)) }
                                        td { (job.error.as_ref().map(|e| short(&e.message, 100)).unwrap_or_default()) }
                                    }
                                    _ => {
                                        td { (crate::layout::time(job.scheduled_at)) }
                                        td class="n" { (job.priority) }
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

/// How long a finished job ran (its last attempt).
pub fn duration(job: &JobInfo) -> String {
    match (job.started_at, job.finished_at) {
        (Some(start), Some(end)) => age((end - start).to_std().unwrap_or_default()),
        _ => "—".into(),
    }
}

/// A progress bar when the job reports a fraction (`0.0..=1.0`, or a
/// percent above 1), its JSON otherwise.
pub fn progress(job: &JobInfo) -> Markup {
    let Some(value) = &job.progress else {
        return html! { span class="muted" { "—" } };
    };
    let fraction = value
        .as_f64()
        .or_else(|| value["fraction"].as_f64())
        .or_else(|| value["percent"].as_f64().map(|p| p / 100.0))
        .map(|f| if f > 1.0 { f / 100.0 } else { f })
        .map(|f| f.clamp(0.0, 1.0));
    html! {
        @if let Some(f) = fraction {
            progress class="bar" max="100" value=(format!("{:.0}", f * 100.0)) {
                (format!("{:.0}%", f * 100.0))
            }
            " " (format!("{:.0}%", f * 100.0))
        } @else {
            code { (short(&value.to_string(), 60)) }
        }
    }
}

/// `text` cut to `max` characters with an ellipsis.
pub fn short(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let cut: String = text.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

fn pager(ctx: &Ctx, listing: &Listing, listed: &Listed) -> Markup {
    let base = ctx.url(&format!("/jobs?{}", listing.query(listing.status)));
    let first_id = listed.jobs.first().map(|j| j.id);
    let last_id = listed.jobs.last().map(|j| j.id);
    html! {
        nav class="pager" {
            @if listed.newer {
                a href=(base) rel="first" { "« First" }
                @if let Some(id) = first_id { a href=(format!("{base}&newer={id}")) rel="prev" { "‹ Newer" } }
            }
            @if listed.older {
                @if let Some(id) = last_id { a href=(format!("{base}&after={id}")) rel="next" { "Older ›" } }
                a href=(format!("{base}&last=1")) rel="last" { "Last »" }
            }
        }
    }
}

/// Job ids in a form body (`id=1&id=2`); anything else that is not a
/// number is an error naming it.
pub fn ids(body: &[u8]) -> Result<Vec<i64>, PageError> {
    form_urlencoded::parse(body)
        .filter(|(k, _)| k == "id")
        .map(|(_, v)| {
            v.parse::<i64>()
                .map_err(|_| PageError::BadRequest(format!("id: {v:?} is not a job id")))
        })
        .collect()
}

/// What a bulk action did, in words.
pub struct ActionOutcome {
    /// Rows changed.
    pub rows: u64,
    /// For the flash message.
    pub message: String,
}

/// Applies `action` to these job ids, or to everything `listing` names;
/// `who` names the actor and the way in ("ops from the dashboard").
pub fn apply(
    queue: &solidq::Queue,
    action: &str,
    listing: &Listing,
    ids: Option<Vec<i64>>,
    who: &str,
) -> solidq::Result<ActionOutcome> {
    use solidq::FailedFilter;
    let ranged = listing.from.is_some() || listing.to.is_some();
    let failed_ids = |ids: Option<Vec<i64>>| -> solidq::Result<Vec<i64>> {
        match ids {
            Some(ids) => Ok(ids),
            None => Ok(queue
                .jobs(&listing.filter(MAX_RANGE_ACTION))?
                .into_iter()
                .map(|j| j.id)
                .collect()),
        }
    };
    let reason = format!("cancelled by {who}");
    let (rows, verb) = match (action, listing.status) {
        ("retry", JobStatus::Failed) => {
            let filter = match (&ids, ranged) {
                (None, false) => listing.failed(),
                _ => FailedFilter::ids(failed_ids(ids)?),
            };
            (queue.retry_failed(&filter)?, "retried")
        }
        ("discard", JobStatus::Failed) => {
            let filter = match (&ids, ranged) {
                (None, false) => listing.failed(),
                _ => FailedFilter::ids(failed_ids(ids)?),
            };
            (queue.discard_failed(&filter)?, "discarded")
        }
        ("run-now", _) => {
            let n = match ids {
                None => queue.run_jobs_now(&listing.filter(MAX_RANGE_ACTION))?,
                Some(ids) => {
                    let mut n = 0;
                    for id in ids {
                        n += u64::from(queue.run_job_now(id)?);
                    }
                    n
                }
            };
            (n, "set to run now")
        }
        ("discard", _) | ("cancel", _) => {
            let total = match ids {
                None => queue.cancel_jobs(&listing.filter(MAX_RANGE_ACTION), &reason)?,
                Some(ids) => {
                    let mut total = solidq::Cancelled::default();
                    for id in ids {
                        let c = queue.cancel_job(id, &reason)?;
                        total.discarded += c.discarded;
                        total.stopping += c.stopping;
                    }
                    total
                }
            };
            let verb = if total.stopping > 0 {
                "cancelled (running ones asked to stop)"
            } else {
                "discarded"
            };
            (total.discarded + total.stopping, verb)
        }
        (other, status) => {
            return Err(solidq::Error::InvalidOption {
                option: "action",
                value: other.to_string(),
                reason: format!("not an action on {status} jobs"),
            });
        }
    };
    Ok(ActionOutcome {
        rows,
        message: format!("{rows} job{} {verb}.", if rows == 1 { "" } else { "s" }),
    })
}

/// `POST /jobs/action/{action}?<listing>[&all=1]` with `id=…` for a
/// selection.
pub async fn bulk_action(
    State(app): State<Shared>,
    actor: Actor,
    headers: HeaderMap,
    Path(action): Path<String>,
    Query(query): Query<ListQuery>,
    Query(scope): Query<Scope>,
    body: Bytes,
) -> Result<Response, PageError> {
    let listing = query.listing()?;
    let selected = if scope.all.is_some() {
        None
    } else {
        let ids = ids(&body)?;
        if ids.is_empty() {
            return Err(PageError::BadRequest("select at least one job".into()));
        }
        Some(ids)
    };
    let target = match &selected {
        Some(ids) => format!("jobs {ids:?}"),
        None => format!(
            "all {} jobs matching {}",
            status_name(listing.status),
            listing.query(listing.status)
        ),
    };
    let (l, a, who) = (listing.clone(), action.clone(), actor.describe());
    let outcome = db(&app, move |queue| {
        if selected.is_none() {
            l.check_names(queue)?;
        }
        apply(queue, &a, &l, selected, &who)
    })
    .await?;
    record(&app, &actor, &action, &target, outcome.rows).await;
    Ok(done(&headers, &outcome.message))
}

/// `?all=1`: act on everything the listing names.
#[derive(Debug, Default, serde::Deserialize)]
pub struct Scope {
    /// Present for "all matching".
    pub all: Option<String>,
}
