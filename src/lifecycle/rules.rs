//! The rules of a job's life that tie the tables together, gathered from
//! the files of each table so that no two of them call each other: what an
//! enqueue places (a concurrency slot, blocked, discarded), what a finish
//! writes and releases, and what follows when members of a batch end (its
//! counts and callbacks, then the dependants of the jobs that ended, whose
//! own ends count in turn). These rules call each other recursively (a
//! cancelled dependant ends a member; a released one may be discarded at
//! its limit), so they live in one module; `batches`, `dependencies`,
//! `concurrency` and `jobs` keep their rows, their statements and the
//! steps that call nothing back. Every function runs inside the caller's
//! transaction, on a [`Driver`].
//!
//! The seed of the layer above the drivers (issue: "rules above, SQL
//! below"): the `Store` methods that open transactions call in here.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use diesel::QueryResult;

use super::places::{self as concurrency, Placement, notify};
use crate::store::batches::{
    BatchDelta, BatchRow, Callback, MemberEnd, NewBatch, Refusal, StoredCallbacks,
};
use crate::store::dependencies::{
    self, FAILED, ParentRef, ParentRow, ReleasedJob, SUCCEEDED, Wait, WaitingRow,
};
use crate::store::*;
use crate::types::OnConflict;
use crate::types::{ErrorInfo, Result};

impl Store {
    /// Moves due limited jobs (at most `batch`) out of scheduled: each
    /// takes a slot, waits blocked, or is discarded.
    pub(crate) fn scheduled_dispatch_limited(&self, batch: usize) -> Result<Placement> {
        self.with_driver("scheduled_dispatch_limited", |d| {
            // Read first: the common case, nothing due, writes nothing.
            if !d.scheduled_limited_due()? {
                return Ok(Placement::default());
            }
            in_transaction(d, |d| {
                let due = d.scheduled_take_limited(None, batch)?;
                if due.is_empty() {
                    return Ok(Placement::default());
                }
                let placement = place(d, due)?;
                notify(d, &placement.ready)?;
                Ok(placement)
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
pub(crate) fn enqueue_reporting(
    d: &mut dyn Driver,
    jobs: &[NewJob],
    notify: bool,
) -> QueryResult<Inserted> {
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
            let placement = place(d, due)?;
            if notify {
                concurrency::notify(d, &placement.ready)?;
            }
            discarded = placement.discarded;
        }
        Ok(Inserted { outcome, discarded })
    })
}

/// Inserts `jobs`, resolving unique-key conflicts to the holders' ids.
pub(crate) fn insert_resolving_duplicates(
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

/// Places limited jobs that became due: each takes a slot of its key and
/// goes to ready, or waits in blocked, or is discarded, per its limit.
pub(crate) fn place(d: &mut dyn Driver, jobs: Vec<LimitedJob>) -> QueryResult<Placement> {
    let (mut ready, mut blocked, mut discarded) = (vec![], vec![], vec![]);
    for job in jobs {
        let slot = job.slot();
        if d.semaphore_acquire(&slot.key, &slot.limit)? {
            ready.push(job);
        } else if slot.limit.on_conflict == OnConflict::Discard {
            discarded.push(job);
        } else {
            blocked.push(job);
        }
    }
    if !ready.is_empty() {
        d.ready_insert(&ready)?;
    }
    if !blocked.is_empty() {
        d.blocked_insert(&blocked)?;
    }
    if !discarded.is_empty() {
        let rows: Vec<Discarded> = discarded
            .iter()
            .map(|job| {
                let slot = job.slot();
                Discarded {
                    id: job.job_id,
                    keep: job.keep(),
                    error: error_json(
                        DISCARDED,
                        &format!(
                            "concurrency limit {} of key {:?} reached; discard on conflict",
                            slot.limit.limit, slot.key
                        ),
                    ),
                }
            })
            .collect();
        d.jobs_discard(&rows)?;
        // Members discarded on their way in are not members yet: whoever
        // enqueued them counts them (`Store::batch_add`).
        let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
        ended_by_id(d, &ids, MemberEnd::Failed)?;
    }
    Ok(Placement {
        ready: ready.into_iter().map(|j| j.queue_name).collect(),
        blocked: blocked.len(),
        discarded,
    })
}

pub(crate) fn finish_on_driver(
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
        members_ended(d, &ended)?;
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
pub(crate) fn single_statement(completions: &[Completion], starts: &[Start]) -> bool {
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

/// Enqueues `jobs` as members of `batch` (inside the caller's
/// transaction), those in `waits` waiting for their parents. A batch takes
/// members while it is open, and after it was closed until it finished (a
/// running member may add to its own batch). Members discarded at their
/// concurrency limit on the way in count as failed. `Err(Refusal)`: roll
/// back.
pub(crate) fn add_on(
    d: &mut dyn Driver,
    batch: i64,
    jobs: &[NewJob],
    notify: bool,
    waits: &[dependencies::Wait],
) -> QueryResult<std::result::Result<crate::store::Inserted, Refusal>> {
    let held;
    let to_insert = if waits.is_empty() {
        jobs
    } else {
        held = dependencies::held(jobs, waits);
        &held[..]
    };
    let inserted = enqueue_reporting(d, to_insert, notify)?;
    let ids: Vec<i64> = inserted.outcome.iter().filter_map(|o| o.ok()).collect();
    let added = BatchDelta {
        total: ids.len() as i64,
        pending: ids.len() as i64,
        edges: waits.iter().map(|w| w.parents.len() as i64).sum(),
        ..BatchDelta::default()
    };
    // The batch row stays locked to the commit: the dependencies below are
    // read and written as no member's completion runs (see
    // `dependencies.rs`).
    match d.batch_change(batch, &added)? {
        None => return Ok(Err(Refusal::Missing)),
        Some(row) if row.finished_at.is_some() => return Ok(Err(Refusal::Finished)),
        Some(_) => {}
    }
    if !ids.is_empty() {
        d.batch_assign(batch, &ids)?;
    }
    if !waits.is_empty()
        && let Err(refusal) = wait_on(d, batch, jobs, &inserted, waits)?
    {
        return Ok(Err(refusal));
    }
    let discarded: Vec<(i64, Option<i64>, MemberEnd)> = inserted
        .discarded
        .iter()
        .map(|job| (batch, Some(job.job_id), MemberEnd::Failed))
        .collect();
    if !discarded.is_empty() {
        members_ended(d, &discarded)?;
    }
    Ok(Ok(inserted))
}

/// Closes `batch` (inside the caller's transaction): from now on it
/// finishes when its last member ends, or now if none is pending.
pub(crate) fn close_on(
    d: &mut dyn Driver,
    batch: i64,
) -> QueryResult<std::result::Result<(), Refusal>> {
    match d.batch_close(batch)? {
        None => Ok(Err(Refusal::Missing)),
        Some(row) => settle(d, row).map(Ok),
    }
}

/// Moves the counts of the batches of members that ended (`(batch id, job id,
/// how)`; no job id for a child batch), in batch id order, settles each batch
/// (see [`settle`]), and resolves the dependencies on those members (see
/// [`parents_ended`]) while the batch row is locked.
pub(crate) fn members_ended(
    d: &mut dyn Driver,
    ended: &[(i64, Option<i64>, MemberEnd)],
) -> QueryResult<()> {
    let mut deltas: BTreeMap<i64, (BatchDelta, Vec<(i64, MemberEnd)>)> = BTreeMap::new();
    for (batch, job, end) in ended {
        let (delta, jobs) = deltas.entry(*batch).or_default();
        delta.pending -= 1;
        match end {
            MemberEnd::Succeeded => delta.succeeded += 1,
            MemberEnd::Failed => delta.failed += 1,
        }
        if let Some(job) = job {
            jobs.push((*job, *end));
        }
    }
    for (batch, (delta, jobs)) in deltas {
        if let Some(row) = d.batch_change(batch, &delta)? {
            let edges = row.edges;
            settle(d, row)?;
            if edges > 0 && !jobs.is_empty() {
                parents_ended(d, batch, &jobs)?;
            }
        }
    }
    Ok(())
}

/// Counts the members among `job_ids` as ended `end` (for paths that do
/// not know which jobs are members: a prune failing jobs, an operator's
/// cancel, a concurrency limit's discard).
pub(crate) fn ended_by_id(d: &mut dyn Driver, job_ids: &[i64], end: MemberEnd) -> QueryResult<()> {
    let ended: Vec<(i64, Option<i64>, MemberEnd)> = members_of(d, job_ids)?
        .into_iter()
        .map(|(batch, job)| (batch, Some(job), end))
        .collect();
    if ended.is_empty() {
        return Ok(());
    }
    members_ended(d, &ended)
}

/// When `row` is closed and nothing in it is pending: marks it finished,
/// enqueues the callbacks due that have not fired, and counts it as ended
/// in its parent. Called in the transaction that changed its counts (the
/// row is locked).
pub(crate) fn settle(d: &mut dyn Driver, row: BatchRow) -> QueryResult<()> {
    if row.closed_at.is_none() || row.pending > 0 {
        return Ok(());
    }
    let callbacks: StoredCallbacks = serde_json::from_str(&row.callbacks).unwrap_or_else(|e| {
        log::error!(
            "batch {}: its callbacks cannot be read ({e}); none is enqueued",
            row.id
        );
        StoredCallbacks::default()
    });
    let due = [
        (Callback::Complete, callbacks.complete.as_ref(), true),
        (
            Callback::Success,
            callbacks.success.as_ref(),
            row.failed == 0,
        ),
        (
            Callback::Failure,
            callbacks.failure.as_ref(),
            row.failed > 0,
        ),
    ];
    let mut jobs = Vec::new();
    for (which, callback, applies) in due {
        if let Some(callback) = callback
            && applies
            && d.batch_fire(row.id, which)?
        {
            jobs.push(callback.to_job());
        }
    }
    if !jobs.is_empty() {
        let inserted = enqueue_reporting(d, &jobs, true)?;
        log::info!(
            "batch {} finished ({} succeeded, {} failed): enqueued its callbacks {:?}",
            row.id,
            row.succeeded,
            row.failed,
            inserted.outcome
        );
    }
    if d.batch_finish(row.id)?
        && let Some(parent) = row.parent_id
    {
        let end = if row.failed == 0 {
            MemberEnd::Succeeded
        } else {
            MemberEnd::Failed
        };
        members_ended(d, &[(parent, None, end)])?;
    }
    Ok(())
}

/// Writes the edges of the jobs of an add that wait (`inserted` gave their
/// ids; `waits` name their parents), moves them to the waiting jobs with
/// their own run time back, and resolves at once the edges to parents that
/// already ended. Inside the add's transaction, the batch row locked.
/// `Err(Refusal::UnknownParent)` when a parent given by id is not a member
/// of `batch`: roll back.
pub(crate) fn wait_on(
    d: &mut dyn Driver,
    batch: i64,
    jobs: &[NewJob],
    inserted: &Inserted,
    waits: &[Wait],
) -> QueryResult<std::result::Result<(), Refusal>> {
    let stored: Vec<i64> = waits
        .iter()
        .flat_map(|w| &w.parents)
        .filter_map(|p| match p {
            ParentRef::Id(id) => Some(*id),
            ParentRef::Index(_) => None,
        })
        .collect::<BTreeSet<i64>>()
        .into_iter()
        .collect();
    let parents: HashMap<i64, ParentRow> = if stored.is_empty() {
        HashMap::new()
    } else {
        d.dependency_parents(&stored)?
            .into_iter()
            .map(|p| (p.id, p))
            .collect()
    };
    if let Some(unknown) = stored
        .iter()
        .find(|id| parents.get(id).is_none_or(|p| p.batch_id != Some(batch)))
    {
        return Ok(Err(Refusal::UnknownParent(*unknown)));
    }
    let mut edges = Vec::new();
    let mut holds = Vec::new();
    for wait in waits {
        // A job whose unique key was taken was not inserted: the caller
        // rolls the add back.
        let Ok(job) = inserted.outcome[wait.index] else {
            continue;
        };
        let own = &jobs[wait.index];
        holds.push(WaitingRow {
            job_id: job,
            run_anyway: wait.run_anyway,
            run_at: own.run_at.or_else(|| {
                (!own.delay.is_zero()).then(|| chrono::Utc::now().naive_utc() + own.delay)
            }),
        });
        for parent in &wait.parents {
            let parent = match parent {
                ParentRef::Id(id) => *id,
                ParentRef::Index(i) => match inserted.outcome[*i] {
                    Ok(id) => id,
                    Err(_) => continue,
                },
            };
            edges.push((job, parent));
        }
    }
    if holds.is_empty() {
        return Ok(Ok(()));
    }
    d.dependencies_insert(batch, &edges)?;
    d.waiting_hold(&holds)?;
    let ended: Vec<(i64, MemberEnd)> = parents
        .values()
        .filter_map(|p| Some((p.id, p.ended?)))
        .collect();
    if !ended.is_empty() {
        parents_ended(d, batch, &ended)?;
    }
    Ok(Ok(()))
}

/// Resolves the edges to `ended` members of `batch` (`(job id, how)`) and
/// settles their dependants: one whose parents all ended runs (ready, or
/// scheduled for its own run time, or placed under its concurrency limit)
/// if they all succeeded or it runs anyway; else it is cancelled, ended as
/// discarded with the failed parent in its error, which ends its own
/// dependants in turn. Inside the transaction that ended them, the batch
/// row locked.
pub(crate) fn parents_ended(
    d: &mut dyn Driver,
    batch: i64,
    ended: &[(i64, MemberEnd)],
) -> QueryResult<()> {
    let pick = |which: MemberEnd| -> Vec<i64> {
        ended
            .iter()
            .filter(|(_, end)| *end == which)
            .map(|(id, _)| *id)
            .collect()
    };
    let mut touched = BTreeSet::new();
    for (parents, outcome) in [
        (pick(MemberEnd::Succeeded), SUCCEEDED),
        (pick(MemberEnd::Failed), FAILED),
    ] {
        if !parents.is_empty() {
            touched.extend(d.dependencies_resolve(&parents, outcome)?);
        }
    }
    let touched: Vec<i64> = touched.into_iter().collect();
    // A wide fan-out is settled a thousand dependants at a time (bind
    // limits: PostgreSQL's 65,535 per statement).
    for chunk in touched.chunks(1_000) {
        settle_dependants(d, batch, chunk)?;
    }
    Ok(())
}

/// Releases or cancels those of `touched` (dependants whose edges just
/// resolved) that still wait and whose parents all ended.
pub(crate) fn settle_dependants(
    d: &mut dyn Driver,
    batch: i64,
    touched: &[i64],
) -> QueryResult<()> {
    let waiting: HashMap<i64, bool> = d
        .waiting_get(touched)?
        .into_iter()
        .map(|w| (w.job_id, w.run_anyway))
        .collect();
    // Per dependant: whether a parent has not ended, and the first that
    // failed.
    let mut state: BTreeMap<i64, (bool, Option<i64>)> = BTreeMap::new();
    for edge in d.dependencies_of(touched)? {
        let entry = state.entry(edge.job_id).or_default();
        match edge.outcome.as_deref() {
            None => entry.0 = true,
            Some(FAILED) => {
                entry.1 = Some(entry.1.map_or(edge.parent_id, |p| p.min(edge.parent_id)))
            }
            Some(_) => {}
        }
    }
    let (mut release, mut cancel) = (Vec::new(), Vec::new());
    for (job, (pending, failed)) in state {
        let Some(run_anyway) = waiting.get(&job) else {
            continue;
        };
        match (pending, failed) {
            (true, _) => {}
            (false, Some(parent)) if !run_anyway => cancel.push((job, parent)),
            (false, _) => release.push(job),
        }
    }
    if !release.is_empty() {
        self::release(d, &release)?;
    }
    if !cancel.is_empty() {
        self::cancel(d, batch, &cancel)?;
    }
    Ok(())
}

/// Moves waiting `jobs` to run: ready when due (placed when limited),
/// scheduled for their own run time otherwise.
pub(crate) fn release(d: &mut dyn Driver, jobs: &[i64]) -> QueryResult<()> {
    d.waiting_delete(jobs)?;
    let rows = d.dependants_read(jobs)?;
    let now = chrono::Utc::now().naive_utc();
    let (due, later): (Vec<ReleasedJob>, Vec<ReleasedJob>) = rows
        .into_iter()
        .partition(|j| j.scheduled_at <= now.max(j.created_at));
    let (limited, free): (Vec<ReleasedJob>, Vec<ReleasedJob>) =
        due.into_iter().partition(|j| j.concurrency_key.is_some());
    if !free.is_empty() {
        d.dependants_ready(&free)?;
        let queues: Vec<String> = free.iter().map(|j| j.queue_name.clone()).collect();
        concurrency::notify(d, &queues)?;
    }
    // Limited ones go through scheduled, due now, and are placed at once
    // as a new limited job is.
    let scheduled: Vec<ReleasedJob> = later.into_iter().chain(limited.iter().cloned()).collect();
    if !scheduled.is_empty() {
        d.dependants_schedule(&scheduled)?;
    }
    if !limited.is_empty() {
        let ids: Vec<i64> = limited.iter().map(|j| j.id).collect();
        let due = d.scheduled_take_limited(Some(&ids), ids.len())?;
        let placement = place(d, due)?;
        concurrency::notify(d, &placement.ready)?;
    }
    log::debug!("{} jobs released: their parents ended", jobs.len());
    Ok(())
}

/// Ends waiting `jobs` (`(job, failed parent)`) as discarded, cancelled by
/// their parent, and counts them as failed members of `batch` (which ends
/// their own dependants).
pub(crate) fn cancel(d: &mut dyn Driver, batch: i64, jobs: &[(i64, i64)]) -> QueryResult<()> {
    let ids: Vec<i64> = jobs.iter().map(|(job, _)| *job).collect();
    d.waiting_delete(&ids)?;
    let options: HashMap<i64, String> = d.jobs_options(&ids)?.into_iter().collect();
    let rows: Vec<Discarded> = jobs
        .iter()
        .map(|(job, parent)| Discarded {
            id: *job,
            keep: std::time::Duration::from_millis(
                StoredOptions::parse(options.get(job).map_or("{}", String::as_str)).keep_result_ms,
            ),
            error: ErrorInfo {
                kind: crate::store::DISCARDED.into(),
                message: format!("cancelled by dependency: job {parent} failed"),
                backtrace: None,
                attempt: None,
                at: Some(chrono::Utc::now()),
                retry_in_ms: None,
            }
            .to_stored_json(),
        })
        .collect();
    d.jobs_discard(&rows)?;
    log::info!(
        "batch {batch}: {} waiting jobs cancelled by dependency",
        rows.len()
    );
    let ended: Vec<(i64, Option<i64>, MemberEnd)> = ids
        .iter()
        .map(|id| (batch, Some(*id), MemberEnd::Failed))
        .collect();
    members_ended(d, &ended)
}

/// Failed members put back to run (an operator's retry): pending again,
/// no longer failed. A batch that had finished is open to finishing again
/// (a callback that fired does not fire twice; `success` may now fire),
/// and its parent counts it as pending again too.
pub(crate) fn members_reopened(d: &mut dyn Driver, batches: &[i64]) -> QueryResult<()> {
    let mut counts: BTreeMap<i64, i64> = BTreeMap::new();
    for batch in batches {
        *counts.entry(*batch).or_default() += 1;
    }
    for (batch, n) in counts {
        let delta = BatchDelta {
            pending: n,
            failed: -n,
            ..BatchDelta::default()
        };
        let Some(row) = d.batch_change(batch, &delta)? else {
            continue;
        };
        if row.finished_at.is_some()
            && d.batch_unfinish(batch)?
            && let Some(parent) = row.parent_id
        {
            members_reopened(d, &[parent])?;
        }
    }
    Ok(())
}

/// The members' batches among `job_ids`: `(batch id, job id)`.
pub(crate) fn members_of(d: &mut dyn Driver, job_ids: &[i64]) -> QueryResult<Vec<(i64, i64)>> {
    if job_ids.is_empty() {
        return Ok(Vec::new());
    }
    d.batch_members(job_ids)
}

/// Opens a batch (inside the caller's transaction); a child of `parent`
/// counts as one pending member of it until it finishes. `Err(Refusal)`
/// when the parent is missing or finished: roll back.
pub(crate) fn open_on(
    d: &mut dyn Driver,
    new: &NewBatch,
) -> QueryResult<std::result::Result<i64, Refusal>> {
    if let Some(parent) = new.parent_id {
        let one = BatchDelta {
            total: 1,
            pending: 1,
            ..BatchDelta::default()
        };
        match d.batch_change(parent, &one)? {
            None => return Ok(Err(Refusal::Missing)),
            Some(row) if row.finished_at.is_some() => return Ok(Err(Refusal::Finished)),
            Some(_) => {}
        }
    }
    Ok(Ok(d.batch_insert(new)?))
}
