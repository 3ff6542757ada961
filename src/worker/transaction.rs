//! A job's writes committed with its completion
//! ([`JobContext::complete_in_transaction`]): the worker's side, which
//! knows the job's claim, its options and the store.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::JobResult;
use crate::client::PayloadLimit;
use crate::job::{JobContext, JobError};
use crate::store::{AnyConnection, Completion, Outcome, Progress, Slot, Store, TxEnd};

/// One attempt's way to finish inside its own transaction.
pub(crate) struct Finisher {
    store: Store,
    job_id: i64,
    process_id: i64,
    kind: String,
    slot: Option<Slot>,
    batch_id: Option<i64>,
    keep: Duration,
    started: Instant,
    payload: PayloadLimit,
    /// The result text, once committed.
    recorded: Mutex<Option<Option<String>>>,
}

/// What a [`Finisher`] is made of.
pub(crate) struct Claim<'a> {
    pub store: &'a Store,
    pub job_id: i64,
    pub process_id: i64,
    pub kind: &'a str,
    pub slot: Option<Slot>,
    pub batch_id: Option<i64>,
    pub keep: Duration,
    pub started: Instant,
    pub payload: &'a PayloadLimit,
}

impl Finisher {
    pub(crate) fn new(claim: Claim<'_>) -> Finisher {
        Finisher {
            store: claim.store.clone(),
            job_id: claim.job_id,
            process_id: claim.process_id,
            kind: claim.kind.to_string(),
            slot: claim.slot,
            batch_id: claim.batch_id,
            keep: claim.keep,
            started: claim.started,
            payload: claim.payload.clone(),
            recorded: Mutex::new(None),
        }
    }

    /// The result the job committed with its success, if it did.
    pub(crate) fn recorded(&self) -> Option<Option<String>> {
        self.recorded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl std::fmt::Debug for Finisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Finisher")
            .field("job_id", &self.job_id)
            .field("process_id", &self.process_id)
            .finish_non_exhaustive()
    }
}

impl Finisher {
    /// Runs `writes` and the job's success in one transaction.
    fn complete(
        &self,
        ctx: &JobContext,
        writes: &mut dyn FnMut(&mut AnyConnection) -> Result<serde_json::Value, JobError>,
    ) -> JobResult {
        if self.recorded().is_some() {
            return Err(JobError::new(
                "already_completed",
                format!(
                    "job {} already committed its completion in a transaction",
                    self.job_id
                ),
            )
            .no_retry());
        }
        let completion = Completion {
            job_id: self.job_id,
            process_id: self.process_id,
            outcome: Outcome::Succeeded {
                result: None,
                keep: self.keep,
            },
            slot: self.slot.clone(),
            batch_id: self.batch_id,
            started: Some(self.started),
            recorded: false,
        };
        // The progress and step checkpoints not written yet go in the same
        // transaction, before the outcome, as the completer writes them.
        let (json, checkpoint) = match &ctx.progress {
            Some(cell) => cell.take(),
            None => (None, None),
        };
        let progress: Vec<Progress> = if json.is_some() || checkpoint.is_some() {
            vec![Progress {
                job_id: self.job_id,
                process_id: self.process_id,
                json: json.clone(),
                checkpoint: checkpoint.clone(),
            }]
        } else {
            Vec::new()
        };
        let mut value = serde_json::Value::Null;
        let mut body = |conn: &mut AnyConnection| -> Result<Option<String>, JobError> {
            let result = writes(conn)?;
            // What would make the outcome anything but this success is
            // decided before the commit, so that it rolls back.
            if ctx.is_cancelled_by_operator() {
                return Err(JobError::new(
                    "cancelled",
                    "cancelled by an operator before its transaction committed; rolled back",
                ));
            }
            if ctx.deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(JobError::new(
                    "timeout",
                    "its timeout passed before its transaction committed; rolled back",
                ));
            }
            let text = (!result.is_null()).then(|| result.to_string());
            let size = text.as_ref().map_or(0, String::len);
            if let Err(error) = self.payload.check("result", &self.kind, size) {
                return Err(JobError::new(
                    "result_too_large",
                    format!("{error}; the transaction was rolled back"),
                )
                .no_retry());
            }
            value = result;
            Ok(text)
        };
        let end = self
            .store
            .finish_in_transaction(&completion, &progress, &mut body);
        let restore = || {
            if let Some(cell) = &ctx.progress {
                cell.restore(json.clone(), checkpoint.clone());
            }
        };
        match end {
            TxEnd::Committed => {
                let text = (!value.is_null()).then(|| value.to_string());
                *self.recorded.lock().unwrap_or_else(|p| p.into_inner()) = Some(text);
                Ok(value)
            }
            TxEnd::Refused(error) => {
                restore();
                Err(error)
            }
            TxEnd::Panicked(payload) => {
                restore();
                std::panic::resume_unwind(payload)
            }
            TxEnd::ClaimLost => Err(JobError::new(
                "claim_lost",
                format!(
                    "job {}'s claim is no longer this worker's (its process was pruned): its transaction was rolled back",
                    self.job_id
                ),
            )),
            TxEnd::Failed(error) => {
                restore();
                Err(JobError::new(
                    "database",
                    format!("the job's transaction did not commit: {error}"),
                ))
            }
        }
    }
}

impl JobContext {
    /// Commits the job's own writes to solidq's database together with its
    /// success, in one transaction: either both are written or neither is.
    /// A job whose effects are rows in the database its queue lives in
    /// then applies them **exactly once**, through crashes, kills and lost
    /// connections, where a job writing on a connection of its own applies
    /// them at least once (the process may die between its commit and the
    /// completer's record of it, and the job runs again). Effects
    /// elsewhere (an HTTP call, an email) stay at least once.
    ///
    /// `writes` gets a connection of the worker's pool inside a write
    /// transaction (SQLite: `BEGIN IMMEDIATE`, so nothing in it meets a
    /// busy lock), does its writes, and returns the job's result. solidq
    /// then records the job as succeeded with that result, fenced by its
    /// claim, and commits. Return this method's value from
    /// [`Job::perform`](crate::Job::perform):
    ///
    /// ```no_run
    /// # use serde::{Deserialize, Serialize};
    /// use diesel::RunQueryDsl;
    /// use solidq::{Job, JobContext, JobResult};
    ///
    /// #[derive(Serialize, Deserialize)]
    /// struct CreditAccount { account: i64, cents: i64 }
    ///
    /// impl Job for CreditAccount {
    ///     const KIND: &'static str = "credit_account";
    ///     fn perform(&self, ctx: &JobContext) -> JobResult {
    ///         ctx.complete_in_transaction(|conn| {
    ///             diesel::sql_query(format!(
    ///                 "UPDATE accounts SET cents = cents + {} WHERE id = {}",
    ///                 self.cents, self.account
    ///             ))
    ///             .execute(conn)?;
    ///             Ok(serde_json::json!({ "credited": self.cents }))
    ///         })
    ///     }
    /// }
    /// ```
    ///
    /// What happens when something goes wrong:
    ///
    /// - `writes` returns an error (or panics): everything rolls back and
    ///   the error is the job's, retried or failed by its options.
    /// - The claim is no longer this worker's (its process was pruned while
    ///   the job ran, an operator cancelled it, its timeout passed): the
    ///   completion fails inside the transaction, everything rolls back, and
    ///   nothing is recorded over the claim that replaced it.
    /// - solidq's own statements meet a deadlock, a serialization failure
    ///   or SQLite's busy lock: everything rolls back and `writes` runs
    ///   again (so it takes `FnMut`); nothing of the first run is kept.
    /// - The connection is lost: solidq reads back whether the commit
    ///   happened (the claim is deleted by it) before anything else, so the
    ///   job is never run again after a commit whose answer was lost.
    ///
    /// Once this returned `Ok`, the job's success is recorded, whatever
    /// `perform` does next; a second call is refused. Keep the transaction
    /// short: on SQLite every other writer waits for it. Outside a worker
    /// or [`Worker::drain`](crate::Worker::drain) (a job run by hand) it
    /// returns an error. Jobs of a batch or a workflow count their end, and
    /// release their dependants, in the same transaction.
    pub fn complete_in_transaction<T, F>(&self, mut writes: F) -> crate::JobResult
    where
        T: serde::Serialize,
        F: FnMut(&mut AnyConnection) -> Result<T, JobError>,
    {
        let Some(finish) = self
            .finish
            .as_ref()
            .and_then(|f| f.downcast_ref::<Finisher>())
        else {
            return Err(JobError::new(
                "no_worker",
                "complete_in_transaction needs the claim of a worker or Worker::drain running this job",
            )
            .no_retry());
        };
        finish.complete(self, &mut |conn| {
            let value = writes(conn)?;
            serde_json::to_value(value).map_err(|error| {
                JobError::new(
                    "result_not_json",
                    format!("the result of complete_in_transaction is not JSON: {error}"),
                )
                .no_retry()
            })
        })
    }
}
