//! What an operator looks at: jobs by status, processes with the jobs they
//! hold, recurring tasks with their next and last runs; and the two
//! operator actions that enqueue (a job by kind, a recurring task now).

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::client::{Enqueued, JobRequest, Queue};
use crate::job::EnqueueOptions;
use crate::scheduler::{RecurringTask, Scheduler};
use crate::store::JobSelection;
use crate::types::{Error, JobInfo, JobStatus, Result, Schedule};

impl JobFilter {
    /// How many jobs [`Queue::jobs`] lists unless told otherwise.
    pub const DEFAULT_LIMIT: usize = 50;
}

/// Which jobs [`Queue::jobs`] lists: conditions combine with AND; newest
/// first.
#[derive(Debug, Clone)]
pub struct JobFilter {
    selection: JobSelection,
}

impl Default for JobFilter {
    fn default() -> Self {
        JobFilter {
            selection: JobSelection {
                limit: JobFilter::DEFAULT_LIMIT,
                ..JobSelection::default()
            },
        }
    }
}

impl JobFilter {
    /// The newest [`JobFilter::DEFAULT_LIMIT`] jobs, whatever their state.
    pub fn new() -> JobFilter {
        JobFilter::default()
    }

    /// Only jobs in this state.
    pub fn status(mut self, status: JobStatus) -> JobFilter {
        self.selection.status = Some(status);
        self
    }

    /// Only jobs of this queue.
    pub fn queue(mut self, queue: impl Into<String>) -> JobFilter {
        self.selection.queue = Some(queue.into());
        self
    }

    /// Only jobs of this kind.
    pub fn kind(mut self, kind: impl Into<String>) -> JobFilter {
        self.selection.kind = Some(kind.into());
        self
    }

    /// Only jobs enqueued at or after `since`.
    pub fn since(mut self, since: DateTime<Utc>) -> JobFilter {
        self.selection.since = Some(since.naive_utc());
        self
    }

    /// At most `limit` jobs.
    pub fn limit(mut self, limit: usize) -> JobFilter {
        self.selection.limit = limit;
        self
    }

    /// Only jobs listed after job `id`, newest first: those with smaller
    /// ids. The next page after a [`JobPage`] is `after(page.next_after)`.
    pub fn after(mut self, id: i64) -> JobFilter {
        self.selection.before = Some(id);
        self
    }

    /// Only jobs listed before job `id`, newest first: those with larger
    /// ids (the page before one that starts at `id`; with
    /// [`JobFilter::oldest_first`], the ones nearest `id`).
    pub fn newer_than(mut self, id: i64) -> JobFilter {
        self.selection.newer_than = Some(id);
        self
    }

    /// List the oldest jobs first (the last page of a listing, or with
    /// [`JobFilter::newer_than`] the page before), instead of the newest.
    pub fn oldest_first(mut self) -> JobFilter {
        self.selection.oldest_first = true;
        self
    }

    /// Only jobs that finished (or failed for good) at or after `from`.
    pub fn finished_from(mut self, from: DateTime<Utc>) -> JobFilter {
        self.selection.finished_from = Some(from.naive_utc());
        self
    }

    /// Only jobs that finished (or failed for good) before `to`.
    pub fn finished_to(mut self, to: DateTime<Utc>) -> JobFilter {
        self.selection.finished_to = Some(to.naive_utc());
        self
    }

    /// Only jobs whose arguments contain `text`, in any case (ASCII),
    /// searched in their stored JSON text (compact: `"user_id":7`).
    pub fn arguments_contain(mut self, text: impl Into<String>) -> JobFilter {
        self.selection.arguments = Some(text.into());
        self
    }

    /// Only jobs with an error (of any attempt) containing `text` in its
    /// kind, message or backtrace, in any case (ASCII).
    pub fn error_contains(mut self, text: impl Into<String>) -> JobFilter {
        self.selection.error = Some(text.into());
        self
    }
}

/// One page of a listing, as [`Queue::jobs_page`] returns it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobPage {
    /// The jobs, newest first, at most the filter's limit.
    pub jobs: Vec<JobInfo>,
    /// How many jobs the filter names in all, whatever page this is.
    pub total: u64,
    /// How many of them were listed on the pages before this one.
    pub skipped: u64,
    /// The id to pass to [`JobFilter::after`] for the next page; `None` on
    /// the last page.
    pub next_after: Option<i64>,
}

/// A registered process, as [`Queue::processes`] reports it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessInfo {
    /// Its row id.
    pub id: i64,
    /// worker, dispatcher, scheduler or supervisor.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// Its host.
    pub hostname: String,
    /// Its OS pid.
    pub pid: i32,
    /// The row id of the supervisor that spawned it, if one did.
    pub supervisor_id: Option<i64>,
    /// Its last heartbeat (database clock).
    pub last_heartbeat_at: DateTime<Utc>,
    /// How long ago that was.
    #[serde(rename = "heartbeat_age_ms", serialize_with = "millis")]
    pub heartbeat_age: Duration,
    /// When it registered.
    pub created_at: DateTime<Utc>,
    /// What it said about itself (queues, threads…).
    pub metadata: serde_json::Value,
    /// The ids of the jobs it holds (claimed, running or about to).
    pub jobs: Vec<i64>,
}

/// A recurring task, as [`Queue::recurring_tasks`] reports it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecurringInfo {
    /// Its key.
    pub key: String,
    /// Its cron expression.
    pub schedule: String,
    /// The time zone the expression is read in.
    pub timezone: String,
    /// The kind of job it enqueues.
    pub kind: String,
    /// The arguments of its jobs.
    pub arguments: serde_json::Value,
    /// The queue of its jobs, if the task sets one.
    pub queue: Option<String>,
    /// The priority of its jobs, if the task sets one.
    pub priority: Option<i32>,
    /// What it is for.
    pub description: Option<String>,
    /// Its next tick after now (database clock); `None` if it has none.
    pub next_run_at: Option<DateTime<Utc>>,
    /// The latest tick fired.
    pub last_run_at: Option<DateTime<Utc>>,
    /// The job of that tick (it may have been cleaned since).
    pub last_job_id: Option<i64>,
}

fn millis<S: serde::Serializer>(d: &Duration, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Queue {
    /// The jobs `filter` names, newest first.
    pub fn jobs(&self, filter: &JobFilter) -> Result<Vec<JobInfo>> {
        self.store().jobs_list(&filter.selection)
    }

    /// A page of the jobs `filter` names, newest first, with how many it
    /// names in all and where the next page starts. The page and the
    /// counts are separate reads: jobs enqueued in between may make them
    /// differ by a few.
    pub fn jobs_page(&self, filter: &JobFilter) -> Result<JobPage> {
        let limit = filter.selection.limit;
        let mut probe = filter.selection.clone();
        probe.limit = limit.saturating_add(1);
        let mut jobs = self.store().jobs_list(&probe)?;
        let more = jobs.len() > limit;
        jobs.truncate(limit);
        let everything = JobSelection {
            before: None,
            ..filter.selection.clone()
        };
        let total = self.store().jobs_count(&everything)?;
        let skipped = match filter.selection.before {
            Some(_) => total.saturating_sub(self.store().jobs_count(&filter.selection)?),
            None => 0,
        };
        Ok(JobPage {
            next_after: if more {
                jobs.last().map(|j| j.id)
            } else {
                None
            },
            jobs,
            total,
            skipped,
        })
    }

    /// How many jobs `filter` names (its limit and page aside), counting
    /// no further than `cap + 1`: whatever the table holds, this reads at
    /// most `cap + 1` index entries. A result above `cap` means "more
    /// than `cap`".
    pub fn jobs_count_capped(&self, filter: &JobFilter, cap: u64) -> Result<u64> {
        let everything = JobSelection {
            before: None,
            newer_than: None,
            oldest_first: false,
            ..filter.selection.clone()
        };
        self.store().jobs_count_capped(&everything, cap)
    }

    /// Every registered process with the jobs it holds, by kind then id.
    pub fn processes(&self) -> Result<Vec<ProcessInfo>> {
        let (rows, now) = self.store().processes_list()?;
        Ok(rows
            .into_iter()
            .map(|p| ProcessInfo {
                heartbeat_age: (now - p.last_heartbeat_at).to_std().unwrap_or_default(),
                id: p.id,
                kind: p.kind,
                name: p.name,
                hostname: p.hostname,
                pid: p.pid,
                supervisor_id: p.supervisor_id,
                last_heartbeat_at: p.last_heartbeat_at.and_utc(),
                created_at: p.created_at.and_utc(),
                metadata: serde_json::from_str(&p.metadata).unwrap_or(serde_json::Value::Null),
                jobs: p.jobs,
            })
            .collect())
    }

    /// Every recurring task the schedulers last declared, by key, with its
    /// next and latest runs.
    pub fn recurring_tasks(&self) -> Result<Vec<RecurringInfo>> {
        let now = self.store().db_now()?.and_utc();
        Ok(self
            .store()
            .recurring_list()?
            .into_iter()
            .map(|l| {
                let t = l.task;
                let next_run_at = Schedule::parse(&t.schedule, &t.timezone)
                    .ok()
                    .and_then(|s| s.next_after(now));
                RecurringInfo {
                    next_run_at,
                    last_run_at: l.last.map(|(at, _)| at.and_utc()),
                    last_job_id: l.last.map(|(_, id)| id),
                    arguments: serde_json::from_str(&t.arguments)
                        .unwrap_or(serde_json::Value::Null),
                    key: t.key,
                    schedule: t.schedule,
                    timezone: t.timezone,
                    kind: t.kind,
                    queue: t.queue_name,
                    priority: t.priority,
                    description: t.description,
                }
            })
            .collect())
    }

    /// Enqueues recurring task `key` (as the schedulers declared it) now,
    /// through the same exactly-once path as its ticks, its run time being
    /// the current second of the database's clock. Returns the job's id,
    /// or `None` when this second's run exists already (its guard is kept
    /// even when its job was deleted, see
    /// [`RECURRING_GUARD_RETENTION`](crate::config::RECURRING_GUARD_RETENTION)).
    /// A key no scheduler declared is [`Error::Unknown`], listing the
    /// declared ones.
    pub fn run_recurring(&self, key: &str) -> Result<Option<i64>> {
        let tasks = self.recurring_tasks()?;
        let keys: Vec<String> = tasks.iter().map(|t| t.key.clone()).collect();
        let info = tasks
            .into_iter()
            .find(|t| t.key == key)
            .ok_or_else(|| Error::Unknown {
                what: "recurring task",
                value: key.to_string(),
                reason: format!(
                    "no such task (schedulers declare tasks when they start; known tasks: {})",
                    crate::admin::listed(&keys)
                ),
            })?;
        let mut task = RecurringTask::untyped(info.key, &info.schedule, info.kind, info.arguments)?
            .timezone(&info.timezone)?;
        if let Some(queue) = info.queue {
            task = task.queue(queue);
        }
        if let Some(priority) = info.priority {
            task = task.priority(priority);
        }
        Scheduler::new(self.clone()).task(task).fire_now(key)
    }

    /// Enqueues a job known by its kind and JSON arguments (no type at
    /// hand: the queue's defaults apply, as for `solidq enqueue`).
    pub fn enqueue_kind(
        &self,
        kind: &str,
        arguments: &serde_json::Value,
        options: EnqueueOptions,
    ) -> Result<i64> {
        let unique_key = options.unique_key.clone();
        let request = JobRequest::untyped(kind.to_string(), arguments, options);
        match self.enqueue_batch(std::slice::from_ref(&request))?.pop() {
            Some(Enqueued::New(id)) => Ok(id),
            Some(Enqueued::Existing(existing_id)) => Err(Error::Duplicate {
                unique_key: unique_key.unwrap_or_default(),
                existing_id,
            }),
            None => unreachable!("one request in, one outcome out"),
        }
    }
}
