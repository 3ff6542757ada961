//! A job's writes committed with its completion
//! ([`JobContext::complete_in_transaction`]): the worker's side, which
//! knows the job's claim, its options and the store.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::JobResult;
use crate::client::PayloadLimit;
use crate::job::{Finish, JobContext, JobError};
use crate::lifecycle::TxEnd;
use crate::store::{AnyConnection, Completion, Outcome, Progress, Slot, Store};

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

impl Finish for Finisher {
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
