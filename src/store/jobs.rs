//! Job lifecycle operations: enqueue, claim, dispatch, finish, release.
//! Each is one transaction composed from [`Driver`] primitives.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use diesel::QueryResult;

use super::batches::{self, MemberEnd};
use super::{
    AttemptStarted, ClaimLimits, ClaimQuery, ClaimedJob, Completion, Discarded, Driver, Failed,
    FinishReport, Inserted, NewJob, Outcome, Progress, Released, Retried, Slot, Snoozed, Start,
    Store, Succeeded, concurrency, driver, in_transaction,
};
use crate::types::{Backend, Result};

/// How many times a claim whose `COMMIT` was lost is read back.
const CLAIM_RESOLVE_ATTEMPTS: u32 = 6;

impl Store {
    /// Inserts jobs in one transaction: each one's new id, or the id of
    /// the existing job holding the same unique key (`Err`), and the jobs
    /// discarded at their concurrency limit on the way in.
    pub(crate) fn jobs_enqueue(&self, jobs: &[NewJob]) -> Result<Inserted> {
        let inserted = self.with_driver("jobs_enqueue", |d| enqueue_reporting(d, jobs, false))?;
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
        enqueue_reporting(d, jobs, notify)
    }

    /// Claims jobs for `process_id` within `limits`.
    ///
    /// On PostgreSQL the claim is one statement in an explicit
    /// transaction. A claim whose reply is lost with its connection may
    /// have committed, and the jobs it took would then stay claimed by a
    /// live process that does not know them, run by nobody. In a
    /// transaction, the statement's rows arrive before the `COMMIT`: when
    /// only the `COMMIT`'s answer is lost, the claims are read back on a
    /// fresh connection (see [`Store::claims_resolve`]).
    pub(crate) fn ready_claim(
        &self,
        claim: &ClaimQuery,
        process_id: i64,
        limits: &ClaimLimits,
    ) -> Result<Vec<ClaimedJob>> {
        if limits.total() == 0 {
            return Ok(Vec::new());
        }
        if self.backend() != Backend::Postgres {
            // SQLite's connections are never lost.
            return self.with_driver("ready_claim", |d| d.ready_claim(claim, process_id, limits));
        }
        let mut claimed: Option<Vec<ClaimedJob>> = None;
        let result = self.with_driver("ready_claim", |d| {
            claimed = None;
            in_transaction(d, |d| {
                let jobs = d.ready_claim(claim, process_id, limits)?;
                claimed = Some(jobs.clone());
                Ok(jobs)
            })
        });
        match (result, claimed) {
            (Err(error), Some(jobs)) if error.may_have_committed() && !jobs.is_empty() => {
                self.claims_resolve(process_id, jobs, error)
            }
            (result, _) => result,
        }
    }

    /// Reads back which of `jobs`, whose claim's `COMMIT` failed with
    /// `error` (the connection lost: it may have committed), `process_id`
    /// holds, and returns those: the others were not claimed and are still
    /// ready. Retries the read a few times; if the database stays away,
    /// returns `error`, and any of them claimed stays so until this
    /// process stops or is pruned (both release its claims).
    fn claims_resolve(
        &self,
        process_id: i64,
        jobs: Vec<ClaimedJob>,
        error: crate::types::Error,
    ) -> Result<Vec<ClaimedJob>> {
        let ids: Vec<i64> = jobs.iter().map(|j| j.id).collect();
        log::warn!(
            "claiming {} jobs: {error}; the claim may have committed, reading it back",
            ids.len()
        );
        let mut pause = Duration::from_millis(100);
        for _ in 0..CLAIM_RESOLVE_ATTEMPTS {
            match self.with_read("claimed_held", |c| driver(c).claimed_held(process_id, &ids)) {
                Ok(held) => {
                    let held: HashSet<i64> = held.into_iter().collect();
                    log::info!(
                        "the lost claim committed for {} of {} jobs; running those",
                        held.len(),
                        ids.len()
                    );
                    return Ok(jobs.into_iter().filter(|j| held.contains(&j.id)).collect());
                }
                Err(read) => {
                    log::warn!("reading back a lost claim failed ({read}); retrying in {pause:?}");
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
            }
        }
        log::error!(
            "cannot tell whether this process (id {process_id}) claimed jobs {ids:?}; \
             any it did are released when it stops or is pruned"
        );
        Err(error)
    }

    /// Moves up to `batch` due scheduled jobs to ready (those under a
    /// concurrency limit: see [`Store::scheduled_dispatch_limited`]).
    pub(crate) fn scheduled_dispatch(&self, batch: usize) -> Result<Vec<String>> {
        self.with_driver("scheduled_dispatch", |d| d.scheduled_dispatch(batch))
    }

    /// How long until the next scheduled job is due (zero when one is due
    /// already), by the backend's clock; `None` when none is scheduled.
    /// One read of the scheduled table's `scheduled_at` index.
    pub(crate) fn scheduled_next_due(&self) -> Result<Option<Duration>> {
        use super::schema::solidq_scheduled_executions as scheduled;
        use diesel::prelude::*;
        self.with_read("scheduled_next_due", |conn| {
            let next: Option<chrono::NaiveDateTime> = scheduled::table
                .select(diesel::dsl::min(scheduled::scheduled_at))
                .first(conn)?;
            let Some(next) = next else {
                return Ok(None);
            };
            let now = driver(conn).db_now()?;
            Ok(Some((next - now).to_std().unwrap_or(Duration::ZERO)))
        })
    }

    /// Stores running jobs' progress, each only while this process still
    /// holds its claim.
    pub(crate) fn jobs_progress(&self, rows: &[Progress]) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        self.with_driver("jobs_progress", |d| {
            if rows.len() == 1 {
                d.jobs_set_progress(rows)
            } else {
                in_transaction(d, |d| d.jobs_set_progress(rows))
            }
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
            if progress.is_empty() && single_statement(completions, starts) {
                finish_on_driver(d, completions, starts)
            } else {
                in_transaction(d, |d| {
                    if !progress.is_empty() {
                        d.jobs_set_progress(progress)?;
                    }
                    finish_on_driver(d, completions, starts)
                })
            }
        })
    }

    /// Hands claimed jobs that never started back to ready (not a stall).
    /// Returns the ids whose claim was still held.
    pub(crate) fn claimed_release(&self, process_id: i64, job_ids: &[i64]) -> Result<Vec<i64>> {
        self.with_driver("claimed_release", |d| {
            in_transaction(d, |d| {
                let held = d.claimed_delete_fenced(process_id, job_ids)?;
                // A start granted under a rate limit was not used: give it
                // back to the key's window.
                if !held.is_empty() {
                    d.rate_starts_forget(&held)?;
                }
                let rows: Vec<Released> = held
                    .iter()
                    .map(|&id| Released {
                        id,
                        stalled: false,
                        error: None,
                    })
                    .collect();
                if !rows.is_empty() {
                    d.jobs_release(&rows)?;
                }
                Ok(held)
            })
        })
    }
}

/// Inserts `jobs` and resolves duplicates to the existing ids. Shared by
/// [`Store::jobs_enqueue`], enqueueing on a caller's connection, and
/// recurring ticks.
/// Each insert is atomic on its own (one statement on PostgreSQL, a write
/// transaction or savepoint on SQLite), so a single enqueue is one round
/// trip; callers that need all-or-nothing wrap this in a transaction.
fn enqueue_reporting(d: &mut dyn Driver, jobs: &[NewJob], notify: bool) -> QueryResult<Inserted> {
    if jobs.iter().all(|j| j.concurrency_key.is_none()) {
        return Ok(Inserted {
            outcome: insert_resolving_duplicates(d, jobs, notify)?,
            discarded: Vec::new(),
        });
    }
    // Jobs under a concurrency limit are inserted into scheduled, then
    // placed (a slot, blocked, or discarded) in the same transaction.
    in_transaction(d, |d| {
        let outcome = insert_resolving_duplicates(d, jobs, notify)?;
        let limited: Vec<i64> = jobs
            .iter()
            .zip(&outcome)
            .filter(|(job, _)| job.concurrency_key.is_some())
            .filter_map(|(_, o)| o.ok())
            .collect();
        let mut discarded = Vec::new();
        if !limited.is_empty() {
            let due = d.scheduled_take_limited(Some(&limited), limited.len())?;
            let placement = concurrency::place(d, due)?;
            if notify {
                concurrency::notify(d, &placement.ready)?;
            }
            discarded = placement.discarded;
        }
        Ok(Inserted { outcome, discarded })
    })
}

/// Inserts `jobs`, resolving unique-key conflicts to the holders' ids.
fn insert_resolving_duplicates(
    d: &mut dyn Driver,
    jobs: &[NewJob],
    notify: bool,
) -> QueryResult<Vec<std::result::Result<i64, i64>>> {
    {
        let mut outcome: Vec<Option<std::result::Result<i64, i64>>> = vec![None; jobs.len()];
        let mut pending: Vec<usize> = (0..jobs.len()).collect();
        // A key's holder can be deleted (cleaned) between our conflict and
        // our lookup; such a job is inserted again. A few rounds settle it.
        for _ in 0..5 {
            if pending.is_empty() {
                break;
            }
            let inserted = if pending.len() == jobs.len() {
                d.jobs_insert(jobs, notify)?
            } else {
                let retry: Vec<NewJob> = pending.iter().map(|&i| jobs[i].clone()).collect();
                d.jobs_insert(&retry, notify)?
            };
            let keys: Vec<String> = pending
                .iter()
                .zip(&inserted)
                .filter(|(_, id)| id.is_none())
                .filter_map(|(&i, _)| jobs[i].unique_key.clone())
                .collect();
            let existing: HashMap<String, i64> = if keys.is_empty() {
                HashMap::new()
            } else {
                d.jobs_find_by_unique_keys(&keys)?.into_iter().collect()
            };
            let mut again = Vec::new();
            for (&i, id) in pending.iter().zip(inserted) {
                let holder = jobs[i].unique_key.as_ref().and_then(|k| existing.get(k));
                match (id, holder) {
                    (Some(id), _) => outcome[i] = Some(Ok(id)),
                    (None, Some(&holder)) => outcome[i] = Some(Err(holder)),
                    (None, None) => again.push(i),
                }
            }
            pending = again;
        }
        if !pending.is_empty() {
            return Err(diesel::result::Error::RollbackTransaction);
        }
        Ok(outcome
            .into_iter()
            .map(|o| o.expect("every job settled"))
            .collect())
    }
}

fn finish_on_driver(
    d: &mut dyn Driver,
    completions: &[Completion],
    starts: &[Start],
) -> QueryResult<FinishReport> {
    // Kept successes (nearly every completion) are fenced and written by one
    // statement per process, which also records that process's starts; the
    // rest are fenced first, then written per outcome.
    let mut started: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for s in starts {
        started.entry(s.process_id).or_default().push(s.job_id);
    }
    let mut kept: BTreeMap<i64, Vec<Succeeded>> = BTreeMap::new();
    let mut others: BTreeMap<i64, Vec<&Completion>> = BTreeMap::new();
    for c in completions {
        match &c.outcome {
            Outcome::Succeeded { result, keep } if !keep.is_zero() => {
                kept.entry(c.process_id).or_default().push(Succeeded {
                    id: c.job_id,
                    result: result.clone(),
                    keep: *keep,
                    started_ago: c.started.map(|at| at.elapsed()).unwrap_or_default(),
                })
            }
            _ => others.entry(c.process_id).or_default().push(c),
        }
    }
    let mut written = HashSet::new();
    for (process_id, rows) in &kept {
        let starts = started.remove(process_id).unwrap_or_default();
        written.extend(d.jobs_succeed_fenced(*process_id, rows, &starts)?);
    }
    for (process_id, ids) in &started {
        d.claimed_mark_started(*process_id, ids)?;
    }
    let finish_slots = |written: &HashSet<i64>| -> Vec<Slot> {
        completions
            .iter()
            .filter(|c| written.contains(&c.job_id))
            .filter_map(|c| c.slot.clone())
            .collect()
    };
    let (mut deleted, mut retried, mut failed, mut snoozed, mut discarded) =
        (vec![], vec![], vec![], vec![], vec![]);
    for (process_id, group) in &others {
        let ids: Vec<i64> = group.iter().map(|c| c.job_id).collect();
        let fenced: HashSet<i64> = d
            .claimed_delete_fenced(*process_id, &ids)?
            .into_iter()
            .collect();
        for c in group.iter().filter(|c| fenced.contains(&c.job_id)) {
            written.insert(c.job_id);
            match &c.outcome {
                Outcome::Succeeded { .. } => deleted.push(c.job_id),
                Outcome::Retry { error, delay } => retried.push(Retried {
                    id: c.job_id,
                    error: error.clone(),
                    delay: *delay,
                }),
                Outcome::Failed { error } => failed.push(Failed {
                    id: c.job_id,
                    error: error.clone(),
                    ends_attempt: true,
                    stalled: false,
                }),
                Outcome::Snoozed { delay } => snoozed.push(Snoozed {
                    id: c.job_id,
                    delay: *delay,
                }),
                Outcome::Discarded { error, keep } => discarded.push(Discarded {
                    id: c.job_id,
                    error: error.clone(),
                    keep: *keep,
                }),
            }
        }
    }
    if !deleted.is_empty() {
        d.jobs_delete(&deleted)?;
    }
    if !retried.is_empty() {
        d.jobs_retry(&retried)?;
    }
    if !failed.is_empty() {
        d.jobs_fail(&failed)?;
    }
    if !snoozed.is_empty() {
        d.jobs_snooze(&snoozed)?;
    }
    if !discarded.is_empty() {
        d.jobs_discard(&discarded)?;
    }
    // When those attempts started; a cancel of a started job counts its
    // attempt (the discard itself does not: it also ends jobs that never
    // ran).
    let started: Vec<AttemptStarted> = completions
        .iter()
        .filter(|c| written.contains(&c.job_id))
        // Kept successes record it themselves; others are deleted.
        .filter(|c| !matches!(c.outcome, Outcome::Succeeded { .. }))
        .filter_map(|c| {
            Some(AttemptStarted {
                id: c.job_id,
                ago: c.started?.elapsed(),
                count: matches!(c.outcome, Outcome::Discarded { .. }),
            })
        })
        .collect();
    if !started.is_empty() {
        d.jobs_attempt_started(&started)?;
    }
    // Members that ended move their batches' counts, and release or
    // cancel the jobs waiting for them, in this transaction.
    let ended: Vec<(i64, Option<i64>, MemberEnd)> = completions
        .iter()
        .filter(|c| written.contains(&c.job_id))
        .filter_map(|c| {
            let end = match c.outcome {
                Outcome::Succeeded { .. } => MemberEnd::Succeeded,
                Outcome::Failed { .. } | Outcome::Discarded { .. } => MemberEnd::Failed,
                Outcome::Retry { .. } | Outcome::Snoozed { .. } => return None,
            };
            Some((c.batch_id?, Some(c.job_id), end))
        })
        .collect();
    if !ended.is_empty() {
        batches::members_ended(d, &ended)?;
    }
    // Slots of limited jobs go to the next blocked job of their key, in
    // this same transaction.
    let slots = finish_slots(&written);
    if !slots.is_empty() {
        let ready = concurrency::release_slots(d, &slots)?;
        concurrency::notify(d, &ready)?;
    }
    let (written, lost) = completions
        .iter()
        .map(|c| c.job_id)
        .partition(|id| written.contains(id));
    Ok(FinishReport { written, lost })
}

/// Whether a batch is written by a single statement (one process, only
/// kept successes, no concurrency slots to give back, starts of that
/// process only, or only starts of one process), which needs no explicit
/// transaction.
fn single_statement(completions: &[Completion], starts: &[Start]) -> bool {
    let Some(process_id) = completions
        .first()
        .map(|c| c.process_id)
        .or(starts.first().map(|s| s.process_id))
    else {
        return true;
    };
    starts.iter().all(|s| s.process_id == process_id)
        && completions.iter().all(|c| {
            c.process_id == process_id
                && c.slot.is_none()
                && c.batch_id.is_none()
                && matches!(&c.outcome, Outcome::Succeeded { keep, .. } if !keep.is_zero())
        })
}

#[cfg(all(test, feature = "sqlite"))]
mod tests {
    use super::*;
    use crate::store::{NewProcess, PoolOptions, SqliteSettings};
    use crate::types::{DatabaseUrl, Delivery, Error, QueuePattern};

    fn job() -> NewJob {
        NewJob {
            queue_name: "default".into(),
            kind: "noop".into(),
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

    /// A claim whose `COMMIT` answer was lost: of the rows it returned,
    /// only those the process holds are kept (its claim committed for
    /// them); the others were never claimed and stay ready for anyone.
    #[test]
    fn a_claim_whose_commit_answer_was_lost_keeps_only_the_jobs_it_holds() {
        let dir = tempfile::tempdir().unwrap();
        let url = DatabaseUrl::parse(&dir.path().join("q.sqlite3").display().to_string()).unwrap();
        let store = Store::connect(
            &url,
            &PoolOptions {
                size: 2,
                timeout: Duration::from_secs(5),
                sqlite: SqliteSettings::default(),
            },
        )
        .unwrap();
        store.migrate().unwrap();
        let ids: Vec<i64> = store
            .jobs_enqueue(&[job(), job(), job(), job()])
            .unwrap()
            .outcome
            .into_iter()
            .map(|o| o.unwrap())
            .collect();
        let process = store
            .process_register(&NewProcess {
                kind: "worker".into(),
                name: "claims-resolve".into(),
                pid: 1,
                hostname: "test".into(),
                supervisor_id: None,
                metadata: "{}".into(),
            })
            .unwrap();
        let claim = ClaimQuery::new(vec![QueuePattern::parse("*").unwrap()]);
        let limits = ClaimLimits {
            immediate: 2,
            ahead: 0,
            fast_kinds: Vec::new(),
        };
        // What the lost claim returned: two it holds and two it does not
        // (as if the transaction that claimed them had rolled back).
        let held = store.ready_claim(&claim, process, &limits).unwrap();
        assert_eq!(held.len(), 2);
        let not_held: Vec<ClaimedJob> = ids
            .iter()
            .filter(|id| held.iter().all(|h| h.id != **id))
            .map(|id| ClaimedJob {
                id: *id,
                ..held[0].clone()
            })
            .collect();
        let mut returned = held.clone();
        returned.extend(not_held.iter().cloned());
        let lost = Error::Database {
            operation: "ready_claim",
            source: Box::new(diesel::result::Error::DatabaseError(
                diesel::result::DatabaseErrorKind::ClosedConnection,
                Box::new("server closed the connection unexpectedly".to_string()),
            )),
        };
        assert!(lost.may_have_committed());
        let sorted = |jobs: &[ClaimedJob]| {
            let mut ids: Vec<i64> = jobs.iter().map(|j| j.id).collect();
            ids.sort_unstable();
            ids
        };
        let kept = store.claims_resolve(process, returned, lost).unwrap();
        assert_eq!(
            sorted(&kept),
            sorted(&held),
            "only the jobs whose claim exists"
        );
        // The others are still there for the next claim.
        let next = store.ready_claim(&claim, process, &limits).unwrap();
        assert_eq!(sorted(&next), sorted(&not_held));
    }
}
