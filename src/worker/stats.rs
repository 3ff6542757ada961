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

impl Stats {
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
