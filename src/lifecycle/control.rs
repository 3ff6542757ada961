//! Job control, as an operator asks it: cancel waiting jobs (discarded with
//! the operator's reason, their concurrency slots given back, their
//! dependants cancelled in turn), run scheduled or blocked jobs now, ask
//! running jobs to stop, retry failed jobs (a failed member of a batch is
//! pending in it again). Each batch of jobs is one transaction.

use std::collections::HashMap;
use std::time::Duration;

use diesel::QueryResult;

use super::places as concurrency;
use crate::store::DISCARDED;
use crate::store::{
    Discarded, Driver, FailedSelection, Slot, Store, StoredOptions, in_transaction,
};
use crate::types::{ErrorInfo, Result};

impl Store {
    /// Discards the waiting jobs (ready, scheduled, retrying, blocked,
    /// waiting for parents) among `ids`: finished now as discarded, `reason` in their error,
    /// kept for their `keep_result`; a ready job's concurrency slot goes
    /// to the next blocked job of its key. Returns the ids discarded.
    /// `names` gives each job's queue and kind: the discarded ones are
    /// counted in the job statistics in the same transaction.
    pub(crate) fn jobs_cancel_waiting(
        &self,
        ids: &[i64],
        reason: &str,
        names: &std::collections::HashMap<i64, (String, String)>,
    ) -> Result<Vec<i64>> {
        let error = ErrorInfo {
            kind: DISCARDED.into(),
            message: format!("cancelled by an operator: {reason}"),
            backtrace: None,
            attempt: None,
            at: Some(chrono::Utc::now()),
            retry_in_ms: None,
        }
        .to_stored_json();
        self.with_driver("jobs_cancel_waiting", |d| {
            in_transaction(d, |d| {
                // Their batches' rows first, in id order, as a completion
                // locks them: a completion releasing one of these jobs
                // (holding the batch row) never waits for us while we wait
                // for it.
                let batches: std::collections::BTreeSet<i64> = super::rules::members_of(d, ids)?
                    .into_iter()
                    .map(|(batch, _)| batch)
                    .collect();
                for batch in batches {
                    d.batch_change(batch, &crate::store::batches::BatchDelta::default())?;
                }
                let mut removed = d.pending_remove(ids)?;
                removed.extend(waiting_remove(d, ids)?);
                let slots: Vec<Slot> = removed
                    .iter()
                    .filter(|r| r.was_ready)
                    .filter_map(|r| {
                        Slot::of(
                            r.concurrency_key.as_deref(),
                            &StoredOptions::parse(&r.options),
                        )
                    })
                    .collect();
                let rows: Vec<Discarded> = removed
                    .iter()
                    .map(|r| Discarded {
                        id: r.id,
                        keep: Duration::from_millis(
                            StoredOptions::parse(&r.options).keep_result_ms,
                        ),
                        error: error.clone(),
                    })
                    .collect();
                if !rows.is_empty() {
                    d.jobs_discard(&rows)?;
                    let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
                    super::rules::ended_by_id(d, &ids, crate::store::batches::MemberEnd::Failed)?;
                    let counted: Vec<(&str, &str, crate::store::Counted)> = ids
                        .iter()
                        .filter_map(|id| names.get(id))
                        .map(|(queue, kind)| {
                            (
                                queue.as_str(),
                                kind.as_str(),
                                crate::store::Counted::Discarded,
                            )
                        })
                        .collect();
                    crate::store::count_now(d, &counted)?;
                }
                if !slots.is_empty() {
                    let ready = concurrency::release_slots(d, &slots)?;
                    concurrency::notify(d, &ready)?;
                }
                Ok(removed.iter().map(|r| r.id).collect())
            })
        })
    }

    /// Runs the scheduled (or retrying) and blocked jobs among `ids` now:
    /// scheduled ones become due (a dispatch moves them, taking their
    /// concurrency slot as usual), blocked ones go to ready out of their
    /// concurrency limit. Returns how many.
    pub(crate) fn jobs_run_now(&self, ids: &[i64]) -> Result<usize> {
        self.with_driver("jobs_run_now", |d| {
            in_transaction(d, |d| {
                let due = d.scheduled_make_due(ids)?;
                let queues = d.blocked_run_now(ids)?;
                concurrency::notify(d, &queues)?;
                Ok(due + queues.len())
            })
        })
    }

    /// Asks the running (or claimed) jobs among `ids` to stop: their
    /// worker sets their cancellation and records them as discarded when
    /// they return an error. Returns those newly asked.
    pub(crate) fn jobs_cancel_running(&self, ids: &[i64]) -> Result<Vec<i64>> {
        self.with_driver("jobs_cancel_running", |d| d.jobs_request_cancel(ids))
    }
}

impl Store {
    /// Retries the failed jobs `selection` names, in batches; returns how
    /// many went back to ready.
    pub(crate) fn failed_retry(&self, selection: &FailedSelection) -> Result<u64> {
        // A failed member of a batch is pending in it again.
        self.failed_batches("failed_retry", selection, |conn, ids| {
            crate::store::in_transaction(crate::store::driver(conn), |d| {
                let members = super::rules::members_of(d, ids)?;
                let retried = d.failed_retry(ids)?;
                let batches: Vec<i64> = members.into_iter().map(|(batch, _)| batch).collect();
                super::rules::members_reopened(d, &batches)?;
                Ok(retried)
            })
        })
    }
}

/// Removes `ids` from the waiting jobs (an operator's cancel): the ids
/// removed, with their options and concurrency keys.
pub(crate) fn waiting_remove(
    d: &mut dyn Driver,
    ids: &[i64],
) -> QueryResult<Vec<crate::store::RemovedPending>> {
    let waiting: Vec<i64> = d.waiting_get(ids)?.into_iter().map(|w| w.job_id).collect();
    if waiting.is_empty() {
        return Ok(Vec::new());
    }
    d.waiting_delete(&waiting)?;
    let options: HashMap<i64, String> = d.jobs_options(&waiting)?.into_iter().collect();
    Ok(waiting
        .into_iter()
        .map(|id| crate::store::RemovedPending {
            id,
            concurrency_key: None,
            options: options.get(&id).cloned().unwrap_or_else(|| "{}".into()),
            was_ready: false,
        })
        .collect())
}
