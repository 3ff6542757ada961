//! The README's demo: an embedded SQLite file, a few hundred jobs of a few
//! kinds (one kind always fails, one job is delayed), a worker that runs
//! them all, and a summary.
//!
//! ```text
//! cargo run --example quickstart                 # SQLite file in the temp directory
//! cargo run --example quickstart -- postgres://postgres@127.0.0.1/postgres
//! ```

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use solidq::{
    EnqueueOptions, Job, JobContext, JobError, JobOptions, JobResult, JobStatus, Queue, Worker,
};

/// Pretends to resize an image.
#[derive(Serialize, Deserialize)]
struct ResizeImage {
    path: String,
    width: u32,
}

impl Job for ResizeImage {
    const KIND: &'static str = "resize_image";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        std::thread::sleep(Duration::from_millis(2));
        Ok(
            serde_json::json!({ "path": self.path, "width": self.width, "height": self.width * 3 / 4 }),
        )
    }
    fn options() -> JobOptions {
        JobOptions::new().queue("images")
    }
}

/// The app's mail client: state the worker shares with every job (see
/// `Worker::state`), reached with `ctx.state()` instead of a `static`.
struct Mailer {
    from: String,
}

/// Pretends to send an email.
#[derive(Serialize, Deserialize)]
struct SendEmail {
    to: String,
}

impl Job for SendEmail {
    const KIND: &'static str = "send_email";
    fn perform(&self, ctx: &JobContext) -> JobResult {
        let mailer = ctx.state::<Mailer>()?;
        Ok(serde_json::json!({ "from": mailer.from, "delivered_to": self.to }))
    }
    fn options() -> JobOptions {
        JobOptions::new().queue("mail").priority(-1)
    }
}

/// A webhook whose endpoint is down: it always fails, and gets one attempt.
#[derive(Serialize, Deserialize)]
struct CallWebhook {
    url: String,
}

impl Job for CallWebhook {
    const KIND: &'static str = "call_webhook";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        Err(JobError::new(
            "http_503",
            format!("{} answered 503 Service Unavailable", self.url),
        ))
    }
    fn options() -> JobOptions {
        JobOptions::new().max_attempts(1)
    }
}

fn main() -> Result<(), solidq::Error> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let url = match std::env::args().nth(1) {
        Some(url) => url,
        None => {
            let path = std::env::temp_dir().join("solidq-quickstart.sqlite3");
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
            }
            format!("sqlite://{}", path.display())
        }
    };
    let queue = Queue::connect(&url)?;
    queue.migrate()?;
    println!("database: {}", queue.url());

    let started = Instant::now();
    let mut ids = Vec::new();
    let images: Vec<ResizeImage> = (0..200)
        .map(|i| ResizeImage {
            path: format!("photos/{i}.jpg"),
            width: 640 + i,
        })
        .collect();
    ids.extend(queue.enqueue_all(&images)?);
    for i in 0..100 {
        ids.push(queue.enqueue(&SendEmail {
            to: format!("user{i}@example.com"),
        })?);
    }
    let failing = queue.enqueue(&CallWebhook {
        url: "https://hooks.example.com/order".into(),
    })?;
    ids.push(failing);
    let delayed = queue.enqueue_with(
        &SendEmail {
            to: "later@example.com".into(),
        },
        EnqueueOptions::new()
            .delay(Duration::from_secs(2))
            .priority(5),
    )?;
    ids.push(delayed);
    println!("enqueued {} jobs in {:?}", ids.len(), started.elapsed());

    let worker = Worker::new(queue.clone())
        .queues(["mail", "images", "*"])
        .threads(4)
        .polling_interval(Duration::from_millis(200))
        .state(Mailer {
            from: "shop@example.com".into(),
        })
        .register::<ResizeImage>()
        .register::<SendEmail>()
        .register::<CallWebhook>()
        .start()?;
    let finished = |s: JobStatus| matches!(s, JobStatus::Succeeded | JobStatus::Failed);
    let deadline = Instant::now() + Duration::from_secs(60);
    let infos = loop {
        let infos = ids
            .iter()
            .map(|id| queue.job(*id))
            .collect::<Result<Vec<_>, _>>()?;
        if infos.iter().all(|i| finished(i.status)) || Instant::now() > deadline {
            break infos;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    worker.stop()?;
    let elapsed = started.elapsed();

    let mut by_kind: BTreeMap<(&str, JobStatus), usize> = BTreeMap::new();
    for info in &infos {
        *by_kind
            .entry((info.kind.as_str(), info.status))
            .or_default() += 1;
    }
    println!("\n{:<14} {:<10} {:>5}", "kind", "status", "jobs");
    for ((kind, status), n) in &by_kind {
        println!("{kind:<14} {:<10} {n:>5}", status.as_str());
    }
    let failed = queue.job(failing)?;
    let error = failed.error.expect("the webhook's error is recorded");
    println!(
        "\nfailed job {}: {}: {}",
        failed.id, error.kind, error.message
    );
    let late = queue.job(delayed)?;
    println!(
        "delayed job {}: due {} after enqueue, finished {} after",
        late.id,
        fmt_ms(late.scheduled_at - late.created_at),
        fmt_ms(late.finished_at.unwrap_or(late.created_at) - late.created_at),
    );
    println!("\n{} jobs done in {elapsed:.2?}", infos.len());
    let unfinished = infos.iter().filter(|i| !finished(i.status)).count();
    if unfinished > 0 {
        eprintln!("{unfinished} jobs did not finish in time");
        std::process::exit(1);
    }
    Ok(())
}

fn fmt_ms(d: chrono::Duration) -> String {
    format!("{:.1}s", d.num_milliseconds() as f64 / 1000.0)
}
