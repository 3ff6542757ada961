//! Enqueue, batch members and finish: the `Store` methods that open a
//! transaction and apply the rules of `rules.rs` on the driver.

use diesel::QueryResult;
use diesel::result::Error as DieselError;

use crate::store::batches::{NewBatch, Refusal, StoredCallbacks};
use crate::store::dependencies::Wait;
use crate::store::{
    Completion, Driver, FinishReport, Inserted, NewJob, Progress, Start, Store, in_transaction,
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

/// [`make_batch`] in a transaction on `d` (a savepoint inside the
/// caller's transaction, if one is open), rolled back when the batch is
/// refused (the refusal in `refused`): a refused batch leaves nothing of
/// itself.
fn make_batch_in_transaction(
    d: &mut dyn Driver,
    making: &BatchMaking<'_>,
    refused: &mut Option<BatchRefused>,
) -> QueryResult<(i64, Inserted)> {
    *refused = None;
    in_transaction(d, |d| match make_batch(d, making)? {
        Ok(made) => Ok(made),
        Err(refusal) => {
            *refused = Some(refusal);
            Err(DieselError::RollbackTransaction)
        }
    })
}

/// A batch made on the caller's connection (see
/// [`make_batch_in_transaction`]).
pub(crate) fn batch_make_on(
    d: &mut dyn Driver,
    making: &BatchMaking<'_>,
) -> Result<std::result::Result<(i64, Inserted), BatchRefused>> {
    let mut refused = None;
    let made = make_batch_in_transaction(d, making, &mut refused);
    match refused {
        Some(refused) => Ok(Err(refused)),
        None => made.map(Ok).map_err(Error::db("batch")),
    }
}

impl Store {
    /// [`batch_make_on`] on a connection of the store's pool.
    pub(crate) fn batch_make(
        &self,
        making: &BatchMaking<'_>,
    ) -> Result<std::result::Result<(i64, Inserted), BatchRefused>> {
        let mut refused = None;
        let made = self.with_driver("batch", |d| {
            make_batch_in_transaction(d, making, &mut refused)
        });
        match refused {
            Some(refused) => Ok(Err(refused)),
            None => made.map(Ok),
        }
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
        let mut duplicate = None;
        let inserted = self.with_driver("jobs_enqueue", |d| {
            duplicate = None;
            in_transaction(d, |d| {
                let inserted = super::rules::enqueue_reporting(d, jobs, false)?;
                if inserted.outcome.iter().any(|o| o.is_err()) {
                    duplicate = Some(first_duplicate(jobs, &inserted.outcome));
                    return Err(DieselError::RollbackTransaction);
                }
                Ok(inserted)
            })
        });
        match duplicate {
            Some(duplicate) => Err(duplicate),
            None => inserted,
        }
    }

    /// Enqueues `jobs` as members of `batch` in one transaction, all or
    /// nothing (see [`super::rules::add_on`]): a batch that takes no
    /// members is `Ok(Err(refusal))`, a taken unique key
    /// [`Error::Duplicate`]; either way nothing is written.
    pub(crate) fn batch_add_members(
        &self,
        batch: i64,
        jobs: &[NewJob],
        waits: &[Wait],
    ) -> Result<std::result::Result<Inserted, Refusal>> {
        let mut refused = None;
        let mut duplicate = None;
        let inserted = self.with_driver("add_to_batch", |d| {
            (refused, duplicate) = (None, None);
            in_transaction(d, |d| {
                match super::rules::add_on(d, batch, jobs, false, waits)? {
                    Err(refusal) => refused = Some(refusal),
                    Ok(inserted) if inserted.outcome.iter().any(|o| o.is_err()) => {
                        duplicate = Some(first_duplicate(jobs, &inserted.outcome));
                    }
                    Ok(inserted) => return Ok(inserted),
                }
                Err(DieselError::RollbackTransaction)
            })
        });
        if let Some(refusal) = refused {
            return Ok(Err(refusal));
        }
        if let Some(duplicate) = duplicate {
            return Err(duplicate);
        }
        inserted.map(Ok)
    }

    /// Closes `batch` in a transaction of its own (see
    /// [`super::rules::close_on`]); `Ok(Err(Refusal::Missing))` if there
    /// is no such batch.
    pub(crate) fn batch_close(&self, batch: i64) -> Result<std::result::Result<(), Refusal>> {
        let mut refused = None;
        self.with_driver("close_batch", |d| {
            refused = None;
            in_transaction(d, |d| match super::rules::close_on(d, batch)? {
                Ok(()) => Ok(()),
                Err(refusal) => {
                    refused = Some(refusal);
                    Err(DieselError::RollbackTransaction)
                }
            })
        })?;
        Ok(match refused {
            Some(refusal) => Err(refusal),
            None => Ok(()),
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
}
