//! Enqueue, batch members and finish: the `Store` methods that open a
//! transaction and apply the rules of `rules.rs` on the driver.

use diesel::QueryResult;
use diesel::result::Error as DieselError;

use crate::store::batches::{NewBatch, Refusal, StoredCallbacks};
use crate::store::dependencies::Wait;
use crate::store::{
    AnyConnection, Completion, Driver, FinishReport, Inserted, NewJob, Outcome, Progress, Start,
    Store, TxEnd, driver, in_transaction,
};
use crate::types::{Error, Result};

/// [`Error::Duplicate`] for the first job of `jobs` whose unique key was
/// taken (`outcome`: each job's new id, or the holder's id as `Err`).
pub(crate) fn first_duplicate(jobs: &[NewJob], outcome: &[std::result::Result<i64, i64>]) -> Error {
    jobs.iter()
        .zip(outcome)
        .find_map(|(job, o)| match o {
            Err(existing_id) => Some(Error::Duplicate {
                unique_key: job.unique_key.clone().unwrap_or_default(),
                existing_id: *existing_id,
            }),
            Ok(_) => None,
        })
        .expect("a duplicate was reported")
}

/// What a new batch is made of: its row, its callbacks (given the
/// batch's id, which their arguments may name), its members and their
/// dependencies, and whether it is closed at once.
pub(crate) struct BatchMaking<'a> {
    pub(crate) row: &'a NewBatch,
    pub(crate) callbacks: &'a dyn Fn(i64) -> Result<StoredCallbacks>,
    pub(crate) jobs: &'a [NewJob],
    pub(crate) waits: &'a [Wait],
    pub(crate) close: bool,
}

/// Makes a batch inside the caller's transaction (on `d`, under a
/// savepoint if one is open): the row, its callbacks, its members, closed
/// if asked. `Ok(Err(error))` when it is refused (a missing parent, a
/// bad callback, a taken unique key): the caller rolls back.
fn make_batch(
    d: &mut dyn Driver,
    making: &BatchMaking<'_>,
) -> QueryResult<std::result::Result<(i64, Inserted), BatchRefused>> {
    let id = match super::rules::open_on(d, making.row)? {
        Ok(id) => id,
        Err(refusal) => {
            return Ok(Err(BatchRefused::Batch(
                making.row.parent_id.unwrap_or_default(),
                refusal,
            )));
        }
    };
    let callbacks = match (making.callbacks)(id) {
        Ok(callbacks) => callbacks,
        Err(error) => return Ok(Err(BatchRefused::Other(error))),
    };
    if callbacks != StoredCallbacks::default() {
        let json = serde_json::to_string(&callbacks).expect("callbacks serialize");
        d.batch_set_callbacks(id, &json)?;
    }
    let added = match super::rules::add_on(d, id, making.jobs, true, making.waits)? {
        Ok(added) => added,
        Err(refusal) => return Ok(Err(BatchRefused::Batch(id, refusal))),
    };
    if added.outcome.iter().any(|o| o.is_err()) {
        return Ok(Err(BatchRefused::Other(first_duplicate(
            making.jobs,
            &added.outcome,
        ))));
    }
    if making.close
        && let Err(refusal) = super::rules::close_on(d, id)?
    {
        return Ok(Err(BatchRefused::Batch(id, refusal)));
    }
    Ok(Ok((id, added)))
}

/// Why a batch was not made: a refusal of the batch with this id (or
/// parent id), or another error.
pub(crate) enum BatchRefused {
    Batch(i64, Refusal),
    Other(Error),
}

impl BatchRefused {
    /// The error the caller sees: [`Error::BatchRefused`], or
    /// [`Error::Dependency`] for a parent outside the batch.
    pub(crate) fn into_error(self) -> Error {
        let (batch, refusal) = match self {
            BatchRefused::Batch(batch, refusal) => (batch, refusal),
            BatchRefused::Other(error) => return error,
        };
        Error::BatchRefused {
            batch,
            reason: match refusal {
                Refusal::Missing => "not found",
                Refusal::Finished => "finished: it takes no more members",
                Refusal::UnknownParent(parent) => {
                    return Error::Dependency {
                        job: format!("a job added to batch {batch}"),
                        reason: format!("job {parent} is not a member of batch {batch}"),
                    };
                }
            },
        }
    }
}

/// Runs `body` in a transaction on `d` (a savepoint inside an open one)
/// and keeps what it wrote, unless it refuses (`Ok(Err(refusal))`): then
/// everything it wrote is rolled back and the refusal returned.
fn unless_refused<T, R>(
    d: &mut dyn Driver,
    mut body: impl FnMut(&mut dyn Driver) -> QueryResult<std::result::Result<T, R>>,
) -> QueryResult<std::result::Result<T, R>> {
    let mut refused = None;
    let kept = in_transaction(d, |d| match body(d)? {
        Ok(kept) => Ok(kept),
        Err(refusal) => {
            refused = Some(refusal);
            Err(DieselError::RollbackTransaction)
        }
    });
    match refused {
        Some(refusal) => Ok(Err(refusal)),
        None => kept.map(Ok),
    }
}

/// A batch made on the caller's connection, in a savepoint of its
/// transaction (a transaction of its own outside one): a refused batch
/// leaves nothing of itself.
pub(crate) fn batch_make_on(
    d: &mut dyn Driver,
    making: &BatchMaking<'_>,
) -> Result<std::result::Result<(i64, Inserted), BatchRefused>> {
    unless_refused(d, |d| make_batch(d, making)).map_err(Error::db("batch"))
}

impl Store {
    /// [`batch_make_on`] on a connection of the store's pool.
    pub(crate) fn batch_make(
        &self,
        making: &BatchMaking<'_>,
    ) -> Result<std::result::Result<(i64, Inserted), BatchRefused>> {
        self.with_driver("batch", |d| unless_refused(d, |d| make_batch(d, making)))
    }

    /// Inserts jobs in one transaction: each one's new id, or the id of
    /// the existing job holding the same unique key (`Err`), and the jobs
    /// discarded at their concurrency limit on the way in.
    pub(crate) fn jobs_enqueue(&self, jobs: &[NewJob]) -> Result<Inserted> {
        let inserted = self.with_driver("jobs_enqueue", |d| {
            super::rules::enqueue_reporting(d, jobs, false)
        })?;
        self.notify_ready(jobs);
        Ok(inserted)
    }

    /// [`Store::jobs_enqueue`] on a driver the caller holds (its own
    /// connection, or one inside its transaction), reporting the jobs
    /// discarded on the way in instead of logging them: the caller reports
    /// them once they are committed.
    pub(crate) fn jobs_enqueue_on(
        d: &mut dyn Driver,
        jobs: &[NewJob],
        notify: bool,
    ) -> QueryResult<Inserted> {
        super::rules::enqueue_reporting(d, jobs, notify)
    }

    /// Inserts jobs in one transaction, all or nothing: if any unique key
    /// is taken, everything is rolled back and the first taken key is
    /// [`Error::Duplicate`] with its holder.
    pub(crate) fn jobs_enqueue_all(&self, jobs: &[NewJob]) -> Result<Inserted> {
        self.with_driver("jobs_enqueue", |d| {
            unless_refused(d, |d| {
                let inserted = super::rules::enqueue_reporting(d, jobs, false)?;
                Ok(if inserted.outcome.iter().any(|o| o.is_err()) {
                    Err(first_duplicate(jobs, &inserted.outcome))
                } else {
                    Ok(inserted)
                })
            })
        })?
    }

    /// Enqueues `jobs` as members of `batch` in one transaction, all or
    /// nothing (see [`super::rules::add_on`]): a batch that takes no
    /// members, or a taken unique key, is refused and nothing is written.
    pub(crate) fn batch_add_members(
        &self,
        batch: i64,
        jobs: &[NewJob],
        waits: &[Wait],
    ) -> Result<std::result::Result<Inserted, BatchRefused>> {
        self.with_driver("add_to_batch", |d| {
            unless_refused(d, |d| {
                Ok(match super::rules::add_on(d, batch, jobs, false, waits)? {
                    Err(refusal) => Err(BatchRefused::Batch(batch, refusal)),
                    Ok(inserted) if inserted.outcome.iter().any(|o| o.is_err()) => Err(
                        BatchRefused::Other(first_duplicate(jobs, &inserted.outcome)),
                    ),
                    Ok(inserted) => Ok(inserted),
                })
            })
        })
    }

    /// Closes `batch` in a transaction of its own (see
    /// [`super::rules::close_on`]); `Ok(Err(Refusal::Missing))` if there
    /// is no such batch.
    pub(crate) fn batch_close(&self, batch: i64) -> Result<std::result::Result<(), Refusal>> {
        self.with_driver("close_batch", |d| {
            unless_refused(d, |d| super::rules::close_on(d, batch))
        })
    }

    /// Records a batch of completions in one transaction, each fenced by its
    /// claim: a completion whose claim is gone is skipped (reported as lost),
    /// the rest of the batch is written. `starts` (jobs claimed ahead that
    /// started, none of them among the completions) are recorded with them,
    /// and `progress` (the last progress and step checkpoints of jobs
    /// ending in this batch) before the outcomes, fenced by the same
    /// claims, in the same transaction.
    pub(crate) fn claimed_finish(
        &self,
        completions: &[Completion],
        starts: &[Start],
        progress: &[Progress],
    ) -> Result<FinishReport> {
        if let Some((recorded, rest)) = split_recorded(completions) {
            let mut report = self.claimed_finish(&rest, starts, progress)?;
            report.written.extend(recorded);
            return Ok(report);
        }
        if completions.is_empty() && starts.is_empty() && progress.is_empty() {
            return Ok(FinishReport::default());
        }
        self.with_driver("claimed_finish", |d| {
            if progress.is_empty() && super::rules::single_statement(completions, starts) {
                super::rules::finish_on_driver(d, completions, starts)
            } else {
                in_transaction(d, |d| {
                    if !progress.is_empty() {
                        d.jobs_set_progress(progress)?;
                    }
                    super::rules::finish_on_driver(d, completions, starts)
                })
            }
        })
    }

    /// SQLite: [`Store::claimed_finish`] and then [`Store::ready_claim`]
    /// in one write transaction. A worker's claim and its outcomes' write
    /// otherwise take SQLite's one write lock in turn, each with a
    /// `COMMIT` of its own, and a claim that found the lock held by its own
    /// process's finish went round again. Both fail or commit together.
    pub(crate) fn claimed_finish_then_claim(
        &self,
        completions: &[Completion],
        starts: &[Start],
        progress: &[Progress],
        claim: &crate::store::ClaimQuery,
        process_id: i64,
        limits: &crate::store::ClaimLimits,
    ) -> Result<(FinishReport, Vec<crate::store::ClaimedJob>)> {
        if let Some((recorded, rest)) = split_recorded(completions) {
            let (mut report, jobs) =
                self.claimed_finish_then_claim(&rest, starts, progress, claim, process_id, limits)?;
            report.written.extend(recorded);
            return Ok((report, jobs));
        }
        let mut report = FinishReport::default();
        let jobs = self.with_driver("claimed_finish_then_claim", |d| {
            d.ready_claim_after(claim, process_id, limits, &mut |d| {
                if !progress.is_empty() {
                    d.jobs_set_progress(progress)?;
                }
                report = if completions.is_empty() && starts.is_empty() {
                    FinishReport::default()
                } else {
                    super::rules::finish_on_driver(d, completions, starts)?
                };
                Ok(())
            })
        })?;
        Ok((report, jobs))
    }
}

impl Store {
    /// Runs `body` (the job's writes; its result text) and then records
    /// `completion` (a success; its result set from `body`'s) in one write
    /// transaction on a connection of the pool: `BEGIN IMMEDIATE` on
    /// SQLite. The completion is fenced as the completer's is, so a claim
    /// that is no longer this process's rolls everything back.
    ///
    /// A lock conflict in solidq's own statements (a deadlock, a
    /// serialization failure, SQLite's busy lock at `BEGIN`) rolls back and
    /// runs `body` again, as every operation of solidq's does. A lost
    /// connection may have lost only the commit's answer: whether the claim
    /// is still held, and else whether the job succeeded, is read back.
    pub(crate) fn finish_in_transaction<E>(
        &self,
        completion: &Completion,
        progress: &[Progress],
        body: &mut dyn FnMut(&mut AnyConnection) -> std::result::Result<Option<String>, E>,
    ) -> TxEnd<E> {
        enum Stop<E> {
            Refused(E),
            Panicked(Box<dyn std::any::Any + Send>),
            Lost,
        }
        let mut stop: Option<Stop<E>> = None;
        let ran = self.with_conn("complete_in_transaction", |conn| {
            stop = None;
            conn.write_transaction(|conn| {
                let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(conn)));
                let result = match ran {
                    Ok(Ok(result)) => result,
                    Ok(Err(refusal)) => {
                        stop = Some(Stop::Refused(refusal));
                        return Err(DieselError::RollbackTransaction);
                    }
                    Err(payload) => {
                        stop = Some(Stop::Panicked(payload));
                        return Err(DieselError::RollbackTransaction);
                    }
                };
                let d = driver(conn);
                if !progress.is_empty() {
                    d.jobs_set_progress(progress)?;
                }
                let mut completion = completion.clone();
                if let Outcome::Succeeded { result: r, .. } = &mut completion.outcome {
                    *r = result;
                }
                let report = super::rules::finish_on_driver(d, &[completion], &[])?;
                if report.written.is_empty() {
                    stop = Some(Stop::Lost);
                    return Err(DieselError::RollbackTransaction);
                }
                Ok(())
            })
        });
        match (stop, ran) {
            (Some(Stop::Refused(refusal)), _) => TxEnd::Refused(refusal),
            (Some(Stop::Panicked(payload)), _) => TxEnd::Panicked(payload),
            (Some(Stop::Lost), _) => TxEnd::ClaimLost,
            (None, Ok(())) => TxEnd::Committed,
            (None, Err(error)) if error.is_connection_lost() => match self.committed(completion) {
                Ok(true) => TxEnd::Committed,
                Ok(false) => TxEnd::Failed(error),
                Err(unread) => {
                    log::warn!(
                        "job {}: the connection was lost during its transaction ({error}), and whether it committed cannot be read now ({unread}); the completer's fenced write decides",
                        completion.job_id
                    );
                    TxEnd::Failed(error)
                }
            },
            (None, Err(error)) => TxEnd::Failed(error),
        }
    }

    /// Whether a job's transaction committed its completion, read back
    /// after its connection was lost: not while its claim stands (the
    /// commit deletes it); else whether the job succeeded, or (kept for no
    /// time) is gone.
    fn committed(&self, completion: &Completion) -> Result<bool> {
        let held = self.with_read("complete_in_transaction/read_back", |conn| {
            driver(conn).claimed_held(completion.process_id, &[completion.job_id])
        })?;
        if !held.is_empty() {
            return Ok(false);
        }
        match self.job_info(crate::store::JobLookup::Id(completion.job_id)) {
            Ok(info) => Ok(info.status == crate::types::JobStatus::Succeeded),
            Err(Error::JobNotFound(_)) => Ok(matches!(
                completion.outcome,
                Outcome::Succeeded { keep, .. } if keep.is_zero()
            )),
            Err(error) => Err(error),
        }
    }
}

/// Completions a job committed in its own transaction, when there are
/// any, and the others: those are reported as written and not written
/// again (their claims are gone: a fenced write would find nothing and
/// call them lost).
fn split_recorded(completions: &[Completion]) -> Option<(Vec<i64>, Vec<Completion>)> {
    if !completions.iter().any(|c| c.recorded) {
        return None;
    }
    let (recorded, rest): (Vec<&Completion>, Vec<&Completion>) =
        completions.iter().partition(|c| c.recorded);
    Some((
        recorded.into_iter().map(|c| c.job_id).collect(),
        rest.into_iter().cloned().collect(),
    ))
}
