//! Handing a job back without spending an attempt: a snooze runs it again
//! after its delay, an interruption at shutdown puts it back to ready at
//! once, both counted and bounded by `max_snoozes`, and a limited job gives
//! its concurrency slot back while it waits.

use crate::common;

use std::time::{Duration, Instant};

use common::{TestDb, wait_for};
use serde::{Deserialize, Serialize};
use solidq::{
    ConcurrencyLimit, EnqueueOptions, Job, JobContext, JobError, JobOptions, JobResult, JobStatus,
    Queue, Worker, WorkerConfig,
};

backend_tests!(
    a_snoozed_job_runs_again_after_its_delay_without_spending_an_attempt,
    a_job_that_snoozes_past_its_max_snoozes_fails_saying_so,
    an_interrupted_job_survives_two_deploys_in_a_row_without_spending_attempts,
    a_snoozing_job_gives_its_concurrency_slot_back,
);

/// Snoozes `times` times for `delay_ms`, then reports what it saw.
#[derive(Serialize, Deserialize)]
struct Snoozy {
    times: u32,
    delay_ms: u64,
}

impl Job for Snoozy {
    const KIND: &'static str = "snoozy";
    fn perform(&self, ctx: &JobContext) -> JobResult {
        if ctx.snoozes() < self.times {
            return Err(JobError::snooze(Duration::from_millis(self.delay_ms)));
        }
        Ok(serde_json::json!({ "attempt": ctx.attempt(), "snoozes": ctx.snoozes() }))
    }
    fn options() -> JobOptions {
        JobOptions::new().max_attempts(1)
    }
}

/// Runs until asked to stop, then hands itself back; succeeds once it has
/// been interrupted `deploys` times.
#[derive(Serialize, Deserialize)]
struct Patient {
    deploys: u32,
    /// Where it says that its code runs (`run-<snoozes>`).
    dir: std::path::PathBuf,
}

impl Job for Patient {
    const KIND: &'static str = "patient";
    fn perform(&self, ctx: &JobContext) -> JobResult {
        if ctx.snoozes() >= self.deploys {
            return Ok(serde_json::json!({ "attempt": ctx.attempt(), "snoozes": ctx.snoozes() }));
        }
        std::fs::write(self.dir.join(format!("run-{}", ctx.snoozes())), "")?;
        while !ctx.is_cancelled() {
            std::thread::sleep(Duration::from_millis(5));
        }
        Err(JobError::interrupted())
    }
}

/// One at a time per key; the first run of each job snoozes.
#[derive(Serialize, Deserialize)]
struct Limited {
    name: String,
}

impl Job for Limited {
    const KIND: &'static str = "limited";
    fn perform(&self, ctx: &JobContext) -> JobResult {
        if ctx.snoozes() == 0 {
            return Err(JobError::snooze(Duration::from_millis(1500)));
        }
        Ok(serde_json::json!(self.name))
    }
    fn options() -> JobOptions {
        JobOptions::new()
            .max_attempts(1)
            .concurrency(ConcurrencyLimit::new(1).duration(Duration::from_secs(60)))
    }
    fn concurrency_key(&self) -> Option<String> {
        Some("one".into())
    }
}

fn worker(queue: &Queue) -> Worker {
    Worker::new(queue.clone())
        .config(WorkerConfig {
            threads: 2,
            polling_interval: Duration::from_millis(50),
            ..WorkerConfig::default()
        })
        .register::<Snoozy>()
        .register::<Patient>()
        .register::<Limited>()
}

fn wait_status(queue: &Queue, id: i64, what: &str, ok: impl Fn(JobStatus) -> bool) {
    wait_for(what, Duration::from_secs(30), || {
        ok(queue.job(id).unwrap().status)
    });
}

fn ended(s: JobStatus) -> bool {
    matches!(s, JobStatus::Succeeded | JobStatus::Failed)
}

fn a_snoozed_job_runs_again_after_its_delay_without_spending_an_attempt(db: &TestDb) {
    let queue = db.queue();
    let id = queue
        .enqueue(&Snoozy {
            times: 2,
            delay_ms: 300,
        })
        .unwrap();
    let worker = worker(&queue).start().unwrap();
    wait_status(&queue, id, "the snoozy job to end", ended);
    worker.stop().unwrap();
    let info = queue.job(id).unwrap();
    assert_eq!(info.status, JobStatus::Succeeded, "{:?}", info.error);
    assert_eq!(info.attempts, 1, "max_attempts 1: the snoozes spent none");
    assert_eq!(info.snoozes, 2);
    assert_eq!(
        info.result,
        Some(serde_json::json!({ "attempt": 1, "snoozes": 2 }))
    );
    assert!(
        info.errors.is_empty(),
        "a snooze is no error: {:?}",
        info.errors
    );
    let took = info.finished_at.unwrap() - info.created_at;
    assert!(
        took >= chrono::Duration::milliseconds(600),
        "two snoozes of 300 ms were waited out: {took}"
    );
}

fn a_job_that_snoozes_past_its_max_snoozes_fails_saying_so(db: &TestDb) {
    let queue = db.queue();
    let id = queue
        .enqueue_with(
            &Snoozy {
                times: u32::MAX,
                delay_ms: 10,
            },
            EnqueueOptions::new().max_snoozes(3),
        )
        .unwrap();
    let worker = worker(&queue).start().unwrap();
    wait_status(&queue, id, "the job to fail", ended);
    worker.stop().unwrap();
    let info = queue.job(id).unwrap();
    assert_eq!(info.status, JobStatus::Failed);
    assert_eq!(info.snoozes, 3);
    let error = info.error.unwrap();
    assert_eq!(error.kind, "snoozed_too_often");
    assert!(error.message.contains("3 times"), "{}", error.message);
}

fn an_interrupted_job_survives_two_deploys_in_a_row_without_spending_attempts(db: &TestDb) {
    let queue = db.queue();
    // The default max_attempts (2): two deploys that failed it would end it.
    let dir = tempfile::tempdir().unwrap();
    let id = queue
        .enqueue(&Patient {
            deploys: 2,
            dir: dir.path().to_path_buf(),
        })
        .unwrap();
    for deploy in 1..=2 {
        let worker = worker(&queue).start().unwrap();
        // Its code runs (a claimed job whose thread has not taken it yet
        // is handed back unstarted at shutdown, which spends nothing).
        let marker = dir.path().join(format!("run-{}", deploy - 1));
        wait_for("the job's code to run", Duration::from_secs(30), || {
            marker.exists()
        });
        let stopping = Instant::now();
        worker.stop().unwrap();
        assert!(
            stopping.elapsed() < Duration::from_secs(5),
            "the job stopped when asked, well inside the grace period"
        );
        let info = queue.job(id).unwrap();
        assert_eq!(
            info.status,
            JobStatus::Ready,
            "deploy {deploy}: back to ready at once"
        );
        assert_eq!(info.attempts, 0, "deploy {deploy}: no attempt spent");
        assert_eq!(info.snoozes, deploy);
        assert_eq!(info.stalled_count, 0);
    }
    let worker = worker(&queue).start().unwrap();
    wait_status(&queue, id, "the job to end", ended);
    worker.stop().unwrap();
    let info = queue.job(id).unwrap();
    assert_eq!(info.status, JobStatus::Succeeded, "{:?}", info.error);
    assert_eq!(
        info.result,
        Some(serde_json::json!({ "attempt": 1, "snoozes": 2 }))
    );
}

fn a_snoozing_job_gives_its_concurrency_slot_back(db: &TestDb) {
    let queue = db.queue();
    let first = queue.enqueue(&Limited { name: "a".into() }).unwrap();
    let second = queue.enqueue(&Limited { name: "b".into() }).unwrap();
    let worker = worker(&queue).start().unwrap();
    // Both snooze 1.5 s on their first run; with the slot held through a
    // snooze, the second could not even start before the first ended.
    wait_for(
        "both limited jobs to have snoozed once",
        Duration::from_secs(30),
        || {
            [first, second]
                .iter()
                .all(|id| queue.job(*id).unwrap().snoozes >= 1)
        },
    );
    let first_info = queue.job(first).unwrap();
    assert!(
        !ended(first_info.status),
        "the second snoozed while the first was still waiting out its snooze: {:?}",
        first_info.status
    );
    for id in [first, second] {
        wait_status(&queue, id, "each limited job to end", ended);
    }
    worker.stop().unwrap();
    for id in [first, second] {
        let info = queue.job(id).unwrap();
        assert_eq!(info.status, JobStatus::Succeeded, "{:?}", info.error);
    }
    common::assert_invariants(db);
}
