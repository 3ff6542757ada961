//! Middleware wiring a `tracing` span around every job: the span carries the
//! job's id, kind, queue and attempt, everything the job logs inside it is
//! tagged with them, and the outcome and duration are recorded when it
//! ends.
//!
//! ```text
//! cargo run --example tracing_spans
//! ```

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use solidq::{Job, JobContext, JobError, JobResult, JobStatus, Middleware, Next, Queue, Worker};

/// Opens a span per execution and records how it ended.
struct Spans;

impl Middleware for Spans {
    fn call(&self, ctx: &JobContext, next: Next<'_>) -> JobResult {
        let span = tracing::info_span!(
            "job",
            id = ctx.job_id(),
            kind = ctx.kind(),
            queue = ctx.queue(),
            attempt = ctx.attempt()
        );
        let _entered = span.enter();
        let started = Instant::now();
        let outcome = next.run();
        let took_ms = started.elapsed().as_secs_f64() * 1000.0;
        match &outcome {
            Ok(_) => tracing::info!(took_ms, "succeeded"),
            Err(e) => tracing::warn!(took_ms, error = %e, "failed"),
        }
        outcome
    }
}

#[derive(Serialize, Deserialize)]
struct Charge {
    order: u32,
}

impl Job for Charge {
    const KIND: &'static str = "charge";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        // Inside the middleware's span: this event carries the job's fields.
        tracing::info!(order = self.order, "charging");
        if self.order.is_multiple_of(3) {
            return Err(JobError::new("card_declined", "the card was declined").no_retry());
        }
        Ok(serde_json::json!({ "charged": self.order }))
    }
}

fn main() -> Result<(), solidq::Error> {
    tracing_subscriber::fmt().with_target(false).init();
    let path = std::env::temp_dir().join(format!("solidq-tracing-{}.sqlite3", std::process::id()));
    let queue = Queue::connect(&format!("sqlite://{}", path.display()))?;
    queue.migrate()?;
    let ids = queue.enqueue_all(&(1..=6).map(|order| Charge { order }).collect::<Vec<_>>())?;
    let worker = Worker::new(queue.clone())
        .threads(2)
        .wrap(Spans)
        .register::<Charge>()
        .start()?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while ids.iter().any(|id| {
        queue
            .job(*id)
            .map(|j| !matches!(j.status, JobStatus::Succeeded | JobStatus::Failed))
            .unwrap_or(true)
    }) && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    worker.stop()?;
    drop(queue);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    Ok(())
}
