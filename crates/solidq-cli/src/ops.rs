//! Commands about the system: queues, pause/resume, processes, recurring.

use clap::{Args, Subcommand};

use super::output::{self, Column, Output, age, maybe_time};
use super::{Db, Format, out};
use solidq::Queue;
use solidq::Result;

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(super) struct RecurringArgs {
    #[command(subcommand)]
    action: Option<RecurringAction>,
    #[command(flatten)]
    format: Format,
}

#[derive(Subcommand)]
enum RecurringAction {
    /// Enqueue a task now, through the same exactly-once path as its ticks.
    Run {
        /// The task's key.
        key: String,
        #[command(flatten)]
        format: Format,
    },
}

pub(super) fn queues(queue: &Queue, o: Output) -> Result<()> {
    let queues = queue.queues()?;
    let document: Vec<_> = queues
        .iter()
        .map(|q| {
            serde_json::json!({
                "name": q.name,
                "ready": q.ready,
                "scheduled": q.scheduled,
                "retrying": q.retrying,
                "claimed": q.claimed,
                "running": q.running,
                "blocked": q.blocked,
                "failed": q.failed,
                "waiting": q.waiting,
                "latency_ms": q.latency.map(|l| l.as_millis() as u64),
                "paused": q.paused,
            })
        })
        .collect();
    o.print(serde_json::json!({ "queues": document }), || {
        let mut table = output::table(&[
            Column::clip("QUEUE", 8),
            Column::keep("READY").right(),
            Column::keep("SCHEDULED").right(),
            Column::keep("RETRYING").right().optional(1),
            Column::keep("CLAIMED").right().optional(4),
            Column::keep("RUNNING").right(),
            Column::keep("BLOCKED").right().optional(3),
            Column::keep("FAILED").right(),
            Column::keep("WAITING").right().optional(5),
            Column::keep("LATENCY").right().optional(2),
            Column::keep("PAUSED"),
        ]);
        for q in &queues {
            table.add_row(vec![
                q.name.clone(),
                q.ready.to_string(),
                q.scheduled.to_string(),
                q.retrying.to_string(),
                q.claimed.to_string(),
                q.running.to_string(),
                q.blocked.to_string(),
                q.failed.to_string(),
                q.waiting.to_string(),
                q.latency.map_or_else(|| "-".into(), age),
                if q.paused {
                    "paused".into()
                } else {
                    String::new()
                },
            ]);
        }
        table
    });
    Ok(())
}

pub(super) fn pause(queue: &Queue, name: &str, paused: bool, force: bool, o: Output) -> Result<()> {
    solidq::QueuePattern::check_name(name)?;
    let warnings = super::guard::names(queue, &[solidq::Name::Queue(name)], force)?;
    let changed = if paused {
        queue.pause(name)?
    } else {
        queue.resume(name)?
    };
    let action = if paused { "pause" } else { "resume" };
    super::audit::record(queue, action, name, u64::from(changed));
    let verb = if paused { "paused" } else { "resumed" };
    let document = serde_json::json!({ "queue": name, "paused": paused, "changed": changed });
    if !changed {
        return o.nothing_done(
            document,
            action,
            format!(
                "queue {name} was {} already",
                if paused { "paused" } else { "not paused" }
            ),
        );
    }
    o.say(document, &format!("queue {name} {verb}"));
    super::guard::warn_all(&warnings);
    Ok(())
}

pub(super) fn processes(queue: &Queue, o: Output) -> Result<()> {
    let processes = queue.processes()?;
    o.print(serde_json::json!({ "processes": processes }), || {
        let mut table = output::table(&[
            Column::keep("ID").right(),
            Column::keep("KIND"),
            Column::clip("NAME", 8),
            Column::clip("HOST", 6).optional(2),
            Column::keep("PID").right().optional(1),
            Column::keep("HEARTBEAT").right(),
            Column::keep("SUPERVISOR").right().optional(3),
            Column::clip("JOBS", 6),
        ]);
        for p in &processes {
            let ids: Vec<String> = p.jobs.iter().map(i64::to_string).collect();
            table.add_row(vec![
                p.id.to_string(),
                p.kind.clone(),
                p.name.clone(),
                p.hostname.clone(),
                p.pid.to_string(),
                format!("{} ago", age(p.heartbeat_age)),
                p.supervisor_id
                    .map_or_else(|| "-".into(), |s| s.to_string()),
                if ids.is_empty() {
                    "-".into()
                } else {
                    format!("{}: {}", ids.len(), ids.join(" "))
                },
            ]);
        }
        table
    });
    Ok(())
}

pub(super) fn recurring(args: RecurringArgs, db: &Db) -> Result<()> {
    if let Some(RecurringAction::Run { key, format }) = args.action {
        let queue = db.queue()?;
        let id = queue.run_recurring(&key)?;
        super::audit::record(&queue, "run_recurring", &key, u64::from(id.is_some()));
        let document = serde_json::json!({ "key": key, "job_id": id });
        let Some(id) = id else {
            return out(format).nothing_done(
                document,
                "run",
                format!("recurring task {key} already ran this second"),
            );
        };
        out(format).say(
            document,
            &format!("recurring task {key} enqueued as job {id}"),
        );
        return Ok(());
    }
    let tasks = db.queue()?.recurring_tasks()?;
    out(args.format).print(serde_json::json!({ "tasks": tasks }), || {
        let mut table = output::table(&[
            Column::clip("KEY", 8),
            Column::clip("SCHEDULE", 9),
            Column::clip("TIMEZONE", 8).optional(2),
            Column::clip("KIND", 8),
            Column::keep("NEXT RUN"),
            Column::keep("LAST RUN").optional(1),
            Column::keep("LAST JOB").right().optional(3),
        ]);
        for t in &tasks {
            table.add_row(vec![
                t.key.clone(),
                t.schedule.clone(),
                t.timezone.clone(),
                t.kind.clone(),
                maybe_time(t.next_run_at),
                maybe_time(t.last_run_at),
                t.last_job_id
                    .map_or_else(|| "-".into(), |id| id.to_string()),
            ]);
        }
        table
    });
    Ok(())
}
