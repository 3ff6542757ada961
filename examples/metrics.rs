//! Metrics from solidq's event hooks, without a metrics library: counters
//! per kind and latency histograms (queue wait and run time) fed by an
//! [`Events`] implementation, over a few hundred jobs of which some fail
//! once and a few fail for good. Swap the `Metrics` type for your
//! Prometheus or StatsD client; the hooks stay the same.
//!
//! ```text
//! cargo run --example metrics                 # SQLite file in the temp directory
//! cargo run --example metrics -- postgres://postgres@127.0.0.1/postgres
//! RUST_LOG=solidq=debug cargo run --example metrics   # also log every event
//! ```

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use solidq::events::{Events, JobClaimed, JobEnqueued, JobFailed, JobRetried, JobSucceeded};
use solidq::{Backoff, Job, JobContext, JobError, JobOptions, JobResult, LogEvents, Queue, Worker};

/// Counters per kind, and two latency histograms.
#[derive(Default)]
struct Metrics {
    /// (kind, event) → count. A mutex is fine here: the hooks run on the
    /// worker's poller and completer threads, once per job and event.
    counts: Mutex<BTreeMap<(String, &'static str), u64>>,
    /// From when a job became due to its claim.
    queue_wait: Histogram,
    /// How long attempts ran.
    run_time: Histogram,
    /// Jobs that ended (succeeded or failed for good).
    ended: AtomicU64,
}

impl Metrics {
    fn count(&self, kind: &str, event: &'static str) {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        *counts.entry((kind.to_string(), event)).or_default() += 1;
    }
}

impl Events for Metrics {
    fn job_enqueued(&self, e: &JobEnqueued) {
        self.count(&e.kind, "enqueued");
    }

    fn job_claimed(&self, e: &JobClaimed) {
        self.count(&e.kind, "claimed");
        self.queue_wait.record(e.wait);
    }

    fn job_succeeded(&self, e: &JobSucceeded) {
        self.count(&e.kind, "succeeded");
        self.run_time.record(e.run_time);
        self.ended.fetch_add(1, Ordering::Relaxed);
    }

    fn job_retried(&self, e: &JobRetried) {
        self.count(&e.kind, "retried");
        self.run_time.record(e.run_time);
    }

    fn job_failed(&self, e: &JobFailed) {
        self.count(&e.kind, "failed");
        self.run_time.record(e.run_time);
        self.ended.fetch_add(1, Ordering::Relaxed);
    }
}

/// Bucket `i` counts durations below 2^i µs (and at least 2^(i-1) µs):
/// fixed, lock-free, and within a factor of two, which is what dashboards
/// of latencies need.
struct Histogram {
    buckets: [AtomicU64; BUCKETS],
}

/// 2^40 µs is about 12 days: enough for any latency.
const BUCKETS: usize = 41;

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl Histogram {
    fn record(&self, value: Duration) {
        let micros = u64::try_from(value.as_micros()).unwrap_or(u64::MAX);
        let bucket = (u64::BITS - micros.leading_zeros()) as usize;
        self.buckets[bucket.min(BUCKETS - 1)].fetch_add(1, Ordering::Relaxed);
    }

    fn total(&self) -> u64 {
        self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).sum()
    }

    /// The upper bound of the bucket holding the `p`-th quantile.
    fn quantile(&self, p: f64) -> Duration {
        let total = self.total();
        let rank = ((total as f64 * p).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, bucket) in self.buckets.iter().enumerate() {
            seen += bucket.load(Ordering::Relaxed);
            if seen >= rank {
                return Duration::from_micros(1u64 << i);
            }
        }
        Duration::ZERO
    }
}

/// Pretends to resize an image; every tenth one fails its first attempt.
#[derive(Serialize, Deserialize)]
struct ResizeImage {
    n: u32,
}

impl Job for ResizeImage {
    const KIND: &'static str = "resize_image";
    fn perform(&self, ctx: &JobContext) -> JobResult {
        std::thread::sleep(Duration::from_micros(500 + u64::from(self.n % 7) * 300));
        if self.n.is_multiple_of(10) && ctx.attempt() == 1 {
            return Err(JobError::new(
                "storage_timeout",
                "the bucket did not answer",
            ));
        }
        Ok(serde_json::Value::Null)
    }
    fn options() -> JobOptions {
        JobOptions::new()
            .max_attempts(3)
            .backoff(Backoff::fixed(Duration::from_millis(50)))
    }
}

/// Pretends to send an email.
#[derive(Serialize, Deserialize)]
struct SendEmail {
    to: String,
}

impl Job for SendEmail {
    const KIND: &'static str = "send_email";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        Ok(serde_json::Value::Null)
    }
}

/// Pretends to charge a card; amounts divisible by 25 are declined for
/// good.
#[derive(Serialize, Deserialize)]
struct ChargeCard {
    cents: u32,
}

impl Job for ChargeCard {
    const KIND: &'static str = "charge_card";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        std::thread::sleep(Duration::from_millis(3));
        if self.cents.is_multiple_of(25) {
            return Err(JobError::new("card_declined", "insufficient funds").no_retry());
        }
        Ok(serde_json::Value::Null)
    }
}

fn main() -> Result<(), solidq::Error> {
    // `LogEvents` logs through `log`: shown with RUST_LOG=solidq=debug.
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("error")).init();
    let url = match std::env::args().nth(1) {
        Some(url) => url,
        None => {
            let path = std::env::temp_dir().join("solidq-metrics.sqlite3");
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
            }
            format!("sqlite://{}", path.display())
        }
    };
    let metrics = Arc::new(Metrics::default());
    // The pair keeps the default log lines and feeds the metrics; the
    // worker built from this queue reports to the same hooks.
    let queue = Queue::connect(&url)?.with_events((LogEvents, Arc::clone(&metrics)));
    queue.migrate()?;
    println!("database: {}", queue.url());

    let started = Instant::now();
    let images: Vec<ResizeImage> = (0..200).map(|n| ResizeImage { n }).collect();
    let emails: Vec<SendEmail> = (0..150)
        .map(|i| SendEmail {
            to: format!("user{i}@example.com"),
        })
        .collect();
    let charges: Vec<ChargeCard> = (0..100).map(|i| ChargeCard { cents: 1_000 + i }).collect();
    let total = queue.enqueue_all(&images)?.len()
        + queue.enqueue_all(&emails)?.len()
        + queue.enqueue_all(&charges)?.len();

    let worker = Worker::new(queue.clone())
        .threads(8)
        .polling_interval(Duration::from_millis(50))
        .register::<ResizeImage>()
        .register::<SendEmail>()
        .register::<ChargeCard>()
        .start()?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while metrics.ended.load(Ordering::Relaxed) < total as u64 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    worker.stop()?;
    let ended = metrics.ended.load(Ordering::Relaxed);
    println!(
        "{ended} of {total} jobs ended in {:.2?}\n",
        started.elapsed()
    );

    let columns = ["enqueued", "claimed", "succeeded", "retried", "failed"];
    print!("{:<14}", "kind");
    for column in columns {
        print!("{column:>10}");
    }
    println!();
    let counts = metrics.counts.lock().unwrap_or_else(|p| p.into_inner());
    let mut kinds: Vec<&String> = counts.keys().map(|(kind, _)| kind).collect();
    kinds.dedup();
    for kind in kinds {
        print!("{kind:<14}");
        for column in columns {
            let n = counts.get(&(kind.clone(), column)).copied().unwrap_or(0);
            print!("{n:>10}");
        }
        println!();
    }

    println!(
        "\n{:<12}{:>8}{:>10}{:>10}{:>10}",
        "latency", "count", "p50 ≤", "p95 ≤", "p99 ≤"
    );
    for (name, histogram) in [
        ("queue wait", &metrics.queue_wait),
        ("run time", &metrics.run_time),
    ] {
        println!(
            "{name:<12}{:>8}{:>10}{:>10}{:>10}",
            histogram.total(),
            format!("{:.1?}", histogram.quantile(0.50)),
            format!("{:.1?}", histogram.quantile(0.95)),
            format!("{:.1?}", histogram.quantile(0.99)),
        );
    }
    if ended < total as u64 {
        eprintln!("{} jobs did not end in time", total as u64 - ended);
        std::process::exit(1);
    }
    Ok(())
}
