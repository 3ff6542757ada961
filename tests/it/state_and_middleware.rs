//! What a job reaches besides its arguments: the worker's shared state
//! (no `static`s), and middleware wrapped around every execution, which
//! sees the outcome, may change it, and whose panics fail only the attempt.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::jobs::{self, Echo, Fail};
use common::{TestDb, wait_for};
use serde::{Deserialize, Serialize};
use solidq::{Job, JobContext, JobOptions, JobResult, JobStatus, Next, Queue, WorkerConfig};

backend_tests!(
    a_job_reaches_the_workers_state_without_a_static,
    a_job_asking_for_state_the_worker_lacks_fails_at_once_naming_the_type,
    middleware_wraps_every_execution_outermost_first_and_sees_the_outcome,
    a_panicking_middleware_fails_only_the_attempt,
);

/// The app's "database pool": counts the jobs that used it.
struct Pool {
    used: AtomicUsize,
}

/// Settings, shared as a second state value.
struct Settings {
    greeting: String,
}

#[derive(Serialize, Deserialize)]
struct Greet {
    name: String,
}

impl Job for Greet {
    const KIND: &'static str = "greet";
    fn perform(&self, ctx: &JobContext) -> JobResult {
        let pool = ctx.state::<Arc<Pool>>()?;
        let settings = ctx.state::<Settings>()?;
        let n = pool.used.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(serde_json::json!({ "text": format!("{} {}", settings.greeting, self.name), "n": n }))
    }
    fn options() -> JobOptions {
        JobOptions::new().max_attempts(3)
    }
}

fn fast() -> WorkerConfig {
    WorkerConfig {
        threads: 2,
        polling_interval: Duration::from_millis(50),
        ..WorkerConfig::default()
    }
}

fn wait_done(queue: &Queue, ids: &[i64]) {
    wait_for("every job to end", Duration::from_secs(30), || {
        ids.iter().all(|id| {
            matches!(
                queue.job(*id).unwrap().status,
                JobStatus::Succeeded | JobStatus::Failed
            )
        })
    });
}

fn a_job_reaches_the_workers_state_without_a_static(db: &TestDb) {
    let queue = db.queue();
    let pool = Arc::new(Pool {
        used: AtomicUsize::new(0),
    });
    let ids: Vec<i64> = (0..10)
        .map(|n| {
            queue
                .enqueue(&Greet {
                    name: format!("n{n}"),
                })
                .unwrap()
        })
        .collect();
    let worker = solidq::Worker::new(queue.clone())
        .config(fast())
        .state(Arc::clone(&pool))
        .state(Settings {
            greeting: "hello".into(),
        })
        .register::<Greet>()
        .start()
        .unwrap();
    wait_done(&queue, &ids);
    worker.stop().unwrap();
    for (n, id) in ids.iter().enumerate() {
        let info = queue.job(*id).unwrap();
        assert_eq!(info.status, JobStatus::Succeeded, "{info:?}");
        let result = info.result.unwrap();
        assert_eq!(result["text"], format!("hello n{n}"));
    }
    assert_eq!(
        pool.used.load(Ordering::SeqCst),
        10,
        "the caller's own value was shared"
    );
}

fn a_job_asking_for_state_the_worker_lacks_fails_at_once_naming_the_type(db: &TestDb) {
    let queue = db.queue();
    let id = queue.enqueue(&Greet { name: "x".into() }).unwrap();
    // Settings given, the pool forgotten.
    let worker = solidq::Worker::new(queue.clone())
        .config(fast())
        .state(Settings {
            greeting: "hi".into(),
        })
        .register::<Greet>()
        .start()
        .unwrap();
    wait_done(&queue, &[id]);
    worker.stop().unwrap();
    let info = queue.job(id).unwrap();
    assert_eq!(info.status, JobStatus::Failed);
    assert_eq!(
        info.attempts, 1,
        "no retry: max_attempts 3 but the setup is wrong"
    );
    let error = info.error.unwrap();
    assert_eq!(error.kind, "missing_state");
    assert!(
        error.message.contains("alloc::sync::Arc<") && error.message.contains("Pool>"),
        "names the missing type: {}",
        error.message
    );
    assert!(
        error.message.contains("Settings"),
        "names what the worker holds: {}",
        error.message
    );
}

/// Records what each middleware saw, in order.
type Trace = Arc<Mutex<Vec<String>>>;

fn tracing_middleware(
    name: &'static str,
    trace: Trace,
) -> impl Fn(&JobContext, Next<'_>) -> JobResult + Send + Sync + 'static {
    move |ctx, next| {
        trace
            .lock()
            .unwrap()
            .push(format!("{name} before {}", ctx.job_id()));
        let outcome = next.run();
        trace.lock().unwrap().push(format!(
            "{name} after {} {}",
            ctx.job_id(),
            if outcome.is_ok() { "ok" } else { "err" }
        ));
        outcome
    }
}

fn middleware_wraps_every_execution_outermost_first_and_sees_the_outcome(db: &TestDb) {
    let queue = db.queue();
    let ok = queue.enqueue(&Echo { value: 1.into() }).unwrap();
    let failing = queue
        .enqueue_with(
            &Fail {
                message: "no".into(),
            },
            solidq::EnqueueOptions::new().max_attempts(1),
        )
        .unwrap();
    // A job the middleware turns from an error into a success.
    let rescued = queue
        .enqueue_with(
            &Fail {
                message: "rescue me".into(),
            },
            solidq::EnqueueOptions::new().max_attempts(1),
        )
        .unwrap();
    let trace: Trace = Arc::default();
    let worker = jobs::worker(queue.clone())
        .config(WorkerConfig {
            threads: 1,
            ..fast()
        })
        .wrap(tracing_middleware("outer", Arc::clone(&trace)))
        .wrap(tracing_middleware("inner", Arc::clone(&trace)))
        .wrap(move |ctx: &JobContext, next: Next<'_>| {
            let outcome = next.run();
            if ctx.job_id() == rescued {
                return Ok(serde_json::json!("rescued"));
            }
            outcome
        })
        .start()
        .unwrap();
    wait_done(&queue, &[ok, failing, rescued]);
    worker.stop().unwrap();
    let trace = trace.lock().unwrap().clone();
    for (id, seen) in [(ok, "ok"), (failing, "err"), (rescued, "ok")] {
        let lines: Vec<&String> = trace
            .iter()
            .filter(|l| l.split(' ').nth(2) == Some(id.to_string().as_str()))
            .collect();
        assert_eq!(
            lines,
            [
                &format!("outer before {id}"),
                &format!("inner before {id}"),
                &format!("inner after {id} {seen}"),
                &format!("outer after {id} {seen}"),
            ],
            "job {id}: {trace:?}"
        );
    }
    assert_eq!(queue.job(ok).unwrap().status, JobStatus::Succeeded);
    assert_eq!(queue.job(failing).unwrap().status, JobStatus::Failed);
    let rescued = queue.job(rescued).unwrap();
    assert_eq!(rescued.status, JobStatus::Succeeded);
    assert_eq!(rescued.result, Some(serde_json::json!("rescued")));
}

fn a_panicking_middleware_fails_only_the_attempt(db: &TestDb) {
    let queue = db.queue();
    let doomed = queue
        .enqueue_with(
            &Echo {
                value: "boom".into(),
            },
            solidq::EnqueueOptions::new().max_attempts(1),
        )
        .unwrap();
    let fine: Vec<i64> = (0..10)
        .map(|n| queue.enqueue(&Echo { value: n.into() }).unwrap())
        .collect();
    let worker = jobs::worker(queue.clone())
        .config(fast())
        .wrap(move |ctx: &JobContext, next: Next<'_>| {
            if ctx.job_id() == doomed {
                panic!("middleware panics for job {}", ctx.job_id());
            }
            next.run()
        })
        .start()
        .unwrap();
    let mut all = fine.clone();
    all.push(doomed);
    wait_done(&queue, &all);
    worker.stop().unwrap();
    let info = queue.job(doomed).unwrap();
    assert_eq!(info.status, JobStatus::Failed);
    let error = info.error.unwrap();
    assert_eq!(error.kind, "panic");
    assert!(
        error.message.contains("middleware panics"),
        "{}",
        error.message
    );
    for id in fine {
        assert_eq!(queue.job(id).unwrap().status, JobStatus::Succeeded);
    }
}
