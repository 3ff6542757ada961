//! Progress: what a running job reports with `set_progress` is visible in
//! `JobInfo` while it runs (with when its attempt started) and after it
//! ends, and however often it is called the worker writes it at most about
//! once per second — counted by a trigger on every write of the column.

use crate::common;

use std::time::{Duration, Instant};

use common::{TestDb, wait_for};
use serde::{Deserialize, Serialize};
use solidq::{Backend, Job, JobContext, JobResult, JobStatus, Queue, Worker, WorkerConfig};

backend_tests!(
    progress_is_visible_while_the_job_runs_and_its_last_value_is_kept,
    progress_is_written_at_most_about_once_a_second_however_often_it_is_set,
);

/// Reports `total` steps, then waits until the file `gate` exists, then
/// reports done.
#[derive(Serialize, Deserialize)]
struct Stepper {
    total: u32,
    gate: std::path::PathBuf,
}

impl Job for Stepper {
    const KIND: &'static str = "stepper";
    fn perform(&self, ctx: &JobContext) -> JobResult {
        for done in 1..=self.total {
            ctx.set_progress(serde_json::json!({ "done": done, "total": self.total }));
        }
        while !self.gate.exists() && !ctx.is_cancelled() {
            std::thread::sleep(Duration::from_millis(10));
        }
        ctx.set_progress(
            serde_json::json!({ "done": self.total, "total": self.total, "phase": "finished" }),
        );
        Ok(serde_json::Value::Null)
    }
}

/// Sets its progress as fast as it can for `millis`.
#[derive(Serialize, Deserialize)]
struct Chatty {
    millis: u64,
}

impl Job for Chatty {
    const KIND: &'static str = "chatty";
    fn perform(&self, ctx: &JobContext) -> JobResult {
        let until = Instant::now() + Duration::from_millis(self.millis);
        let mut calls = 0_u64;
        while Instant::now() < until {
            calls += 1;
            ctx.set_progress(serde_json::json!({ "calls": calls }));
        }
        Ok(serde_json::json!(calls))
    }
}

/// Ends at once: keeps the completer writing outcome batches meanwhile.
#[derive(Serialize, Deserialize)]
struct Quick;

impl Job for Quick {
    const KIND: &'static str = "quick";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        std::thread::sleep(Duration::from_micros(200));
        Ok(serde_json::Value::Null)
    }
}

fn worker(queue: &Queue) -> Worker {
    Worker::new(queue.clone())
        .config(WorkerConfig {
            threads: 2,
            polling_interval: Duration::from_millis(50),
            ..WorkerConfig::default()
        })
        .register::<Stepper>()
        .register::<Chatty>()
        .register::<Quick>()
}

fn progress_is_visible_while_the_job_runs_and_its_last_value_is_kept(db: &TestDb) {
    let queue = db.queue();
    let dir = tempfile::tempdir().unwrap();
    let gate = dir.path().join("gate");
    let id = queue
        .enqueue(&Stepper {
            total: 1000,
            gate: gate.clone(),
        })
        .unwrap();
    let worker = worker(&queue).start().unwrap();
    wait_for(
        "the running job's progress to reach 1000",
        Duration::from_secs(10),
        || {
            queue.job(id).unwrap().progress
                == Some(serde_json::json!({ "done": 1000, "total": 1000 }))
        },
    );
    let running = queue.job(id).unwrap();
    assert_eq!(running.status, JobStatus::Running);
    let started = running
        .started_at
        .expect("a running job says when its attempt started");
    assert!(
        started >= running.created_at,
        "{started} vs {}",
        running.created_at
    );
    std::fs::write(&gate, "open").unwrap();
    wait_for("the job to end", Duration::from_secs(10), || {
        queue.job(id).unwrap().status == JobStatus::Succeeded
    });
    worker.stop().unwrap();
    assert_eq!(
        queue.job(id).unwrap().progress,
        Some(serde_json::json!({ "done": 1000, "total": 1000, "phase": "finished" })),
        "the value set just before returning is stored"
    );
}

fn count_progress_writes(db: &TestDb) {
    db.execute("CREATE TABLE progress_writes (job_id BIGINT NOT NULL)");
    match db.backend {
        Backend::Postgres => db.execute(
            "CREATE FUNCTION count_progress() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN INSERT INTO progress_writes VALUES (NEW.id); RETURN NEW; END $$;
             CREATE TRIGGER count_progress AFTER UPDATE OF progress ON solidq_jobs
             FOR EACH ROW WHEN (NEW.progress IS DISTINCT FROM OLD.progress)
             EXECUTE FUNCTION count_progress();",
        ),
        Backend::Sqlite => db.execute(
            "CREATE TRIGGER count_progress AFTER UPDATE OF progress ON solidq_jobs
             WHEN NEW.progress IS NOT OLD.progress
             BEGIN INSERT INTO progress_writes VALUES (NEW.id); END;",
        ),
        Backend::Mysql => db.execute(
            "CREATE TRIGGER count_progress AFTER UPDATE ON solidq_jobs FOR EACH ROW
             IF NOT (NEW.progress <=> OLD.progress) THEN
                 INSERT INTO progress_writes VALUES (NEW.id);
             END IF",
        ),
    }
}

fn progress_is_written_at_most_about_once_a_second_however_often_it_is_set(db: &TestDb) {
    let queue = db.queue();
    count_progress_writes(db);
    let id = queue.enqueue(&Chatty { millis: 2500 }).unwrap();
    // Outcome batches written all along must not carry the chatty job's
    // progress each time.
    let quick = queue
        .enqueue_all(&(0..3000).map(|_| Quick).collect::<Vec<_>>())
        .unwrap();
    let started = Instant::now();
    let worker = worker(&queue).start().unwrap();
    wait_for("the chatty job to end", Duration::from_secs(20), || {
        queue.job(id).unwrap().status == JobStatus::Succeeded
    });
    let ran = started.elapsed();
    worker.stop().unwrap();
    let quick_done = quick
        .iter()
        .filter(|q| queue.job(**q).unwrap().status == JobStatus::Succeeded)
        .count();
    let info = queue.job(id).unwrap();
    let calls = info.result.unwrap().as_u64().unwrap();
    let writes = db.scalar("SELECT count(*) AS v FROM progress_writes");
    eprintln!(
        "{calls} set_progress calls in 2.5 s, {writes} writes, {quick_done} other jobs meanwhile"
    );
    assert!(quick_done > 100, "other jobs ended meanwhile: {quick_done}");
    assert!(calls > 10_000, "the job called set_progress often: {calls}");
    // One write per elapsed second at most, plus the one with the outcome.
    let bound = ran.as_secs() as i64 + 2;
    assert!(
        (2..=bound).contains(&writes),
        "{writes} progress writes for {calls} calls in {ran:?} (bound {bound})"
    );
    assert_eq!(
        info.progress,
        Some(serde_json::json!({ "calls": calls })),
        "the last value is the one stored"
    );
}
