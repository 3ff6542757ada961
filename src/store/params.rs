//! The values that cross the store's boundary: what the runtime hands in
//! (new jobs, completions, process rows) and what it gets back (claimed
//! jobs, released jobs, reports).

use std::time::Duration;

use chrono::NaiveDateTime;

#[cfg(feature = "postgres")]
use super::postgres;
use crate::types::{Delivery, StoredLimit};

/// A job to insert, with every option resolved.
#[derive(Debug, Clone)]
pub(crate) struct NewJob {
    pub queue_name: String,
    pub kind: String,
    pub arguments: String,
    pub priority: i32,
    pub unique_key: Option<String>,
    pub concurrency_key: Option<String>,
    /// Its tenant for fair share (see `store::fair`).
    pub fairness_key: Option<String>,
    pub options: String,
    pub delivery: Delivery,
    pub max_attempts: i32,
    pub max_stalled_count: Option<i32>,
    /// Absolute run time; when `None`, now + `delay`.
    pub run_at: Option<NaiveDateTime>,
    pub delay: Duration,
}

#[cfg(test)]
impl NewJob {
    /// A job of `kind` on `queue` with no options: due now, one attempt.
    pub(crate) fn plain(queue: &str, kind: &str) -> NewJob {
        NewJob {
            queue_name: queue.into(),
            kind: kind.into(),
            arguments: "null".into(),
            priority: 0,
            unique_key: None,
            concurrency_key: None,
            fairness_key: None,
            options: "{}".into(),
            delivery: Delivery::AtLeastOnce,
            max_attempts: 1,
            max_stalled_count: None,
            run_at: None,
            delay: Duration::ZERO,
        }
    }
}

/// A worker's queue list, compiled once into the SQL that selects claim
/// candidates (see [`crate::types::QueuePattern`]).
#[derive(Debug)]
pub(crate) struct ClaimQuery {
    pub(crate) patterns: Vec<crate::types::QueuePattern>,
    #[cfg(feature = "postgres")]
    postgres_sql: std::sync::OnceLock<String>,
    /// Where the server backends' claims start (`store::floor`).
    #[cfg(any(feature = "postgres", feature = "mysql"))]
    /// Shared with the look below the floor, which runs on a thread of its
    /// own ([`ClaimQuery::probe_due`]).
    pub(super) floor: std::sync::Arc<std::sync::Mutex<super::floor::ClaimFloor>>,
    #[cfg(feature = "sqlite")]
    pub(super) sqlite_sql: std::sync::OnceLock<String>,
    #[cfg(feature = "sqlite")]
    pub(super) sqlite_ahead_sql: std::sync::OnceLock<String>,
    #[cfg(feature = "mysql")]
    pub(super) mysql_sql: std::sync::OnceLock<String>,
    #[cfg(feature = "mysql")]
    pub(super) mysql_ahead_sql: std::sync::OnceLock<String>,
    #[cfg(feature = "mysql")]
    pub(super) mysql_floor_sql: std::sync::OnceLock<String>,
    #[cfg(feature = "mysql")]
    pub(super) mysql_floor_ahead_sql: std::sync::OnceLock<String>,
}

impl ClaimQuery {
    pub(crate) fn new(patterns: Vec<crate::types::QueuePattern>) -> ClaimQuery {
        ClaimQuery {
            patterns,
            #[cfg(feature = "postgres")]
            postgres_sql: Default::default(),
            #[cfg(any(feature = "postgres", feature = "mysql"))]
            floor: Default::default(),
            #[cfg(feature = "sqlite")]
            sqlite_sql: Default::default(),
            #[cfg(feature = "sqlite")]
            sqlite_ahead_sql: Default::default(),
            #[cfg(feature = "mysql")]
            mysql_sql: Default::default(),
            #[cfg(feature = "mysql")]
            mysql_ahead_sql: Default::default(),
            #[cfg(feature = "mysql")]
            mysql_floor_sql: Default::default(),
            #[cfg(feature = "mysql")]
            mysql_floor_ahead_sql: Default::default(),
        }
    }

    #[cfg(feature = "postgres")]
    pub(crate) fn postgres_sql(&self) -> &str {
        self.postgres_sql.get_or_init(|| postgres::claim_sql(self))
    }

    /// A look below the floor, when one is due (`store::floor`): the floor,
    /// and a query of the same pattern that shares this one's floor, to
    /// run it on a thread of its own ([`ClaimQuery::probed`] records how
    /// it went).
    pub(crate) fn probe_due(&self) -> Option<(i64, ClaimQuery)> {
        #[cfg(any(feature = "postgres", feature = "mysql"))]
        if super::floor::applies(self) {
            let floor = self
                .floor
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .probe_due(std::time::Instant::now())?;
            let prober = ClaimQuery {
                floor: std::sync::Arc::clone(&self.floor),
                ..ClaimQuery::new(self.patterns.clone())
            };
            return Some((floor, prober));
        }
        None
    }

    /// Records a look below the floor that started `at` and took `took`:
    /// whether it found a ready job there (`None`: it failed).
    pub(crate) fn probed(
        &self,
        at: std::time::Instant,
        took: std::time::Duration,
        found: Option<bool>,
    ) {
        #[cfg(any(feature = "postgres", feature = "mysql"))]
        self.floor
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .probed(at, took, found);
        #[cfg(not(any(feature = "postgres", feature = "mysql")))]
        let _ = (at, took, found);
    }

    /// After a claim that failed: the next starts at the head of the
    /// queue (`store::floor`).
    pub(crate) fn forget_floor(&self) {
        #[cfg(any(feature = "postgres", feature = "mysql"))]
        self.floor
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .forget();
    }

    /// `SELECT job_id, ord, priority, position` of up to `limit` candidates
    /// per pattern, each pattern's candidates in priority and position order
    /// (see `store::fair`), paused
    /// queues excluded. `lock` is appended to each pattern's subquery
    /// (`FOR UPDATE SKIP LOCKED` on PostgreSQL). Queue names are validated
    /// (letters, digits, `_-.:`) so inlining them is safe, and inlining makes
    /// the statement text fixed per worker: prepared once, planned per queue.
    #[cfg(feature = "sqlite")]
    pub(crate) fn candidates_sql(&self, limit: &str, lock: &str) -> String {
        self.candidates_where_sql(limit, "", lock)
    }

    /// [`ClaimQuery::candidates_sql`] with `extra` conditions (starting
    /// with `AND`) on each ready row `r`.
    #[cfg(any(feature = "postgres", feature = "sqlite"))]
    pub(crate) fn candidates_where_sql(&self, limit: &str, extra: &str, lock: &str) -> String {
        self.candidates_in_order_sql(limit, extra, lock, false, false, false)
    }

    /// [`ClaimQuery::candidates_sql`] with each ready row's `kind` and
    /// `delivery` after its place (NULL in a row an older release wrote).
    #[cfg(feature = "sqlite")]
    pub(crate) fn candidates_with_kind_sql(&self, limit: &str) -> String {
        self.candidates_in_order_sql(limit, "", "", false, true, false)
    }

    /// [`ClaimQuery::candidates_where_sql`] that reads each pattern's rows
    /// through the index in claim order (MySQL's `FORCE INDEX`). InnoDB
    /// locks every row it reads: a plan that sorts (which MariaDB picks
    /// for a table of a few dozen rows) would lock every ready row of the
    /// pattern while taking a few, and a concurrent claim would skip them
    /// all and come back empty.
    #[cfg(feature = "mysql")]
    pub(crate) fn candidates_in_index_order_sql(
        &self,
        limit: &str,
        extra: &str,
        lock: &str,
    ) -> String {
        self.candidates_in_order_sql(limit, extra, lock, true, false, false)
    }

    /// [`ClaimQuery::candidates_in_index_order_sql`] whose rows carry their
    /// jobs' columns ([`JOB_COLUMNS`], read in the same locking read: the
    /// job row locked with its ready row).
    #[cfg(feature = "mysql")]
    pub(crate) fn candidates_with_jobs_sql(&self, limit: &str, extra: &str, lock: &str) -> String {
        self.candidates_in_order_sql(limit, extra, lock, true, false, true)
    }

    fn candidates_in_order_sql(
        &self,
        limit: &str,
        extra: &str,
        lock: &str,
        force_index: bool,
        with_kind: bool,
        with_job: bool,
    ) -> String {
        use crate::types::QueuePattern;
        let kind = if with_kind { ", kind, delivery" } else { "" };
        let (job_inner, job_join, job_outer) = job_carried(with_job);
        if let Some(names) = self.listed() {
            return listed_candidates_sql(
                &names,
                limit,
                extra,
                lock,
                force_index,
                kind,
                (&job_inner, job_join, &job_outer),
            );
        }
        let mut parts = Vec::with_capacity(self.patterns.len());
        for (ord, pattern) in self.patterns.iter().enumerate() {
            let (condition, index) = match pattern {
                QueuePattern::Exact(name) => (
                    format!("r.queue_name = '{name}'"),
                    "solidq_ready_poll_by_queue",
                ),
                QueuePattern::Prefix(prefix) => (
                    format!(
                        "substr(r.queue_name, 1, {}) = '{prefix}'",
                        prefix.chars().count()
                    ),
                    "solidq_ready_poll_all",
                ),
                QueuePattern::All => ("1 = 1".to_string(), "solidq_ready_poll_all"),
            };
            let hint = if force_index {
                format!(" FORCE INDEX ({index})")
            } else {
                String::new()
            };
            parts.push(format!(
                "SELECT job_id, {ord} AS ord, priority, position{kind}{job_outer} FROM \
                 (SELECT r.job_id, r.priority, r.position{kind}{job_inner} \
                 FROM solidq_ready_executions r{hint}{job_join} WHERE {condition} \
                 AND r.queue_name NOT IN (SELECT queue_name FROM solidq_pauses){extra} \
                 ORDER BY r.priority, r.position LIMIT {limit}{lock}) AS c{ord}"
            ));
        }
        parts.join(" UNION ALL ")
    }

    /// The queue names of a list of two or more exact names (no prefix, no
    /// `*`): such a list is claimed from by one probe per queue in the
    /// list's order that stops at the limit ([`listed_candidates_sql`]),
    /// not by a branch per pattern that each read the limit's rows.
    #[cfg(feature = "postgres")]
    pub(crate) fn is_listed(&self) -> bool {
        self.listed().is_some()
    }

    fn listed(&self) -> Option<Vec<&str>> {
        use crate::types::QueuePattern;
        if self.patterns.len() < 2 {
            return None;
        }
        self.patterns
            .iter()
            .map(|p| match p {
                QueuePattern::Exact(name) => Some(name.as_str()),
                _ => None,
            })
            .collect()
    }

    /// How many times the candidates' statement carries its per-pattern
    /// parameters (the limit, MySQL's filters of the jobs claimed ahead):
    /// once per pattern, or once for a list of names.
    #[cfg(feature = "mysql")]
    pub(crate) fn parts(&self) -> usize {
        if self.listed().is_some() {
            1
        } else {
            self.patterns.len()
        }
    }

    /// Puts claimed jobs in claim order: by the first pattern of the queue
    /// list that names their queue, then priority, then their ready rows'
    /// places (`store::fair`), then id.
    pub(crate) fn sort(&self, jobs: &mut [ClaimedJob]) {
        for job in jobs.iter_mut() {
            job.ord = self
                .patterns
                .iter()
                .position(|p| p.matches(&job.queue_name))
                .unwrap_or(self.patterns.len()) as i64;
        }
        jobs.sort_unstable_by_key(|j| (j.ord, j.priority, j.position, j.id));
    }
}

/// A claimed job's columns as a claim's candidates carry them on MySQL
/// (`ClaimQuery::candidates_with_jobs_sql`), from `solidq_jobs jb`, each
/// named `j_` and its name in [`ClaimedJob`] (a ready row's `priority`
/// is beside it in the same row).
#[cfg(feature = "mysql")]
pub(crate) const JOB_COLUMNS: [&str; 17] = [
    "jb.queue_name AS j_queue_name",
    "jb.kind AS j_kind",
    "jb.arguments AS j_arguments",
    "jb.concurrency_key AS j_concurrency_key",
    "jb.priority AS j_priority",
    "jb.options AS j_options",
    "jb.delivery AS j_delivery",
    "jb.max_attempts AS j_max_attempts",
    "jb.attempts AS j_attempts",
    "jb.stalled_count AS j_stalled_count",
    "jb.snoozes AS j_snoozes",
    "jb.checkpoint AS j_checkpoint",
    "jb.batch_id AS j_batch_id",
    "jb.cancel_requested_at IS NOT NULL AS j_cancel_requested",
    "jb.created_at AS j_created_at",
    "GREATEST(jb.scheduled_at, jb.updated_at) AS j_due_at",
    "jb.run_alone AS j_run_alone",
];

/// The names [`JOB_COLUMNS`] give their columns.
#[cfg(feature = "mysql")]
pub(crate) fn job_column_names() -> Vec<&'static str> {
    JOB_COLUMNS
        .iter()
        .map(|c| c.rsplit_once(" AS ").map_or(*c, |(_, name)| name))
        .collect()
}

/// The inner select's job columns, the join that reads them and the
/// outer select's names of them, when candidates carry their jobs.
#[cfg(feature = "mysql")]
fn job_carried(with_job: bool) -> (String, &'static str, String) {
    if !with_job {
        return (String::new(), "", String::new());
    }
    (
        format!(", {}", JOB_COLUMNS.join(", ")),
        " STRAIGHT_JOIN solidq_jobs jb ON jb.id = r.job_id",
        format!(", {}", job_column_names().join(", ")),
    )
}

#[cfg(not(feature = "mysql"))]
fn job_carried(_: bool) -> (String, &'static str, String) {
    (String::new(), "", String::new())
}

/// The candidates of a list of queue names, `SELECT job_id, ord,
/// priority, position` in claim order (the list's, then priority, then
/// place): a nested loop over the names in order, each an index probe of
/// its queue, that stops once `limit` rows are found. Whatever the list's
/// length a claim is one statement, and it reads (and locks) the rows it
/// returns and probes the queues before them, most of them empty; a
/// branch per pattern read `limit` rows of every listed queue (issue 36:
/// 1,000 listed queues were not drained in 240 s). PostgreSQL: `unnest
/// … WITH ORDINALITY` joined `LATERAL` to each queue's probe; SQLite:
/// `json_each` as the outer loop of a `CROSS JOIN` (which SQLite never
/// reorders) over the queue's index, whose order is the claim order;
/// MySQL: `JSON_TABLE` joined `STRAIGHT_JOIN` over the forced index. The
/// names are validated (letters, digits, `_-.:`), so inlining them is
/// safe and keeps the statement's text fixed per worker.
fn listed_candidates_sql(
    names: &[&str],
    limit: &str,
    extra: &str,
    lock: &str,
    force_index: bool,
    kind: &str,
    (job_inner, job_join, job_outer): (&str, &str, &str),
) -> String {
    let paused = "queue_name NOT IN (SELECT queue_name FROM solidq_pauses)";
    if force_index {
        // JSON_ARRAY: no double quotes in the text, which MariaDB's JSON
        // plans print unescaped.
        let array = names
            .iter()
            .map(|name| format!("'{name}'"))
            .collect::<Vec<_>>()
            .join(", ");
        return format!(
            "SELECT job_id, ord, priority, position{job_outer} FROM (SELECT r.job_id, names.ord - 1 AS ord, \
             r.priority, r.position{job_inner} FROM JSON_TABLE(JSON_ARRAY({array}), '$[*]' COLUMNS (ord FOR ORDINALITY, \
             name VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$')) AS names \
             STRAIGHT_JOIN solidq_ready_executions r FORCE INDEX (solidq_ready_poll_by_queue) \
             ON r.queue_name = names.name{job_join} WHERE r.{paused}{extra} LIMIT {limit}{lock}) AS c0"
        );
    }
    if lock.is_empty() {
        // SQLite's (the one whose ahead candidates carry kind and delivery).
        let r_kind = if kind.is_empty() {
            ""
        } else {
            ", r.kind, r.delivery"
        };
        let json = serde_json::to_string(names).expect("names serialize");
        return format!(
            "SELECT r.job_id, q.key AS ord, r.priority, r.position{r_kind} FROM json_each('{json}') AS q \
             CROSS JOIN solidq_ready_executions AS r INDEXED BY solidq_ready_poll_by_queue \
             WHERE r.queue_name = q.value AND r.{paused}{extra} LIMIT {limit}"
        );
    }
    // Quoted: an unquoted `null` in an array literal is a NULL.
    let array = names
        .iter()
        .map(|name| format!("\"{name}\""))
        .collect::<Vec<_>>()
        .join(",");
    // `$5`: the first name to probe (1-based; see `ClaimLimits::from`).
    format!(
        "SELECT c.job_id, q.ord + $5 - 2 AS ord, c.priority, c.position \
         FROM unnest(('{{{array}}}'::text[])[$5:]) WITH ORDINALITY AS q(name, ord) \
         CROSS JOIN LATERAL (SELECT job_id, priority, position FROM solidq_ready_executions r \
         WHERE r.queue_name = q.name AND r.{paused}{extra} \
         ORDER BY priority, position LIMIT {limit}{lock}) AS c LIMIT {limit}"
    )
}

/// A job claimed by a worker, with what it needs to run it.
#[derive(Debug, Clone, diesel::QueryableByName)]
pub(crate) struct ClaimedJob {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub id: i64,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub queue_name: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub kind: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub arguments: String,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    pub concurrency_key: Option<String>,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    pub priority: i32,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub options: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub delivery: String,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    pub max_attempts: i32,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    pub attempts: i32,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    pub stalled_count: i32,
    /// Times it handed itself back (snoozed or interrupted).
    #[diesel(sql_type = diesel::sql_types::Integer)]
    pub snoozes: i32,
    /// Its resumable steps so far (JSON), kept across attempts.
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    pub checkpoint: Option<String>,
    /// The batch it belongs to.
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::BigInt>)]
    pub batch_id: Option<i64>,
    /// An operator asked it to stop (while a worker that died ran it).
    #[diesel(sql_type = diesel::sql_types::Bool)]
    pub cancel_requested: bool,
    #[diesel(sql_type = diesel::sql_types::Timestamp)]
    pub created_at: NaiveDateTime,
    /// When it last became due (enqueued, its run time, its retry time, or
    /// its release after a stall), on the same clock as `claimed_at`.
    #[diesel(sql_type = diesel::sql_types::Timestamp)]
    pub due_at: NaiveDateTime,
    /// When the claim was made (the database's clock).
    #[diesel(sql_type = diesel::sql_types::Timestamp)]
    pub claimed_at: NaiveDateTime,
    /// The position in the claim order (queue list, then priority, then
    /// `position`).
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub ord: i64,
    /// Its ready row's place in claim order (`store::fair`).
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub position: i64,
    /// Whether the claim recorded it as started (it goes to an idle thread
    /// at once); the others were claimed ahead and are marked as they start.
    #[diesel(sql_type = diesel::sql_types::Bool)]
    pub started: bool,
    /// It was released because the process running it died: it runs alone
    /// in its process, with nothing else running there meanwhile, so a
    /// crash during that run is blamed on it only.
    #[diesel(sql_type = diesel::sql_types::Bool)]
    pub run_alone: bool,
}

/// How much one claim takes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ClaimLimits {
    /// Jobs for idle threads: any kind, recorded as started by the claim.
    pub immediate: usize,
    /// Jobs beyond those, held in memory until a thread frees: only of
    /// `fast_kinds`, only at-least-once, recorded as not started.
    pub ahead: usize,
    /// The kinds that may be claimed ahead.
    pub fast_kinds: Vec<String>,
    /// For a list of queue names, the index of the first one to probe:
    /// the worker's knowledge that those before it are empty (they were
    /// at its last claim, and no notification named one since). Only
    /// PostgreSQL, whose notifications name the queue, is told; 0 probes
    /// them all.
    pub from: usize,
}

impl ClaimLimits {
    /// `n` jobs for idle threads, none ahead, every queue of a list
    /// probed.
    pub(crate) fn idle(n: usize) -> ClaimLimits {
        ClaimLimits {
            immediate: n,
            ahead: 0,
            fast_kinds: Vec::new(),
            from: 0,
        }
    }

    /// Jobs at most.
    pub(crate) fn total(&self) -> usize {
        if self.fast_kinds.is_empty() {
            self.immediate
        } else {
            self.immediate + self.ahead
        }
    }
}

/// A claimed job being released: the facts the release rules look at.
#[derive(Debug, Clone, PartialEq, Eq, diesel::QueryableByName)]
pub(crate) struct ReleasedJob {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub id: i64,
    /// The process that held the claim.
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub process_id: i64,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub kind: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub queue_name: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub delivery: String,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    pub stalled_count: i32,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Integer>)]
    pub max_stalled_count: Option<i32>,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    pub concurrency_key: Option<String>,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub options: String,
    /// Whether it had started (a claim held ahead in memory had not).
    #[diesel(sql_type = diesel::sql_types::Bool)]
    pub started: bool,
}

impl ReleasedJob {
    /// The concurrency slot it holds, if its type has a limit.
    pub(crate) fn slot(&self) -> Option<Slot> {
        let options = crate::store::StoredOptions::parse(&self.options);
        Slot::of(self.concurrency_key.as_deref(), &options)
    }
}

/// A successful attempt to record.
#[derive(Debug, Clone)]
pub(crate) struct Succeeded {
    pub id: i64,
    pub result: Option<String>,
    pub keep: Duration,
    /// How long before this write the attempt started: its start is kept
    /// as the backend's "now" less this (`started_at`).
    pub started_ago: Duration,
}

/// The start of an attempt that ended otherwise than in a kept success
/// (retried, failed, snoozed, cancelled), recorded on its job beside the
/// outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AttemptStarted {
    pub id: i64,
    /// As [`Succeeded::started_ago`].
    pub ago: Duration,
    /// Whether the outcome beside it does not count the attempt itself
    /// (a cancel while it ran): then `attempts + 1` here.
    pub count: bool,
}

/// A failed attempt with attempts left.
#[derive(Debug, Clone)]
pub(crate) struct Retried {
    pub id: i64,
    pub error: String,
    pub delay: Duration,
}

/// The latest progress of a running job, fenced by its claim.
#[derive(Debug, Clone)]
pub(crate) struct Progress {
    pub job_id: i64,
    pub process_id: i64,
    /// The progress to store, if it changed.
    pub json: Option<String>,
    /// The resumable steps' checkpoint to store, if it changed.
    pub checkpoint: Option<String>,
}

/// A waiting job taken out of its execution table by an operator.
#[derive(Debug, Clone, PartialEq, Eq, diesel::QueryableByName)]
pub(crate) struct RemovedPending {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub id: i64,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    pub concurrency_key: Option<String>,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub options: String,
    /// Whether it was ready (holding its concurrency slot, if limited).
    #[diesel(sql_type = diesel::sql_types::Bool)]
    pub was_ready: bool,
}

/// The queue name reserved for "an operator asked running jobs to stop" in
/// PostgreSQL notifications (no queue can be named with a `!`).
pub(crate) const CANCEL_CHANNEL_QUEUE: &str = "!cancel";

/// A job handing itself back (snoozed, or interrupted at shutdown).
#[derive(Debug, Clone)]
pub(crate) struct Snoozed {
    pub id: i64,
    pub delay: Duration,
}

/// A job failing for good.
#[derive(Debug, Clone)]
pub(crate) struct Failed {
    pub id: i64,
    pub error: String,
    /// Whether this ends an attempt (`attempts + 1`); a stall does not.
    pub ends_attempt: bool,
    /// Whether this counts a stall (`stalled_count + 1`).
    pub stalled: bool,
}

/// A claimed job going back to ready.
#[derive(Debug, Clone)]
pub(crate) struct Released {
    pub id: i64,
    /// Whether its process died (`stalled_count + 1`) rather than stopped.
    pub stalled: bool,
    /// For a stall, the error object appended to the job's `errors`: which
    /// process died holding it (the job's stall history).
    pub error: Option<String>,
}

/// A process row to register.
#[derive(Debug, Clone)]
pub(crate) struct NewProcess {
    pub kind: String,
    pub name: String,
    pub pid: i32,
    pub hostname: String,
    pub supervisor_id: Option<i64>,
    pub metadata: String,
}

/// A job's outcome as the worker reports it.
#[derive(Debug, Clone)]
pub(crate) enum Outcome {
    Succeeded {
        result: Option<String>,
        keep: Duration,
    },
    Retry {
        error: String,
        delay: Duration,
    },
    Failed {
        error: String,
    },
    /// Handed back without spending an attempt: due again after `delay`
    /// (zero: ready at once, unless a concurrency limit must be taken
    /// again).
    Snoozed {
        delay: Duration,
    },
    /// Cancelled by an operator: finished as discarded, kept for `keep`.
    Discarded {
        error: String,
        keep: Duration,
    },
}

/// A ready row's job, as a look below a claim floor reads it
/// (`ClaimsDriver::ready_below_floor`).
#[derive(diesel::QueryableByName)]
pub(crate) struct ReadyJobId {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    #[allow(dead_code)] // read only to see that a row came back
    pub job_id: i64,
}

/// One finished execution to record, fenced by the claim it was run under.
#[derive(Debug, Clone)]
pub(crate) struct Completion {
    pub job_id: i64,
    pub process_id: i64,
    pub outcome: Outcome,
    /// The concurrency slot the job holds, given back with its outcome.
    pub slot: Option<Slot>,
    /// The batch the job belongs to, whose counts its final outcome moves.
    pub batch_id: Option<i64>,
    /// When its attempt started; `None` when it never did (cancelled
    /// before its claim started).
    pub started: Option<std::time::Instant>,
    /// Already written, by the job itself in its own transaction
    /// ([`JobContext::complete_in_transaction`](crate::JobContext::complete_in_transaction)):
    /// reported as written, never written again.
    pub recorded: bool,
}

/// A job claimed ahead that started, to record on its claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Start {
    pub job_id: i64,
    pub process_id: i64,
}

/// A concurrency slot: the key it counts against and the limit's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Slot {
    pub key: String,
    pub limit: StoredLimit,
}

impl Slot {
    /// The slot a job with this key and these stored options holds, if any.
    pub(crate) fn of(key: Option<&str>, options: &crate::store::StoredOptions) -> Option<Slot> {
        Some(Slot {
            key: key?.to_string(),
            limit: options.concurrency.unwrap_or(DEFAULT_LIMIT),
        })
    }
}

/// The terms assumed for a row that has a concurrency key but no readable
/// limit in its options (written by hand or by another version).
const DEFAULT_LIMIT: StoredLimit = StoredLimit {
    limit: 1,
    duration_ms: crate::types::DEFAULT_CONCURRENCY_DURATION.as_millis() as u64,
    on_conflict: crate::types::OnConflict::Block,
};

/// A job discarded at its concurrency limit: finished without running.
#[derive(Debug, Clone)]
pub(crate) struct Discarded {
    pub id: i64,
    /// How long the row is kept (its `keep_result`).
    pub keep: Duration,
    /// The error recorded: why it was discarded.
    pub error: String,
}

/// A job under a concurrency limit that is due to become ready: it takes a
/// slot, or waits blocked, or is discarded.
#[derive(Debug, Clone, diesel::QueryableByName)]
pub(crate) struct LimitedJob {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub job_id: i64,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub queue_name: String,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    pub priority: i32,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub concurrency_key: String,
    /// Its kind, for the events of discarded jobs.
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub kind: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub options: String,
}

impl LimitedJob {
    pub(crate) fn slot(&self) -> Slot {
        let options = crate::store::StoredOptions::parse(&self.options);
        Slot::of(Some(&self.concurrency_key), &options).expect("a key was given")
    }

    pub(crate) fn keep(&self) -> Duration {
        Duration::from_millis(crate::store::StoredOptions::parse(&self.options).keep_result_ms)
    }
}

/// What inserting jobs came to.
#[derive(Debug, Default, Clone)]
pub(crate) struct Inserted {
    /// For each job, in order: its new id, or (`Err`) the id of the job
    /// holding its unique key.
    pub outcome: Vec<std::result::Result<i64, i64>>,
    /// New jobs discarded at their concurrency limit on the way in.
    pub discarded: Vec<LimitedJob>,
}

/// What a batch of completions came to.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct FinishReport {
    /// Jobs whose outcome was recorded.
    pub written: Vec<i64>,
    /// Jobs whose claim was gone (the process was pruned meanwhile): nothing
    /// was written for them.
    pub lost: Vec<i64>,
}

/// A process row, as pruning reads it.
#[derive(Debug, Clone, diesel::QueryableByName)]
pub(crate) struct ProcessRow {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub id: i64,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub kind: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub name: String,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    pub pid: i32,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub hostname: String,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::BigInt>)]
    pub supervisor_id: Option<i64>,
    #[diesel(sql_type = diesel::sql_types::Timestamp)]
    pub last_heartbeat_at: NaiveDateTime,
}

/// How a job's own transaction ended (`Store::finish_in_transaction`).
pub(crate) enum TxEnd<E> {
    /// Committed: the job's writes and its success, together.
    Committed,
    /// The job's writes returned an error: everything rolled back.
    Refused(E),
    /// They panicked: everything rolled back; the panic goes on.
    Panicked(Box<dyn std::any::Any + Send>),
    /// The claim was no longer this process's (it was pruned, the job
    /// released): everything rolled back, nothing recorded.
    ClaimLost,
    /// The database failed and nothing was committed (a commit whose
    /// answer was lost was read back first).
    Failed(crate::types::Error),
}
