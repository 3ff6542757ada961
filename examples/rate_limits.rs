//! Rate limits: 20 calls to an API that takes 5 a second, on a worker with
//! 8 threads. Jobs over the limit go back to wait, without spending an
//! attempt, and start as the limit frees up: 5 starts in each second.
//!
//! ```text
//! cargo run --example rate_limits                 # SQLite file in the temp directory
//! cargo run --example rate_limits -- postgres://postgres@127.0.0.1/postgres
//! ```

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use solidq::{
    Job, JobContext, JobOptions, JobResult, JobStatus, Queue, RateLimit, Worker, WorkerConfig,
};

#[derive(Serialize, Deserialize)]
struct CallApi {
    n: u32,
}

impl Job for CallApi {
    const KIND: &'static str = "call_api";
    fn perform(&self, ctx: &JobContext) -> JobResult {
        let second = (chrono::Utc::now() - ctx.enqueued_at()).num_milliseconds() / 1000;
        println!("call {:>2} starts in second {second}", self.n);
        Ok(serde_json::Value::Null)
    }
    fn options() -> JobOptions {
        JobOptions::new().rate_limit(RateLimit::new(5, Duration::from_secs(1)))
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let url = match std::env::args().nth(1) {
        Some(url) => url,
        None => {
            let path = std::env::temp_dir().join("solidq-rate-limits.sqlite3");
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
            }
            path.display().to_string()
        }
    };
    let queue = Queue::connect(&url)?;
    queue.migrate()?;
    let calls: Vec<CallApi> = (1..=20).map(|n| CallApi { n }).collect();
    let ids = queue.enqueue_all(&calls)?;
    let config = WorkerConfig {
        threads: 8,
        ..WorkerConfig::default()
    };
    let began = Instant::now();
    let worker = Worker::new(queue.clone())
        .config(config)
        .register::<CallApi>()
        .start()?;
    for id in &ids {
        while queue.job(*id)?.status != JobStatus::Succeeded {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    worker.stop()?;
    let attempts: u32 = ids
        .iter()
        .map(|id| queue.job(*id).map(|j| j.attempts))
        .sum::<solidq::Result<u32>>()?;
    println!(
        "20 calls in {:.1} s, {attempts} attempts in all",
        began.elapsed().as_secs_f64()
    );
    Ok(())
}
