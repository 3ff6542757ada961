//! Batches: resize an album's photos as one batch, one of them broken; the
//! report runs once, when the last photo ended, with the batch's counts. A
//! photo adds a thumbnail job to its own batch while it runs.
//!
//! ```text
//! cargo run --example batches                 # SQLite file in the temp directory
//! cargo run --example batches -- postgres://postgres@127.0.0.1/postgres
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};
use solidq::{
    BatchOptions, EnqueueOptions, Job, JobContext, JobError, JobRequest, JobResult, Queue, Worker,
};

#[derive(Serialize, Deserialize)]
struct Resize {
    photo: u32,
}

impl Job for Resize {
    const KIND: &'static str = "resize";
    fn perform(&self, ctx: &JobContext) -> JobResult {
        if self.photo == 7 {
            return Err(JobError::new("corrupt", "photo 7 is not a JPEG").no_retry());
        }
        if self.photo == 1 {
            // A running member adds to its own batch (even once closed).
            let queue = ctx.state::<Queue>().expect("the queue is shared state");
            let batch = ctx.batch_id().expect("a member");
            let thumbnail = JobRequest::new(&Thumbnail { photo: 1 }, EnqueueOptions::new())?;
            queue.add_to_batch(batch, &[thumbnail])?;
        }
        std::thread::sleep(Duration::from_millis(20));
        Ok(serde_json::Value::Null)
    }
}

#[derive(Serialize, Deserialize)]
struct Thumbnail {
    photo: u32,
}

impl Job for Thumbnail {
    const KIND: &'static str = "thumbnail";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        Ok(serde_json::Value::Null)
    }
}

/// The batch's callback: reads the counts.
#[derive(Serialize, Deserialize)]
struct Report {
    batch: i64,
}

impl Job for Report {
    const KIND: &'static str = "report";
    fn perform(&self, ctx: &JobContext) -> JobResult {
        let queue = ctx.state::<Queue>().expect("the queue is shared state");
        let info = queue.batch_info(self.batch)?.expect("the batch");
        println!(
            "report: batch {} ended, {} of {} succeeded, {} failed",
            info.id, info.succeeded, info.total, info.failed
        );
        Ok(serde_json::Value::Null)
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let url = match std::env::args().nth(1) {
        Some(url) => url,
        None => {
            let path = std::env::temp_dir().join("solidq-batches.sqlite3");
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
            }
            path.display().to_string()
        }
    };
    let queue = Queue::connect(&url)?;
    queue.migrate()?;
    let photos = (1..=10)
        .map(|photo| JobRequest::new(&Resize { photo }, EnqueueOptions::new()))
        .collect::<solidq::Result<Vec<_>>>()?;
    let options = BatchOptions::new()
        .description("resize the album")
        .on_complete(|batch| JobRequest::new(&Report { batch }, EnqueueOptions::new()));
    let batch = queue.batch(options, &photos)?;
    println!("batch {} of {} photos enqueued", batch.id, batch.jobs.len());

    let worker = Worker::new(queue.clone())
        .state(queue.clone())
        .register::<Resize>()
        .register::<Thumbnail>()
        .register::<Report>()
        .start()?;
    while queue
        .batch_info(batch.id)?
        .is_some_and(|b| !b.is_finished())
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300)); // the report runs
    worker.stop()?;
    println!("{:?}", queue.batch_info(batch.id)?);
    Ok(())
}
