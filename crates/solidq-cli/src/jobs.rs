//! Commands about jobs: enqueue, jobs, job, failed retry|discard.

use std::time::Duration;

use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};

use super::output::{self, Column, Output, age, maybe_time, time};
use super::{Db, Format, out};
use solidq::{EnqueueOptions, FailedFilter, JobFilter, JobInfo, JobStatus};
use solidq::{Error, Result};

#[derive(Args)]
pub(super) struct EnqueueArgs {
    /// The job's kind (its type's KIND).
    kind: String,
    /// Its arguments, as JSON.
    #[arg(long, default_value = "{}")]
    args: String,
    /// Its queue (default: the queue's default, "default").
    #[arg(long)]
    queue: Option<String>,
    /// Its priority: smaller runs first.
    #[arg(long, allow_negative_numbers = true)]
    priority: Option<i32>,
    /// Run it no earlier than this from now, e.g. "90s", "2h".
    #[arg(long, value_parser = humantime::parse_duration, conflicts_with = "at")]
    delay: Option<Duration>,
    /// Run it no earlier than this time (RFC 3339, e.g. 2026-12-01T09:00:00Z).
    #[arg(long, value_parser = parse_time)]
    at: Option<DateTime<Utc>>,
    /// Refuse it if a job holds this key.
    #[arg(long)]
    unique_key: Option<String>,
    /// Enqueue it even if the database knows no such kind or queue, or no
    /// registered worker claims from its queue.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    format: Format,
}

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(super) struct JobsArgs {
    /// `cancel` or `run-now` every job of a filter instead of listing.
    #[command(subcommand)]
    action: Option<super::control::JobsAction>,
    /// Only jobs in this state.
    #[arg(long, value_parser = crate::status_parser())]
    status: Option<JobStatus>,
    /// Only jobs of this queue.
    #[arg(long)]
    queue: Option<String>,
    /// Only jobs of this kind.
    #[arg(long)]
    kind: Option<String>,
    /// Only jobs enqueued since: a time (RFC 3339) or how long ago ("1h").
    #[arg(long, value_parser = parse_since)]
    since: Option<DateTime<Utc>>,
    /// Only jobs whose arguments contain this text (any case), as stored
    /// in compact JSON: e.g. '"user_id":7'.
    #[arg(long)]
    args: Option<String>,
    /// Only jobs with an error (any attempt's kind, message or backtrace)
    /// containing this text (any case).
    #[arg(long)]
    error: Option<String>,
    /// At most this many, at least 1.
    #[arg(long, default_value_t = solidq::JobFilter::DEFAULT_LIMIT, value_parser = super::at_least_one)]
    limit: usize,
    /// The next page: the jobs listed after this job id (older ones).
    #[arg(long, value_name = "ID")]
    after: Option<i64>,
    #[command(flatten)]
    format: Format,
}

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub(super) struct JobArgs {
    /// `cancel` or `run-now` jobs instead of showing one.
    #[command(subcommand)]
    action: Option<super::control::JobAction>,
    /// The job's id.
    #[arg(required_unless_present = "unique_key")]
    id: Option<i64>,
    /// Find it by its unique key instead.
    #[arg(long, conflicts_with = "id")]
    unique_key: Option<String>,
    /// Show every frame of a backtrace (by default solidq's, the standard
    /// library's and the runtime's frames are hidden).
    #[arg(long)]
    full: bool,
    #[command(flatten)]
    format: Format,
}

#[derive(Subcommand)]
pub(super) enum FailedAction {
    /// Move failed jobs back to ready (one more attempt if they had none).
    Retry(FailedArgs),
    /// Delete failed jobs.
    Discard(FailedArgs),
}

#[derive(Args)]
#[command(group = clap::ArgGroup::new("which").required(true).multiple(true).args(["ids", "all", "kind", "queue"]))]
pub(super) struct FailedArgs {
    /// These jobs.
    #[arg(conflicts_with_all = ["all", "kind", "queue"])]
    ids: Vec<i64>,
    /// Every failed job.
    #[arg(long, conflicts_with_all = ["kind", "queue"])]
    all: bool,
    /// Failed jobs of this kind.
    #[arg(long)]
    kind: Option<String>,
    /// Failed jobs of this queue.
    #[arg(long)]
    queue: Option<String>,
    #[command(flatten)]
    format: Format,
}

fn parse_time(s: &str) -> std::result::Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| format!("not an RFC 3339 time like 2026-12-01T09:00:00Z ({e})"))
}

fn parse_since(s: &str) -> std::result::Result<DateTime<Utc>, String> {
    parse_time(s).or_else(|_| {
        let ago = humantime::parse_duration(s)
            .map_err(|_| "not a time (2026-12-01T09:00:00Z) nor a duration (1h)".to_string())?;
        chrono::Duration::from_std(ago)
            .ok()
            .and_then(|d| Utc::now().checked_sub_signed(d))
            .ok_or_else(|| "too long ago".to_string())
    })
}

pub(super) fn enqueue(a: EnqueueArgs, db: &Db) -> Result<()> {
    // Everything is checked before the database is touched.
    let arguments: serde_json::Value =
        serde_json::from_str(&a.args).map_err(|e| Error::InvalidOption {
            option: "--args",
            value: a.args.clone(),
            reason: format!("not JSON: {e}"),
        })?;
    let mut options = EnqueueOptions::new();
    if let Some(queue) = &a.queue {
        solidq::QueuePattern::check_name(queue)?;
        options = options.queue(queue.clone());
    }
    if let Some(priority) = a.priority {
        options = options.priority(priority);
    }
    if let Some(delay) = a.delay {
        options = options.delay(delay);
    }
    if let Some(at) = a.at {
        options = options.run_at(at);
    }
    if let Some(key) = &a.unique_key {
        options = options.unique_key(key.clone());
    }
    let queue = db.queue()?;
    let target = a
        .queue
        .clone()
        .unwrap_or_else(|| queue.config().default_queue.clone());
    let warnings = super::guard::names(
        &queue,
        &[solidq::Name::Kind(&a.kind), solidq::Name::Target(&target)],
        a.force,
    )?;
    let id = queue.enqueue_kind(&a.kind, &arguments, options)?;
    super::audit::record(&queue, "enqueue", &id.to_string(), 1);
    let info = queue.job(id)?;
    out(a.format).say(
        serde_json::json!({ "id": id, "status": info.status }),
        &format!(
            "enqueued job {id} ({}) on queue {}: {}",
            info.kind, info.queue, info.status
        ),
    );
    super::guard::warn_all(&warnings);
    Ok(())
}

pub(super) fn list(a: JobsArgs, db: &Db) -> Result<()> {
    if let Some(action) = a.action {
        return super::control::jobs(action, db);
    }
    let mut filter = JobFilter::new().limit(a.limit);
    if let Some(status) = a.status {
        filter = filter.status(status);
    }
    if let Some(queue) = a.queue {
        filter = filter.queue(queue);
    }
    if let Some(kind) = a.kind {
        filter = filter.kind(kind);
    }
    if let Some(since) = a.since {
        filter = filter.since(since);
    }
    if let Some(text) = a.args {
        filter = filter.arguments_contain(text);
    }
    if let Some(text) = a.error {
        filter = filter.error_contains(text);
    }
    if let Some(id) = a.after {
        filter = filter.after(id);
    }
    let page = db.queue()?.jobs_page(&filter)?;
    let o = out(a.format);
    o.print(
        serde_json::json!({ "jobs": page.jobs, "total": page.total, "next_after": page.next_after }),
        || {
            let mut table = output::table(&[
                Column::keep("ID").right(),
                Column::clip("KIND", 8),
                Column::clip("QUEUE", 6).optional(2),
                Column::keep("STATUS"),
                Column::keep("PRI").right().optional(3),
                Column::keep("TRIES").right().optional(1),
                Column::keep("CREATED").optional(4),
                Column::keep("AT"),
                Column::clip("ERROR", 10),
            ]);
            for j in &page.jobs {
                table.add_row(vec![
                    j.id.to_string(),
                    j.kind.clone(),
                    j.queue.clone(),
                    match progress(j) {
                        Some(p) => format!("{} {p}", j.status),
                        None => j.status.to_string(),
                    },
                    j.priority.to_string(),
                    format!("{}/{}", j.attempts, j.max_attempts),
                    time(j.created_at),
                    maybe_time(status_time(j)),
                    j.error.as_ref().map_or_else(String::new, |e| {
                        format!("{}: {}", e.kind, e.message.lines().next().unwrap_or(""))
                    }),
                ]);
            }
            table
        },
    );
    if !o.json {
        let shown = page.jobs.len() as u64;
        if shown < page.total {
            let next = page
                .next_after
                .map(|id| format!("; next page: --after {id}"))
                .unwrap_or_default();
            if shown == 0 {
                eprintln!("solidq: no jobs on this page (of {})", page.total);
            } else {
                eprintln!(
                    "solidq: jobs {}–{} of {}{next}",
                    page.skipped + 1,
                    page.skipped + shown,
                    page.total
                );
            }
        }
    }
    Ok(())
}

/// The time of a job's status: when it is (or was) due while it waits or
/// is claimed, when its retry is due, when its attempt started, when it
/// finished, when it failed.
fn status_time(j: &JobInfo) -> Option<DateTime<Utc>> {
    match j.status {
        JobStatus::Scheduled
        | JobStatus::Waiting
        | JobStatus::Ready
        | JobStatus::Blocked
        | JobStatus::Claimed => Some(j.scheduled_at),
        JobStatus::Retrying => j.retry_at,
        JobStatus::Running => j.started_at,
        JobStatus::Succeeded | JobStatus::Discarded => j.finished_at,
        JobStatus::Failed => j.failed_at,
    }
}

pub(super) fn show(a: JobArgs, db: &Db) -> Result<()> {
    if let Some(action) = a.action {
        return super::control::job(action, db);
    }
    let queue = db.queue()?;
    let info = match (&a.unique_key, a.id) {
        (Some(key), _) => queue.job_by_unique_key(key)?,
        (None, Some(id)) => queue.job(id)?,
        (None, None) => unreachable!("clap requires one"),
    };
    out(a.format).print_text(
        serde_json::to_value(&info).expect("JobInfo serializes"),
        || output::fields(job_fields(&info, a.full)),
    );
    Ok(())
}

/// A resumable job's steps: `done a, b; in c at <cursor>`, or `-`.
fn steps(j: &JobInfo) -> String {
    let Some(c) = &j.checkpoint else {
        return "-".into();
    };
    let done: Vec<&str> = c["done"]
        .as_array()
        .map(|d| d.iter().filter_map(|s| s.as_str()).collect())
        .unwrap_or_default();
    let mut text = if done.is_empty() {
        "none done".to_string()
    } else {
        format!("done {}", done.join(", "))
    };
    if let Some(step) = c["step"].as_str() {
        text.push_str(&format!("; in {step}"));
        if let Some(cursor) = c.get("cursor") {
            text.push_str(&format!(" at {cursor}"));
        }
    }
    text
}

/// A running job's progress, short: `done/total` when it reports those,
/// else its JSON clipped.
fn progress(j: &JobInfo) -> Option<String> {
    if !matches!(j.status, JobStatus::Running | JobStatus::Claimed) {
        return None;
    }
    let p = j.progress.as_ref()?;
    Some(match (p.get("done"), p.get("total")) {
        (Some(done), Some(total)) => format!("{done}/{total}"),
        _ => output::clip(&p.to_string(), 24),
    })
}

/// Every field of a job, for `solidq job`.
fn job_fields(j: &JobInfo, full: bool) -> Vec<(&'static str, String)> {
    let trace = |e: &solidq::ErrorInfo| {
        if full {
            e.backtrace.clone().unwrap_or_default()
        } else {
            e.user_backtrace().unwrap_or_default()
        }
    };
    let json = |v: &serde_json::Value| serde_json::to_string_pretty(v).unwrap_or_default();
    let mut rows = vec![
        ("id", j.id.to_string()),
        ("kind", j.kind.clone()),
        ("queue", j.queue.clone()),
        ("status", j.status.to_string()),
        ("priority", j.priority.to_string()),
        ("attempts", format!("{} of {}", j.attempts, j.max_attempts)),
        ("stalled", j.stalled_count.to_string()),
        ("delivery", j.delivery.to_string()),
        (
            "unique key",
            j.unique_key.clone().unwrap_or_else(|| "-".into()),
        ),
        (
            "concurrency key",
            j.concurrency_key.clone().unwrap_or_else(|| "-".into()),
        ),
        (
            "fairness key",
            j.fairness_key.clone().unwrap_or_else(|| "-".into()),
        ),
        ("created", time(j.created_at)),
        ("scheduled", time(j.scheduled_at)),
        ("started", maybe_time(j.started_at)),
        (
            "progress",
            j.progress
                .as_ref()
                .map_or_else(|| "-".into(), |p| p.to_string()),
        ),
        ("steps", steps(j)),
        (
            "batch",
            j.batch_id.map_or_else(|| "-".into(), |b| b.to_string()),
        ),
        ("snoozes", j.snoozes.to_string()),
        ("finished", maybe_time(j.finished_at)),
        ("failed", maybe_time(j.failed_at)),
        ("retry at", maybe_time(j.retry_at)),
        (
            "process",
            j.process_id.map_or_else(|| "-".into(), |p| p.to_string()),
        ),
        ("arguments", json(&j.arguments)),
        ("result", j.result.as_ref().map_or_else(|| "-".into(), json)),
    ];
    for (n, e) in j.errors.iter().enumerate() {
        let when = e.at.map(time).unwrap_or_default();
        let retry = e
            .retry_in_ms
            .map(|ms| format!(", retried after {}", age(Duration::from_millis(ms))))
            .unwrap_or_default();
        let attempt = e
            .attempt
            .map(|a| format!("attempt {a}, "))
            .unwrap_or_default();
        rows.push((
            // The last is the job's error only while its state comes
            // from it (`JobInfo::error`): not once it succeeded.
            if n + 1 == j.errors.len() && j.error.is_some() {
                "error"
            } else {
                "earlier error"
            },
            format!("{}: {} ({attempt}{when}{retry})", e.kind, e.message),
        ));
        if e.backtrace.is_some() {
            rows.push(("backtrace", trace(e)));
        }
    }
    if j.errors.is_empty()
        && let Some(e) = &j.error
    {
        rows.push(("error", format!("{}: {}", e.kind, e.message)));
        if e.backtrace.is_some() {
            rows.push(("backtrace", trace(e)));
        }
    }
    rows
}

pub(super) fn failed(action: FailedAction, db: &Db) -> Result<()> {
    let (retry, a) = match action {
        FailedAction::Retry(a) => (true, a),
        FailedAction::Discard(a) => (false, a),
    };
    let mut filter = if a.ids.is_empty() {
        FailedFilter::all()
    } else {
        FailedFilter::ids(a.ids.iter().copied())
    };
    if let Some(kind) = &a.kind {
        filter = filter.kind(kind.clone());
    }
    if let Some(queue) = &a.queue {
        filter = filter.queue(queue.clone());
    }
    let queue = db.queue()?;
    super::guard::failed_ids(&queue, &a.ids)?;
    super::guard::names(
        &queue,
        &super::guard::filter(a.kind.as_deref(), a.queue.as_deref()),
        false,
    )?;
    let target = if a.ids.is_empty() {
        super::audit::filter(&[
            ("all", a.all.then_some(true.into())),
            ("kind", a.kind.clone().map(Into::into)),
            ("queue", a.queue.clone().map(Into::into)),
        ])
    } else {
        super::audit::ids(&a.ids)
    };
    let o: Output = out(a.format);
    let (action, n) = if retry {
        let n = queue.retry_failed(&filter)?;
        super::audit::record(&queue, "retry", &target, n);
        ("retry", n)
    } else {
        let n = queue.discard_failed(&filter)?;
        super::audit::record(&queue, "discard", &target, n);
        ("discard", n)
    };
    let (key, done) = if retry {
        ("retried", "retried")
    } else {
        ("discarded", "discarded")
    };
    let document = serde_json::json!({ key: n });
    if n == 0 {
        return o.nothing_done(document, action, "no failed job matches".into());
    }
    o.say(document, &format!("{done} {n} failed jobs"));
    Ok(())
}

/// `solidq batch ID`.
pub(super) fn batch(queue: &solidq::Queue, id: i64, o: Output) -> Result<()> {
    let Some(b) = queue.batch_info(id)? else {
        return Err(solidq::Error::BatchRefused {
            batch: id,
            reason: "not found",
        });
    };
    let state = if b.is_finished() {
        "finished"
    } else if b.closed_at.is_some() {
        "closed"
    } else {
        "open"
    };
    let edges = queue.batch_dependencies(id)?;
    let mut nodes = std::collections::BTreeMap::new();
    for edge in &edges {
        for job in [edge.job_id, edge.parent_id] {
            if let std::collections::btree_map::Entry::Vacant(slot) = nodes.entry(job) {
                let label = match queue.job(job) {
                    Ok(info) => format!("{job} {} {}", info.kind, info.status),
                    Err(solidq::Error::JobNotFound(_)) => format!("{job} (deleted)"),
                    Err(error) => return Err(error),
                };
                slot.insert(label);
            }
        }
    }
    let tree = dependency_tree(&edges, &nodes);
    let mut document = serde_json::to_value(&b).expect("BatchInfo serializes");
    document["dependencies"] = serde_json::to_value(&edges).expect("edges serialize");
    o.print_text(document, || {
        let mut fields = vec![
            ("id", b.id.to_string()),
            (
                "description",
                b.description.clone().unwrap_or_else(|| "-".into()),
            ),
            ("state", state.to_string()),
            (
                "progress",
                format!("{} of {} ended", b.total - b.pending, b.total),
            ),
            ("pending", b.pending.to_string()),
            ("succeeded", b.succeeded.to_string()),
            ("failed", b.failed.to_string()),
            (
                "parent",
                b.parent_id.map_or_else(|| "-".into(), |p| p.to_string()),
            ),
            ("created", time(b.created_at)),
            ("closed", maybe_time(b.closed_at)),
            ("finished", maybe_time(b.finished_at)),
            (
                "callbacks fired",
                if b.fired.is_empty() {
                    "-".into()
                } else {
                    b.fired.join(", ")
                },
            ),
        ];
        if !tree.is_empty() {
            fields.push(("dependencies", tree));
        }
        output::fields(fields)
    });
    Ok(())
}

/// The members linked by `edges` drawn as a tree from the jobs that wait
/// for none, each line `nodes`' label; a job with several parents is
/// drawn under the first and referred to under the others.
fn dependency_tree(
    edges: &[solidq::Dependency],
    nodes: &std::collections::BTreeMap<i64, String>,
) -> String {
    use std::collections::{BTreeMap, BTreeSet};
    struct Tree<'a> {
        children: BTreeMap<i64, Vec<i64>>,
        nodes: &'a BTreeMap<i64, String>,
        drawn: BTreeSet<i64>,
        out: String,
    }
    impl Tree<'_> {
        /// `job` under `prefix`; `branch` is `None` for a root, else
        /// whether it is its parent's last child.
        fn draw(&mut self, job: i64, prefix: &str, branch: Option<bool>) {
            let (mark, below) = match branch {
                None => ("", prefix.to_string()),
                Some(true) => ("└─ ", format!("{prefix}   ")),
                Some(false) => ("├─ ", format!("{prefix}│  ")),
            };
            if !self.drawn.insert(job) {
                self.out.push_str(&format!("{prefix}{mark}{job} (above)\n"));
                return;
            }
            let label = self
                .nodes
                .get(&job)
                .cloned()
                .unwrap_or_else(|| job.to_string());
            self.out.push_str(&format!("{prefix}{mark}{label}\n"));
            let kids = self.children.get(&job).cloned().unwrap_or_default();
            for (i, kid) in kids.iter().enumerate() {
                self.draw(*kid, &below, Some(i + 1 == kids.len()));
            }
        }
    }
    let waiting: BTreeSet<i64> = edges.iter().map(|e| e.job_id).collect();
    let mut tree = Tree {
        children: BTreeMap::new(),
        nodes,
        drawn: BTreeSet::new(),
        out: String::new(),
    };
    for edge in edges {
        tree.children
            .entry(edge.parent_id)
            .or_default()
            .push(edge.job_id);
    }
    for root in nodes.keys().filter(|j| !waiting.contains(j)) {
        tree.draw(*root, "", None);
    }
    tree.out.trim_end().to_string()
}
