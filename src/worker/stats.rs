//! Counters a worker keeps about its own database work: how many claims and
//! completion writes, how big, how long. Logged when the worker stops, so
//! an operator can see batch sizes and round-trip times without a profiler.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

#[derive(Debug, Default)]
pub(crate) struct Stats {
    claims: AtomicU64,
    empty_claims: AtomicU64,
    claimed: AtomicU64,
    claim_us: AtomicU64,
    writes: AtomicU64,
    written: AtomicU64,
    write_us: AtomicU64,
}

/// What a worker has done so far, from [`crate::WorkerHandle::stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerStats {
    /// Claim statements run.
    pub claims: u64,
    /// Of them, how many found nothing.
    pub empty_claims: u64,
    /// Jobs claimed.
    pub claimed_jobs: u64,
    /// Time spent in claims.
    pub claim_time: Duration,
    /// Completion batches written.
    pub writes: u64,
    /// Outcomes written.
    pub written: u64,
    /// Time spent writing them.
    pub write_time: Duration,
}

impl Stats {
    pub(crate) fn snapshot(&self) -> WorkerStats {
        WorkerStats {
            claims: self.claims.load(Relaxed),
            empty_claims: self.empty_claims.load(Relaxed),
            claimed_jobs: self.claimed.load(Relaxed),
            claim_time: Duration::from_micros(self.claim_us.load(Relaxed)),
            writes: self.writes.load(Relaxed),
            written: self.written.load(Relaxed),
            write_time: Duration::from_micros(self.write_us.load(Relaxed)),
        }
    }

    pub(crate) fn claim(&self, jobs: usize, took: Duration) {
        self.claims.fetch_add(1, Relaxed);
        if jobs == 0 {
            self.empty_claims.fetch_add(1, Relaxed);
        }
        self.claimed.fetch_add(jobs as u64, Relaxed);
        self.claim_us.fetch_add(took.as_micros() as u64, Relaxed);
    }

    pub(crate) fn write(&self, completions: usize, took: Duration) {
        self.writes.fetch_add(1, Relaxed);
        self.written.fetch_add(completions as u64, Relaxed);
        self.write_us.fetch_add(took.as_micros() as u64, Relaxed);
    }

    pub(crate) fn summary(&self) -> String {
        let avg = |total: &AtomicU64, n: &AtomicU64| {
            total.load(Relaxed) as f64 / n.load(Relaxed).max(1) as f64
        };
        format!(
            "claimed {} jobs in {} claims ({} empty; {:.1} per claim, {:.2} ms each); \
             recorded {} outcomes in {} writes ({:.1} per write, {:.2} ms each)",
            self.claimed.load(Relaxed),
            self.claims.load(Relaxed),
            self.empty_claims.load(Relaxed),
            avg(&self.claimed, &self.claims),
            avg(&self.claim_us, &self.claims) / 1000.0,
            self.written.load(Relaxed),
            self.writes.load(Relaxed),
            avg(&self.written, &self.writes),
            avg(&self.write_us, &self.writes) / 1000.0,
        )
    }
}

/// An exponentially weighted moving average kept in an atomic (lost
/// updates under contention only blur it a little).
#[derive(Debug, Default)]
pub(crate) struct Ewma(AtomicU64);

impl Ewma {
    /// Folds in one observation, in microseconds.
    pub(crate) fn observe(&self, took: Duration) {
        let x = took.as_secs_f64() * 1e6;
        let old = f64::from_bits(self.0.load(Relaxed));
        let new = if old == 0.0 {
            x.max(1e-3)
        } else {
            old + 0.05 * (x - old)
        };
        self.0.store(new.to_bits(), Relaxed);
    }

    /// The average in microseconds; 0 before the first observation.
    pub(crate) fn get(&self) -> f64 {
        f64::from_bits(self.0.load(Relaxed))
    }
}

/// The last [`Recent::LEN`] observations, in atomics (a ring).
#[derive(Debug, Default)]
pub(crate) struct Recent {
    next: AtomicU64,
    slots: [AtomicU64; Recent::LEN],
}

impl Recent {
    const LEN: usize = 8;

    /// Records one observation, in microseconds.
    pub(crate) fn observe(&self, took: Duration) {
        let at = self.next.fetch_add(1, Relaxed) as usize % Self::LEN;
        self.slots[at].store((took.as_secs_f64() * 1e6).to_bits(), Relaxed);
    }

    /// The latest observation, `None` before the first.
    pub(crate) fn last(&self) -> Option<f64> {
        let n = self.next.load(Relaxed) as usize;
        (n > 0).then(|| f64::from_bits(self.slots[(n - 1) % Self::LEN].load(Relaxed)))
    }

    /// The upper median of the last [`Recent::LEN`] observations (the 5th
    /// smallest of 8: past it once half of them are), `None` before there
    /// are that many.
    pub(crate) fn median(&self) -> Option<f64> {
        if (self.next.load(Relaxed) as usize) < Self::LEN {
            return None;
        }
        let mut values: Vec<f64> = self
            .slots
            .iter()
            .map(|s| f64::from_bits(s.load(Relaxed)))
            .collect();
        values.sort_by(f64::total_cmp);
        Some(values[Self::LEN / 2])
    }
}

/// How long a kind's jobs take here, for the claim-ahead plan: the lesser
/// of the moving average and the median of the last 8. The average reacts
/// at once to a kind that turned slow (4 slow jobs of 8 also lift the
/// median); the median keeps one job descheduled for 50 ms on a busy
/// machine from making a kind of 0.1 ms jobs look slower than a claim,
/// which stopped its claim-ahead for the next few dozen jobs.
#[derive(Debug, Default)]
pub(crate) struct RunTime {
    average: Ewma,
    recent: Recent,
}

impl RunTime {
    pub(crate) fn observe(&self, took: Duration) {
        self.average.observe(took);
        self.recent.observe(took);
    }

    /// In microseconds; 0 before the first observation.
    pub(crate) fn get(&self) -> f64 {
        let average = self.average.get();
        self.recent.median().map_or(average, |m| average.min(m))
    }

    /// How long the latest job took, in microseconds; 0 before the first.
    pub(crate) fn last(&self) -> f64 {
        self.recent.last().unwrap_or(0.0)
    }
}

/// How far a worker claims beyond its idle threads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Jobs claimed ahead, at most.
    pub ahead: usize,
    /// The kinds that may be claimed ahead.
    pub fast_kinds: Vec<String>,
}

/// The claim-ahead plan: only kinds whose jobs take less than a claim
/// round trip here (measured; a kind never measured is never claimed
/// ahead), and no more of them than `threads` finish during one round trip
/// at the slowest of those kinds' pace, at most `max`. Jobs longer than a
/// round trip gain little from it (a thread waits one round trip at most)
/// and are the ones hoarding would hurt.
pub(crate) fn plan<'a>(
    threads: usize,
    max: usize,
    claim_us: f64,
    kind_us: impl IntoIterator<Item = (&'a str, f64)>,
) -> Plan {
    if max == 0 || claim_us <= 0.0 {
        return Plan::default();
    }
    let mut slowest: f64 = 0.0;
    let mut fast_kinds = Vec::new();
    for (kind, us) in kind_us {
        if us > 0.0 && us <= claim_us {
            slowest = slowest.max(us);
            fast_kinds.push(kind.to_string());
        }
    }
    if fast_kinds.is_empty() {
        return Plan::default();
    }
    fast_kinds.sort_unstable();
    let ahead = ((threads as f64 * claim_us / slowest).floor() as usize).min(max);
    if ahead == 0 {
        return Plan::default();
    }
    Plan { ahead, fast_kinds }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_slow_job_does_not_make_a_fast_kind_slow_and_half_of_the_last_eight_do() {
        let time = RunTime::default();
        for _ in 0..100 {
            time.observe(Duration::from_micros(100));
        }
        time.observe(Duration::from_millis(50));
        assert!(time.get() < 200.0, "one outlier: {}", time.get());
        for _ in 0..3 {
            time.observe(Duration::from_secs(2));
        }
        assert!(
            time.get() >= 50_000.0,
            "4 of the last 8 slow: {}",
            time.get()
        );
    }

    #[test]
    fn only_measured_kinds_faster_than_a_claim_are_claimed_ahead() {
        let p = plan(16, 128, 3_000.0, [("noop", 10.0)]);
        assert_eq!(
            (p.ahead, p.fast_kinds),
            (128, vec!["noop".to_string()]),
            "no-op jobs: the cap"
        );
        let p = plan(16, 128, 3_000.0, [("noop", 10.0), ("medium", 2_000.0)]);
        assert_eq!(
            p.ahead, 24,
            "what 16 threads finish in a round trip at 2 ms each"
        );
        let p = plan(16, 128, 3_000.0, [("noop", 10.0), ("slow", 30_000_000.0)]);
        assert_eq!(
            p.fast_kinds,
            vec!["noop".to_string()],
            "a slow kind is never claimed ahead"
        );
        assert_eq!(
            plan(16, 128, 3_000.0, [("new", 0.0)]),
            Plan::default(),
            "never measured"
        );
        assert_eq!(
            plan(16, 128, 0.0, [("noop", 10.0)]),
            Plan::default(),
            "no claim yet"
        );
        assert_eq!(
            plan(16, 0, 3_000.0, [("noop", 10.0)]),
            Plan::default(),
            "prefetch off"
        );
    }
}
