//! Fair share across tenants: tenant `acme` enqueues a burst of 1,000
//! reports, then tenants `globex` and `initech` one each. With fairness keys
//! the small tenants' reports start right away, between acme's, instead of
//! after the whole burst.
//!
//! ```text
//! cargo run --example fairness                 # SQLite file in the temp directory
//! cargo run --example fairness -- postgres://postgres@127.0.0.1/postgres
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};
use solidq::{Job, JobContext, JobResult, JobStatus, Queue, Worker, WorkerConfig};

#[derive(Serialize, Deserialize)]
struct Report {
    tenant: String,
    n: u32,
}

impl Job for Report {
    const KIND: &'static str = "report";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        if self.tenant != "acme" || self.n <= 3 {
            println!("{:>8} report {}", self.tenant, self.n);
        }
        std::thread::sleep(Duration::from_millis(2));
        Ok(serde_json::Value::Null)
    }
    /// Jobs of different tenants take turns.
    fn fairness_key(&self) -> Option<String> {
        Some(self.tenant.clone())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let url = match std::env::args().nth(1) {
        Some(url) => url,
        None => {
            let path = std::env::temp_dir().join("solidq-fairness.sqlite3");
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
            }
            path.display().to_string()
        }
    };
    let queue = Queue::connect(&url)?;
    queue.migrate()?;
    let burst: Vec<Report> = (1..=1_000)
        .map(|n| Report {
            tenant: "acme".into(),
            n,
        })
        .collect();
    queue.enqueue_all(&burst)?;
    let mut last = 0;
    for tenant in ["globex", "initech"] {
        last = queue.enqueue(&Report {
            tenant: tenant.into(),
            n: 1,
        })?;
    }
    println!("acme enqueued 1,000 reports, then globex and initech one each");

    // One thread: jobs start in claim order.
    let config = WorkerConfig {
        threads: 1,
        ..WorkerConfig::default()
    };
    let worker = Worker::new(queue.clone())
        .config(config)
        .register::<Report>()
        .start()?;
    while queue.job(last)?.status != JobStatus::Succeeded {
        std::thread::sleep(Duration::from_millis(10));
    }
    worker.stop()?;
    let waiting = queue.queue_stats("default")?.ready;
    println!("both small tenants done while {waiting} of acme's reports still wait");
    Ok(())
}
