//! Rate grants (see `RateLimit` in `src/concurrency.rs` for the promises):
//! the starts of a claim's rate-limited jobs granted in one short
//! transaction on their keys' rows, and the jobs over a limit sent back to
//! the scheduled ones.
//!
//! The key's row is locked first (`FOR UPDATE` on PostgreSQL and MySQL;
//! SQLite's write transaction has the file), so two workers never both
//! read the window with room for one more start. Time is the database's
//! (`db_now`), the same for every host.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use chrono::NaiveDateTime;
use diesel::QueryResult;

use super::places as concurrency;
use crate::store::{Driver, Slot, Store, StoredOptions, in_transaction};
use crate::types::{Result, StoredRate};

/// A claimed job under a rate limit.
#[derive(Debug, Clone)]
pub(crate) struct Limited {
    pub job_id: i64,
    pub rate: StoredRate,
    pub options: StoredOptions,
    /// When it became due (for a job sent back before: its turn).
    pub due_at: NaiveDateTime,
}

/// How much wider than `period / limit` the turns of jobs sent back are
/// spread: a start that comes a little late (a wake-up, a claim) leaves
/// the window this much of a period before the next turn, instead of just
/// after it (which would send that job back again). Costs 2 % of the rate.
const TURN_SLACK: i32 = 50;

fn span(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}

/// Grants starts to the rate-limited jobs `process_id` just claimed, in
/// claim order within each key: those within their key's limit have their
/// start recorded now; the others go back to the scheduled jobs (see
/// [`defer_on`]), the first when the oldest of the last `limit` starts
/// leaves the window and each next one a turn (`period / limit`, and
/// [`TURN_SLACK`]) later, never earlier than a turn after the last job the
/// key sent back; a job back at its own turn that finds the window full
/// by a moment waits only until it opens.
/// The keys' rows are locked at once, in key order (two claims never wait
/// for each other's keys in opposite orders), and every key is read and
/// written by the same few statements, whatever their number. Returns the
/// ids sent back.
pub(crate) fn grant_on(
    d: &mut dyn Driver,
    process_id: i64,
    jobs: &[Limited],
) -> QueryResult<Vec<i64>> {
    let mut by_key: BTreeMap<&str, Vec<&Limited>> = BTreeMap::new();
    for job in jobs {
        by_key.entry(job.rate.key.as_str()).or_default().push(job);
    }
    let keys: Vec<String> = by_key.keys().map(|k| k.to_string()).collect();
    let next: HashMap<String, NaiveDateTime> = d.rate_keys_lock(&keys)?.into_iter().collect();
    // Read after the lock: a grant that waited for it is timed when made.
    let now = d.rate_clock()?;
    // The starts within each key's period (a kind's keys share one).
    let mut by_period: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for (key, jobs) in &by_key {
        by_period
            .entry(jobs[0].rate.period_ms)
            .or_default()
            .push(key.to_string());
    }
    let mut recent: HashMap<String, i64> = HashMap::new();
    for (period_ms, keys) in &by_period {
        let since = now - span(Duration::from_millis(*period_ms));
        d.rate_starts_prune(keys, since)?;
        recent.extend(d.rate_starts_counts(keys, since)?);
    }
    let mut granted: Vec<(String, i64)> = Vec::new();
    let mut over: Vec<(&str, usize)> = Vec::new();
    for (key, jobs) in &by_key {
        let limit = i64::from(jobs[0].rate.limit.max(1));
        let started = recent.get(*key).copied().unwrap_or(0);
        let free = (limit - started).clamp(0, jobs.len() as i64) as usize;
        granted.extend(jobs[..free].iter().map(|j| (key.to_string(), j.job_id)));
        if free < jobs.len() {
            over.push((key, free));
        }
    }
    log::trace!("starts granted at {now} (recent {recent:?}): {granted:?}");
    if !granted.is_empty() {
        d.rate_starts_insert(&granted, now)?;
    }
    let mut deferred = Vec::new();
    for (key, free) in over {
        let jobs = &by_key[key];
        let rate = &jobs[0].rate;
        let period = span(rate.period());
        let since = now - period;
        let limit = i64::from(rate.limit.max(1));
        let started = recent.get(key).copied().unwrap_or(0);
        // The first sent back may start when the oldest of the last `limit`
        // starts (those recorded and those just granted) leaves the window.
        let frees_at = d.rate_start_nth(key, since, started + free as i64 - limit)? + period;
        let turn = rate.period() / rate.limit.max(1);
        let spread = span(turn + turn / TURN_SLACK as u32);
        let last = next.get(key).copied().unwrap_or(now);
        let mut at = frees_at.max(last + spread);
        for (n, job) in jobs[free..].iter().enumerate() {
            // Back at its turn, it found the window full by a moment (an
            // earlier start came late): it keeps its turn, waiting only
            // until the window opens, rather than going to the back.
            let when = if n == 0 && job.due_at + spread > frees_at {
                frees_at
            } else {
                at += spread;
                at - spread
            };
            if defer_on(d, process_id, job.job_id, &job.options, when)? {
                deferred.push(job.job_id);
            }
        }
        d.rate_key_set_next(key, at - spread)?;
    }
    Ok(deferred)
}

/// Sends job `job_id`, claimed by `process_id` and not run, back to the
/// scheduled jobs until `at`, without counting an attempt; its concurrency
/// slot (per `options`) goes to the next blocked job, and it takes one
/// again when due. False if its claim was no longer held.
fn defer_on(
    d: &mut dyn Driver,
    process_id: i64,
    job_id: i64,
    options: &StoredOptions,
    at: NaiveDateTime,
) -> QueryResult<bool> {
    let held = d.claimed_delete_fenced(process_id, &[job_id])?;
    if held.is_empty() {
        return Ok(false);
    }
    let key = d.jobs_defer(job_id, at)?;
    if let Some(slot) = Slot::of(key.as_deref(), options) {
        let ready = concurrency::release_slots(d, &[slot])?;
        concurrency::notify(d, &ready)?;
    }
    Ok(true)
}

impl Store {
    /// [`grant_on`] in a transaction of its own.
    pub(crate) fn rate_grant(&self, process_id: i64, jobs: &[Limited]) -> Result<Vec<i64>> {
        self.with_driver("rate_grant", |d| {
            in_transaction(d, |d| grant_on(d, process_id, jobs))
        })
    }

    /// Sends claimed jobs back until `at` (when their grant could not be
    /// asked); returns those whose claim was still held.
    pub(crate) fn claimed_defer(
        &self,
        process_id: i64,
        jobs: &[Limited],
        at: NaiveDateTime,
    ) -> Result<Vec<i64>> {
        self.with_driver("claimed_defer", |d| {
            in_transaction(d, |d| {
                let mut deferred = Vec::new();
                for job in jobs {
                    if defer_on(d, process_id, job.job_id, &job.options, at)? {
                        deferred.push(job.job_id);
                    }
                }
                Ok(deferred)
            })
        })
    }
}
