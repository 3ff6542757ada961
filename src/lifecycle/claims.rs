//! Claims: taking ready jobs for a process, reading back a claim whose
//! `COMMIT` answer was lost, handing back claims that never started, and
//! the progress of running jobs under their claim's fence.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::store::{
    ClaimLimits, ClaimQuery, ClaimedJob, Progress, Released, Store, driver, in_claim_transaction,
    in_transaction,
};
use crate::types::{Backend, Result};

/// How long a look below the claims' floor waits for a connection: it
/// takes a free one, or waits for the next.
const PROBE_CHECKOUT: Duration = Duration::from_millis(100);

/// How many times a claim whose `COMMIT` was lost is read back.
const CLAIM_RESOLVE_ATTEMPTS: u32 = 6;

impl Store {
    /// Claims jobs for `process_id` within `limits`.
    ///
    /// On PostgreSQL and MySQL the claim runs in an explicit transaction
    /// (one statement on PostgreSQL, several on MySQL). A claim whose
    /// reply is lost with its connection may have committed, and the jobs
    /// it took would then stay claimed by a live process that does not
    /// know them, run by nobody. In a transaction, the claimed rows arrive
    /// before the `COMMIT`: when only the `COMMIT`'s answer is lost, the
    /// claims are read back on a fresh connection (see
    /// [`Store::claims_resolve`]). SQLite's connections are never lost
    /// (it looks without the write lock first, then takes it itself).
    pub(crate) fn ready_claim(
        &self,
        claim: &ClaimQuery,
        process_id: i64,
        limits: &ClaimLimits,
    ) -> Result<Vec<ClaimedJob>> {
        if limits.total() == 0 {
            return Ok(Vec::new());
        }
        if self.backend() == Backend::Sqlite {
            return self.with_driver("ready_claim", |d| d.ready_claim(claim, process_id, limits));
        }
        self.probe_floor(claim);
        // The claimed rows are kept here, not copied: they are the answer
        // once the transaction commits, and what to read back when only
        // its `COMMIT`'s answer is lost.
        let mut claimed: Option<Vec<ClaimedJob>> = None;
        let result = self.with_driver("ready_claim", |d| {
            claimed = None;
            in_claim_transaction(d, |d| {
                claimed = Some(d.ready_claim(claim, process_id, limits)?);
                Ok(())
            })
        });
        if result.is_err() {
            claim.forget_floor();
        }
        match (result, claimed) {
            (Ok(()), claimed) => Ok(claimed.unwrap_or_default()),
            (Err(error), Some(jobs)) if error.may_have_committed() && !jobs.is_empty() => {
                self.claims_resolve(process_id, jobs, error)
            }
            (Err(error), _) => Err(error),
        }
    }

    /// Starts a look below `claim`'s floor when one is due (`store::floor`),
    /// on a thread and a connection of its own: under a long hold it walks
    /// every row claimed since the hold began, and a claim that did so
    /// kept jobs waiting. It takes a connection only if one is free soon.
    fn probe_floor(&self, claim: &ClaimQuery) {
        let Some((floor, prober)) = claim.probe_due() else {
            return;
        };
        let store = self.clone();
        let spawned = std::thread::Builder::new()
            .name("solidq-floor".into())
            .spawn(move || {
                let at = Instant::now();
                let found =
                    store.with_conn_within("ready_below_floor", Some(PROBE_CHECKOUT), |c| {
                        driver(c).ready_below_floor(&prober, floor)
                    });
                if let Err(error) = &found {
                    log::debug!("looking below the claims' floor: {error}");
                }
                prober.probed(at, at.elapsed(), found.ok());
            });
        if let Err(error) = spawned {
            log::debug!("looking below the claims' floor: {error}");
            claim.probed(Instant::now(), Duration::ZERO, None);
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

    /// Records the claims of `process_id` among `job_ids` as not started:
    /// a job that runs alone waits, unstarted, for the others to end.
    pub(crate) fn claimed_mark_unstarted(&self, process_id: i64, job_ids: &[i64]) -> Result<()> {
        self.with_driver("claimed_mark_unstarted", |d| {
            d.claimed_mark_unstarted(process_id, job_ids)
        })
    }

    /// Records the claims of `process_id` among `job_ids` as started now
    /// (a job that waited to run alone starts: a crash from here on is
    /// its stall).
    pub(crate) fn claimed_mark_started(&self, process_id: i64, job_ids: &[i64]) -> Result<()> {
        self.with_driver("claimed_mark_started", |d| {
            d.claimed_mark_started(process_id, job_ids)
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

#[cfg(all(test, feature = "sqlite"))]
mod tests {
    use super::*;
    use crate::types::Error;

    /// A claim whose `COMMIT` answer was lost: of the rows it returned,
    /// only those the process holds are kept (its claim committed for
    /// them); the others were never claimed and stay ready for anyone.
    #[test]
    fn a_claim_whose_commit_answer_was_lost_keeps_only_the_jobs_it_holds() {
        let (_dir, store, ids, process, claim) = Store::four_jobs_and_a_worker("claims-resolve");
        let limits = ClaimLimits::idle(2);
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
