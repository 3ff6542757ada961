//! Batches: a set of jobs tracked together, with callback jobs enqueued
//! when the set finishes (as Sidekiq's and SolidQueue's batches).
//!
//! ```no_run
//! # use solidq::{BatchOptions, EnqueueOptions, JobRequest, Queue};
//! # #[derive(serde::Serialize, serde::Deserialize)] struct Resize { id: u32 }
//! # impl solidq::Job for Resize { const KIND: &'static str = "resize";
//! #   fn perform(&self, _: &solidq::JobContext) -> solidq::JobResult { Ok(serde_json::Value::Null) } }
//! # #[derive(serde::Serialize, serde::Deserialize)] struct Report { batch: i64 }
//! # impl solidq::Job for Report { const KIND: &'static str = "report";
//! #   fn perform(&self, _: &solidq::JobContext) -> solidq::JobResult { Ok(serde_json::Value::Null) } }
//! # fn main() -> solidq::Result<()> {
//! let queue = Queue::connect("sqlite://jobs.sqlite3")?;
//! let jobs: Vec<JobRequest> = (0..100)
//!     .map(|id| JobRequest::new(&Resize { id }, EnqueueOptions::new()))
//!     .collect::<solidq::Result<_>>()?;
//! let options = BatchOptions::new()
//!     .description("resize the album")
//!     .on_complete(|batch| JobRequest::new(&Report { batch }, EnqueueOptions::new()));
//! let batch = queue.batch(options, &jobs)?;
//! println!("{:?}", queue.batch_info(batch.id)?);
//! # Ok(()) }
//! ```
//!
//! # What is promised
//!
//! * **Atomic.** A batch and its members are written in one transaction
//!   (on the caller's connection too, with [`Queue::batch_on`](crate::Queue::batch_on)): there is
//!   never a batch without its jobs, nor members without their batch.
//! * **Counted where the members end.** The batch's counts (`pending`,
//!   `succeeded`, `failed`) move in the transaction that records each
//!   member's final outcome, batched like every outcome; nothing polls the
//!   members. A member counts as *failed* when it failed for good (out of
//!   attempts, or out of stalls after crashes), was discarded, or was
//!   cancelled; attempts that will be retried and snoozes do not count.
//! * **Callbacks once.** When the batch is closed and no member is
//!   pending, the callbacks that apply are enqueued in that same
//!   transaction, each marked fired there: `on_complete` always,
//!   `on_success` when no member failed, `on_failure` when one did. A
//!   callback never fires twice, however many workers finish members at
//!   once or crash meanwhile. An operator's retry of a failed member makes
//!   it pending again: the batch can then finish again, and `on_success`
//!   fires then if every member succeeded at last.
//! * **Open batches.** [`Queue::open_batch`](crate::Queue::open_batch) makes a
//!   batch that takes members
//!   ([`Queue::add_to_batch`](crate::Queue::add_to_batch)) until
//!   [`Queue::close_batch`](crate::Queue::close_batch); it cannot finish while
//!   open. A closed batch still takes members until it finishes, so a running
//!   member may add jobs to its own batch ([`crate::JobContext::batch_id`]).
//! * **Nested.** A batch opened with [`BatchOptions::parent`] is one
//!   pending member of its parent until it finishes, counted succeeded if
//!   none of its members failed.
//!
//! A callback is an ordinary job built by the closure given the batch's id:
//! read the batch's counts with
//! [`Queue::batch_info`](crate::Queue::batch_info). Members may wait for other
//! members: see [`crate::workflow`].

use std::sync::Arc;

use crate::client::JobRequest;
use crate::types::Result;

/// Builds a callback job from its batch's id.
pub type CallbackBuilder = Arc<dyn Fn(i64) -> Result<JobRequest> + Send + Sync>;

/// How a batch is made: its description, parent and callbacks.
#[derive(Clone, Default)]
pub struct BatchOptions {
    pub(crate) description: Option<String>,
    pub(crate) parent: Option<i64>,
    pub(crate) on_complete: Option<CallbackBuilder>,
    pub(crate) on_success: Option<CallbackBuilder>,
    pub(crate) on_failure: Option<CallbackBuilder>,
}

impl std::fmt::Debug for BatchOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchOptions")
            .field("description", &self.description)
            .field("parent", &self.parent)
            .field("on_complete", &self.on_complete.is_some())
            .field("on_success", &self.on_success.is_some())
            .field("on_failure", &self.on_failure.is_some())
            .finish()
    }
}

impl BatchOptions {
    /// A batch without description, parent or callbacks.
    pub fn new() -> BatchOptions {
        BatchOptions::default()
    }

    /// A description shown with the batch.
    pub fn description(mut self, description: impl Into<String>) -> BatchOptions {
        self.description = Some(description.into());
        self
    }

    /// Makes the batch a child of `parent`: one pending member of it until
    /// this batch finishes.
    pub fn parent(mut self, parent: i64) -> BatchOptions {
        self.parent = Some(parent);
        self
    }

    /// The job enqueued once when every member ended, however.
    pub fn on_complete(
        mut self,
        callback: impl Fn(i64) -> Result<JobRequest> + Send + Sync + 'static,
    ) -> BatchOptions {
        self.on_complete = Some(Arc::new(callback));
        self
    }

    /// The job enqueued once when every member succeeded.
    pub fn on_success(
        mut self,
        callback: impl Fn(i64) -> Result<JobRequest> + Send + Sync + 'static,
    ) -> BatchOptions {
        self.on_success = Some(Arc::new(callback));
        self
    }

    /// The job enqueued once when every member ended and at least one
    /// failed for good, was discarded or cancelled.
    pub fn on_failure(
        mut self,
        callback: impl Fn(i64) -> Result<JobRequest> + Send + Sync + 'static,
    ) -> BatchOptions {
        self.on_failure = Some(Arc::new(callback));
        self
    }
}

/// A batch just made: its id and its members' ids, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BatchEnqueued {
    /// The batch's id.
    pub id: i64,
    /// The members' ids, in the order given.
    pub jobs: Vec<i64>,
}

/// A batch's state, from [`Queue::batch_info`](crate::Queue::batch_info).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct BatchInfo {
    /// Its id.
    pub id: i64,
    /// The batch it is a member of.
    pub parent_id: Option<i64>,
    /// Its description.
    pub description: Option<String>,
    /// Members ever added (child batches included).
    pub total: i64,
    /// Members not ended yet.
    pub pending: i64,
    /// Members that succeeded.
    pub succeeded: i64,
    /// Members that failed for good, were discarded or cancelled.
    pub failed: i64,
    /// When it was made.
    pub created_at: chrono::DateTime<chrono::Utc>,
    /// When it was closed (it takes members until it finishes).
    pub closed_at: Option<chrono::DateTime<chrono::Utc>>,
    /// When it finished: closed, and no member pending.
    pub finished_at: Option<chrono::DateTime<chrono::Utc>>,
    /// The callbacks enqueued so far: `complete`, `success`, `failure`.
    pub fired: Vec<String>,
}

impl BatchInfo {
    pub(crate) fn of(row: crate::store::batches::BatchRow) -> BatchInfo {
        let mut fired = Vec::new();
        for (name, at) in [
            ("complete", row.complete_fired_at),
            ("success", row.success_fired_at),
            ("failure", row.failure_fired_at),
        ] {
            if at.is_some() {
                fired.push(name.to_string());
            }
        }
        BatchInfo {
            id: row.id,
            parent_id: row.parent_id,
            description: row.description,
            total: row.total,
            pending: row.pending,
            succeeded: row.succeeded,
            failed: row.failed,
            created_at: row.created_at.and_utc(),
            closed_at: row.closed_at.map(|t| t.and_utc()),
            finished_at: row.finished_at.map(|t| t.and_utc()),
            fired,
        }
    }

    /// Whether it finished.
    pub fn is_finished(&self) -> bool {
        self.finished_at.is_some()
    }
}

impl crate::Queue {
    /// Makes a closed batch of `jobs` with `options`, all in one
    /// transaction: all or nothing. If any `unique_key` is taken, nothing is
    /// written and [`Error::Duplicate`](crate::Error::Duplicate) names it.
    /// An empty batch finishes at once (its callbacks are enqueued).
    pub fn batch(&self, options: BatchOptions, jobs: &[JobRequest]) -> Result<BatchEnqueued> {
        self.batch_in(&options, jobs, true, |making| {
            self.store().batch_make(making)
        })
    }

    /// [`Queue::batch`](crate::Queue::batch) on `conn`, the caller's own connection (see
    /// [`Queue::enqueue_on`](crate::Queue::enqueue_on)): the batch and its
    /// members commit or roll back with the caller's transaction. A batch
    /// refused (a taken unique key, say) is rolled back to a savepoint and
    /// the caller's transaction goes on.
    pub fn batch_on<C: crate::EnqueueConnection>(
        &self,
        conn: &mut C,
        options: BatchOptions,
        jobs: &[JobRequest],
    ) -> Result<BatchEnqueued> {
        // A savepoint inside the caller's transaction (a transaction of its
        // own outside one): a refused batch leaves nothing of itself, and
        // the caller's transaction goes on.
        self.batch_in(&options, jobs, true, |making| {
            crate::lifecycle::batch_make_on(conn.solidq_driver().0, making)
        })
    }

    /// Makes an open batch: it takes members with [`Queue::add_to_batch`](crate::Queue::add_to_batch)
    /// and cannot finish before [`Queue::close_batch`](crate::Queue::close_batch).
    pub fn open_batch(&self, options: BatchOptions) -> Result<i64> {
        let made = self.batch_in(&options, &[], false, |making| {
            self.store().batch_make(making)
        })?;
        Ok(made.id)
    }

    /// Enqueues `jobs` as members of `batch`, in one transaction, all or
    /// nothing (a taken `unique_key` is
    /// [`Error::Duplicate`](crate::Error::Duplicate)). A batch takes members
    /// until it finishes, so a running member may add to its own batch;
    /// after that, [`Error::BatchRefused`](crate::Error::BatchRefused).
    pub fn add_to_batch(&self, batch: i64, jobs: &[JobRequest]) -> Result<Vec<i64>> {
        let new = jobs
            .iter()
            .map(|r| self.build_member(r))
            .collect::<Result<Vec<_>>>()?;
        let waits = crate::workflow::waits(jobs)?;
        let inserted = match self.store().batch_add_members(batch, &new, &waits)? {
            Ok(inserted) => inserted,
            Err(refused) => return Err(refused.into_error()),
        };
        self.store().notify_ready(&new);
        self.after_enqueue(&new, &inserted);
        Ok(inserted
            .outcome
            .into_iter()
            .map(|o| o.unwrap_or_default())
            .collect())
    }

    /// Closes `batch`: it finishes when its last pending member ends, at
    /// once if none is pending. Closing twice changes nothing.
    pub fn close_batch(&self, batch: i64) -> Result<()> {
        self.store()
            .batch_close(batch)?
            .map_err(|refusal| crate::lifecycle::BatchRefused::Batch(batch, refusal).into_error())
    }

    /// A batch's counts and state, `None` if no batch has this id.
    pub fn batch_info(&self, batch: i64) -> Result<Option<BatchInfo>> {
        Ok(self.store().batch_get(batch)?.map(BatchInfo::of))
    }

    /// Makes a batch with `options` and `jobs`, closed if `close`, by
    /// `make` (in a transaction of the store's, or on the caller's
    /// connection).
    fn batch_in(
        &self,
        options: &BatchOptions,
        jobs: &[JobRequest],
        close: bool,
        make: impl FnOnce(
            &crate::lifecycle::BatchMaking<'_>,
        ) -> Result<
            std::result::Result<(i64, crate::store::Inserted), crate::lifecycle::BatchRefused>,
        >,
    ) -> Result<BatchEnqueued> {
        use crate::lifecycle::{BatchMaking, BatchRefused};
        use crate::store::batches::{NewBatch, StoredCallback, StoredCallbacks};
        if let Some(description) = &options.description {
            crate::client::check_no_nul("batch description", description)?;
        }
        let new = jobs
            .iter()
            .map(|r| self.build_member(r))
            .collect::<Result<Vec<_>>>()?;
        let waits = crate::workflow::waits(jobs)?;
        let row = NewBatch {
            parent_id: options.parent,
            description: options.description.clone(),
        };
        let callbacks = |id: i64| -> Result<StoredCallbacks> {
            let callback = |builder: &Option<CallbackBuilder>| -> Result<Option<StoredCallback>> {
                let Some(builder) = builder else {
                    return Ok(None);
                };
                Ok(Some(StoredCallback::of(&self.build(&builder(id)?)?)))
            };
            Ok(StoredCallbacks {
                complete: callback(&options.on_complete)?,
                success: callback(&options.on_success)?,
                failure: callback(&options.on_failure)?,
            })
        };
        let making = BatchMaking {
            row: &row,
            callbacks: &callbacks,
            jobs: &new,
            waits: &waits,
            close,
        };
        let (id, inserted) = make(&making)?.map_err(BatchRefused::into_error)?;
        self.after_enqueue(&new, &inserted);
        let jobs = inserted
            .outcome
            .iter()
            .map(|o| o.unwrap_or_default())
            .collect();
        Ok(BatchEnqueued { id, jobs })
    }
}
