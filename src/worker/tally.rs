//! The outcomes a worker has recorded, counted in memory per minute,
//! queue, kind and outcome, and flushed to the job statistics
//! (`solidq_job_stats`) at most once per heartbeat (the completer flushes
//! when a heartbeat that worked asks it to, so a slow write never delays a
//! heartbeat), and once more when the worker stops.
//!
//! The completer counts an outcome once its write committed (a claim
//! found lost counts nothing), adding a batch under one lock; a flush is
//! one upsert of every row (one statement on PostgreSQL, one write
//! transaction on SQLite), never a statement per job. A flush that fails
//! puts its counts back for the next heartbeat. A process that dies loses
//! what it counted since its last flush: at most one heartbeat interval of
//! its outcomes. The statistics are for metrics and charts; the jobs table
//! stays the truth.
//!
//! Memory is bounded: while flushes keep failing (the statistics table
//! refused, the database away) the counts grow by one row per minute,
//! queue, kind and outcome, up to [`MAX_ROWS`]; outcomes that would need
//! a row beyond it are not counted (said once per run of failures), so an
//! outage of any length cannot exhaust the worker's memory.
//!
//! Times: a job's minute is when its attempt ended, and its wait runs from
//! when it became due to when it started, both on the backend's clock (the
//! database's on PostgreSQL): the claim's database time plus the time that
//! passed here since the claim returned. Sums are kept in microseconds and
//! written in milliseconds, rounded per row and flush.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use chrono::NaiveDateTime;

use crate::store::{Counted, StatsDelta, Store};
use crate::types::Result;

/// One recorded outcome to count.
pub(crate) struct Counting<'a> {
    /// When the attempt ended (the backend's clock).
    pub ended_at: NaiveDateTime,
    pub queue: &'a str,
    pub kind: &'a str,
    pub outcome: Counted,
    pub wait: Duration,
    pub run: Duration,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Sums {
    jobs: i64,
    wait_us: i64,
    run_us: i64,
}

/// By queue, then kind, then (minute, outcome): lookups by `&str`, so
/// counting an outcome allocates nothing unless its queue or kind is new
/// since the last flush.
type Counts = HashMap<String, HashMap<String, HashMap<(NaiveDateTime, Counted), Sums>>>;

/// How many rows (minute, queue, kind, outcome) the counts may hold
/// before new ones are dropped: about 1 MB.
pub(crate) const MAX_ROWS: usize = 10_000;

/// Counted outcomes not yet flushed.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    counts: Mutex<Counts>,
    /// Rows in `counts`, and whether a drop was said since the last flush
    /// that worked.
    rows: Mutex<(usize, bool)>,
}

impl Tally {
    /// Counts a batch of recorded outcomes. A batch is summed first without
    /// hashing (its jobs share a few keys: most often one queue, kind,
    /// outcome and minute), then each distinct key is added once under the
    /// lock: a few nanoseconds per job.
    pub(crate) fn add<'a>(&self, batch: impl IntoIterator<Item = Counting<'a>>) {
        let mut summed: Vec<(Counting<'a>, Sums)> = Vec::new();
        for c in batch {
            let minute = crate::store::minute_of(c.ended_at);
            let sums = match summed.iter_mut().rev().find(|(k, _)| {
                k.ended_at == minute
                    && k.outcome == c.outcome
                    && k.kind == c.kind
                    && k.queue == c.queue
            }) {
                Some((_, sums)) => sums,
                None => {
                    summed.push((
                        Counting {
                            ended_at: minute,
                            ..c
                        },
                        Sums::default(),
                    ));
                    &mut summed.last_mut().expect("just pushed").1
                }
            };
            sums.jobs += 1;
            sums.wait_us = sums.wait_us.saturating_add(micros(c.wait));
            sums.run_us = sums.run_us.saturating_add(micros(c.run));
        }
        if summed.is_empty() {
            return;
        }
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        for (key, add) in summed {
            let Some(sums) = self.slot(&mut counts, key.queue, key.kind, key.ended_at, key.outcome)
            else {
                continue;
            };
            sums.jobs += add.jobs;
            sums.wait_us = sums.wait_us.saturating_add(add.wait_us);
            sums.run_us = sums.run_us.saturating_add(add.run_us);
        }
    }

    /// Writes every count to the database and forgets it; on failure keeps
    /// it for the next flush. Returns how many outcomes were written.
    pub(crate) fn flush(&self, store: &Store) -> Result<i64> {
        let taken = {
            let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
            self.rows.lock().unwrap_or_else(|p| p.into_inner()).0 = 0;
            std::mem::take(&mut *counts)
        };
        if taken.is_empty() {
            return Ok(0);
        }
        let deltas = deltas(&taken);
        match store.job_stats_add(&deltas) {
            Ok(()) => {
                self.rows.lock().unwrap_or_else(|p| p.into_inner()).1 = false;
                Ok(deltas.iter().map(|d| d.jobs).sum())
            }
            Err(error) => {
                self.put_back(taken);
                Err(error)
            }
        }
    }

    /// Outcomes counted and not yet written.
    pub(crate) fn pending(&self) -> i64 {
        let counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        counts
            .values()
            .flat_map(HashMap::values)
            .flat_map(HashMap::values)
            .map(|s| s.jobs)
            .sum()
    }

    fn put_back(&self, taken: Counts) {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        for (queue, kinds) in taken {
            for (kind, rows) in kinds {
                for ((minute, outcome), add) in rows {
                    let Some(sums) = self.slot(&mut counts, &queue, &kind, minute, outcome) else {
                        continue;
                    };
                    sums.jobs += add.jobs;
                    sums.wait_us = sums.wait_us.saturating_add(add.wait_us);
                    sums.run_us = sums.run_us.saturating_add(add.run_us);
                }
            }
        }
    }
}

impl Tally {
    /// The row of a key, made if there is room (see [`MAX_ROWS`]).
    fn slot<'c>(
        &self,
        counts: &'c mut Counts,
        queue: &str,
        kind: &str,
        minute: NaiveDateTime,
        outcome: Counted,
    ) -> Option<&'c mut Sums> {
        let exists = counts
            .get(queue)
            .and_then(|kinds| kinds.get(kind))
            .is_some_and(|rows| rows.contains_key(&(minute, outcome)));
        if !exists {
            let mut rows = self.rows.lock().unwrap_or_else(|p| p.into_inner());
            if rows.0 >= MAX_ROWS {
                if !rows.1 {
                    rows.1 = true;
                    log::warn!(
                        "job statistics could not be written for a long while: {MAX_ROWS} rows wait in memory; outcomes beyond them are not counted in the statistics (the jobs themselves are recorded)"
                    );
                }
                return None;
            }
            rows.0 += 1;
        }
        if !counts.contains_key(queue) {
            counts.insert(queue.to_string(), HashMap::new());
        }
        let kinds = counts.get_mut(queue).expect("inserted above");
        if !kinds.contains_key(kind) {
            kinds.insert(kind.to_string(), HashMap::new());
        }
        Some(
            kinds
                .get_mut(kind)
                .expect("inserted above")
                .entry((minute, outcome))
                .or_default(),
        )
    }
}

fn deltas(counts: &Counts) -> Vec<StatsDelta> {
    let mut deltas = Vec::new();
    for (queue, kinds) in counts {
        for (kind, rows) in kinds {
            for (&(bucket, outcome), sums) in rows {
                deltas.push(StatsDelta {
                    bucket,
                    queue_name: queue.clone(),
                    kind: kind.clone(),
                    outcome,
                    jobs: sums.jobs,
                    wait_ms: (sums.wait_us + 500) / 1000,
                    run_ms: (sums.run_us + 500) / 1000,
                });
            }
        }
    }
    deltas
}

fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(minute: u32, second: u32) -> NaiveDateTime {
        chrono::NaiveDate::from_ymd_opt(2026, 11, 25)
            .unwrap()
            .and_hms_opt(10, minute, second)
            .unwrap()
    }

    fn counting(ended_at: NaiveDateTime, kind: &str, outcome: Counted) -> Counting<'_> {
        Counting {
            ended_at,
            queue: "default",
            kind,
            outcome,
            wait: Duration::from_micros(1_400),
            run: Duration::from_micros(600),
        }
    }

    #[test]
    fn outcomes_are_summed_per_minute_queue_kind_and_outcome() {
        let tally = Tally::default();
        tally.add([
            counting(at(1, 5), "mail", Counted::Succeeded),
            counting(at(1, 59), "mail", Counted::Succeeded),
            counting(at(2, 0), "mail", Counted::Succeeded),
            counting(at(1, 30), "mail", Counted::Failed),
            counting(at(1, 30), "sms", Counted::Succeeded),
        ]);
        assert_eq!(tally.pending(), 5);
        let mut rows: Vec<_> = deltas(&tally.counts.lock().unwrap())
            .into_iter()
            .map(|d| (d.bucket, d.kind, d.outcome, d.jobs, d.wait_ms, d.run_ms))
            .collect();
        rows.sort_by(|a, b| (a.0, &a.1, a.2).cmp(&(b.0, &b.1, b.2)));
        assert_eq!(
            rows,
            [
                (at(1, 0), "mail".into(), Counted::Succeeded, 2, 3, 1),
                (at(1, 0), "mail".into(), Counted::Failed, 1, 1, 1),
                (at(1, 0), "sms".into(), Counted::Succeeded, 1, 1, 1),
                (at(2, 0), "mail".into(), Counted::Succeeded, 1, 1, 1),
            ]
        );
        let taken = std::mem::take(&mut *tally.counts.lock().unwrap());
        assert_eq!(tally.pending(), 0);
        tally.put_back(taken);
        tally.add([counting(at(1, 5), "mail", Counted::Succeeded)]);
        assert_eq!(tally.pending(), 6, "put back and added to");
    }

    #[test]
    fn counts_stop_growing_at_the_row_bound() {
        let tally = Tally::default();
        let kinds: Vec<String> = (0..MAX_ROWS + 5).map(|i| format!("k{i}")).collect();
        for kind in &kinds {
            tally.add([counting(at(1, 5), kind, Counted::Succeeded)]);
        }
        assert_eq!(
            tally.pending(),
            MAX_ROWS as i64,
            "rows beyond the bound not counted"
        );
        tally.add([counting(at(1, 6), "k0", Counted::Succeeded)]);
        assert_eq!(
            tally.pending(),
            MAX_ROWS as i64 + 1,
            "an existing row still counts"
        );
        let taken = std::mem::take(&mut *tally.counts.lock().unwrap());
        tally.rows.lock().unwrap().0 = 0;
        tally.put_back(taken);
        assert_eq!(
            tally.pending(),
            MAX_ROWS as i64 + 1,
            "put back within the bound"
        );
    }
}
