//! Job control from the command line: `job cancel|run-now ID…` and
//! `jobs cancel|run-now` with the listing's filters, each printing what it
//! did with counts.

use clap::{Args, Subcommand};

use super::{Db, Format, audit, out};
use solidq::Result;
use solidq::{JobFilter, JobStatus};

/// What to do to one or more jobs by id.
#[derive(Subcommand)]
pub(super) enum JobAction {
    /// Cancel jobs: waiting ones (ready, scheduled, retrying, blocked) are
    /// discarded with the reason, running ones are asked to stop.
    Cancel {
        /// The jobs' ids.
        #[arg(required = true)]
        ids: Vec<i64>,
        /// Why, kept in each discarded job's error.
        #[arg(long, default_value = "cancelled from the command line")]
        reason: String,
        #[command(flatten)]
        format: Format,
    },
    /// Run scheduled, retrying or blocked jobs now (a blocked job leaves
    /// its concurrency limit).
    RunNow {
        /// The jobs' ids.
        #[arg(required = true)]
        ids: Vec<i64>,
        #[command(flatten)]
        format: Format,
    },
}

/// What to do to every job a filter selects.
#[derive(Subcommand)]
pub(super) enum JobsAction {
    /// Cancel every job the filter selects (waiting ones discarded, running
    /// ones asked to stop).
    Cancel {
        #[command(flatten)]
        filter: BulkFilter,
        /// Why, kept in each discarded job's error.
        #[arg(long, default_value = "cancelled from the command line")]
        reason: String,
    },
    /// Run every scheduled, retrying or blocked job the filter selects now.
    RunNow {
        #[command(flatten)]
        filter: BulkFilter,
    },
}

/// The jobs a bulk action selects: at least one condition.
#[derive(Args)]
#[command(group = clap::ArgGroup::new("which").required(true).multiple(true).args(["status", "queue", "kind"]))]
pub(super) struct BulkFilter {
    /// Only jobs in this state.
    #[arg(long, value_parser = crate::status_parser())]
    status: Option<JobStatus>,
    /// Only jobs of this queue.
    #[arg(long)]
    queue: Option<String>,
    /// Only jobs of this kind.
    #[arg(long)]
    kind: Option<String>,
    /// At most this many jobs (newest first), at least 1.
    #[arg(long, default_value_t = BULK_LIMIT, value_parser = super::at_least_one)]
    limit: usize,
    #[command(flatten)]
    format: Format,
}

/// The most jobs one bulk command acts on unless told otherwise.
const BULK_LIMIT: usize = 100_000;

impl BulkFilter {
    fn filter(&self) -> JobFilter {
        let mut filter = JobFilter::new().limit(self.limit);
        if let Some(status) = self.status {
            filter = filter.status(status);
        }
        if let Some(queue) = &self.queue {
            filter = filter.queue(queue.clone());
        }
        if let Some(kind) = &self.kind {
            filter = filter.kind(kind.clone());
        }
        filter
    }

    /// Its `--kind` and `--queue` must name a kind and a queue the
    /// database knows (a typo would match nothing).
    fn check(&self, queue: &solidq::Queue) -> Result<()> {
        super::guard::names(
            queue,
            &super::guard::filter(self.kind.as_deref(), self.queue.as_deref()),
            false,
        )
        .map(drop)
    }

    /// The filter, as the audit log's target.
    fn target(&self) -> String {
        audit::filter(&[
            ("status", self.status.map(|s| s.as_str().into())),
            ("queue", self.queue.clone().map(Into::into)),
            ("kind", self.kind.clone().map(Into::into)),
            ("limit", Some(self.limit.into())),
        ])
    }
}

pub(super) fn job(action: JobAction, db: &Db) -> Result<()> {
    match action {
        JobAction::Cancel {
            ids,
            reason,
            format,
        } => {
            let queue = db.queue()?;
            let (mut discarded, mut stopping, mut untouched) = (0, 0, 0);
            let mut failure = None;
            for id in &ids {
                match queue.cancel_job(*id, &reason) {
                    Ok(done) => {
                        discarded += done.discarded;
                        stopping += done.stopping;
                        untouched += done.untouched;
                    }
                    Err(error) => {
                        failure = Some(error);
                        break;
                    }
                }
            }
            // The jobs cancelled before a failure stay cancelled: recorded.
            if failure.is_none() || discarded + stopping > 0 {
                audit::record(&queue, "cancel", &audit::ids(&ids), discarded + stopping);
            }
            if let Some(error) = failure {
                return Err(error);
            }
            report_cancel(
                format,
                discarded,
                stopping,
                untouched,
                format!(
                    "jobs {ids:?} are finished, failed, or were asked to stop before (left as they were)"
                ),
            )
        }
        JobAction::RunNow { ids, format } => {
            let queue = db.queue()?;
            let mut moved = Vec::new();
            let mut skipped = Vec::new();
            let mut failure = None;
            for &id in &ids {
                match queue.run_job_now(id) {
                    Ok(true) => moved.push(id),
                    Ok(false) => skipped.push(id),
                    Err(error) => {
                        failure = Some(error);
                        break;
                    }
                }
            }
            if failure.is_none() || !moved.is_empty() {
                audit::record(&queue, "run_now", &audit::ids(&ids), moved.len() as u64);
            }
            if let Some(error) = failure {
                return Err(error);
            }
            let document = serde_json::json!({ "run_now": moved, "not_waiting": skipped });
            if moved.is_empty() {
                return out(format).nothing_done(
                    document,
                    "run now",
                    format!("jobs {skipped:?} are not scheduled, retrying or blocked"),
                );
            }
            let mut text = format!("running now: {}", moved.len());
            if !skipped.is_empty() {
                text.push_str(&format!(
                    "\nnot scheduled, retrying or blocked (left as they were): {skipped:?}"
                ));
            }
            out(format).say(document, &text);
            Ok(())
        }
    }
}

pub(super) fn jobs(action: JobsAction, db: &Db) -> Result<()> {
    match action {
        JobsAction::Cancel { filter, reason } => {
            let queue = db.queue()?;
            filter.check(&queue)?;
            let done = queue.cancel_jobs(&filter.filter(), &reason)?;
            let rows = done.discarded + done.stopping;
            audit::record(&queue, "cancel", &filter.target(), rows);
            report_cancel(
                filter.format,
                done.discarded,
                done.stopping,
                done.untouched,
                format!(
                    "no job the filter names is waiting or running ({} left as they were: finished, failed, or asked before)",
                    done.untouched
                ),
            )
        }
        JobsAction::RunNow { filter } => {
            let queue = db.queue()?;
            filter.check(&queue)?;
            let moved = queue.run_jobs_now(&filter.filter())?;
            audit::record(&queue, "run_now", &filter.target(), moved);
            let document = serde_json::json!({ "run_now": moved });
            if moved == 0 {
                return out(filter.format).nothing_done(
                    document,
                    "run now",
                    "no job the filter names is scheduled, retrying or blocked".into(),
                );
            }
            out(filter.format).say(document, &format!("running now: {moved}"));
            Ok(())
        }
    }
}

/// What a cancel did; when it changed no job, `nothing` says why (exit 1).
fn report_cancel(
    format: Format,
    discarded: u64,
    stopping: u64,
    untouched: u64,
    nothing: String,
) -> Result<()> {
    let document =
        serde_json::json!({ "discarded": discarded, "stopping": stopping, "untouched": untouched });
    if discarded + stopping == 0 {
        return out(format).nothing_done(document, "cancel", nothing);
    }
    out(format).say(
        document,
        &format!(
            "discarded: {discarded}\nasked to stop: {stopping}\nleft as they were (finished, failed, or asked before): {untouched}"
        ),
    );
    Ok(())
}
