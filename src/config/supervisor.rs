//! `solidq.toml`: the supervisor's configuration file, and the environment
//! a supervisor hands to the worker processes it spawns.
//!
//! ```toml
//! database_url = "postgres://…"      # or an SQLite path; SOLIDQ_DATABASE_URL overrides
//! # Behind PgBouncer in transaction mode, solidq's own URL parameters:
//! # "postgres://app@bouncer:6432/app?prepared_statements=false&listen_host=db"
//! heartbeat_interval = "10s"
//! process_alive_threshold = "60s"
//! shutdown_timeout = "7s"
//! max_stalled_count = 1
//! sqlite_synchronous = "full"        # or "normal"; SOLIDQ_SQLITE_SYNCHRONOUS overrides
//! max_payload_bytes = 1048576        # arguments and results; SOLIDQ_MAX_PAYLOAD_BYTES overrides
//! restart_backoff_window = "1s"      # a worker process exiting sooner is crash-looping…
//! restart_backoff_max = "10s"        # …and restarted after 100 ms, 200 ms, … up to this
//!
//! [dispatcher]
//! polling_interval = "1s"
//! batch_size = 500
//! concurrency_maintenance_interval = "30s"
//!
//! [[workers]]
//! command = ["target/release/myapp", "work"]
//! processes = 2
//! queues = ["critical", "*"]
//! threads = 8
//! env = { RUST_LOG = "info" }         # optional, added to the child's environment
//!
//! [recurring.nightly_export]          # one table per task, by key
//! kind = "export_orders"              # the job's kind
//! schedule = "0 30 2 * * ?"           # cron: 5 fields, or 6 with seconds first
//! args = { format = "csv" }           # the job's arguments (default {})
//! queue = "exports"                   # optional; default: the job type's
//! priority = 5                        # optional
//! timezone = "Europe/Berlin"          # optional; default "UTC"
//! description = "yesterday's orders"  # optional
//! ```
//!
//! Unknown keys are errors, so a typo never silently falls back to a
//! default. Durations are written like `"500ms"`, `"10s"`, `"2m"`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use super::{
    DEFAULT_CONCURRENCY_MAINTENANCE_INTERVAL, DEFAULT_DISPATCHER_BATCH_SIZE,
    DEFAULT_DISPATCHER_POLLING_INTERVAL, DEFAULT_HEARTBEAT_INTERVAL, DEFAULT_MAX_PAYLOAD_BYTES,
    DEFAULT_POLLING_INTERVAL, DEFAULT_PROCESS_ALIVE_THRESHOLD, DEFAULT_SHUTDOWN_TIMEOUT,
    DEFAULT_SQLITE_SYNCHRONOUS, DEFAULT_THREADS, DispatcherConfig, MAX_KIND_LEN,
    MAX_UNIQUE_KEY_LEN, QueueConfig, SqliteSynchronous, Warnings, WorkerConfig,
};
use crate::types::{DatabaseUrl, Error, QueuePattern, Result, Schedule, validate_queue_name};

/// How many times a job may be released after its process died before it
/// fails instead, unless its type says otherwise. Bull's default.
pub const DEFAULT_MAX_STALLED_COUNT: u32 = 1;

/// The environment variable that overrides `database_url`, and that worker
/// processes read their database from.
pub const ENV_DATABASE_URL: &str = "SOLIDQ_DATABASE_URL";
/// Comma-separated queue list handed to a worker process.
pub const ENV_QUEUES: &str = "SOLIDQ_QUEUES";
/// Thread count handed to a worker process.
pub const ENV_THREADS: &str = "SOLIDQ_THREADS";
/// The id of the supervisor's process row, handed to its children.
pub const ENV_SUPERVISOR_ID: &str = "SOLIDQ_SUPERVISOR_ID";
/// Heartbeat interval handed to a worker process (humantime, e.g. `10s`).
pub const ENV_HEARTBEAT_INTERVAL: &str = "SOLIDQ_HEARTBEAT_INTERVAL";
/// Alive threshold handed to a worker process.
pub const ENV_PROCESS_ALIVE_THRESHOLD: &str = "SOLIDQ_PROCESS_ALIVE_THRESHOLD";
/// Shutdown timeout handed to a worker process.
pub const ENV_SHUTDOWN_TIMEOUT: &str = "SOLIDQ_SHUTDOWN_TIMEOUT";
/// Polling interval handed to a worker process.
pub const ENV_POLLING_INTERVAL: &str = "SOLIDQ_POLLING_INTERVAL";
/// Hard timeout handed to a worker process (see `WorkerConfig::hard_timeout`).
pub const ENV_HARD_TIMEOUT: &str = "SOLIDQ_HARD_TIMEOUT";
/// `1` or `true`: a worker on a database that lacks migrations waits for
/// them instead of refusing to start (see
/// `WorkerConfig::wait_for_migrations`); handed to a supervisor's worker
/// processes when `wait_for_migrations` is set in `solidq.toml`.
pub const ENV_WAIT_FOR_MIGRATIONS: &str = "SOLIDQ_WAIT_FOR_MIGRATIONS";
/// SQLite's `synchronous` setting (`normal` or `full`, see
/// [`QueueConfig::sqlite_synchronous`]): overrides `sqlite_synchronous` of
/// `solidq.toml`, is handed to a supervisor's worker processes, and is read
/// by [`QueueConfig::from_env`].
pub const ENV_SQLITE_SYNCHRONOUS: &str = "SOLIDQ_SQLITE_SYNCHRONOUS";
/// The largest arguments and results, in bytes (see
/// [`QueueConfig::max_payload_bytes`]): overrides `max_payload_bytes` of
/// `solidq.toml`, is handed to a supervisor's worker processes, and is read
/// by [`QueueConfig::from_env`].
pub const ENV_MAX_PAYLOAD_BYTES: &str = "SOLIDQ_MAX_PAYLOAD_BYTES";

/// Everything a supervisor runs with. Load it with
/// [`SupervisorConfig::load`] or build it in code.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SupervisorConfig {
    /// The database. Required here or in `SOLIDQ_DATABASE_URL`, which wins.
    #[serde(default)]
    pub database_url: Option<String>,
    /// Heartbeat interval of the supervisor and of its workers. Defaults to
    /// [`DEFAULT_HEARTBEAT_INTERVAL`].
    #[serde(default = "default_heartbeat", with = "humantime_serde")]
    pub heartbeat_interval: Duration,
    /// A process whose heartbeat is older than this is dead: its row is
    /// pruned and its jobs released. Defaults to
    /// [`DEFAULT_PROCESS_ALIVE_THRESHOLD`].
    #[serde(default = "default_threshold", with = "humantime_serde")]
    pub process_alive_threshold: Duration,
    /// Grace period for running jobs when stopping; the supervisor waits
    /// this plus a margin for its children before killing them. Defaults to
    /// [`DEFAULT_SHUTDOWN_TIMEOUT`].
    #[serde(default = "default_shutdown", with = "humantime_serde")]
    pub shutdown_timeout: Duration,
    /// Releases after a dead process before a job fails instead. Defaults
    /// to [`DEFAULT_MAX_STALLED_COUNT`]; a job type can override it.
    #[serde(default = "default_max_stalled")]
    pub max_stalled_count: u32,
    /// A worker process that exits sooner than this after it started is
    /// crash-looping (a bad deploy, a broken environment): each further
    /// restart waits twice as long as the last, from
    /// [`RESTART_BACKOFF_BASE`] up to `restart_backoff_max`, and the
    /// supervisor says so once per step; a run this long resets it.
    /// Defaults to [`DEFAULT_RESTART_BACKOFF_WINDOW`].
    #[serde(default = "default_restart_window", with = "humantime_serde")]
    pub restart_backoff_window: Duration,
    /// The longest wait before restarting a crash-looping worker process.
    /// Defaults to [`DEFAULT_RESTART_BACKOFF_MAX`].
    #[serde(default = "default_restart_max", with = "humantime_serde")]
    pub restart_backoff_max: Duration,
    /// SQLite only: the `synchronous` setting of the supervisor's
    /// connections and of its worker processes' (handed to them as
    /// `SOLIDQ_SQLITE_SYNCHRONOUS`, which also overrides this value). See
    /// [`QueueConfig::sqlite_synchronous`]. Defaults to
    /// [`DEFAULT_SQLITE_SYNCHRONOUS`].
    #[serde(default = "default_sqlite_synchronous")]
    pub sqlite_synchronous: SqliteSynchronous,
    /// On a database that lacks migrations of this build: wait for them
    /// (a line every 30 s) and start once they are applied, instead of
    /// refusing to start (exit 2). Handed to the worker processes
    /// (`SOLIDQ_WAIT_FOR_MIGRATIONS`). Defaults to false: deploy order is
    /// migrate first.
    #[serde(default)]
    pub wait_for_migrations: bool,
    /// The largest arguments and results of its jobs, in bytes (handed to
    /// its worker processes as `SOLIDQ_MAX_PAYLOAD_BYTES`, which also
    /// overrides this value). See [`QueueConfig::max_payload_bytes`].
    /// Defaults to [`DEFAULT_MAX_PAYLOAD_BYTES`].
    #[serde(default = "default_max_payload")]
    pub max_payload_bytes: usize,
    /// The dispatcher the supervisor runs.
    #[serde(default)]
    pub dispatcher: DispatcherSection,
    /// Worker processes to spawn and keep running. May be empty: a
    /// supervisor then only dispatches and prunes.
    #[serde(default)]
    pub workers: Vec<WorkerGroup>,
    /// Recurring tasks, by key: the supervisor runs a scheduler for them.
    #[serde(default)]
    pub recurring: BTreeMap<String, RecurringSection>,
    /// The settings of `solidq web`.
    #[serde(default)]
    pub web: super::WebSection,
}

/// `[recurring.<key>]`: a job enqueued at every tick of a cron schedule.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecurringSection {
    /// The kind of job to enqueue.
    pub kind: String,
    /// A cron expression: 5 fields (Unix), or 6 with seconds first
    /// (Quartz/LeanCloud); see [`crate::Schedule`].
    pub schedule: String,
    /// The job's arguments: a table (or any TOML value but a date),
    /// handed to the job as JSON. Defaults to an empty table.
    #[serde(default)]
    pub args: Option<toml::Value>,
    /// The job's queue. Defaults to the job type's.
    #[serde(default)]
    pub queue: Option<String>,
    /// The job's priority. Defaults to the job type's.
    #[serde(default)]
    pub priority: Option<i32>,
    /// The IANA time zone the schedule is read in. Defaults to `"UTC"`.
    #[serde(default = "utc")]
    pub timezone: String,
    /// What it is for.
    #[serde(default)]
    pub description: Option<String>,
}

/// A `[recurring.<key>]` section checked by
/// [`SupervisorConfig::recurring_resolved`].
#[derive(Debug, Clone)]
pub struct ResolvedRecurring<'a> {
    /// The task's key.
    pub key: &'a str,
    /// The section as written.
    pub section: &'a RecurringSection,
    /// Its `args` as JSON.
    pub arguments: serde_json::Value,
    /// Its schedule, read in its time zone.
    pub schedule: Schedule,
}

/// A recurring task's key: 1 to [`MAX_UNIQUE_KEY_LEN`] bytes, no control
/// characters.
pub(crate) fn validate_task_key(key: &str) -> Result<()> {
    if key.is_empty() || key.len() > MAX_UNIQUE_KEY_LEN || key.chars().any(char::is_control) {
        return Err(Error::InvalidOption {
            option: "recurring task key",
            value: key.to_string(),
            reason: format!("must be 1 to {MAX_UNIQUE_KEY_LEN} bytes, without control characters"),
        });
    }
    Ok(())
}

/// A recurring task's job kind: not blank, at most [`MAX_KIND_LEN`]
/// bytes, no control characters (as every job's kind).
pub(crate) fn validate_task_kind(key: &str, kind: &str) -> Result<()> {
    let bad = |reason: String| Error::InvalidOption {
        option: "recurring task kind",
        value: kind.to_string(),
        reason,
    };
    if kind.trim().is_empty() {
        return Err(bad(format!(
            "task {key:?} needs the kind of job to enqueue"
        )));
    }
    if kind.len() > MAX_KIND_LEN || kind.chars().any(char::is_control) {
        return Err(bad(format!(
            "task {key:?}: must be 1 to {MAX_KIND_LEN} bytes, without control characters"
        )));
    }
    Ok(())
}

/// A recurring task's description: any text but NUL, which the database
/// cannot store (PostgreSQL refuses it).
pub(crate) fn validate_task_description(key: &str, description: Option<&str>) -> Result<()> {
    match description {
        Some(text) if text.contains('\0') => Err(Error::InvalidOption {
            option: "recurring task description",
            value: text.to_string(),
            reason: format!(
                "task {key:?}: contains a NUL character, which the database cannot store"
            ),
        }),
        _ => Ok(()),
    }
}

fn utc() -> String {
    "UTC".to_string()
}

/// TOML as JSON; dates have no JSON form and are refused.
fn toml_to_json(value: &toml::Value) -> std::result::Result<serde_json::Value, String> {
    use serde_json::Value as J;
    Ok(match value {
        toml::Value::String(s) => J::String(s.clone()),
        toml::Value::Integer(i) => J::from(*i),
        toml::Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(J::Number)
            .ok_or_else(|| format!("{f} has no JSON form"))?,
        toml::Value::Boolean(b) => J::Bool(*b),
        toml::Value::Datetime(d) => {
            return Err(format!("{d} is a TOML date, which JSON has not: quote it"));
        }
        toml::Value::Array(items) => J::Array(
            items
                .iter()
                .map(toml_to_json)
                .collect::<std::result::Result<_, _>>()?,
        ),
        toml::Value::Table(table) => J::Object(
            table
                .iter()
                .map(|(k, v)| Ok((k.clone(), toml_to_json(v)?)))
                .collect::<std::result::Result<_, String>>()?,
        ),
    })
}

/// `[dispatcher]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DispatcherSection {
    /// Defaults to [`DEFAULT_DISPATCHER_POLLING_INTERVAL`].
    #[serde(default = "default_dispatcher_polling", with = "humantime_serde")]
    pub polling_interval: Duration,
    /// Defaults to [`DEFAULT_DISPATCHER_BATCH_SIZE`].
    #[serde(default = "default_batch")]
    pub batch_size: usize,
    /// Defaults to [`DEFAULT_CONCURRENCY_MAINTENANCE_INTERVAL`].
    #[serde(default = "default_concurrency_maintenance", with = "humantime_serde")]
    pub concurrency_maintenance_interval: Duration,
}

impl Default for DispatcherSection {
    fn default() -> Self {
        DispatcherSection {
            polling_interval: DEFAULT_DISPATCHER_POLLING_INTERVAL,
            batch_size: DEFAULT_DISPATCHER_BATCH_SIZE,
            concurrency_maintenance_interval: DEFAULT_CONCURRENCY_MAINTENANCE_INTERVAL,
        }
    }
}

/// One `[[workers]]` entry: a command run as `processes` worker processes.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerGroup {
    /// The program and its arguments; it should call
    /// `solidq::Worker::from_env()`.
    pub command: Vec<String>,
    /// How many processes of it to keep running. Defaults to 1.
    #[serde(default = "one")]
    pub processes: usize,
    /// Their queue list. Defaults to `["*"]`.
    #[serde(default = "all_queues")]
    pub queues: Vec<String>,
    /// Threads per process. Defaults to [`DEFAULT_THREADS`].
    #[serde(default = "default_threads")]
    pub threads: usize,
    /// Their idle polling interval. Defaults to [`DEFAULT_POLLING_INTERVAL`].
    #[serde(default = "default_polling", with = "humantime_serde")]
    pub polling_interval: Duration,
    /// How long past its deadline a job may run before its worker process
    /// exits (see `WorkerConfig::hard_timeout`). Defaults to none.
    #[serde(default, with = "humantime_serde")]
    pub hard_timeout: Option<Duration>,
    /// Extra environment variables for the processes.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

fn default_heartbeat() -> Duration {
    DEFAULT_HEARTBEAT_INTERVAL
}
fn default_threshold() -> Duration {
    DEFAULT_PROCESS_ALIVE_THRESHOLD
}
fn default_shutdown() -> Duration {
    DEFAULT_SHUTDOWN_TIMEOUT
}
fn default_max_stalled() -> u32 {
    DEFAULT_MAX_STALLED_COUNT
}
fn default_restart_window() -> Duration {
    DEFAULT_RESTART_BACKOFF_WINDOW
}
fn default_restart_max() -> Duration {
    DEFAULT_RESTART_BACKOFF_MAX
}
fn default_sqlite_synchronous() -> SqliteSynchronous {
    DEFAULT_SQLITE_SYNCHRONOUS
}
fn default_max_payload() -> usize {
    DEFAULT_MAX_PAYLOAD_BYTES
}
fn default_dispatcher_polling() -> Duration {
    DEFAULT_DISPATCHER_POLLING_INTERVAL
}
fn default_batch() -> usize {
    DEFAULT_DISPATCHER_BATCH_SIZE
}
fn default_concurrency_maintenance() -> Duration {
    DEFAULT_CONCURRENCY_MAINTENANCE_INTERVAL
}
fn one() -> usize {
    1
}
fn all_queues() -> Vec<String> {
    vec!["*".to_string()]
}
fn default_threads() -> usize {
    DEFAULT_THREADS
}
fn default_polling() -> Duration {
    DEFAULT_POLLING_INTERVAL
}

impl SupervisorConfig {
    /// Reads, parses and validates `path`, applying `SOLIDQ_DATABASE_URL`,
    /// `SOLIDQ_SQLITE_SYNCHRONOUS` and `SOLIDQ_MAX_PAYLOAD_BYTES`. Every
    /// error is one line naming the file (or the variable) and the problem.
    pub fn load(path: &Path) -> Result<SupervisorConfig> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| Error::Config {
            origin: origin.clone(),
            message: format!("cannot read the file: {e}"),
        })?;
        let mut config = SupervisorConfig::parse(&text, &origin)?;
        if let Ok(url) = std::env::var(ENV_DATABASE_URL)
            && !url.trim().is_empty()
        {
            config.database_url = Some(url);
        }
        if let Some(value) = sqlite_synchronous_from_env()? {
            config.sqlite_synchronous = value;
        }
        if let Some(value) = max_payload_from_env()? {
            config.max_payload_bytes = value;
        }
        config.validate(&origin)?;
        Ok(config)
    }

    /// Parses TOML text (no environment, no validation); `origin` names it
    /// in errors.
    pub fn parse(text: &str, origin: &str) -> Result<SupervisorConfig> {
        toml::from_str(text).map_err(|e| {
            let place = e
                .span()
                .map(|span| {
                    let before = &text[..span.start.min(text.len())];
                    let line = before.matches('\n').count() + 1;
                    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
                    format!("line {line}, column {column}: ")
                })
                .unwrap_or_default();
            Error::Config {
                origin: origin.to_string(),
                message: format!("{place}{}", e.message().trim().replace('\n', " ")),
            }
        })
    }

    /// The database URL, parsed.
    pub fn database_url(&self) -> Result<DatabaseUrl> {
        match &self.database_url {
            Some(url) => DatabaseUrl::parse(url),
            None => Err(Error::Config {
                origin: "configuration".into(),
                message: format!(
                    "database_url is missing (set it in the file or in {ENV_DATABASE_URL})"
                ),
            }),
        }
    }

    /// Checks every value; `origin` names the file in errors.
    pub fn validate(&self, origin: &str) -> Result<Warnings> {
        let bad = |message: String| Error::Config {
            origin: origin.to_string(),
            message,
        };
        self.database_url().map_err(|e| match e {
            Error::Config { message, .. } => bad(message),
            other => bad(other.to_string()),
        })?;
        if self.heartbeat_interval.is_zero() {
            return Err(bad("heartbeat_interval must be longer than zero".into()));
        }
        if self.process_alive_threshold <= self.heartbeat_interval {
            return Err(bad(format!(
                "process_alive_threshold ({}) must be longer than heartbeat_interval ({})",
                humantime::format_duration(self.process_alive_threshold),
                humantime::format_duration(self.heartbeat_interval)
            )));
        }
        if self.dispatcher.batch_size == 0 {
            return Err(bad("dispatcher.batch_size must be at least 1".into()));
        }
        if self.restart_backoff_max < RESTART_BACKOFF_BASE {
            return Err(bad(format!(
                "restart_backoff_max ({}) must be at least {}",
                humantime::format_duration(self.restart_backoff_max),
                humantime::format_duration(RESTART_BACKOFF_BASE)
            )));
        }
        if self.max_payload_bytes == 0 {
            return Err(bad("max_payload_bytes must be at least 1".into()));
        }
        if self.dispatcher.concurrency_maintenance_interval.is_zero() {
            return Err(bad(
                "dispatcher.concurrency_maintenance_interval must be longer than zero".into(),
            ));
        }
        if self.dispatcher.polling_interval.is_zero() {
            return Err(bad(
                "dispatcher.polling_interval must be longer than zero".into()
            ));
        }
        self.recurring_resolved(origin)?;
        for (i, group) in self.workers.iter().enumerate() {
            if group
                .command
                .first()
                .is_none_or(|program| program.trim().is_empty())
            {
                return Err(bad(format!(
                    "workers[{i}].command is empty: give the program and its arguments"
                )));
            }
            if group.processes == 0 {
                return Err(bad(format!("workers[{i}].processes must be at least 1")));
            }
            if group.threads == 0 {
                return Err(bad(format!("workers[{i}].threads must be at least 1")));
            }
            if group.polling_interval.is_zero() {
                return Err(bad(format!(
                    "workers[{i}].polling_interval must be longer than zero"
                )));
            }
            if group.queues.is_empty() {
                return Err(bad(format!(
                    "workers[{i}].queues is empty (use [\"*\"] for all)"
                )));
            }
            for queue in &group.queues {
                QueuePattern::parse(queue).map_err(|e| bad(format!("workers[{i}].queues: {e}")))?;
            }
        }
        let mut warnings = Vec::new();
        if self.heartbeat_interval * 2 > self.process_alive_threshold {
            warnings.push(format!(
                "heartbeat_interval {} is more than half of process_alive_threshold {}: one late heartbeat can get a live process pruned",
                humantime::format_duration(self.heartbeat_interval),
                humantime::format_duration(self.process_alive_threshold)
            ));
        }
        Ok(Warnings(warnings))
    }

    /// Each `[recurring.*]` task checked and resolved: its arguments as
    /// JSON and its schedule parsed in its time zone. `origin` names the
    /// file in errors, which name the task and what is wrong with it (for a
    /// bad schedule: the expression and its bad field). The supervisor
    /// builds its scheduler's tasks from these (see
    /// `SupervisorConfig::recurring_tasks`).
    pub fn recurring_resolved(&self, origin: &str) -> Result<Vec<ResolvedRecurring<'_>>> {
        self.recurring
            .iter()
            .map(|(key, section)| {
                let bad = |message: String| Error::Config {
                    origin: origin.to_string(),
                    message,
                };
                let arguments = match &section.args {
                    Some(args) => toml_to_json(args)
                        .map_err(|e| bad(format!("recurring task {key:?}: args: {e}")))?,
                    None => serde_json::json!({}),
                };
                let resolve = || -> Result<Schedule> {
                    validate_task_key(key)?;
                    validate_task_kind(key, &section.kind)?;
                    validate_task_description(key, section.description.as_deref())?;
                    if let Some(queue) = &section.queue {
                        validate_queue_name(queue)?;
                    }
                    Schedule::parse(&section.schedule, &section.timezone).map_err(|source| {
                        Error::Schedule {
                            task: key.clone(),
                            source,
                        }
                    })
                };
                let schedule = resolve().map_err(|e| match e {
                    Error::Schedule { .. } => bad(e.to_string()),
                    other => bad(format!("recurring task {key:?}: {other}")),
                })?;
                Ok(ResolvedRecurring {
                    key,
                    section,
                    arguments,
                    schedule,
                })
            })
            .collect()
    }

    /// The dispatcher settings.
    pub fn dispatcher_config(&self) -> DispatcherConfig {
        DispatcherConfig {
            polling_interval: self.dispatcher.polling_interval,
            batch_size: self.dispatcher.batch_size,
            heartbeat_interval: self.heartbeat_interval,
            concurrency_maintenance_interval: self.dispatcher.concurrency_maintenance_interval,
            process_alive_threshold: self.process_alive_threshold,
            max_stalled_count: self.max_stalled_count,
        }
    }

    /// The environment a worker process of `group` gets.
    pub(crate) fn child_env(
        &self,
        group: &WorkerGroup,
        supervisor_id: i64,
    ) -> Vec<(String, String)> {
        let duration = |d: Duration| humantime::format_duration(d).to_string();
        let mut env = vec![
            (
                ENV_DATABASE_URL.to_string(),
                self.database_url.clone().unwrap_or_default(),
            ),
            (ENV_QUEUES.to_string(), group.queues.join(",")),
            (ENV_THREADS.to_string(), group.threads.to_string()),
            (ENV_SUPERVISOR_ID.to_string(), supervisor_id.to_string()),
            (
                ENV_HEARTBEAT_INTERVAL.to_string(),
                duration(self.heartbeat_interval),
            ),
            (
                ENV_PROCESS_ALIVE_THRESHOLD.to_string(),
                duration(self.process_alive_threshold),
            ),
            (
                ENV_SHUTDOWN_TIMEOUT.to_string(),
                duration(self.shutdown_timeout),
            ),
            (
                ENV_POLLING_INTERVAL.to_string(),
                duration(group.polling_interval),
            ),
            (
                ENV_SQLITE_SYNCHRONOUS.to_string(),
                self.sqlite_synchronous.to_string(),
            ),
            (
                ENV_MAX_PAYLOAD_BYTES.to_string(),
                self.max_payload_bytes.to_string(),
            ),
        ];
        if let Some(hard) = group.hard_timeout {
            env.push((ENV_HARD_TIMEOUT.to_string(), duration(hard)));
        }
        if self.wait_for_migrations {
            env.push((ENV_WAIT_FOR_MIGRATIONS.to_string(), "1".to_string()));
        }
        env.extend(group.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        env
    }
}

impl WorkerConfig {
    /// The configuration a supervisor hands its worker processes through the
    /// environment (`SOLIDQ_QUEUES`, `SOLIDQ_THREADS`, …); unset variables
    /// keep their defaults. A supervised worker leaves dispatching to the
    /// supervisor. Errors name the variable and its value.
    pub fn from_env() -> Result<WorkerConfig> {
        let mut config = WorkerConfig::default();
        if let Some(queues) = env_var(ENV_QUEUES) {
            config.queues = queues
                .split(',')
                .map(|q| q.trim().to_string())
                .filter(|q| !q.is_empty())
                .collect();
        }
        if let Some(threads) = env_var(ENV_THREADS) {
            config.threads = threads
                .parse()
                .map_err(|_| env_error(ENV_THREADS, &threads, "not a whole number"))?;
        }
        if let Some(id) = env_var(ENV_SUPERVISOR_ID) {
            config.supervisor_id = Some(
                id.parse()
                    .map_err(|_| env_error(ENV_SUPERVISOR_ID, &id, "not an id"))?,
            );
            config.standalone = false;
        }
        let duration = |name: &'static str, target: &mut Duration| -> Result<()> {
            if let Some(value) = env_var(name) {
                *target = humantime::parse_duration(&value)
                    .map_err(|e| env_error(name, &value, &e.to_string()))?;
            }
            Ok(())
        };
        duration(ENV_HEARTBEAT_INTERVAL, &mut config.heartbeat_interval)?;
        duration(
            ENV_PROCESS_ALIVE_THRESHOLD,
            &mut config.process_alive_threshold,
        )?;
        duration(ENV_SHUTDOWN_TIMEOUT, &mut config.shutdown_timeout)?;
        duration(ENV_POLLING_INTERVAL, &mut config.polling_interval)?;
        if let Some(value) = env_var(ENV_HARD_TIMEOUT) {
            config.hard_timeout = Some(
                humantime::parse_duration(&value)
                    .map_err(|e| env_error(ENV_HARD_TIMEOUT, &value, &e.to_string()))?,
            );
        }
        if let Some(value) = env_var(ENV_WAIT_FOR_MIGRATIONS) {
            config.wait_for_migrations = match value.to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" => true,
                "0" | "false" | "no" => false,
                _ => {
                    return Err(env_error(
                        ENV_WAIT_FOR_MIGRATIONS,
                        &value,
                        "expected 1, true, 0 or false",
                    ));
                }
            };
        }
        config.validate()?;
        Ok(config)
    }
}

impl QueueConfig {
    /// The default configuration with what a supervisor hands its worker
    /// processes through the environment: `SOLIDQ_SQLITE_SYNCHRONOUS` and
    /// `SOLIDQ_MAX_PAYLOAD_BYTES`. An unset variable keeps its default; a
    /// bad value is an error naming the variable and its value.
    pub fn from_env() -> Result<QueueConfig> {
        let mut config = QueueConfig::default();
        if let Some(value) = sqlite_synchronous_from_env()? {
            config.sqlite_synchronous = value;
        }
        if let Some(value) = max_payload_from_env()? {
            config.max_payload_bytes = value;
        }
        config.validate()?;
        Ok(config)
    }
}

/// `SOLIDQ_SQLITE_SYNCHRONOUS`, if set.
fn sqlite_synchronous_from_env() -> Result<Option<SqliteSynchronous>> {
    env_var(ENV_SQLITE_SYNCHRONOUS)
        .map(|value| {
            value.parse().map_err(|_| {
                env_error(
                    ENV_SQLITE_SYNCHRONOUS,
                    &value,
                    "expected \"normal\" or \"full\"",
                )
            })
        })
        .transpose()
}

/// `SOLIDQ_MAX_PAYLOAD_BYTES`, if set: a whole number of bytes, at least 1.
fn max_payload_from_env() -> Result<Option<usize>> {
    env_var(ENV_MAX_PAYLOAD_BYTES)
        .map(|value| {
            value
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| {
                    env_error(
                        ENV_MAX_PAYLOAD_BYTES,
                        &value,
                        "expected a whole number of bytes, at least 1",
                    )
                })
        })
        .transpose()
}

fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn env_error(name: &'static str, value: &str, reason: &str) -> Error {
    Error::InvalidOption {
        option: name,
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

// Timings the supervisor works by (not settings: code that must agree
// with them, a deploy check or a test, reads them here).

/// Extra time a stopping supervisor gives its children beyond
/// `shutdown_timeout`: they need it to record their last outcomes and
/// deregister after their jobs' grace period ends. With the default
/// `shutdown_timeout` the whole wait is 9 s, leaving a second of the 10 s
/// grace of `docker stop` for the supervisor's own
/// teardown; see [`STOP_GRACE`].
pub const SHUTDOWN_MARGIN: Duration = Duration::from_secs(2);

/// The grace period the default settings fit: `docker stop` sends SIGKILL
/// 10 s after SIGTERM (Kubernetes' `terminationGracePeriodSeconds` is 30 s
/// by default, systemd's `TimeoutStopSec` 90 s). A supervisor with the
/// default `shutdown_timeout` exits within it; with a longer
/// `shutdown_timeout`, give the container (`docker stop --time`,
/// `docker run --stop-timeout`) at least `shutdown_timeout` +
/// [`SHUTDOWN_MARGIN`] + 1 s.
pub const STOP_GRACE: Duration = Duration::from_secs(10);

/// A worker process that lived less than this is crash-looping: the
/// default of [`SupervisorConfig::restart_backoff_window`].
pub const DEFAULT_RESTART_BACKOFF_WINDOW: Duration = Duration::from_secs(1);
/// The first restart delay of a crash-looping worker process; it doubles
/// with each further quick exit.
pub const RESTART_BACKOFF_BASE: Duration = Duration::from_millis(100);
/// The longest restart delay: the default of
/// [`SupervisorConfig::restart_backoff_max`].
pub const DEFAULT_RESTART_BACKOFF_MAX: Duration = Duration::from_secs(10);

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
        database_url = "sqlite://jobs.sqlite3"
        heartbeat_interval = "100ms"
        process_alive_threshold = "1s"
        [[workers]]
        command = ["app", "work"]
        processes = 2
        queues = ["critical", "*"]
    "#;

    fn error_of(text: &str) -> String {
        match SupervisorConfig::parse(text, "solidq.toml")
            .and_then(|c| c.validate("solidq.toml").map(drop))
        {
            Ok(()) => panic!("accepted: {text}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_good_file_parses_with_defaults() {
        let config = SupervisorConfig::parse(GOOD, "t").unwrap();
        assert_eq!(config.heartbeat_interval, Duration::from_millis(100));
        assert_eq!(config.shutdown_timeout, DEFAULT_SHUTDOWN_TIMEOUT);
        assert_eq!(config.workers[0].threads, DEFAULT_THREADS);
        assert_eq!(config.max_stalled_count, DEFAULT_MAX_STALLED_COUNT);
        assert_eq!(config.sqlite_synchronous, DEFAULT_SQLITE_SYNCHRONOUS);
        assert!(config.validate("t").is_ok());
    }

    #[test]
    fn sqlite_synchronous_is_read_and_handed_to_workers() {
        let text = r#"
            database_url = "sqlite://jobs.sqlite3"
            sqlite_synchronous = "Normal"
            [[workers]]
            command = ["app", "work"]
        "#;
        let config = SupervisorConfig::parse(text, "t").unwrap();
        assert_eq!(config.sqlite_synchronous, SqliteSynchronous::Normal);
        let env = config.child_env(&config.workers[0], 1);
        assert!(
            env.contains(&(ENV_SQLITE_SYNCHRONOUS.to_string(), "normal".to_string())),
            "{env:?}"
        );
        assert!(
            env.contains(&(ENV_MAX_PAYLOAD_BYTES.to_string(), "1048576".to_string())),
            "{env:?}"
        );
    }

    #[test]
    fn max_payload_bytes_is_read_handed_to_workers_and_checked() {
        let text =
            "database_url = \"x.db\"\nmax_payload_bytes = 4096\n[[workers]]\ncommand = [\"app\"]\n";
        let config = SupervisorConfig::parse(text, "t").unwrap();
        assert_eq!(config.max_payload_bytes, 4096);
        let env = config.child_env(&config.workers[0], 1);
        assert!(
            env.contains(&(ENV_MAX_PAYLOAD_BYTES.to_string(), "4096".to_string())),
            "{env:?}"
        );
        let zero =
            SupervisorConfig::parse("database_url = \"x.db\"\nmax_payload_bytes = 0", "t").unwrap();
        assert!(
            zero.validate("t")
                .unwrap_err()
                .to_string()
                .contains("max_payload_bytes must be at least 1")
        );
    }

    #[test]
    fn each_mistake_is_one_line_naming_it() {
        let cases = [
            (
                "database_url = \"x.db\"\nheartbeat_intervall = \"1s\"",
                "unknown field `heartbeat_intervall`",
            ),
            (
                "database_url = \"x.db\"\nshutdown_timeout = \"10x\"",
                "line 2",
            ),
            (
                "database_url = \"x.db\"\n[[workers]]\ncommand = []",
                "workers[0].command is empty",
            ),
            (
                "database_url = \"x.db\"\n[[workers]]\ncommand = [\"a\"]\nthreads = 0",
                "workers[0].threads",
            ),
            ("database_url = \"redis://h/db\"", "unsupported scheme"),
            ("heartbeat_interval = \"1s\"", "database_url is missing"),
            (
                "database_url = \"x.db\"\nprocess_alive_threshold = \"1s\"\nheartbeat_interval = \"2s\"",
                "must be longer than heartbeat_interval",
            ),
            ("database_url = [", "line 1"),
            (
                "database_url = \"x.db\"\nsqlite_synchronous = \"fsync\"",
                r#"invalid sqlite_synchronous "fsync": expected "normal" or "full""#,
            ),
        ];
        for (text, expected) in cases {
            let error = error_of(text);
            assert!(
                error.contains(expected),
                "{text:?} gave {error:?}, expected {expected:?}"
            );
            assert!(!error.contains('\n'), "one line: {error:?}");
            assert!(error.starts_with("solidq.toml: "), "{error:?}");
        }
    }
}
