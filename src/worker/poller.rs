//! The claim loop. It claims up to the free capacity in one transaction:
//! one job per idle thread (recorded as started), plus a claim-ahead of
//! jobs of kinds measured faster than a claim round trip (see
//! [`super::stats::plan`]); hands the jobs to the pool's queue; and sleeps
//! until a thread frees up (when the last claim came back full), a
//! listener or an enqueue in this process wakes it, or the polling
//! interval passes. Jobs queued ahead whose kind turns out slow are handed
//! back at once, so a worker never sits on work others could run.
//!
//! It claims nothing while the worker's lease is invalid (its heartbeats
//! failed too long: its row may be pruned), while outcomes wait for the
//! completer beyond its limit, or while writing outcomes fails (a full
//! disk, an outage): a job started then could not have its end recorded.
//!
//! A claimed job whose last run ended with its process dead runs alone
//! ([`Alone`]): the other jobs of its claim and those queued are handed
//! back, it waits unstarted until the jobs running end, then runs with
//! nothing else started until it ends. A crash during that run is its
//! stall alone, so a job that kills its process takes no neighbour with
//! it.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::completer::{ClaimRequest, Message};
use super::pool;
use super::shutdown;
use super::state::{Alone, Assigned, Unreleased, WorkQueue};
use super::state::{Parts, Shared, lock};
use super::stats::{self, Plan};
use crate::events::JobClaimed;
use crate::lifecycle::Limited;
use crate::process;
use crate::store::{ClaimLimits, ClaimedJob, StoredOptions};
use crate::types::{Backend, Result};

/// How often jobs queued ahead are checked against how long their kind
/// now takes.
const REBALANCE_INTERVAL: Duration = Duration::from_millis(20);

/// Runs the claim loop until the worker stops, then the shutdown sequence.
pub(super) fn run(shared: &Arc<Shared>, mut parts: Parts) -> Result<()> {
    let threads = shared.config.threads;
    let mut failures = 0u32;
    let mut backlog = false;
    let mut outcomes_failing = false;
    // A list of queue names: the first that may have jobs, and when all
    // were last probed (see `ClaimLimits::from`).
    let mut listed_from = 0usize;
    let mut probed_all = Instant::now();
    // When the last claim was sent, and whether the last wait ended only
    // because jobs queued ahead were due a look (`REBALANCE_INTERVAL`):
    // that alone is no reason to claim again before the interval.
    let mut last_claim = Instant::now();
    let mut rebalance_tick = false;
    let parent = std::os::unix::process::parent_id();
    while !shared.stopping.load(Ordering::SeqCst) {
        if shared.config.supervisor_id.is_some() && std::os::unix::process::parent_id() != parent {
            log::warn!("the supervisor (pid {parent}) is gone: shutting down gracefully");
            shared.request_stop();
            break;
        }
        let mut wait = if shared.reach.listening.load(Ordering::SeqCst) {
            shared.config.fallback_polling_interval
        } else {
            shared.config.polling_interval
        };
        pool::release_pending(shared);
        let due = !rebalance_tick || last_claim.elapsed() >= wait;
        rebalance_tick = false;
        let process_id = shared.process_id();
        if process_id == 0 {
            shared.duty.want(false);
            if !reregister(shared, &mut failures) {
                wait = backoff(shared.config.polling_interval, failures);
            }
        } else {
            let plan = plan(shared);
            rebalance(shared, &parts.work, &plan);
            // After a claim that came back full there is probably more work:
            // claim again once half the capacity is free or the claimed jobs
            // waiting for a thread have run out, so claims stay large without
            // letting a thread idle.
            let capacity = threads + plan.ahead;
            let inflight = shared.inflight.load(Ordering::SeqCst);
            let free = capacity.saturating_sub(inflight);
            let worth_it =
                |free: usize, waiting: usize| free > 0 && (free * 2 >= capacity || waiting == 0);
            // Outcomes the completer cannot write yet, or a lease that may
            // have lapsed: claim nothing more until that passes.
            let failing = shared.backlog.is_failing();
            if failing != outcomes_failing {
                outcomes_failing = failing;
                if failing {
                    log::warn!(
                        "outcomes cannot be written: claiming nothing until they are (the jobs already claimed run on)"
                    );
                } else {
                    log::info!("outcomes are written again: claiming");
                }
            }
            let alone = step_alone(shared, &mut parts, threads);
            let may_claim =
                !alone && !shared.backlog.is_full() && !failing && shared.lease.is_valid();
            // Queues a notification named since may have jobs; without a
            // listener any may, and all are probed once per polling
            // interval whatever was heard.
            listed_from = listed_from.min(shared.heard_from.swap(usize::MAX, Ordering::SeqCst));
            if !shared.reach.listening.load(Ordering::SeqCst)
                || probed_all.elapsed() >= shared.config.polling_interval
            {
                listed_from = 0;
            }
            if free > 0 && due && may_claim && (!backlog || worth_it(free, parts.work.len())) {
                last_claim = Instant::now();
                let immediate = threads.saturating_sub(inflight).min(free);
                if listed_from == 0 {
                    probed_all = Instant::now();
                }
                let limits = ClaimLimits {
                    immediate,
                    ahead: free - immediate,
                    fast_kinds: plan.fast_kinds,
                    from: listed_from,
                };
                let started = Instant::now();
                log::trace!("claiming {limits:?} with {inflight} in flight");
                match claim(shared, &parts, process_id, &limits) {
                    Ok(jobs) => {
                        shared.stats.claim(jobs.len(), started.elapsed());
                        if !jobs.is_empty() {
                            shared.claim_time.observe(started.elapsed());
                        }
                        failures = 0;
                        backlog = jobs.len() == limits.total();
                        listed_from = empty_before(&jobs, &limits, listed_from);
                        let jobs = grant_starts(shared, process_id, jobs);
                        shared.inflight.fetch_add(jobs.len(), Ordering::SeqCst);
                        let claimed = Instant::now();
                        // Before the threads get them, so a job's claim is
                        // always reported before its outcome.
                        for job in &jobs {
                            shared.events.job_claimed(&JobClaimed::of(job, process_id));
                        }
                        let jobs = take_alone(shared, &mut parts, process_id, jobs, claimed);
                        let assigned = jobs
                            .into_iter()
                            .map(|job| Assigned {
                                job,
                                process_id,
                                claimed,
                            })
                            .collect();
                        parts.work.push_all(assigned, threads);
                    }
                    Err(error) => {
                        failures += 1;
                        backlog = false;
                        listed_from = 0;
                        wait = backoff(shared.config.polling_interval, failures);
                        log::warn!("claiming failed ({error}); retrying in {wait:?}");
                    }
                }
            }
            // With room for more and no backlog, it claims on what it
            // hears: it gets in line for the duty (`duty.rs`).
            let full = shared.inflight.load(Ordering::SeqCst) >= threads;
            shared.duty.want(may_claim && !backlog && !full);
            // A job waiting to run alone, or running alone, wants to hear
            // of each thread that frees up; so does a worker without room:
            // it let the duty go, and hears of new jobs no more until it
            // has room and takes it again.
            shared
                .wake_when_free
                .store(backlog || full || parts.alone.is_some(), Ordering::SeqCst);
            // Threads that freed up before the flag was set did not wake us.
            let free = capacity.saturating_sub(shared.inflight.load(Ordering::SeqCst));
            if backlog && may_claim && worth_it(free, parts.work.len()) {
                continue;
            }
            if full && shared.inflight.load(Ordering::SeqCst) < threads {
                continue;
            }
            if alone_may_move(shared, &parts) {
                continue;
            }
            if parts.work.len() > 0 && wait > REBALANCE_INTERVAL {
                let woken = parts.wake_rx.recv_timeout(REBALANCE_INTERVAL).is_ok();
                rebalance_tick = !woken;
                continue;
            }
        }
        let _ = parts.wake_rx.recv_timeout(wait);
    }
    shutdown::run(shared, &mut parts)
}

/// Claims within `limits`. On SQLite, while outcomes wait for the
/// completer, it claims in the transaction that writes them
/// (`completer::ClaimRequest`): SQLite has one write lock, and the worker
/// then takes it once a round, not twice. The write counts in the claim's
/// measured round trip (the claim-ahead plan's yardstick): a thread
/// waiting for work waits for both.
fn claim(
    shared: &Shared,
    parts: &Parts,
    process_id: i64,
    limits: &ClaimLimits,
) -> Result<Vec<ClaimedJob>> {
    if shared.store.backend() == Backend::Sqlite && !shared.backlog.is_empty() {
        let (reply, answer) = crossbeam_channel::bounded(1);
        let request = ClaimRequest {
            claim: Arc::clone(&parts.claim),
            process_id,
            limits: limits.clone(),
            reply,
        };
        if parts.completer.tx.send(Message::Claim(request)).is_ok()
            && let Ok(Some(jobs)) = answer.recv()
        {
            return Ok(jobs);
        }
    }
    shared.store.ready_claim(&parts.claim, process_id, limits)
}

/// How many queues of a list of names are known to be empty after a
/// claim: when it took as many jobs for idle threads as it asked for,
/// every listed queue before the first it took one from had none (or only
/// rows another claim held). A claim only ahead (no thread idle) keeps
/// what was `known`; one that took fewer than it asked for says nothing
/// (0).
fn empty_before(jobs: &[ClaimedJob], limits: &ClaimLimits, known: usize) -> usize {
    if limits.immediate == 0 {
        return known;
    }
    let took = jobs.iter().filter(|j| j.started);
    if took.clone().count() < limits.immediate {
        return 0;
    }
    took.map(|j| usize::try_from(j.ord).unwrap_or(0))
        .min()
        .unwrap_or(0)
}

/// Moves the job that runs alone on: a waiting one starts once it is the
/// only job in flight and every other job's outcome is written; a running
/// one is done when its own outcome is (until then a crash would take the
/// jobs whose end is not recorded with it: they would run again). Returns
/// whether claims wait for it.
fn step_alone(shared: &Shared, parts: &mut Parts, threads: usize) -> bool {
    if !alone_may_move(shared, parts) {
        return parts.alone.is_some();
    }
    parts.alone = match parts.alone.take() {
        Some(Alone::Waiting(mut assigned)) => {
            let id = assigned.job.id;
            log::info!("job {id} runs alone now: this process's other jobs have ended");
            record_start(shared, assigned.process_id, &mut assigned.job);
            parts.work.push_all(vec![*assigned], threads);
            Some(Alone::Running(id))
        }
        Some(Alone::Running(id)) => {
            log::info!("job {id} ran alone and its end is recorded: claiming again");
            None
        }
        None => None,
    };
    shared.backlog.wake_when_empty(parts.alone.is_some());
    parts.alone.is_some()
}

/// Records the start of a job that runs alone before it runs, if its
/// claim did not: it runs alone because it may kill its process, and a
/// kill must count as its stall (a start left to the completer's next
/// batch is lost if the process dies first, and its rerun would not be
/// counted).
fn record_start(shared: &Shared, process_id: i64, job: &mut ClaimedJob) {
    if job.started {
        return;
    }
    match shared.store.claimed_mark_started(process_id, &[job.id]) {
        Ok(()) => job.started = true,
        Err(error) => log::warn!(
            "cannot record that job {} started ({error}); the completer records it, \
             and if this process dies first its run is not counted as a stall",
            job.id
        ),
    }
}

/// Whether the job that runs alone may start (waiting) or is done
/// (running). The flags that wake the poller are set before the counts
/// are read, so a thread or the completer that changes them after the
/// read wakes it.
fn alone_may_move(shared: &Shared, parts: &Parts) -> bool {
    let Some(alone) = &parts.alone else {
        return false;
    };
    shared.wake_when_free.store(true, Ordering::SeqCst);
    shared.backlog.wake_when_empty(true);
    // In flight first: a thread adds its outcome to the backlog before it
    // leaves the count.
    let inflight = shared.inflight.load(Ordering::SeqCst);
    let written = shared.backlog.is_empty();
    match alone {
        Alone::Waiting(_) => inflight <= 1 && written,
        Alone::Running(_) => inflight == 0 && written,
    }
}

/// Of newly claimed `jobs` (counted in flight), the first that must run
/// alone is kept aside and the rest (with every job queued and not
/// started) handed back; returns the jobs to queue. It starts at once when
/// nothing else is in flight, else it waits unstarted
/// ([`step_alone`] starts it).
fn take_alone(
    shared: &Shared,
    parts: &mut Parts,
    process_id: i64,
    mut jobs: Vec<ClaimedJob>,
    claimed: Instant,
) -> Vec<ClaimedJob> {
    let Some(at) = jobs.iter().position(|j| j.run_alone) else {
        return jobs;
    };
    let mut job = jobs.remove(at);
    let mut back: Vec<Assigned> = jobs
        .into_iter()
        .map(|job| Assigned {
            job,
            process_id,
            claimed,
        })
        .collect();
    back.extend(parts.work.take_back(|_| true));
    let handed_back = back.len();
    pool::hand_back(shared, back);
    let running = shared.inflight.load(Ordering::SeqCst).saturating_sub(1);
    shared.backlog.wake_when_empty(true);
    log::info!(
        "job {} ({}) runs alone: its last run ended with its process dead (stalled {} times); \
         {handed_back} claimed jobs handed back, {running} running jobs to end first \
         and outcomes to be written",
        job.id,
        job.kind,
        job.stalled_count
    );
    if running == 0 && shared.backlog.is_empty() {
        parts.alone = Some(Alone::Running(job.id));
        record_start(shared, process_id, &mut job);
        return vec![job];
    }
    // Recorded as started by the claim, but it waits: a crash meanwhile is
    // not its stall.
    if job.started {
        if let Err(error) = shared.store.claimed_mark_unstarted(process_id, &[job.id]) {
            log::warn!(
                "cannot record job {} as waiting ({error}); handing it back to run alone elsewhere",
                job.id
            );
            pool::hand_back(
                shared,
                vec![Assigned {
                    job,
                    process_id,
                    claimed,
                }],
            );
            return Vec::new();
        }
        job.started = false;
    }
    parts.alone = Some(Alone::Waiting(Box::new(Assigned {
        job,
        process_id,
        claimed,
    })));
    Vec::new()
}

/// The claimed jobs that may start: all but the rate-limited ones over
/// their limit, which go back to the scheduled jobs (one transaction for
/// the claim's rate-limited jobs; see `store/rates.rs`). When the database
/// cannot be asked, or the lease does not hold again within an alive
/// threshold ([`lease_holds`]), the rate-limited ones go back for a second (if even
/// that fails, their claims stay until this process deregisters or is
/// pruned, and are released then).
fn grant_starts(shared: &Shared, process_id: i64, jobs: Vec<ClaimedJob>) -> Vec<ClaimedJob> {
    let limited: Vec<Limited> = jobs
        .iter()
        .filter_map(|job| {
            let options = StoredOptions::parse(&job.options);
            Some(Limited {
                job_id: job.id,
                rate: options.rate.clone()?,
                options,
                due_at: job.due_at,
            })
        })
        .collect();
    if limited.is_empty() {
        return jobs;
    }
    let granted = if lease_holds(shared) {
        shared
            .store
            .rate_grant(process_id, &limited)
            .map_err(|e| e.to_string())
    } else {
        Err("this worker's heartbeats have not succeeded for too long".to_string())
    };
    let back: HashSet<i64> = match granted {
        Ok(back) => back.into_iter().collect(),
        Err(error) => {
            log::warn!(
                "cannot grant starts to {} rate-limited jobs ({error}); sending them back for a second",
                limited.len()
            );
            let at = jobs[0].claimed_at + chrono::Duration::seconds(1);
            match shared.store.claimed_defer(process_id, &limited, at) {
                Ok(back) => back.into_iter().collect(),
                Err(error) => {
                    log::warn!(
                        "cannot send them back either ({error}); their claims are released as soon as the database takes it"
                    );
                    let ids: HashSet<i64> = limited.iter().map(|l| l.job_id).collect();
                    lock(&shared.unreleased).extend(
                        jobs.iter()
                            .filter(|j| ids.contains(&j.id))
                            .map(|j| Unreleased::of(j, process_id)),
                    );
                    ids
                }
            }
        }
    };
    if !back.is_empty() {
        log::debug!(
            "{} claimed jobs sent back: their rate limits are reached",
            back.len()
        );
    }
    jobs.into_iter().filter(|j| !back.contains(&j.id)).collect()
}

/// Whether the lease holds, waiting up to an alive threshold for it: a
/// claim can come back after the lease lapsed (it waited for a connection
/// through an outage), and its jobs start only once the lease holds again
/// (`pool::verdict`). A start is granted when the job starts: granted
/// before the wait, it would be recorded seconds before it happens, and
/// the window would let others start beside it.
fn lease_holds(shared: &Shared) -> bool {
    let deadline = Instant::now() + shared.lease.threshold();
    while !shared.lease.is_valid() {
        if shared.stopping.load(Ordering::SeqCst) || Instant::now() >= deadline {
            return false;
        }
        shared.lease.wait_valid(Duration::from_millis(100));
    }
    true
}

/// The claim-ahead plan from each kind's run time here ([`lifted`]).
fn plan(shared: &Shared) -> Plan {
    let mut shortest_running: HashMap<String, f64> = HashMap::new();
    let now = Instant::now();
    shared.slots.each(|running| {
        let us = now.duration_since(running.started).as_secs_f64() * 1e6;
        let entry = shortest_running
            .entry(running.kind.clone())
            .or_insert(f64::MAX);
        *entry = entry.min(us);
    });
    stats::plan(
        shared.config.threads,
        shared.config.prefetch,
        shared.claim_time.get(),
        lifted(shared.registry.times(), &shortest_running),
    )
}

/// Each kind's run time for the plan: the time learned from its jobs
/// ([`stats::RunTime`]), raised to how long its jobs running now have taken
/// when all of them have been running longer (a kind that became slow
/// stops being claimed ahead before the first of its slow jobs ends; one
/// job delayed among many does not count), and, with none of its jobs
/// running, to how long its latest job took. The learned time lags a kind
/// that turned slow until half of its last 8 jobs were: a worker whose
/// threads had all just ended their first slow jobs saw the kind fast
/// again and claimed 24 of them ahead, until the next look handed them
/// back (`hoarding::*::a_kind_that_turns_slow_is_handed_back_at_once`, seen
/// on MySQL on a slow machine). A kind not measured yet stays unmeasured:
/// its first jobs running for a moment say nothing about how long they
/// take.
fn lifted<'a>(
    times: impl IntoIterator<Item = (&'a str, f64, f64)>,
    shortest_running: &HashMap<String, f64>,
) -> HashMap<&'a str, f64> {
    times
        .into_iter()
        .map(|(kind, time, last)| {
            let lift = match shortest_running.get(kind) {
                Some(running) => *running,
                None => last,
            };
            (kind, if time > 0.0 { time.max(lift) } else { time })
        })
        .collect()
}

/// Hands back the jobs queued ahead whose kind is no longer claimed ahead
/// (its jobs turned out slower than a claim round trip): other workers get
/// them at once instead of after this worker's slow ones.
fn rebalance(shared: &Shared, work: &WorkQueue, plan: &Plan) {
    if work.len() == 0 {
        return;
    }
    let back = work.take_back(|a| !a.job.started && !plan.fast_kinds.contains(&a.job.kind));
    if !back.is_empty() {
        log::info!(
            "handing back {} jobs claimed ahead: their kind now takes longer than a claim",
            back.len()
        );
        pool::hand_back(shared, back);
    }
}

/// Registers the worker: at the start, if the database was away then, or
/// after its row was pruned, once nothing runs under the old registration.
/// Returns false when it tried and failed (`failures` counts the tries in
/// a row, for the back-off; the first and every tenth are logged).
fn reregister(shared: &Shared, failures: &mut u32) -> bool {
    if shared.inflight.load(Ordering::SeqCst) > 0 {
        return true;
    }
    let sent = Instant::now();
    match process::register(&shared.store, &shared.process, shared.events.as_ref()) {
        Ok(id) => {
            shared.lease.renew(sent);
            shared.process_id.store(id, Ordering::SeqCst);
            *failures = 0;
            log::info!("worker {} registered as process {id}", shared.process.name);
            true
        }
        Err(error) => {
            if failures.is_multiple_of(10) {
                log::warn!("cannot register yet: {error}; retrying");
            }
            *failures += 1;
            false
        }
    }
}

/// The wait after `failures` failed attempts in a row.
pub(super) fn backoff(base: Duration, failures: u32) -> Duration {
    (base * 2u32.saturating_pow(failures.min(5))).min(Duration::from_secs(30))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kind_none_of_whose_jobs_runs_is_as_slow_as_its_latest_job() {
        let claim_us = 3_000.0;
        // `sleep` learned fast (0.1 ms), its latest job took 2 s, none runs
        // now: not claimed ahead. `echo`'s latest was fast: claimed ahead.
        let times = [("sleep", 100.0, 2e6), ("echo", 100.0, 90.0)];
        let plan = stats::plan(4, 128, claim_us, lifted(times, &HashMap::new()));
        assert_eq!(plan.fast_kinds, ["echo"], "{plan:?}");
        // One of its jobs running for 50 µs: that says it is fast again
        // (one slow job among fast ones does not stop claim-ahead).
        let running = HashMap::from([("sleep".to_string(), 50.0)]);
        let plan = stats::plan(4, 128, claim_us, lifted(times, &running));
        assert_eq!(plan.fast_kinds, ["echo", "sleep"], "{plan:?}");
        // All of them running for 1 s: slow.
        let running = HashMap::from([("echo".to_string(), 1e6)]);
        let plan = stats::plan(4, 128, claim_us, lifted(times, &running));
        assert!(plan.fast_kinds.is_empty(), "{plan:?}");
        // Never measured: stays unmeasured, never claimed ahead.
        let lifted = lifted([("new", 0.0, 0.0)], &running);
        assert_eq!(lifted["new"], 0.0);
    }
}
