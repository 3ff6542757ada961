//! A recurring task: a job enqueued at every tick of a cron schedule.

use std::fmt;

use crate::client::JobRequest;
use crate::config::{
    ResolvedRecurring, SupervisorConfig, validate_task_description, validate_task_key,
    validate_task_kind,
};
use crate::job::{EnqueueOptions, Job};
use crate::store::RecurringTaskRow;
use crate::types::{Error, Result, Schedule, validate_queue_name};

/// Builds a typed job's request from its JSON arguments: the type's
/// defaults and concurrency key apply, and bad arguments are caught when
/// the scheduler starts.
pub(crate) type Build = fn(&serde_json::Value, EnqueueOptions) -> Result<JobRequest>;

/// [`Build`] for job type `J`.
pub(crate) fn build<J: Job>(
    arguments: &serde_json::Value,
    options: EnqueueOptions,
) -> Result<JobRequest> {
    let job: J = serde_json::from_value(arguments.clone()).map_err(|e| Error::InvalidOption {
        option: "recurring task arguments",
        value: arguments.to_string(),
        reason: format!("not arguments of job kind {:?}: {e}", J::KIND),
    })?;
    JobRequest::new(&job, options)
}

/// A job enqueued at every tick of a cron [`Schedule`], once per tick
/// however many schedulers run (see [`crate::Scheduler`]).
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use solidq::{Job, JobContext, JobResult, RecurringTask};
///
/// #[derive(Serialize, Deserialize)]
/// struct NightlyExport { format: String }
///
/// impl Job for NightlyExport {
///     const KIND: &'static str = "nightly_export";
///     fn perform(&self, _ctx: &JobContext) -> JobResult { Ok(serde_json::Value::Null) }
/// }
///
/// let task = RecurringTask::new("nightly_export", "0 30 2 * * ?", &NightlyExport { format: "csv".into() })?
///     .timezone("Europe/Berlin")?
///     .description("exports yesterday's orders");
/// assert_eq!(task.schedule().timezone(), "Europe/Berlin");
/// # Ok::<(), solidq::Error>(())
/// ```
#[derive(Clone)]
pub struct RecurringTask {
    key: String,
    schedule: Schedule,
    kind: String,
    arguments: serde_json::Value,
    queue: Option<String>,
    priority: Option<i32>,
    description: Option<String>,
    build: Option<Build>,
}

impl RecurringTask {
    /// A task enqueuing `job` at every tick of `schedule` (a cron
    /// expression, read in UTC until [`RecurringTask::timezone`]). The
    /// job's type gives its defaults, as for any enqueue.
    pub fn new<J: Job>(key: impl Into<String>, schedule: &str, job: &J) -> Result<RecurringTask> {
        let key = key.into();
        let arguments = serde_json::to_value(job).map_err(|source| Error::SerializeArguments {
            kind: J::KIND.to_string(),
            source,
        })?;
        let mut task = RecurringTask::untyped(key, schedule, J::KIND, arguments)?;
        task.build = Some(build::<J>);
        Ok(task)
    }

    /// A task known only by its job kind and JSON arguments, as
    /// `solidq.toml` declares them. Unless the scheduler knows the kind
    /// ([`crate::Scheduler::register`]), its jobs get the queue's defaults
    /// and no concurrency limit.
    pub fn untyped(
        key: impl Into<String>,
        schedule: &str,
        kind: impl Into<String>,
        arguments: serde_json::Value,
    ) -> Result<RecurringTask> {
        let key = key.into();
        validate_task_key(&key)?;
        let kind = kind.into();
        validate_task_kind(&key, &kind)?;
        let schedule = Schedule::parse(schedule, "UTC").map_err(|source| Error::Schedule {
            task: key.clone(),
            source,
        })?;
        Ok(RecurringTask {
            key,
            schedule,
            kind,
            arguments,
            queue: None,
            priority: None,
            description: None,
            build: None,
        })
    }

    /// Reads the schedule in IANA time zone `timezone` (default `"UTC"`).
    pub fn timezone(mut self, timezone: &str) -> Result<RecurringTask> {
        self.schedule =
            Schedule::parse(self.schedule.expression(), timezone).map_err(|source| {
                Error::Schedule {
                    task: self.key.clone(),
                    source,
                }
            })?;
        Ok(self)
    }

    /// The queue of its jobs, over the job type's default.
    pub fn queue(mut self, queue: impl Into<String>) -> RecurringTask {
        self.queue = Some(queue.into());
        self
    }

    /// The priority of its jobs, over the job type's default.
    pub fn priority(mut self, priority: i32) -> RecurringTask {
        self.priority = Some(priority);
        self
    }

    /// What it is for, shown by `solidq recurring`. Any text but NUL
    /// (which the database cannot store): a description holding NUL is
    /// refused by [`crate::Scheduler::check`] and
    /// [`crate::Scheduler::start`].
    pub fn description(mut self, description: impl Into<String>) -> RecurringTask {
        self.description = Some(description.into());
        self
    }

    /// Its key: unique among recurring tasks.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Its schedule.
    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    /// The kind of job it enqueues.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The arguments of its jobs.
    pub fn arguments(&self) -> &serde_json::Value {
        &self.arguments
    }

    /// Checks what its constructors could not: the description.
    pub(crate) fn validate(&self) -> Result<()> {
        validate_task_description(&self.key, self.description.as_deref())
    }

    /// The request for one of its jobs; `known` builds kinds a scheduler
    /// was taught.
    pub(crate) fn request(&self, known: Option<Build>) -> Result<JobRequest> {
        let mut options = EnqueueOptions::new();
        if let Some(queue) = &self.queue {
            validate_queue_name(queue)?;
            options = options.queue(queue.clone());
        }
        if let Some(priority) = self.priority {
            options = options.priority(priority);
        }
        match self.build.or(known) {
            Some(build) => build(&self.arguments, options),
            None => Ok(JobRequest::untyped(
                self.kind.clone(),
                &self.arguments,
                options,
            )),
        }
    }

    /// The row `recurring_tasks` keeps for it.
    pub(crate) fn row(&self) -> RecurringTaskRow {
        RecurringTaskRow {
            key: self.key.clone(),
            schedule: self.schedule.expression().to_string(),
            timezone: self.schedule.timezone().to_string(),
            kind: self.kind.clone(),
            arguments: self.arguments.to_string(),
            queue_name: self.queue.clone(),
            priority: self.priority,
            description: self.description.clone(),
        }
    }
}

impl RecurringTask {
    /// A task from a checked `[recurring.<key>]` section.
    fn from_resolved(resolved: ResolvedRecurring<'_>) -> RecurringTask {
        let section = resolved.section;
        RecurringTask {
            key: resolved.key.to_string(),
            schedule: resolved.schedule,
            kind: section.kind.clone(),
            arguments: resolved.arguments,
            queue: section.queue.clone(),
            priority: section.priority,
            description: section.description.clone(),
            build: None,
        }
    }
}

impl SupervisorConfig {
    /// The recurring tasks of `[recurring.*]`; `origin` names the file in
    /// errors, which name the task and what is wrong with it (for a bad
    /// schedule: the expression and its bad field).
    pub fn recurring_tasks(&self, origin: &str) -> Result<Vec<RecurringTask>> {
        Ok(self
            .recurring_resolved(origin)?
            .into_iter()
            .map(RecurringTask::from_resolved)
            .collect())
    }
}

impl fmt::Debug for RecurringTask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecurringTask")
            .field("key", &self.key)
            .field("schedule", &self.schedule.expression())
            .field("timezone", &self.schedule.timezone())
            .field("kind", &self.kind)
            .field("arguments", &self.arguments)
            .field("queue", &self.queue)
            .field("priority", &self.priority)
            .field("description", &self.description)
            .field("typed", &self.build.is_some())
            .finish()
    }
}
