//! The driver's areas, under one supertrait, [`Driver`], which the rules
//! above take as `&mut dyn Driver`. Most areas are implemented by each
//! backend (`sqlite`, `postgres`, `mysql`) for its connection type; those
//! whose statements the backends agree on (batches, dependencies, rate
//! starts) are implemented once, for every
//! [`Portable`](super::portable::Portable) connection. Methods marked
//! "operation" manage their own transaction; the others are primitives
//! meant to run inside [`Driver::transaction`].

use std::time::Duration;

use chrono::NaiveDateTime;
use diesel::QueryResult;

use super::{
    AttemptStarted, AuditRow, ClaimLimits, ClaimQuery, ClaimedJob, Discarded, Failed, HealthFacts,
    HorizonFacts, LimitedJob, NewAudit, NewJob, NewProcess, ProcessRow, Progress, RecurringTaskRow,
    Released, ReleasedJob, RemovedPending, Retried, Snoozed, StatsDelta, Succeeded, batches,
    dependencies,
};
use crate::types::StoredLimit;

/// The backend-specific half of the store: a connection type with every
/// area. Methods marked "operation" manage their own transaction; the
/// others are primitives meant to run inside [`Driver::transaction`].
pub(crate) trait Driver:
    JobsDriver
    + ClaimsDriver
    + ProcessesDriver
    + LimitsDriver
    + RatesDriver
    + BatchesDriver
    + DependenciesDriver
    + RecurringDriver
    + AdminDriver
    + ControlDriver
    + AuditDriver
    + StatsDriver
    + HealthDriver
{
    /// Runs `body` in a write transaction: `BEGIN IMMEDIATE` on SQLite,
    /// `BEGIN` on PostgreSQL, a savepoint when one is already open.
    fn transaction(
        &mut self,
        body: &mut dyn FnMut(&mut dyn Driver) -> QueryResult<()>,
    ) -> QueryResult<()>;

    /// Runs a claim in a transaction of its own: [`Driver::transaction`],
    /// and on PostgreSQL with bitmap scans off for it (`postgres::claims`
    /// says why).
    fn claim_transaction(
        &mut self,
        body: &mut dyn FnMut(&mut dyn Driver) -> QueryResult<()>,
    ) -> QueryResult<()> {
        self.transaction(body)
    }
}

/// A job's rows and outcomes, and an operator's actions on jobs that wait
/// or run.
pub(crate) trait JobsDriver {
    /// Inserts jobs and their ready or scheduled executions. Returns, for each
    /// input in order, its new id, or `None` when its unique key was taken.
    /// With `notify`, listeners hear of the ready ones when the enclosing
    /// transaction commits (PostgreSQL). Must run inside a transaction (or be
    /// a single statement).
    fn jobs_insert(&mut self, jobs: &[NewJob], notify: bool) -> QueryResult<Vec<Option<i64>>>;

    /// Tells listeners that jobs became ready on `queues` (PostgreSQL
    /// NOTIFY; nothing on SQLite).
    fn notify_ready(&mut self, queues: &[String]) -> QueryResult<()>;

    /// Ids of jobs holding these unique keys.
    fn jobs_find_by_unique_keys(&mut self, keys: &[String]) -> QueryResult<Vec<(String, i64)>>;

    /// Deletes jobs that succeeded (their claims already fenced away): a
    /// job in an execution table is not deleted here (no cascade follows
    /// a failed job's row on PostgreSQL).
    fn jobs_delete(&mut self, ids: &[i64]) -> QueryResult<()>;

    /// Records a failed attempt and schedules the retry.
    fn jobs_retry(&mut self, rows: &[Retried]) -> QueryResult<()>;

    /// Hands jobs back without spending an attempt (`snoozes + 1`): due
    /// again after their delay — straight to ready when it is zero and the
    /// job has no concurrency key (notified on PostgreSQL), through
    /// scheduled otherwise.
    fn jobs_snooze(&mut self, rows: &[Snoozed]) -> QueryResult<()>;

    /// Stores progress on jobs whose claim the given process holds.
    fn jobs_set_progress(&mut self, rows: &[Progress]) -> QueryResult<()>;

    /// Moves jobs to failed_executions with their error.
    fn jobs_fail(&mut self, rows: &[Failed]) -> QueryResult<()>;

    /// Records when the attempts of these jobs started (the backend's
    /// "now" less each `ago`), counting the attempt where asked.
    fn jobs_attempt_started(&mut self, rows: &[AttemptStarted]) -> QueryResult<()>;

    /// Puts jobs back in ready, counting a stall on those flagged.
    fn jobs_release(&mut self, rows: &[Released]) -> QueryResult<()>;

    /// Operation: deletes up to `limit` finished jobs whose retention ended
    /// (`older_than` None) or that finished more than `older_than` ago.
    fn jobs_delete_finished(
        &mut self,
        older_than: Option<Duration>,
        limit: usize,
    ) -> QueryResult<usize>;

    /// Operation: moves those of these jobs that are failed back to ready,
    /// with one more attempt if they had none left and a fresh stall
    /// budget; returns how many.
    fn failed_retry(&mut self, ids: &[i64]) -> QueryResult<usize>;

    /// Operation: deletes those of these jobs that are failed, with their
    /// failed rows; returns how many.
    fn failed_discard(&mut self, ids: &[i64]) -> QueryResult<usize>;
}

/// An operator's actions on jobs that wait or run (each backend's
/// `control.rs`).
pub(crate) trait ControlDriver {
    /// Takes jobs out of ready, scheduled and blocked; returns each with
    /// what giving up its concurrency slot needs.
    fn pending_remove(&mut self, ids: &[i64]) -> QueryResult<Vec<RemovedPending>>;

    /// Makes scheduled jobs due now (a dispatch then moves them); returns
    /// how many.
    fn scheduled_make_due(&mut self, ids: &[i64]) -> QueryResult<usize>;

    /// Moves blocked jobs to ready, out of their concurrency limit; returns
    /// their queues.
    fn blocked_run_now(&mut self, ids: &[i64]) -> QueryResult<Vec<String>>;

    /// Asks the claimed jobs among `ids` to stop (notifying workers on
    /// PostgreSQL); returns those newly asked.
    fn jobs_request_cancel(&mut self, ids: &[i64]) -> QueryResult<Vec<i64>>;
}

/// Claims: taking ready jobs for a process, and the fence every outcome passes.
pub(crate) trait ClaimsDriver {
    /// Operation: claims ready jobs for `process_id` within `limits`, in
    /// the worker's queue order, then priority, then id: the first
    /// `limits.immediate` recorded as started, then up to `limits.ahead` of
    /// `limits.fast_kinds` (at-least-once only) recorded as not started.
    /// PostgreSQL and MySQL claim inside the caller's transaction, and
    /// return the claimed jobs before its `COMMIT` (so a lost answer to
    /// the `COMMIT` can be resolved); SQLite looks without the write lock
    /// first, then takes it itself.
    fn ready_claim(
        &mut self,
        claim: &ClaimQuery,
        process_id: i64,
        limits: &ClaimLimits,
    ) -> QueryResult<Vec<ClaimedJob>>;

    /// SQLite's: runs `before` (a worker's outcomes waiting to be written)
    /// and then the claim of [`ClaimsDriver::ready_claim`] in one write
    /// transaction, without its look first: one `COMMIT` and one turn of
    /// the write lock for both. The server backends' claims and finishes
    /// take no common lock, and they do not offer it.
    fn ready_claim_after(
        &mut self,
        _claim: &ClaimQuery,
        _process_id: i64,
        _limits: &ClaimLimits,
        _before: &mut dyn FnMut(&mut dyn Driver) -> QueryResult<()>,
    ) -> QueryResult<Vec<ClaimedJob>> {
        Err(diesel::result::Error::QueryBuilderError(
            "a claim after a finish in one transaction is SQLite's only".into(),
        ))
    }

    /// Whether a ready job of `claim`'s pattern (a single one), in a queue
    /// not paused, is placed before `(0, floor)` in claim order: a read of
    /// the first such row, without locks (`store::floor`'s look below a
    /// worker's floor, on a connection of its own).
    fn ready_below_floor(&mut self, claim: &ClaimQuery, floor: i64) -> QueryResult<bool>;

    /// Operation: moves up to `batch` due scheduled executions to ready;
    /// returns the queue of each job moved.
    fn scheduled_dispatch(&mut self, batch: usize) -> QueryResult<Vec<String>>;

    /// Which of `job_ids` `process_id` holds a claim on.
    fn claimed_held(&mut self, process_id: i64, job_ids: &[i64]) -> QueryResult<Vec<i64>>;

    /// Deletes the claims of these jobs held by `process_id`; returns the ids
    /// whose claim existed (the fence: any other id's claim was lost).
    fn claimed_delete_fenced(&mut self, process_id: i64, job_ids: &[i64]) -> QueryResult<Vec<i64>>;

    /// Records that these jobs, claimed ahead by `process_id`, started.
    fn claimed_mark_started(&mut self, process_id: i64, job_ids: &[i64]) -> QueryResult<()>;

    /// Records the claims of `process_id` among `job_ids` as not started:
    /// a job that runs alone, claimed while the process ran others, waits
    /// unstarted until they end (a crash meanwhile is not its stall).
    fn claimed_mark_unstarted(&mut self, process_id: i64, job_ids: &[i64]) -> QueryResult<()>;

    /// Deletes every claim `process_id` holds and returns the jobs' facts.
    fn claimed_delete_by_process(&mut self, process_id: i64) -> QueryResult<Vec<ReleasedJob>>;

    /// Deletes up to `limit` claims whose process row does not exist and
    /// returns the jobs' facts.
    fn claimed_delete_orphans(&mut self, limit: usize) -> QueryResult<Vec<ReleasedJob>>;

    /// For each row whose claim by `process_id` still exists: deletes the
    /// claim and marks the job finished with its result, kept until
    /// `now + keep`; and records `starts` (other jobs of the same process,
    /// claimed ahead) as started. Atomic on its own (one statement on
    /// PostgreSQL), or part of an enclosing transaction. Returns the ids
    /// written.
    fn jobs_succeed_fenced(
        &mut self,
        process_id: i64,
        rows: &[Succeeded],
        starts: &[i64],
    ) -> QueryResult<Vec<i64>>;
}

/// The processes' registrations and heartbeats.
pub(crate) trait ProcessesDriver {
    /// Registers a process row; returns its id.
    fn process_insert(&mut self, process: &NewProcess) -> QueryResult<i64>;

    /// Writes a heartbeat; returns false when the row is gone.
    fn process_heartbeat(&mut self, id: i64) -> QueryResult<bool>;

    /// Deletes a process row; returns whether it existed.
    fn process_delete(&mut self, id: i64) -> QueryResult<bool>;

    /// Process rows whose heartbeat is older than `threshold`, but `exclude`.
    fn process_find_expired(
        &mut self,
        threshold: Duration,
        exclude: i64,
        limit: usize,
    ) -> QueryResult<Vec<ProcessRow>>;

    /// The process rows of OS process `pid` on `hostname` whose supervisor
    /// is `supervisor_id`.
    fn process_find_by_pid(
        &mut self,
        hostname: &str,
        pid: i32,
        supervisor_id: i64,
    ) -> QueryResult<Vec<ProcessRow>>;

    /// Locks process row `id` for pruning, skipping it when another
    /// transaction holds it or, with `dead_for`, when it heartbeated within
    /// that long. Inside a transaction.
    fn process_lock(
        &mut self,
        id: i64,
        dead_for: Option<Duration>,
    ) -> QueryResult<Option<ProcessRow>>;
}

/// Concurrency limits (semaphores, blocked jobs), and the rate limits'
/// keys (locked and timed differently by each backend).
pub(crate) trait LimitsDriver {
    /// Whether any limited job is due: a read, so an idle dispatcher takes
    /// no write lock (SQLite) and opens no transaction.
    fn scheduled_limited_due(&mut self) -> QueryResult<bool>;

    /// Deletes and returns scheduled executions of limited jobs that are
    /// due: those of `ids` (just enqueued), or with `None` up to `batch` in
    /// due order, skipping rows another transaction locked.
    fn scheduled_take_limited(
        &mut self,
        ids: Option<&[i64]>,
        batch: usize,
    ) -> QueryResult<Vec<LimitedJob>>;

    /// Takes a slot of `key`: creates its semaphore with `limit - 1` free
    /// slots, or takes one of its free slots. Either way its expiry moves
    /// to now + duration. Returns whether a slot was taken. On PostgreSQL
    /// the semaphore row stays locked to the end of the transaction even
    /// when no slot was free, so a holder giving one back meanwhile waits
    /// for this transaction and then sees its blocked row.
    fn semaphore_acquire(&mut self, key: &str, limit: &StoredLimit) -> QueryResult<bool>;

    /// Gives a slot of `key` back, never above `limit`, and moves its
    /// expiry to now + duration. Returns whether the semaphore existed
    /// below its limit.
    fn semaphore_signal(&mut self, key: &str, limit: &StoredLimit) -> QueryResult<bool>;

    /// Inserts ready executions for these jobs.
    fn ready_insert(&mut self, jobs: &[LimitedJob]) -> QueryResult<()>;

    /// Inserts blocked executions for these jobs, each expiring its limit's
    /// duration from now.
    fn blocked_insert(&mut self, jobs: &[LimitedJob]) -> QueryResult<()>;

    /// The next blocked job of `key` (by priority, then id), locked for
    /// this transaction (PostgreSQL skips rows others hold).
    fn blocked_next(&mut self, key: &str) -> QueryResult<Option<LimitedJob>>;

    /// Deletes a blocked execution.
    fn blocked_delete(&mut self, job_id: i64) -> QueryResult<()>;

    /// Ends jobs without running them: finished, kept for their
    /// `keep_result`, with the error that says why.
    fn jobs_discard(&mut self, rows: &[Discarded]) -> QueryResult<()>;

    /// Deletes semaphores whose expiry passed; returns their keys.
    fn semaphores_delete_expired(&mut self) -> QueryResult<Vec<String>>;

    /// Up to `limit` keys of blocked executions whose expiry passed.
    fn blocked_expired_keys(&mut self, limit: usize) -> QueryResult<Vec<String>>;

    /// Creates the rate-limit keys' rows that are missing and locks them
    /// (in key order) to the end of the transaction; returns each key's
    /// last time handed to a job sent back.
    fn rate_keys_lock(&mut self, keys: &[String]) -> QueryResult<Vec<(String, NaiveDateTime)>>;

    /// The database's time now (the statement's, not the transaction's).
    fn rate_clock(&mut self) -> QueryResult<NaiveDateTime>;
}

/// The starts of rate-limited jobs and the jobs sent back: the same
/// statements on every backend, implemented once for every
/// [`Portable`](super::portable::Portable) connection (`rates.rs`).
pub(crate) trait RatesDriver {
    /// Stores the last time handed to a job sent back.
    fn rate_key_set_next(&mut self, key: &str, at: NaiveDateTime) -> QueryResult<()>;

    /// How many starts each of `keys` had after `since` (keys without any
    /// are missing).
    fn rate_starts_counts(
        &mut self,
        keys: &[String],
        since: NaiveDateTime,
    ) -> QueryResult<Vec<(String, i64)>>;

    /// The time of the key's start after `since` that `offset` others
    /// precede.
    fn rate_start_nth(
        &mut self,
        key: &str,
        since: NaiveDateTime,
        offset: i64,
    ) -> QueryResult<NaiveDateTime>;

    /// Deletes the starts of `keys` at or before `since`.
    fn rate_starts_prune(&mut self, keys: &[String], since: NaiveDateTime) -> QueryResult<()>;

    /// Deletes the starts granted to `job_ids` (handed back unstarted).
    fn rate_starts_forget(&mut self, job_ids: &[i64]) -> QueryResult<()>;

    /// Records the starts granted, `(key, job id)`, at `at`.
    fn rate_starts_insert(
        &mut self,
        starts: &[(String, i64)],
        at: NaiveDateTime,
    ) -> QueryResult<()>;

    /// Puts a job whose claim was just deleted back in the scheduled jobs
    /// until `at`; returns its concurrency key.
    fn jobs_defer(&mut self, job_id: i64, at: NaiveDateTime) -> QueryResult<Option<String>>;
}

/// Batches: the same statements on every backend, implemented once for
/// every [`Portable`](super::portable::Portable) connection (`batches.rs`).
pub(crate) trait BatchesDriver {
    /// Inserts an open batch without callbacks; returns its id.
    fn batch_insert(&mut self, batch: &batches::NewBatch) -> QueryResult<i64>;

    /// Stores a batch's callbacks (JSON).
    fn batch_set_callbacks(&mut self, id: i64, callbacks: &str) -> QueryResult<()>;

    /// Adds `delta` to a batch's counts (locking its row to the end of the
    /// transaction); returns the row as changed, `None` if it is gone.
    fn batch_change(
        &mut self,
        id: i64,
        delta: &batches::BatchDelta,
    ) -> QueryResult<Option<batches::BatchRow>>;

    /// A batch row.
    fn batch_get(&mut self, id: i64) -> QueryResult<Option<batches::BatchRow>>;

    /// Closes a batch (no-op if closed); returns its row.
    fn batch_close(&mut self, id: i64) -> QueryResult<Option<batches::BatchRow>>;

    /// Marks a callback fired; returns false if it had fired.
    fn batch_fire(&mut self, id: i64, which: batches::Callback) -> QueryResult<bool>;

    /// Marks a batch finished; returns false if it was.
    fn batch_finish(&mut self, id: i64) -> QueryResult<bool>;

    /// Marks a finished batch unfinished; returns false if it was not
    /// finished.
    fn batch_unfinish(&mut self, id: i64) -> QueryResult<bool>;

    /// `(batch id, job id)` of those of `job_ids` that are batch members.
    fn batch_members(&mut self, job_ids: &[i64]) -> QueryResult<Vec<(i64, i64)>>;

    /// Makes jobs members of `batch` (just inserted, in this transaction).
    fn batch_assign(&mut self, batch: i64, job_ids: &[i64]) -> QueryResult<()>;
}

/// The dependencies between a batch's members: the same statements on
/// every backend, implemented once for every
/// [`Portable`](super::portable::Portable) connection (`dependencies.rs`).
pub(crate) trait DependenciesDriver {
    /// The stored jobs among `ids`, with their batch and how they ended.
    fn dependency_parents(&mut self, ids: &[i64]) -> QueryResult<Vec<dependencies::ParentRow>>;

    /// Inserts the edges `(job, parent)` of members of `batch`, unresolved.
    fn dependencies_insert(&mut self, batch: i64, edges: &[(i64, i64)]) -> QueryResult<()>;

    /// Moves just-inserted jobs from the scheduled ones to the waiting
    /// ones, their own run time written back.
    fn waiting_hold(&mut self, rows: &[dependencies::WaitingRow]) -> QueryResult<()>;

    /// Marks the open edges to `parents` resolved with `outcome`; returns
    /// the dependants of those edges.
    fn dependencies_resolve(&mut self, parents: &[i64], outcome: &str) -> QueryResult<Vec<i64>>;

    /// Every edge of the dependants `jobs`.
    fn dependencies_of(&mut self, jobs: &[i64]) -> QueryResult<Vec<dependencies::Edge>>;

    /// Every edge between members of `batch`.
    fn dependencies_in_batch(&mut self, batch: i64) -> QueryResult<Vec<dependencies::Edge>>;

    /// The waiting rows of those of `ids` that wait.
    fn waiting_get(&mut self, ids: &[i64]) -> QueryResult<Vec<dependencies::WaitingRow>>;

    /// Deletes the waiting rows of `ids`.
    fn waiting_delete(&mut self, ids: &[i64]) -> QueryResult<()>;

    /// `(id, options)` of jobs.
    fn jobs_options(&mut self, ids: &[i64]) -> QueryResult<Vec<(i64, String)>>;

    /// What releasing the dependants `ids` needs of their job rows.
    fn dependants_read(&mut self, ids: &[i64]) -> QueryResult<Vec<dependencies::ReleasedJob>>;

    /// Makes released dependants ready.
    fn dependants_ready(&mut self, jobs: &[dependencies::ReleasedJob]) -> QueryResult<()>;

    /// Schedules released dependants for their run time.
    fn dependants_schedule(&mut self, jobs: &[dependencies::ReleasedJob]) -> QueryResult<()>;
}

/// Recurring tasks and the guards of their ticks.
pub(crate) trait RecurringDriver {
    /// Makes `recurring_tasks` hold exactly `tasks` (inside a transaction).
    fn recurring_tasks_sync(&mut self, tasks: &[RecurringTaskRow]) -> QueryResult<()>;

    /// Inserts the guard of one tick of a recurring task, for job `job_id`
    /// (inserted in this transaction), unless the tick has one; returns the
    /// job's `created_at` (the database's clock) when it was inserted. On
    /// PostgreSQL a racing insert of the same tick waits for the first to
    /// commit or roll back.
    fn recurring_execution_insert(
        &mut self,
        task_key: &str,
        run_at: NaiveDateTime,
        job_id: i64,
    ) -> QueryResult<Option<NaiveDateTime>>;

    /// Operation: deletes up to `limit` tick guards whose tick is more
    /// than `older_than` ago (the database's clock), never a task's
    /// latest; returns how many.
    fn recurring_executions_delete_old(
        &mut self,
        older_than: Duration,
        limit: usize,
    ) -> QueryResult<usize>;
}

/// What operators read and set directly: pauses and the database's clock.
pub(crate) trait AdminDriver {
    /// Operation: pauses (or resumes) a queue; returns whether that
    /// changed anything.
    fn pause_set(&mut self, queue: &str, paused: bool) -> QueryResult<bool>;

    /// The database's clock (the host's for SQLite).
    fn db_now(&mut self) -> QueryResult<NaiveDateTime>;
}

/// The audit log (each backend's `audit.rs`).
pub(crate) trait AuditDriver {
    /// Stores an audit entry, timed by the backend's clock; returns it as
    /// stored. One statement.
    fn audit_insert(&mut self, entry: &NewAudit<'_>) -> QueryResult<AuditRow>;
}

/// Job statistics per minute (each backend's `stats.rs`).
pub(crate) trait StatsDriver {
    /// Adds each row's counts to its row of the job statistics, creating
    /// it when missing; the rows' keys are distinct. Atomic on its own
    /// (one statement on PostgreSQL, a write transaction or savepoint on
    /// SQLite).
    fn job_stats_add(&mut self, rows: &[&StatsDelta]) -> QueryResult<()>;

    /// Operation: adds the statistics rows of minutes older than
    /// `older_than` to the totals rows ([`TOTALS_BUCKET`]) and deletes
    /// them, atomically; returns how many rows it folded.
    fn job_stats_fold(&mut self, older_than: Duration) -> QueryResult<usize>;
}

/// solidq's tables as a whole: their health and their upkeep (each
/// backend's `health.rs`).
pub(crate) trait HealthDriver {
    /// solidq's tables with their rows and sizes, and the backend's own
    /// facts, each read at a cost that does not grow with the tables
    /// (SQLite's table sizes excepted, up to a file size).
    fn database_health(&mut self) -> QueryResult<HealthFacts>;

    /// The oldest transaction another session holds open with a snapshot
    /// or a transaction id (the server keeps every row version deleted
    /// after it began, and claims walk them), and how many wait: one row,
    /// its fields `None` where there is none or the backend keeps no old
    /// versions (SQLite).
    fn horizon(&mut self) -> QueryResult<HorizonFacts>;

    /// Operation: vacuums and analyzes solidq's tables where their
    /// statistics say it is due; returns what it did ("VACUUM table").
    fn tables_tend(&mut self) -> QueryResult<Vec<String>>;
}
