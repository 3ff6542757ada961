//! Workflows: an import as a DAG. `fetch` fans out to three `parse` jobs,
//! which fan in to `load`; the second part is corrupt, so its parse fails,
//! `load` is cancelled by dependency, and `notify` runs anyway.
//!
//! ```text
//! cargo run --example workflows                 # SQLite file in the temp directory
//! cargo run --example workflows -- postgres://postgres@127.0.0.1/postgres
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};
use solidq::{
    BatchOptions, EnqueueOptions, Job, JobContext, JobError, JobRequest, JobResult, Queue, Worker,
};

#[derive(Serialize, Deserialize)]
struct Step {
    name: String,
    /// Fails for good when set.
    corrupt: bool,
}

impl Job for Step {
    const KIND: &'static str = "step";
    fn perform(&self, ctx: &JobContext) -> JobResult {
        println!("{:>8}: job {} runs", self.name, ctx.job_id());
        std::thread::sleep(Duration::from_millis(50));
        if self.corrupt {
            return Err(JobError::new("corrupt", format!("{} is not CSV", self.name)).no_retry());
        }
        Ok(serde_json::Value::Null)
    }
}

fn step(name: &str, corrupt: bool) -> solidq::Result<JobRequest> {
    let job = Step {
        name: name.into(),
        corrupt,
    };
    Ok(JobRequest::new(&job, EnqueueOptions::new())?.named(name))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let url = match std::env::args().nth(1) {
        Some(url) => url,
        None => {
            let path = std::env::temp_dir().join("solidq-workflows.sqlite3");
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
            }
            path.display().to_string()
        }
    };
    let queue = Queue::connect(&url)?;
    queue.migrate()?;
    let jobs = vec![
        step("fetch", false)?,
        step("parse-1", false)?.after("fetch"),
        step("parse-2", true)?.after("fetch"),
        step("parse-3", false)?.after("fetch"),
        step("load", false)?
            .after("parse-1")
            .after("parse-2")
            .after("parse-3"),
        step("notify", false)?.after("load").even_if_parents_fail(),
    ];
    let workflow = queue.batch(BatchOptions::new().description("import"), &jobs)?;
    println!(
        "workflow {} of {} jobs enqueued",
        workflow.id,
        workflow.jobs.len()
    );

    let worker = Worker::new(queue.clone()).register::<Step>().start()?;
    while queue
        .batch_info(workflow.id)?
        .is_some_and(|b| !b.is_finished())
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    worker.stop()?;
    for id in &workflow.jobs {
        let job = queue.job(*id)?;
        let error = job.error.map(|e| e.message).unwrap_or_default();
        println!("job {id}: {} {error}", job.status);
    }
    println!("{:?}", queue.batch_info(workflow.id)?);
    Ok(())
}
