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

/// How many jobs to claim beyond the free threads: as many as the threads
/// are expected to finish while the next claim is in flight, at most
/// `max`. Nothing is known before the first job ends: then none.
pub(crate) fn claim_ahead(threads: usize, max: usize, claim_us: f64, job_us: f64) -> usize {
    if job_us <= 0.0 || claim_us <= 0.0 {
        return 0;
    }
    ((threads as f64 * claim_us / job_us).ceil() as usize).min(max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claim_ahead_grows_with_fast_jobs_and_vanishes_for_slow_ones() {
        assert_eq!(
            claim_ahead(16, 128, 3_000.0, 10.0),
            128,
            "no-op jobs: the cap"
        );
        assert_eq!(
            claim_ahead(16, 128, 3_000.0, 5_000.0),
            10,
            "5 ms jobs: what runs during a claim"
        );
        assert_eq!(
            claim_ahead(16, 128, 3_000.0, 1_000_000.0),
            1,
            "1 s jobs: barely any"
        );
        assert_eq!(claim_ahead(16, 128, 0.0, 10.0), 0, "nothing known yet");
        assert_eq!(claim_ahead(16, 0, 3_000.0, 10.0), 0, "prefetch off");
    }
}
