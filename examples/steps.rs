//! Resumable steps: an import of three steps whose worker is stopped in the
//! middle of the second. The next worker skips the finished step and
//! resumes the second from its last checkpoint.
//!
//! ```text
//! cargo run --example steps                 # SQLite file in the temp directory
//! cargo run --example steps -- postgres://postgres@127.0.0.1/postgres
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};
use solidq::{Job, JobContext, JobError, JobResult, JobStatus, Queue, Worker};

/// Downloads a file, inserts its rows, then tells someone.
#[derive(Serialize, Deserialize)]
struct Import {
    rows: u64,
}

impl Job for Import {
    const KIND: &'static str = "import";
    fn perform(&self, ctx: &JobContext) -> JobResult {
        ctx.step("download", |_| {
            println!("  download (attempt {})", ctx.attempt());
            Ok(())
        })?;
        ctx.step("insert", |s| {
            let from: u64 = s.cursor().unwrap_or(0);
            println!("  insert rows from {from}");
            for row in from..self.rows {
                if ctx.is_cancelled() {
                    println!("  asked to stop after {row} rows: handing the job back");
                    return Err(JobError::interrupted());
                }
                std::thread::sleep(Duration::from_millis(10)); // insert the row
                s.checkpoint(row + 1);
            }
            Ok(())
        })?;
        ctx.step("notify", |_| {
            println!("  notify");
            Ok(())
        })?;
        Ok(serde_json::json!({ "rows": self.rows }))
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let url = match std::env::args().nth(1) {
        Some(url) => url,
        None => {
            let path = std::env::temp_dir().join("solidq-steps.sqlite3");
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
            }
            path.display().to_string()
        }
    };
    let queue = Queue::connect(&url)?;
    queue.migrate()?;
    let id = queue.enqueue(&Import { rows: 300 })?;

    println!("first worker:");
    let worker = Worker::new(queue.clone()).register::<Import>().start()?;
    std::thread::sleep(Duration::from_millis(1_500));
    worker.stop()?;
    let job = queue.job(id)?;
    println!(
        "stopped; the job is {} with checkpoint {}",
        job.status,
        job.checkpoint.unwrap_or_default()
    );

    println!("second worker:");
    let worker = Worker::new(queue.clone()).register::<Import>().start()?;
    while !matches!(
        queue.job(id)?.status,
        JobStatus::Succeeded | JobStatus::Failed
    ) {
        std::thread::sleep(Duration::from_millis(50));
    }
    worker.stop()?;
    let job = queue.job(id)?;
    println!(
        "{}: result {}, checkpoint {}",
        job.status,
        job.result.unwrap_or_default(),
        job.checkpoint.unwrap_or_default()
    );
    Ok(())
}
