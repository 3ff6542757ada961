//! What a running job sees: [`JobContext`] — its identity, attempt,
//! deadline, whether it should stop, and the worker's shared state.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use super::JobError;
use super::state::StateMap;
use super::steps::StepBook;

/// What a running job can see about itself, and how it learns it should stop.
///
/// [`Job::perform`](crate::Job::perform) gets one for each attempt:
///
/// | method | what |
/// | --- | --- |
/// | [`job_id`](JobContext::job_id), [`kind`](JobContext::kind), [`queue`](JobContext::queue), [`batch_id`](JobContext::batch_id), [`enqueued_at`](JobContext::enqueued_at) | which job this is |
/// | [`attempt`](JobContext::attempt), [`max_attempts`](JobContext::max_attempts), [`stalled_count`](JobContext::stalled_count), [`snoozes`](JobContext::snoozes) | how it got here (the first attempt is 1) |
/// | [`deadline`](JobContext::deadline), [`is_cancelled`](JobContext::is_cancelled), [`is_cancelled_by_operator`](JobContext::is_cancelled_by_operator) | when to stop: its timeout, the worker's shutdown, an operator's cancel |
/// | [`state`](JobContext::state) | a value the worker was given with [`Worker::state`](crate::Worker::state), by type |
/// | [`set_progress`](JobContext::set_progress) | a JSON progress value, cheap to set in a loop |
/// | [`step`](JobContext::step), [`finished_steps`](JobContext::finished_steps) | resumable steps with a cursor (the guide's [steps](crate::guide::steps)) |
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use solidq::{Job, JobContext, JobError, JobResult};
///
/// struct Mailer { from: String }
///
/// #[derive(Serialize, Deserialize)]
/// struct SendNewsletter { recipients: Vec<String> }
///
/// impl Job for SendNewsletter {
///     const KIND: &'static str = "send_newsletter";
///     fn perform(&self, ctx: &JobContext) -> JobResult {
///         let mailer = ctx.state::<Mailer>()?; // given with Worker::state(Mailer { … })
///         for (done, to) in self.recipients.iter().enumerate() {
///             if ctx.is_cancelled() {
///                 // shutdown, timeout or an operator: hand it back, no attempt spent
///                 return Err(JobError::interrupted());
///             }
///             println!("{} → {to} (attempt {})", mailer.from, ctx.attempt());
///             ctx.set_progress(serde_json::json!({ "done": done + 1, "total": self.recipients.len() }));
///         }
///         Ok(serde_json::json!({ "sent": self.recipients.len(), "job": ctx.job_id() }))
///     }
/// }
/// ```
#[derive(Debug, Clone)]
pub struct JobContext {
    pub(crate) id: i64,
    pub(crate) kind: String,
    pub(crate) queue: String,
    pub(crate) attempt: u32,
    pub(crate) max_attempts: u32,
    pub(crate) stalled_count: u32,
    pub(crate) snoozes: u32,
    pub(crate) enqueued_at: DateTime<Utc>,
    pub(crate) deadline: Option<Instant>,
    pub(crate) shutdown: Arc<ShutdownSignal>,
    pub(crate) state: StateMap,
    pub(crate) progress: Option<Arc<ProgressCell>>,
    /// Its resumable steps so far (see [`JobContext::step`]).
    pub(crate) steps: Arc<StepBook>,
    /// The batch it is a member of.
    pub(crate) batch_id: Option<i64>,
    /// Set when an operator asks this running job to stop.
    pub(crate) cancel: Arc<AtomicBool>,
    /// Commits the job's writes with its completion
    /// ([`JobContext::complete_in_transaction`]): the worker's
    /// `Finisher`, which knows the job's claim and the store (a layer
    /// above this one); `None` outside a worker.
    pub(crate) finish: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

impl JobContext {
    /// The job's id.
    pub fn job_id(&self) -> i64 {
        self.id
    }

    /// The batch this job is a member of (see [`crate::batch`]): a running
    /// member may add jobs to it with
    /// [`Queue::add_to_batch`](crate::Queue::add_to_batch), even after it
    /// was closed, since the batch cannot finish while this job runs.
    pub fn batch_id(&self) -> Option<i64> {
        self.batch_id
    }

    /// The job's kind (its type's `KIND`).
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The queue it was claimed from.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// Which attempt this is, starting at 1.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The most attempts the job gets.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// How many times the job was released because its process died.
    pub fn stalled_count(&self) -> u32 {
        self.stalled_count
    }

    /// How many times the job handed itself back before
    /// ([`JobError::snooze`], [`JobError::interrupted`]).
    pub fn snoozes(&self) -> u32 {
        self.snoozes
    }

    /// When the job was enqueued.
    pub fn enqueued_at(&self) -> DateTime<Utc> {
        self.enqueued_at
    }

    /// The instant by which the job should return: its timeout, or the end of
    /// the worker's shutdown grace period, whichever is earlier.
    pub fn deadline(&self) -> Option<Instant> {
        match (self.deadline, self.shutdown.deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// True once the deadline has passed, the worker is shutting down, or
    /// an operator cancelled the job; and, for as long as it lasts, while
    /// the worker is cut off from the database (its heartbeats have failed
    /// for so long that peers may release its jobs to others: a database
    /// outage, a full disk). A long job should check this between steps and
    /// return early (see [`JobContext::is_cancelled_by_operator`] and
    /// [`JobError::interrupted`], which hands the job back without spending
    /// an attempt).
    pub fn is_cancelled(&self) -> bool {
        self.shutdown.is_requested()
            || self.shutdown.is_cut_off()
            || self.is_cancelled_by_operator()
            || self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// True once an operator cancelled this running job (`Queue::cancel_job`,
    /// `solidq job cancel`): whatever error it returns then records it as
    /// discarded, never retried.
    pub fn is_cancelled_by_operator(&self) -> bool {
        self.cancel.load(Ordering::SeqCst)
    }
}

impl JobContext {
    /// The value of type `T` the worker was given with
    /// [`Worker::state`](crate::Worker::state): a database pool, an HTTP
    /// client, settings. Shared by every job of the worker; wrap what needs
    /// mutation in a `Mutex` or use a type that shares itself (a pool).
    ///
    /// Without one, an error naming `T` and the types the worker holds,
    /// which fails the job without a retry (`?` returns it): a missing
    /// value is a mistake in the worker's setup that retrying cannot fix.
    ///
    /// ```
    /// # use serde::{Deserialize, Serialize};
    /// use solidq::{Job, JobContext, JobResult};
    ///
    /// struct Mailer { from: String }
    ///
    /// #[derive(Serialize, Deserialize)]
    /// struct Welcome { to: String }
    ///
    /// impl Job for Welcome {
    ///     const KIND: &'static str = "welcome";
    ///     fn perform(&self, ctx: &JobContext) -> JobResult {
    ///         let mailer = ctx.state::<Mailer>()?;
    ///         Ok(serde_json::json!({ "from": mailer.from, "to": self.to }))
    ///     }
    /// }
    /// // Worker::new(queue).state(Mailer { from: "shop@example.com".into() }).register::<Welcome>()
    /// ```
    pub fn state<T: Send + Sync + 'static>(&self) -> Result<&T, JobError> {
        self.state.get::<T>().ok_or_else(|| {
            let held = self.state.names();
            JobError::new(
                "missing_state",
                format!(
                    "no state of type {} on this worker (it holds: {}); give it with Worker::state",
                    std::any::type_name::<T>(),
                    if held.is_empty() {
                        "nothing".to_string()
                    } else {
                        held.join(", ")
                    }
                ),
            )
            .no_retry()
        })
    }
}

impl JobContext {
    /// Reports how far the job got, e.g. `json!({"done": 40, "total":
    /// 1000})`: visible in [`JobInfo::progress`](crate::JobInfo), `solidq
    /// job ID` and `solidq jobs`. Cheap to call often: each call replaces
    /// the last value in memory, and the worker writes the latest value of
    /// its running jobs at most once per second (one statement for all of
    /// them, fenced by the claim), and before the job's outcome. So the
    /// stored progress may lag the last call by up to a second, the value
    /// set just before returning is stored, and a value set by a worker
    /// that lost its claim is not. The value is kept after the job ends.
    /// A value that does not serialize is logged and ignored.
    pub fn set_progress(&self, progress: impl serde::Serialize) {
        let Some(cell) = &self.progress else {
            return;
        };
        match serde_json::to_string(&progress) {
            Ok(json) => cell.set(json),
            Err(error) => log::warn!(
                "job {} ({}): progress does not serialize ({error}); ignored",
                self.id,
                self.kind
            ),
        }
    }
}

/// The latest progress and step checkpoint of one running job, until the
/// worker writes them.
pub(crate) struct ProgressCell {
    pub(crate) job_id: i64,
    /// The registration the job was claimed under (the write's fence).
    pub(crate) process_id: i64,
    latest: Mutex<Option<String>>,
    checkpoint: Mutex<Option<String>>,
    /// Whether the writer has been told of this cell since it last took.
    queued: AtomicBool,
    /// Tells the writer (once per value it has not taken yet).
    queue: Box<dyn Fn(Arc<ProgressCell>) + Send + Sync>,
}

impl ProgressCell {
    pub(crate) fn new(
        job_id: i64,
        process_id: i64,
        queue: impl Fn(Arc<ProgressCell>) + Send + Sync + 'static,
    ) -> Arc<ProgressCell> {
        Arc::new(ProgressCell {
            job_id,
            process_id,
            latest: Mutex::new(None),
            checkpoint: Mutex::new(None),
            queued: AtomicBool::new(false),
            queue: Box::new(queue),
        })
    }

    fn set(self: &Arc<Self>, json: String) {
        *self.latest.lock().unwrap_or_else(|p| p.into_inner()) = Some(json);
        self.tell();
    }

    /// Replaces the checkpoint to write (the whole state of the job's
    /// steps).
    pub(crate) fn set_checkpoint(self: &Arc<Self>, json: String) {
        *self.checkpoint.lock().unwrap_or_else(|p| p.into_inner()) = Some(json);
        self.tell();
    }

    fn tell(self: &Arc<Self>) {
        if !self.queued.swap(true, Ordering::SeqCst) {
            (self.queue)(Arc::clone(self));
        }
    }

    /// Puts back values a write could not store for now (the database is
    /// away or full), unless newer ones were set meanwhile, and tells the
    /// writer again.
    pub(crate) fn restore(self: &Arc<Self>, json: Option<String>, checkpoint: Option<String>) {
        for (slot, value) in [(&self.latest, json), (&self.checkpoint, checkpoint)] {
            let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
            if slot.is_none() {
                *slot = value;
            }
        }
        self.tell();
    }

    /// The latest progress and checkpoint not written yet; the next `set`
    /// tells the writer again.
    pub(crate) fn take(&self) -> (Option<String>, Option<String>) {
        self.queued.store(false, Ordering::SeqCst);
        (
            self.latest.lock().unwrap_or_else(|p| p.into_inner()).take(),
            self.checkpoint
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take(),
        )
    }
}

impl fmt::Debug for ProgressCell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProgressCell")
            .field("job_id", &self.job_id)
            .finish_non_exhaustive()
    }
}

/// Whether a worker may still run its jobs: it may not while its
/// heartbeats cannot prove that its registration exists (the database is
/// away), since peers may then release its jobs to other workers.
pub(crate) trait Standing: Send + Sync + fmt::Debug {
    /// Whether the registration is certain to exist now.
    fn holds(&self) -> bool;
}

/// Shared between a worker and its running jobs: set once when shutdown
/// begins, with the grace period's end; and the worker's standing, which
/// asks running jobs to stop while it does not hold.
#[derive(Debug, Default)]
pub(crate) struct ShutdownSignal {
    requested: AtomicBool,
    deadline: std::sync::OnceLock<Instant>,
    standing: std::sync::OnceLock<Arc<dyn Standing>>,
}

impl ShutdownSignal {
    /// A signal whose jobs are asked to stop whenever `standing` does not
    /// hold.
    pub(crate) fn with_standing(standing: Arc<dyn Standing>) -> ShutdownSignal {
        let signal = ShutdownSignal::default();
        let _ = signal.standing.set(standing);
        signal
    }

    pub(crate) fn request(&self, grace: Duration) {
        let _ = self.deadline.set(Instant::now() + grace);
        self.requested.store(true, Ordering::SeqCst);
    }

    pub(crate) fn is_requested(&self) -> bool {
        self.requested.load(Ordering::SeqCst)
    }

    /// Whether the worker is cut off from the database (its standing does
    /// not hold) right now.
    pub(crate) fn is_cut_off(&self) -> bool {
        self.standing.get().is_some_and(|s| !s.holds())
    }

    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.deadline.get().copied()
    }
}
