//! The client: connect, migrate, enqueue (single, with options, bulk, or on
//! the caller's own connection inside the caller's transaction), and ask
//! about jobs.

use std::sync::Arc;
use std::time::Duration;

#[cfg(feature = "postgres")]
use diesel::PgConnection;
#[cfg(feature = "sqlite")]
use diesel::SqliteConnection;

use crate::concurrency::{ConcurrencyLimit, check_duration};
use crate::config::{MAX_KIND_LEN, MAX_UNIQUE_KEY_LEN, QueueConfig};
use crate::events::{Events, JobDiscarded, JobEnqueued, default_events};
use crate::job::{EnqueueOptions, Job, JobOptions};
use crate::process::wakeups;
use crate::store::{
    self, AnyConnection, ConnectionCustomizer, Driver, EnqueueStatement, Inserted, NewJob,
    PoolOptions, SqliteSettings, Store, StoredOptions,
};
use crate::types::{
    Backend, DatabaseUrl, Error, JobInfo, Result, StoredLimit, validate_queue_name,
};

/// How often a process waiting for migrations says so again.
pub const SCHEMA_WAIT_SAY_EVERY: std::time::Duration = std::time::Duration::from_secs(30);
/// How often it looks.
const SCHEMA_WAIT_POLL: std::time::Duration = std::time::Duration::from_millis(500);

/// A handle on a solidq database: cheap to clone, safe to share between
/// threads. Everything a producer needs.
#[derive(Clone)]
pub struct Queue {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    config: QueueConfig,
    events: Arc<dyn Events>,
}

impl Queue {
    /// Connects with the default [`QueueConfig`]. `url` is `postgres://…`,
    /// `sqlite://path` or a file path (see [`DatabaseUrl`]). Fails at once if
    /// the database cannot be reached. Does not migrate: call
    /// [`Queue::migrate`] or run `solidq migrate`.
    pub fn connect(url: &str) -> Result<Queue> {
        Queue::connect_with(url, QueueConfig::default())
    }

    /// Connects with `config`.
    pub fn connect_with(url: &str, config: QueueConfig) -> Result<Queue> {
        config.validate()?;
        let url = DatabaseUrl::parse(url)?;
        let store = Store::connect(
            &url,
            &PoolOptions {
                size: config.pool_size,
                timeout: config.pool_timeout,
                sqlite: SqliteSettings {
                    busy_timeout: config.sqlite_busy_timeout,
                    synchronous: config.sqlite_synchronous,
                },
            },
        )?;
        Ok(Queue {
            inner: Arc::new(Inner {
                store,
                config,
                events: default_events(),
            }),
        })
    }

    /// This queue with `events` as its hooks (see [`crate::events`]): they
    /// hear of every job it enqueues, and the [`Worker`](crate::Worker),
    /// [`Dispatcher`](crate::Dispatcher) and [`Scheduler`](crate::Scheduler)
    /// built from it use them unless given their own. Defaults to
    /// [`LogEvents`](crate::LogEvents). The returned queue shares the
    /// connection pool; clones made before keep their hooks.
    ///
    /// ```no_run
    /// use solidq::events::{Events, JobEnqueued};
    /// use std::sync::atomic::{AtomicU64, Ordering};
    ///
    /// #[derive(Default)]
    /// struct Enqueued(AtomicU64);
    ///
    /// impl Events for Enqueued {
    ///     fn job_enqueued(&self, _: &JobEnqueued) {
    ///         self.0.fetch_add(1, Ordering::Relaxed);
    ///     }
    /// }
    ///
    /// let queue = solidq::Queue::connect("sqlite://jobs.sqlite3")?
    ///     .with_events((solidq::LogEvents, Enqueued::default()));
    /// # Ok::<(), solidq::Error>(())
    /// ```
    pub fn with_events(self, events: impl Events) -> Queue {
        self.with_events_arc(crate::events::guarded(events))
    }

    pub(crate) fn with_events_arc(self, events: Arc<dyn Events>) -> Queue {
        Queue {
            inner: Arc::new(Inner {
                store: self.inner.store.clone(),
                config: self.inner.config.clone(),
                events,
            }),
        }
    }

    /// The hooks of this queue.
    pub(crate) fn events(&self) -> &Arc<dyn Events> {
        &self.inner.events
    }

    /// Creates or updates solidq's tables. Running it again changes nothing;
    /// concurrent runs wait for each other. Returns the versions applied.
    pub fn migrate(&self) -> Result<Vec<String>> {
        self.inner.store.migrate()
    }

    /// Checks that the database has every migration of this build (one
    /// read): [`Error::SchemaBehind`], naming the missing versions, when it
    /// has not been migrated since solidq was upgraded. A database ahead of
    /// this build (a newer one migrated it) is fine: migrations are
    /// additive. Workers, dispatchers and schedulers check at their start;
    /// any operation that meets a missing table or column says the same.
    pub fn check_schema(&self) -> Result<()> {
        self.inner.store.check_schema()
    }

    /// Applies this build's migrations up to and including `version` and no
    /// further: where an older release left the schema (for upgrade tests).
    #[doc(hidden)]
    pub fn migrate_through(&self, version: &str) -> Result<Vec<String>> {
        self.inner.store.migrate_through(version)
    }

    /// Waits until the database has every migration of this build, saying
    /// so when it starts waiting and every [`SCHEMA_WAIT_SAY_EVERY`]; true
    /// once it has them, false if `stop` fired first. Other errors (the
    /// database away) are waited through too.
    pub(crate) fn wait_for_schema(
        &self,
        who: &str,
        stop: &crossbeam_channel::Receiver<()>,
    ) -> bool {
        let mut said: Option<std::time::Instant> = None;
        loop {
            match self.check_schema() {
                Ok(()) => {
                    if said.is_some() {
                        log::info!("{who}: the database has every migration now; starting");
                    }
                    return true;
                }
                Err(error) => {
                    if said.is_none_or(|at| at.elapsed() >= SCHEMA_WAIT_SAY_EVERY) {
                        log::warn!("{who} waits for migrations (wait_for_migrations): {error}");
                        said = Some(std::time::Instant::now());
                    }
                }
            }
            if stop.recv_timeout(SCHEMA_WAIT_POLL).is_ok() {
                return false;
            }
        }
    }

    /// The database's backend.
    pub fn backend(&self) -> Backend {
        self.inner.store.backend()
    }

    /// The database URL (its `Display` hides the password).
    pub fn url(&self) -> &DatabaseUrl {
        self.inner.store.url()
    }

    /// The configuration this queue was connected with.
    pub fn config(&self) -> &QueueConfig {
        &self.inner.config
    }

    /// The connection pool's size.
    pub fn pool_size(&self) -> u32 {
        self.inner.config.pool_size
    }

    /// The largest JSON text of a job's arguments (or result) this queue
    /// takes, in bytes: [`QueueConfig::max_payload_bytes`], or on MySQL
    /// less when the server's `max_allowed_packet` (read at connect, less
    /// 64 KiB for the rest of the statement) is smaller.
    pub fn max_payload_bytes(&self) -> usize {
        self.payload_limit().bytes
    }

    /// [`Queue::max_payload_bytes`] with where it comes from.
    pub(crate) fn payload_limit(&self) -> PayloadLimit {
        let configured = self.inner.config.max_payload_bytes;
        match self.inner.store.max_packet() {
            Some(packet) if packet.saturating_sub(PACKET_MARGIN) < configured => PayloadLimit {
                bytes: packet.saturating_sub(PACKET_MARGIN),
                setting: format!(
                    "the MySQL server's max_allowed_packet of {packet} bytes, less 64 KiB for \
                     the rest of the statement: raise max_allowed_packet on the server, or \
                     keep the job's data elsewhere"
                ),
            },
            _ => PayloadLimit {
                bytes: configured,
                setting: "max_payload_bytes: QueueConfig, SOLIDQ_MAX_PAYLOAD_BYTES, solidq.toml"
                    .into(),
            },
        }
    }

    pub(crate) fn store(&self) -> &Store {
        &self.inner.store
    }

    /// Enqueues `job` with its type's default options; returns its id.
    pub fn enqueue<J: Job>(&self, job: &J) -> Result<i64> {
        self.enqueue_with(job, EnqueueOptions::new())
    }

    /// Enqueues `job` with `options` overriding its type's defaults. A
    /// `unique_key` already held by another job gives [`Error::Duplicate`]
    /// with that job's id.
    pub fn enqueue_with<J: Job>(&self, job: &J, options: EnqueueOptions) -> Result<i64> {
        let new = self.build(&JobRequest::new(job, options)?)?;
        let inserted = self.inner.store.jobs_enqueue(std::slice::from_ref(&new))?;
        self.after_enqueue(std::slice::from_ref(&new), &inserted);
        single(&new, inserted.outcome)
    }

    /// Enqueues every job of `jobs` in one transaction with multi-row
    /// inserts; returns their ids in order. All or nothing: if the
    /// transaction fails, nothing is enqueued.
    pub fn enqueue_all<J: Job>(&self, jobs: &[J]) -> Result<Vec<i64>> {
        let requests = jobs
            .iter()
            .map(|job| JobRequest::new(job, EnqueueOptions::new()))
            .collect::<Result<Vec<_>>>()?;
        self.enqueue_all_with(&requests)
    }

    /// Enqueues jobs of any types, each with its own options (unique keys
    /// included), in one transaction, all or nothing; returns their ids in
    /// order. If any `unique_key` is taken, nothing is enqueued and
    /// [`Error::Duplicate`] names the first taken key and its holder.
    /// ([`Queue::enqueue_batch`] enqueues the others instead.)
    pub fn enqueue_all_with(&self, requests: &[JobRequest]) -> Result<Vec<i64>> {
        let new = requests
            .iter()
            .map(|r| self.build(r))
            .collect::<Result<Vec<_>>>()?;
        let inserted = self.inner.store.jobs_enqueue_all(&new)?;
        self.inner.store.notify_ready(&new);
        self.after_enqueue(&new, &inserted);
        Ok(inserted
            .outcome
            .into_iter()
            .map(|o| o.unwrap_or_default())
            .collect())
    }

    /// Enqueues `job` unless a job holds its `unique_key` already, and
    /// returns that job's id instead of an error: for idempotent producers
    /// that may send the same work twice.
    pub fn enqueue_or_existing<J: Job>(
        &self,
        job: &J,
        options: EnqueueOptions,
    ) -> Result<Enqueued> {
        match self.enqueue_with(job, options) {
            Ok(id) => Ok(Enqueued::New(id)),
            Err(Error::Duplicate { existing_id, .. }) => Ok(Enqueued::Existing(existing_id)),
            Err(error) => Err(error),
        }
    }

    /// Enqueues jobs of any types, each with its own options, in one
    /// transaction. A job whose `unique_key` is taken is not inserted; its
    /// entry reports the holder ([`Enqueued::Existing`]) and the others are
    /// enqueued.
    pub fn enqueue_batch(&self, requests: &[JobRequest]) -> Result<Vec<Enqueued>> {
        let new = requests
            .iter()
            .map(|r| self.build(r))
            .collect::<Result<Vec<_>>>()?;
        let inserted = self.inner.store.jobs_enqueue(&new)?;
        self.after_enqueue(&new, &inserted);
        Ok(inserted
            .outcome
            .into_iter()
            .map(|o| match o {
                Ok(id) => Enqueued::New(id),
                Err(existing) => Enqueued::Existing(existing),
            })
            .collect())
    }

    /// Enqueues `job` on `conn`, the caller's own diesel connection to the
    /// same database, so it commits or rolls back with the caller's
    /// transaction: a rollback leaves no job. The queue's
    /// [`Events::job_enqueued`] fires when solidq's statements ran, before
    /// the caller's transaction commits or rolls back.
    ///
    /// Open `conn` with [`Queue::open_connection`] (or set up your pool
    /// with [`Queue::connection_customizer`]): on SQLite a connection of
    /// your own otherwise has no busy timeout and fails with `database is
    /// locked` whenever a worker holds the write lock. On SQLite, write in
    /// `immediate_transaction` ([`AnyConnection::write_transaction`] on an
    /// `AnyConnection`), not `transaction`: see the README's SQLite section.
    ///
    /// On MySQL and MariaDB, keep DDL (`CREATE`, `ALTER`, `DROP`,
    /// `TRUNCATE`, …) out of a transaction that enqueues: the server
    /// commits the transaction implicitly before such a statement, so what
    /// came before it is committed whatever happens next, the savepoint
    /// `enqueue_on` takes no longer belongs to a transaction, and a later
    /// rollback leaves the job in place. Run schema changes first, in
    /// their own statements.
    ///
    /// To abandon the caller's transaction from inside its closure with a
    /// message of your own, return [`Error::rollback`].
    ///
    /// ```no_run
    /// # use diesel::{Connection, SqliteConnection};
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Serialize, Deserialize)] struct ShipOrder { id: i64 }
    /// # impl solidq::Job for ShipOrder { const KIND: &'static str = "ship";
    /// #   fn perform(&self, _: &solidq::JobContext) -> solidq::JobResult { Ok(serde_json::Value::Null) } }
    /// let queue = solidq::Queue::connect("sqlite://app.sqlite3")?;
    /// let mut conn: SqliteConnection = queue.open_connection()?;
    /// conn.immediate_transaction::<_, solidq::Error, _>(|conn| {
    ///     // insert the order with diesel, then:
    ///     queue.enqueue_on(conn, &ShipOrder { id: 7 })?;
    ///     Ok(())
    /// })?;
    /// # Ok::<(), solidq::Error>(())
    /// ```
    pub fn enqueue_on<C: EnqueueConnection, J: Job>(&self, conn: &mut C, job: &J) -> Result<i64> {
        self.enqueue_on_with(conn, job, EnqueueOptions::new())
    }

    /// [`Queue::enqueue_on`] with options.
    pub fn enqueue_on_with<C: EnqueueConnection, J: Job>(
        &self,
        conn: &mut C,
        job: &J,
        options: EnqueueOptions,
    ) -> Result<i64> {
        let new = self.build(&JobRequest::new(job, options)?)?;
        let inserted =
            Store::jobs_enqueue_on(conn.solidq_driver().0, std::slice::from_ref(&new), true)
                .map_err(Error::db("jobs_enqueue"))?;
        // The caller's transaction may still roll back; a worker woken early
        // finds nothing and goes back to sleep, and the hooks were told of
        // a job that never was (documented above).
        self.after_enqueue(std::slice::from_ref(&new), &inserted);
        single(&new, inserted.outcome)
    }

    /// The SQL that enqueues `job` (with `options`) on a connection solidq
    /// does not own, for a caller whose transaction runs on another driver
    /// (sqlx, tokio-postgres, rusqlite…): run the statements, in order, in
    /// your transaction, and the job exists exactly when it commits (see
    /// [`EnqueueStatement`] for what each backend's statements return). The
    /// database, its tables and their migration must be this queue's.
    ///
    /// Nothing is sent to the database here, and solidq never learns
    /// whether the statements ran: [`Events::job_enqueued`] does not fire,
    /// and the workers of this process hear of the job as of any other
    /// process's (PostgreSQL: notified at your commit; SQLite: they see the
    /// file change). A taken `unique_key` inserts nothing (no row comes
    /// back) without aborting your transaction. Jobs under a concurrency
    /// limit are refused with [`Error::InvalidOption`]: placing them takes
    /// decisions solidq makes inside the transaction, so enqueue those with
    /// [`Queue::enqueue_on`] or after your commit.
    ///
    /// ```no_run
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Serialize, Deserialize)] struct ShipOrder { id: i64 }
    /// # impl solidq::Job for ShipOrder { const KIND: &'static str = "ship";
    /// #   fn perform(&self, _: &solidq::JobContext) -> solidq::JobResult { Ok(serde_json::Value::Null) } }
    /// use solidq::{EnqueueOptions, SqlValue};
    /// let queue = solidq::Queue::connect("postgres://localhost/app")?;
    /// let enqueue = queue.enqueue_statement(&ShipOrder { id: 7 }, EnqueueOptions::new())?;
    /// for statement in &enqueue.statements {
    ///     // your_tx.execute(&statement.sql, bind(&statement.params))
    ///     for value in &statement.params {
    ///         match value {
    ///             SqlValue::Integer(v) => { /* bind v: Option<i32> */ }
    ///             SqlValue::BigInt(v) => { /* Option<i64> */ }
    ///             SqlValue::Text(v) => { /* Option<String> */ }
    ///             SqlValue::Timestamp(v) => { /* Option<chrono::NaiveDateTime> */ }
    ///             _ => unreachable!("SqlValue is non_exhaustive"),
    ///         }
    ///     }
    /// }
    /// # Ok::<(), solidq::Error>(())
    /// ```
    pub fn enqueue_statement<J: Job>(
        &self,
        job: &J,
        options: EnqueueOptions,
    ) -> Result<EnqueueStatement> {
        let new = self.build(&JobRequest::new(job, options)?)?;
        if let Some(key) = new.concurrency_key {
            return Err(Error::InvalidOption {
                option: "concurrency limit",
                value: key,
                reason: "a job under a concurrency limit cannot be enqueued by statement \
                         (its slot is decided inside solidq's transaction): use enqueue_on, \
                         or enqueue after your commit"
                    .into(),
            });
        }
        Ok(self.inner.store.enqueue_statement(&new))
    }

    /// Opens a new connection to this queue's database for your own
    /// queries and transactions (and [`Queue::enqueue_on`]), set up exactly
    /// as solidq's own: on SQLite WAL, `synchronous` from
    /// [`QueueConfig::sqlite_synchronous`], `foreign_keys` on, an in-memory
    /// temp store, and a busy timeout of [`QueueConfig::sqlite_busy_timeout`]
    /// (a statement waits that long for the write lock, where a plain
    /// `SqliteConnection::establish` fails at once with `database is
    /// locked` while a worker writes); on PostgreSQL a plain connection.
    /// Its statements are not counted by [`crate::events::statements_executed`].
    ///
    /// Ask for the type your code uses: [`SqliteConnection`] or
    /// [`PgConnection`] (the one the URL names, else
    /// [`Error::InvalidOption`]), or [`AnyConnection`] for either.
    ///
    /// solidq's pool does not lend its connections: they fail a busy lock at
    /// once and the store retries the whole operation, which it cannot do
    /// for your transaction, and the pool is sized for the worker's loops.
    /// For a pool of your own, see [`Queue::connection_customizer`].
    ///
    /// ```no_run
    /// use diesel::{Connection, SqliteConnection};
    /// let queue = solidq::Queue::connect("sqlite://app.sqlite3")?;
    /// let mut conn: SqliteConnection = queue.open_connection()?;
    /// let any = queue.open_connection::<solidq::AnyConnection>()?;
    /// # Ok::<(), solidq::Error>(())
    /// ```
    pub fn open_connection<C: EnqueueConnection>(&self) -> Result<C> {
        let conn = self.inner.store.caller_connection()?;
        C::solidq_from_any(conn).map_err(|conn| Error::InvalidOption {
            option: "connection type",
            value: C::SOLIDQ_NAME.to_string(),
            reason: format!(
                "the queue's database {} is {}: ask for a {} or an AnyConnection",
                self.url(),
                self.backend(),
                match conn {
                    #[cfg(feature = "postgres")]
                    AnyConnection::Postgres(_) => "PgConnection",
                    #[cfg(feature = "sqlite")]
                    AnyConnection::Sqlite(_) => "SqliteConnection",
                    #[cfg(feature = "mysql")]
                    AnyConnection::Mysql(_) => "MysqlConnection",
                }
            ),
        })
    }

    /// An r2d2 connection customizer that sets up the connections of your
    /// own diesel pool as [`Queue::open_connection`] does (see
    /// [`ConnectionCustomizer`]).
    pub fn connection_customizer(&self) -> ConnectionCustomizer {
        self.inner.store.caller_customizer()
    }

    /// Everything known about job `id`.
    pub fn job(&self, id: i64) -> Result<JobInfo> {
        self.inner.store.job_info(store::JobLookup::Id(id))
    }

    /// Everything known about the job holding `unique_key`.
    pub fn job_by_unique_key(&self, unique_key: &str) -> Result<JobInfo> {
        self.inner
            .store
            .job_info(store::JobLookup::UniqueKey(unique_key))
    }

    /// Checks `request` the way [`Queue::enqueue_all_with`] does,
    /// writing nothing: every option resolved over the type's defaults
    /// over the queue's config, each value checked, the same error for the
    /// same bad value (what the HTTP API answers before it writes).
    pub fn check_request(&self, request: &JobRequest) -> Result<()> {
        self.build(request).map(|_| ())
    }

    /// Resolves a request's options over its type's defaults over the
    /// queue's config, checking each value.
    pub(crate) fn build(&self, request: &JobRequest) -> Result<NewJob> {
        if let Some(parent) = request.after.first() {
            return Err(Error::Dependency {
                job: request.kind.to_string(),
                reason: format!(
                    "waits for {parent:?}: dependencies are between members of a batch (Queue::batch, Queue::add_to_batch)"
                ),
            });
        }
        if let Some(parent) = request.after_jobs.first() {
            return Err(Error::Dependency {
                job: request.kind.to_string(),
                reason: format!(
                    "waits for job {parent}: dependencies are between members of a batch (Queue::batch, Queue::add_to_batch)"
                ),
            });
        }
        self.build_member(request)
    }

    /// [`Queue::build`] for a member of a batch, which may wait for others.
    pub(crate) fn build_member(&self, request: &JobRequest) -> Result<NewJob> {
        let config = &self.inner.config;
        check_kind(&request.kind)?;
        self.payload_limit()
            .check("arguments", &request.kind, request.arguments.len())?;
        let defaults = &request.defaults;
        let options = &request.options;
        let o = &options.job;
        let queue = o
            .queue
            .clone()
            .or_else(|| defaults.queue.clone())
            .unwrap_or_else(|| config.default_queue.clone());
        validate_queue_name(&queue)?;
        let max_attempts = o
            .max_attempts
            .or(defaults.max_attempts)
            .unwrap_or(config.max_attempts);
        let max_attempts = crate::job::check_max_attempts(max_attempts)?;
        let max_stalled_count = o
            .max_stalled_count
            .or(defaults.max_stalled_count)
            .map(|n| i32::try_from(n).unwrap_or(i32::MAX));
        let keep_result = o
            .keep_result
            .or(defaults.keep_result)
            .unwrap_or(config.keep_result);
        check_duration("keep_result", keep_result)?;
        let timeout = o.timeout.or(defaults.timeout).or(config.timeout);
        if let Some(timeout) = timeout {
            crate::job::check_timeout(timeout)?;
        }
        if let Some(delay) = options.delay {
            check_duration("delay", delay)?;
        }
        if let Some(key) = &options.unique_key {
            check_key("unique_key", key)?;
        }
        if let Some(key) = &request.fairness_key {
            check_key("fairness_key", key)?;
        }
        let concurrency = match o.concurrency.as_ref().or(defaults.concurrency.as_ref()) {
            Some(limit) => Some(check_limit(limit, request.concurrency_key.as_deref())?),
            None => None,
        };
        let rate = match (&defaults.rate_limit, &request.rate_key) {
            (Some(limit), Some(key)) => Some(check_rate(limit, key)?),
            _ => None,
        };
        let stored = StoredOptions {
            timeout_ms: timeout.map(|t| t.as_millis() as u64),
            keep_result_ms: keep_result.as_millis() as u64,
            backoff: o.backoff.or(defaults.backoff).unwrap_or(config.backoff),
            concurrency,
            max_snoozes: o.max_snoozes.or(defaults.max_snoozes),
            rate,
        };
        Ok(NewJob {
            queue_name: queue,
            kind: request.kind.to_string(),
            arguments: request.arguments.clone(),
            priority: o.priority.or(defaults.priority).unwrap_or(0),
            unique_key: options.unique_key.clone(),
            concurrency_key: concurrency.and(request.concurrency_key.clone()),
            fairness_key: request.fairness_key.clone(),
            options: serde_json::to_string(&stored).expect("options serialize"),
            delivery: o.delivery.or(defaults.delivery).unwrap_or(config.delivery),
            max_attempts,
            max_stalled_count,
            run_at: options.run_at.map(|t| t.naive_utc()),
            delay: options.delay.unwrap_or(Duration::ZERO),
        })
    }

    /// Wakes this process's workers and tells the hooks.
    pub(crate) fn after_enqueue(&self, jobs: &[NewJob], inserted: &Inserted) {
        if jobs.iter().any(|j| j.run_at.is_none() && j.delay.is_zero()) {
            wakeups::wake(self.inner.store.url().expose());
        }
        report_enqueued(self.inner.events.as_ref(), jobs, inserted);
    }
}

/// Tells `events` of each new job of `jobs` (not of duplicates), then of
/// those discarded on the way in.
fn report_enqueued(events: &dyn Events, jobs: &[NewJob], inserted: &Inserted) {
    let now = chrono::Utc::now();
    for (job, outcome) in jobs.iter().zip(&inserted.outcome) {
        if let Ok(id) = outcome {
            events.job_enqueued(&JobEnqueued::of(job, *id, now));
        }
    }
    for job in &inserted.discarded {
        events.job_discarded(&JobDiscarded::of(job));
    }
}

/// One job to enqueue in a [`Queue::enqueue_batch`]: its kind, its
/// arguments (serialized now) and its options.
#[derive(Debug, Clone)]
pub struct JobRequest {
    kind: std::borrow::Cow<'static, str>,
    arguments: String,
    defaults: JobOptions,
    options: EnqueueOptions,
    /// `group/key` when the type has a concurrency limit.
    concurrency_key: Option<String>,
    /// `group/key` when the type has a rate limit.
    rate_key: Option<String>,
    /// Its tenant for fair share: the options' key, else the job's.
    fairness_key: Option<String>,
    /// Its name among the jobs of one batch call (see `crate::workflow`).
    pub(crate) name: Option<String>,
    /// Names of the jobs of the same call it waits for.
    pub(crate) after: Vec<String>,
    /// Ids of stored members of its batch it waits for.
    pub(crate) after_jobs: Vec<i64>,
    /// Whether it runs once its parents ended, however.
    pub(crate) run_anyway: bool,
}

impl JobRequest {
    /// A request for `job` with `options` over its type's defaults. Fails
    /// if the arguments do not serialize.
    pub fn new<J: Job>(job: &J, options: EnqueueOptions) -> Result<JobRequest> {
        let arguments = serde_json::to_string(job).map_err(|source| Error::SerializeArguments {
            kind: J::KIND.to_string(),
            source,
        })?;
        let defaults = J::options();
        let concurrency_key = options
            .job
            .concurrency
            .as_ref()
            .or(defaults.concurrency.as_ref())
            .map(|limit| limit.full_key(J::KIND, job.concurrency_key()));
        let rate_key = defaults
            .rate_limit
            .as_ref()
            .map(|limit| limit.full_key(J::KIND, job.rate_key()));
        let fairness_key = options.fairness_key.clone().or_else(|| job.fairness_key());
        Ok(JobRequest {
            kind: J::KIND.into(),
            arguments,
            defaults,
            options,
            concurrency_key,
            rate_key,
            fairness_key,
            name: None,
            after: Vec::new(),
            after_jobs: Vec::new(),
            run_anyway: false,
        })
    }

    /// Names the job among the jobs of one [`Queue::batch`] or
    /// [`Queue::add_to_batch`] call, for [`JobRequest::after`] (see
    /// [`crate::workflow`]). Names are not stored.
    pub fn named(mut self, name: impl Into<String>) -> JobRequest {
        self.name = Some(name.into());
        self
    }

    /// Makes the job wait for the job named `name` in the same batch call:
    /// it becomes ready when that one succeeded (see [`crate::workflow`]).
    /// May be given several times.
    pub fn after(mut self, name: impl Into<String>) -> JobRequest {
        self.after.push(name.into());
        self
    }

    /// Makes the job wait for the stored job `id`, a member of the batch it
    /// is added to ([`Queue::add_to_batch`]).
    pub fn after_job(mut self, id: i64) -> JobRequest {
        self.after_jobs.push(id);
        self
    }

    /// Runs the job once its parents ended, however they ended, instead of
    /// cancelling it when one fails.
    pub fn even_if_parents_fail(mut self) -> JobRequest {
        self.run_anyway = true;
        self
    }
}

impl JobRequest {
    /// A request for a job known only by its kind and JSON arguments (a
    /// recurring task from a configuration file, the HTTP API): no type's
    /// defaults, no concurrency limit.
    pub fn untyped(
        kind: String,
        arguments: &serde_json::Value,
        options: EnqueueOptions,
    ) -> JobRequest {
        let fairness_key = options.fairness_key.clone();
        JobRequest {
            kind: kind.into(),
            arguments: arguments.to_string(),
            defaults: JobOptions::default(),
            options,
            concurrency_key: None,
            rate_key: None,
            fairness_key,
            name: None,
            after: Vec::new(),
            after_jobs: Vec::new(),
            run_anyway: false,
        }
    }

    /// The job's kind.
    pub fn kind(&self) -> &str {
        &self.kind
    }
}

/// What an idempotent enqueue did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enqueued {
    /// A new job, with its id.
    New(i64),
    /// The unique key was taken: the id of the job holding it.
    Existing(i64),
}

impl Enqueued {
    /// The job's id, new or existing.
    pub fn id(self) -> i64 {
        match self {
            Enqueued::New(id) | Enqueued::Existing(id) => id,
        }
    }

    /// Whether a new job was enqueued.
    pub fn is_new(self) -> bool {
        matches!(self, Enqueued::New(_))
    }
}

/// MySQL: room kept in a packet for the rest of a statement that carries
/// arguments or a result (its other columns, the protocol's framing).
const PACKET_MARGIN: usize = 64 * 1024;

/// The most bytes of JSON a job's arguments or result may take, and where
/// that limit comes from (for the error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PayloadLimit {
    pub bytes: usize,
    pub setting: String,
}

impl Default for PayloadLimit {
    fn default() -> Self {
        PayloadLimit {
            bytes: crate::config::DEFAULT_MAX_PAYLOAD_BYTES,
            setting: "max_payload_bytes".into(),
        }
    }
}

impl PayloadLimit {
    /// [`Error::TooLarge`] when `bytes` of `what` are over the limit.
    pub(crate) fn check(&self, what: &'static str, kind: &str, bytes: usize) -> Result<()> {
        if bytes > self.bytes {
            return Err(Error::TooLarge {
                what,
                kind: kind.to_string(),
                bytes,
                limit: self.bytes,
                setting: self.setting.clone(),
            });
        }
        Ok(())
    }
}

/// Checks a rate limit and its job's key; returns what is stored.
fn check_rate(
    limit: &crate::concurrency::RateLimit,
    key: &str,
) -> Result<crate::types::StoredRate> {
    limit.validate()?;
    if key.is_empty() || key.len() > MAX_UNIQUE_KEY_LEN {
        return Err(Error::InvalidOption {
            option: "rate_key",
            value: key.to_string(),
            reason: format!("must be 1 to {MAX_UNIQUE_KEY_LEN} bytes, group included"),
        });
    }
    check_no_nul("rate_key", key)?;
    Ok(crate::types::StoredRate {
        key: key.to_string(),
        limit: limit.limit,
        period_ms: limit.period.as_millis() as u64,
    })
}

/// Checks a concurrency limit and its job's key; returns what is stored.
fn check_limit(limit: &ConcurrencyLimit, key: Option<&str>) -> Result<StoredLimit> {
    limit.validate()?;
    if let Some(key) = key {
        if key.is_empty() || key.len() > MAX_UNIQUE_KEY_LEN {
            return Err(Error::InvalidOption {
                option: "concurrency_key",
                value: key.to_string(),
                reason: format!("must be 1 to {MAX_UNIQUE_KEY_LEN} bytes, group included"),
            });
        }
        check_no_nul("concurrency_key", key)?;
    }
    Ok(StoredLimit {
        limit: limit.limit,
        duration_ms: limit.duration.as_millis() as u64,
        on_conflict: limit.on_conflict,
    })
}

/// A job's kind: 1 to [`MAX_KIND_LEN`] bytes, no control characters (a
/// NUL cannot be stored at all on PostgreSQL).
pub(crate) fn check_kind(kind: &str) -> Result<()> {
    if kind.trim().is_empty() || kind.len() > MAX_KIND_LEN || kind.chars().any(char::is_control) {
        return Err(Error::InvalidOption {
            option: "kind",
            value: kind.to_string(),
            reason: format!("must be 1 to {MAX_KIND_LEN} bytes, without control characters"),
        });
    }
    Ok(())
}

/// A key stored in an indexed column: 1 to 255 bytes, no NUL.
fn check_key(option: &'static str, key: &str) -> Result<()> {
    if key.is_empty() || key.len() > MAX_UNIQUE_KEY_LEN {
        return Err(Error::InvalidOption {
            option,
            value: key.to_string(),
            reason: format!("must be 1 to {MAX_UNIQUE_KEY_LEN} bytes"),
        });
    }
    check_no_nul(option, key)
}

/// Text stored as is (a key) cannot hold NUL: PostgreSQL refuses it.
pub(crate) fn check_no_nul(option: &'static str, value: &str) -> Result<()> {
    if value.contains('\0') {
        return Err(Error::InvalidOption {
            option,
            value: value.to_string(),
            reason: "contains a NUL character, which the database cannot store".into(),
        });
    }
    Ok(())
}

fn single(job: &NewJob, mut outcome: Vec<std::result::Result<i64, i64>>) -> Result<i64> {
    match outcome.pop() {
        Some(Ok(id)) => Ok(id),
        Some(Err(existing_id)) => Err(Error::Duplicate {
            unique_key: job.unique_key.clone().unwrap_or_default(),
            existing_id,
        }),
        None => unreachable!("one job in, one outcome out"),
    }
}

mod sealed {
    pub trait Sealed {}
    #[cfg(feature = "postgres")]
    impl Sealed for diesel::PgConnection {}
    #[cfg(feature = "sqlite")]
    impl Sealed for diesel::SqliteConnection {}
    #[cfg(feature = "mysql")]
    impl Sealed for diesel::MysqlConnection {}
    impl Sealed for crate::store::AnyConnection {}
}

/// A diesel connection solidq can enqueue on, and open for you
/// ([`Queue::open_connection`]): [`PgConnection`], [`SqliteConnection`],
/// `MysqlConnection` (with the `mysql` feature) or solidq's own
/// [`AnyConnection`]. Pooled connections deref to these
/// (`&mut *pooled`).
pub trait EnqueueConnection: sealed::Sealed {
    #[doc(hidden)]
    const SOLIDQ_NAME: &'static str;

    #[doc(hidden)]
    fn solidq_driver(&mut self) -> DriverRef<'_>;

    /// The connection inside `conn` when it is of this type.
    #[doc(hidden)]
    fn solidq_from_any(conn: AnyConnection) -> std::result::Result<Self, AnyConnection>
    where
        Self: Sized;
}

/// Internal: the store's view of a caller's connection.
#[doc(hidden)]
pub struct DriverRef<'a>(pub(crate) &'a mut dyn Driver);

#[cfg(feature = "postgres")]
impl EnqueueConnection for PgConnection {
    const SOLIDQ_NAME: &'static str = "PgConnection";

    fn solidq_driver(&mut self) -> DriverRef<'_> {
        DriverRef(self)
    }

    fn solidq_from_any(conn: AnyConnection) -> std::result::Result<Self, AnyConnection> {
        match conn {
            AnyConnection::Postgres(conn) => Ok(conn),
            #[allow(unreachable_patterns)]
            other => Err(other),
        }
    }
}

#[cfg(feature = "sqlite")]
impl EnqueueConnection for SqliteConnection {
    const SOLIDQ_NAME: &'static str = "SqliteConnection";

    fn solidq_driver(&mut self) -> DriverRef<'_> {
        DriverRef(self)
    }

    fn solidq_from_any(conn: AnyConnection) -> std::result::Result<Self, AnyConnection> {
        match conn {
            AnyConnection::Sqlite(conn) => Ok(conn),
            #[allow(unreachable_patterns)]
            other => Err(other),
        }
    }
}

#[cfg(feature = "mysql")]
impl EnqueueConnection for diesel::MysqlConnection {
    const SOLIDQ_NAME: &'static str = "MysqlConnection";

    fn solidq_driver(&mut self) -> DriverRef<'_> {
        DriverRef(self)
    }

    fn solidq_from_any(conn: AnyConnection) -> std::result::Result<Self, AnyConnection> {
        match conn {
            AnyConnection::Mysql(conn) => Ok(conn),
            #[allow(unreachable_patterns)]
            other => Err(other),
        }
    }
}

impl EnqueueConnection for AnyConnection {
    const SOLIDQ_NAME: &'static str = "AnyConnection";

    fn solidq_driver(&mut self) -> DriverRef<'_> {
        DriverRef(store::driver(self))
    }

    fn solidq_from_any(conn: AnyConnection) -> std::result::Result<Self, AnyConnection> {
        Ok(conn)
    }
}
