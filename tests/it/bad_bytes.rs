//! Bad bytes (DESIGN: "a clear error for that one row or job; every other
//! row unaffected"): an error message holding NUL is stored (NUL becomes
//! U+FFFD) without holding back the outcomes written with it; an outcome
//! the database refuses fails its own job with the database's error while
//! the rest of its batch is written; NUL in a kind or key is refused at
//! enqueue naming the value, while arguments and results holding NUL are
//! stored (as the JSON escape) and returned exactly; arguments over the
//! size limit are refused at enqueue and a result over it fails its job,
//! both naming the size and the limit (MySQL's packet limit included);
//! and a worker whose
//! outcomes cannot be written stops claiming more work until they are.

use crate::common;

use std::time::Duration;

use common::jobs::{self, Echo, Fail, Panic};
use common::{TestDb, assert_invariants, wait_for};
use serde::{Deserialize, Serialize};
use solidq::{
    Backend, ConcurrencyLimit, EnqueueOptions, Error, Job, JobContext, JobOptions, JobRequest,
    JobResult, JobStatus, QueueConfig, WorkerConfig,
};

backend_tests!(
    an_error_holding_nul_is_stored_and_holds_back_no_other_outcome,
    an_outcome_the_database_refuses_fails_alone_and_its_batch_is_written,
    nul_in_a_kind_or_key_is_refused_at_enqueue_naming_the_value,
    a_worker_whose_outcomes_cannot_be_written_stops_claiming,
    nul_in_arguments_and_results_is_stored_and_returned_exactly,
    arguments_and_results_over_the_limit_are_refused_naming_size_and_limit,
);

const WAIT: Duration = Duration::from_secs(30);

/// Outcomes linger this long before a write, so those of one burst share
/// a batch.
const LINGER: Duration = Duration::from_millis(100);

fn finished(db: &TestDb) -> i64 {
    db.scalar(
        "SELECT count(*) AS v FROM solidq_jobs j WHERE finished_at IS NOT NULL
         OR EXISTS (SELECT 1 FROM solidq_failed_executions f WHERE f.job_id = j.id)",
    )
}

fn an_error_holding_nul_is_stored_and_holds_back_no_other_outcome(db: &TestDb) {
    let queue = db.queue();
    let fail = queue
        .enqueue(&Fail {
            message: "bad\0byte".into(),
        })
        .unwrap();
    let panic = queue
        .enqueue(&Panic {
            message: "boom\0".into(),
        })
        .unwrap();
    let echoes: Vec<i64> = (0..50)
        .map(|n| queue.enqueue(&Echo { value: n.into() }).unwrap())
        .collect();
    let worker = jobs::worker(queue.clone())
        .config(WorkerConfig {
            threads: 4,
            completion_flush_interval: LINGER,
            ..WorkerConfig::default()
        })
        .start()
        .unwrap();
    wait_for("every outcome to be recorded", WAIT, || finished(db) == 52);
    worker.stop().unwrap();
    for id in echoes {
        assert_eq!(queue.job(id).unwrap().status, JobStatus::Succeeded);
    }
    let failed = queue.job(fail).unwrap();
    assert_eq!(failed.status, JobStatus::Failed);
    assert_eq!(failed.error.unwrap().message, "bad\u{FFFD}byte");
    let panicked = queue.job(panic).unwrap();
    assert_eq!(panicked.status, JobStatus::Failed);
    let error = panicked.error.unwrap();
    assert_eq!(error.kind, "panic");
    assert_eq!(error.message, "boom\u{FFFD}");
    assert_eq!(panicked.errors.len(), 1, "the history is readable JSON");
    assert_invariants(db);
}

/// Makes the database refuse to store a result that contains `poison`.
fn refuse_poisoned_results(db: &TestDb) {
    match db.backend {
        Backend::Postgres | Backend::Mysql => db.execute(
            "ALTER TABLE solidq_jobs ADD CONSTRAINT no_poison
             CHECK (result IS NULL OR result NOT LIKE '%poison%')",
        ),
        Backend::Sqlite => db.execute(
            "CREATE TRIGGER no_poison BEFORE UPDATE OF result ON solidq_jobs
             WHEN NEW.result LIKE '%poison%'
             BEGIN SELECT RAISE(ABORT, 'poisoned result refused'); END;",
        ),
    }
}

fn an_outcome_the_database_refuses_fails_alone_and_its_batch_is_written(db: &TestDb) {
    let queue = db.queue();
    refuse_poisoned_results(db);
    let poison = queue.enqueue(&Echo {
        value: "poison".into(),
    });
    let poison = poison.unwrap();
    let others: Vec<i64> = (0..50)
        .map(|n| queue.enqueue(&Echo { value: n.into() }).unwrap())
        .collect();
    let worker = jobs::worker(queue.clone())
        .config(WorkerConfig {
            threads: 4,
            completion_flush_interval: LINGER,
            ..WorkerConfig::default()
        })
        .start()
        .unwrap();
    wait_for("every outcome to be recorded", WAIT, || finished(db) == 51);
    worker.stop().unwrap();
    for id in others {
        assert_eq!(queue.job(id).unwrap().status, JobStatus::Succeeded);
    }
    let refused = queue.job(poison).unwrap();
    assert_eq!(refused.status, JobStatus::Failed);
    let error = refused.error.unwrap();
    assert_eq!(error.kind, "outcome_not_recorded");
    assert!(
        error.message.contains("no_poison") || error.message.contains("poisoned result"),
        "the database's own error is kept: {}",
        error.message
    );
    assert_eq!(refused.result, None);
    assert_invariants(db);
}

/// A job whose concurrency key holds a NUL.
#[derive(Serialize, Deserialize)]
struct NulKey;

impl Job for NulKey {
    const KIND: &'static str = "nul_key";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        Ok(serde_json::Value::Null)
    }
    fn options() -> JobOptions {
        JobOptions::new().concurrency(ConcurrencyLimit::new(1))
    }
    fn concurrency_key(&self) -> Option<String> {
        Some("acct\0 7".into())
    }
}

fn nul_in_a_kind_or_key_is_refused_at_enqueue_naming_the_value(db: &TestDb) {
    let queue = db.queue();
    let refused = |result: solidq::Result<i64>, option: &str, value: &str| match result {
        Err(Error::InvalidOption {
            option: named,
            value: shown,
            ..
        }) => {
            assert_eq!(named, option);
            assert_eq!(shown, value);
        }
        other => panic!("{option}: expected InvalidOption, got {other:?}"),
    };
    refused(
        queue.enqueue_with(
            &Echo { value: 1.into() },
            EnqueueOptions::new().unique_key("order\0 42"),
        ),
        "unique_key",
        "order\0 42",
    );
    refused(
        queue.enqueue_kind("send\0mail", &serde_json::json!({}), EnqueueOptions::new()),
        "kind",
        "send\0mail",
    );
    refused(
        queue.enqueue(&NulKey),
        "concurrency_key",
        "nul_key/acct\0 7",
    );
    let error = queue
        .enqueue_with(
            &Echo { value: 1.into() },
            EnqueueOptions::new().queue("q\0"),
        )
        .unwrap_err();
    assert!(
        matches!(
            error,
            Error::InvalidOption {
                option: "queue name",
                ..
            }
        ),
        "{error}"
    );
    assert!(
        error.to_string().contains("\\0"),
        "the value is shown: {error}"
    );
    assert_eq!(db.count("solidq_jobs"), 0, "nothing was written");
}

/// Makes every completion write fail with a transient error (a connection
/// the server is terminating, or a locked SQLite file) until removed.
fn break_completions(db: &TestDb) {
    match db.backend {
        Backend::Postgres => db.execute(
            "CREATE FUNCTION test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN RAISE EXCEPTION 'terminating connection due to administrator command'
                   USING ERRCODE = '57P01'; END $$;
             CREATE TRIGGER refuse BEFORE UPDATE ON solidq_jobs
             FOR EACH ROW EXECUTE FUNCTION test_refuse();",
        ),
        Backend::Sqlite => db.execute(
            "CREATE TRIGGER refuse BEFORE UPDATE ON solidq_jobs
             BEGIN SELECT RAISE(ABORT, 'database is locked'); END;",
        ),
        Backend::Mysql => db.execute(
            "CREATE TRIGGER refuse BEFORE UPDATE ON solidq_jobs FOR EACH ROW
             SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'Lost connection to server during query'",
        ),
    }
}

fn mend_completions(db: &TestDb) {
    db.execute(match db.backend {
        Backend::Postgres => "DROP TRIGGER refuse ON solidq_jobs",
        Backend::Sqlite | Backend::Mysql => "DROP TRIGGER refuse",
    });
}

fn a_worker_whose_outcomes_cannot_be_written_stops_claiming(db: &TestDb) {
    let queue = db.queue_with(solidq::QueueConfig {
        sqlite_busy_timeout: Duration::from_millis(100),
        ..solidq::QueueConfig::default()
    });
    break_completions(db);
    for n in 0..200 {
        queue.enqueue(&Echo { value: n.into() }).unwrap();
    }
    let batch = 4;
    let threads = 2;
    let worker = jobs::worker(queue.clone())
        .config(WorkerConfig {
            threads,
            prefetch: 0,
            completion_batch_size: batch,
            ..WorkerConfig::default()
        })
        .start()
        .unwrap();
    wait_for("the worker to claim", WAIT, || {
        db.count("solidq_claimed_executions") > 0
    });
    // Long enough for an unchecked poller to claim all 200.
    std::thread::sleep(Duration::from_secs(2));
    let claimed = db.count("solidq_claimed_executions");
    // What waits for the completer (its limit, 2 batches, plus the one it
    // holds), plus what runs.
    let bound = (3 * batch + 2 * threads) as i64;
    assert!(
        claimed <= bound,
        "{claimed} jobs claimed while none of their outcomes could be written (bound {bound})"
    );
    mend_completions(db);
    wait_for(
        "every job to succeed once outcomes can be written",
        WAIT,
        || db.scalar("SELECT count(*) AS v FROM solidq_jobs WHERE finished_at IS NOT NULL") == 200,
    );
    worker.stop().unwrap();
    assert_invariants(db);
}

/// Arguments and results are any JSON: a NUL in a string or a key is
/// stored as the JSON escape `\u0000` and comes back exactly, on every
/// backend (the HTTP API takes them too: web_api.rs).
fn nul_in_arguments_and_results_is_stored_and_returned_exactly(db: &TestDb) {
    let queue = db.queue();
    let value = serde_json::json!({"text": "a\u{0}b", "k\u{0}": ["\u{0}"]});
    let id = queue
        .enqueue(&Echo {
            value: value.clone(),
        })
        .unwrap();
    assert_eq!(
        queue.job(id).unwrap().arguments,
        serde_json::json!({ "value": value })
    );
    let worker = jobs::worker(queue.clone()).start().unwrap();
    wait_for("the echo to succeed", WAIT, || {
        queue.job(id).unwrap().status == JobStatus::Succeeded
    });
    worker.stop().unwrap();
    assert_eq!(queue.job(id).unwrap().result, Some(value));
    assert_invariants(db);
}

/// Returns a string of `bytes` characters.
#[derive(Serialize, Deserialize)]
struct BigResult {
    bytes: usize,
}

impl Job for BigResult {
    const KIND: &'static str = "big_result";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        Ok("r".repeat(self.bytes).into())
    }
}

/// `error` is `TooLarge` for `what` over `limit`, naming `setting`; its
/// message names the size and the limit.
fn too_large(error: Error, what: &str, limit: usize, setting: &str) -> usize {
    let text = error.to_string();
    match error {
        Error::TooLarge {
            what: w,
            bytes,
            limit: l,
            setting: s,
            ..
        } => {
            assert_eq!((w, l), (what, limit), "{text}");
            assert!(bytes > limit, "{text}");
            assert!(s.contains(setting), "{text}");
            assert!(
                text.contains(&bytes.to_string()) && text.contains(&limit.to_string()),
                "{text}"
            );
            bytes
        }
        other => panic!("expected TooLarge, got {other}"),
    }
}

/// Issue 26 item 3: one documented limit on arguments and results, on
/// every backend (1 MiB by default, `QueueConfig::max_payload_bytes`).
fn arguments_and_results_over_the_limit_are_refused_naming_size_and_limit(db: &TestDb) {
    let queue = db.queue();
    assert_eq!(
        queue.max_payload_bytes(),
        solidq::config::DEFAULT_MAX_PAYLOAD_BYTES
    );
    let mib = 1024 * 1024;
    let big = Echo {
        value: "x".repeat(mib).into(),
    };
    too_large(
        queue.enqueue(&big).unwrap_err(),
        "arguments",
        mib,
        "max_payload_bytes",
    );
    too_large(
        queue
            .enqueue_kind(
                "echo",
                &serde_json::to_value(&big).unwrap(),
                EnqueueOptions::new(),
            )
            .unwrap_err(),
        "arguments",
        mib,
        "max_payload_bytes",
    );
    let small = Echo { value: 1.into() };
    let requests = [
        JobRequest::new(&small, EnqueueOptions::new()).unwrap(),
        JobRequest::new(&big, EnqueueOptions::new()).unwrap(),
    ];
    too_large(
        queue.enqueue_all_with(&requests).unwrap_err(),
        "arguments",
        mib,
        "max_payload_bytes",
    );
    too_large(
        queue
            .enqueue_statement(&big, EnqueueOptions::new())
            .unwrap_err(),
        "arguments",
        mib,
        "max_payload_bytes",
    );
    assert_eq!(db.count("solidq_jobs"), 0, "nothing written");
    // Just under the limit is taken.
    let fits = Echo {
        value: "x".repeat(mib - 20).into(),
    };
    queue.enqueue(&fits).unwrap();

    // A smaller limit, and a result over it: the job fails for good with
    // the sizes named, its attempts left unused, nothing of it stored.
    let strict = db.queue_with(QueueConfig {
        max_payload_bytes: 4096,
        ..QueueConfig::default()
    });
    let over = Echo {
        value: "x".repeat(5000).into(),
    };
    too_large(
        strict.enqueue(&over).unwrap_err(),
        "arguments",
        4096,
        "max_payload_bytes",
    );
    let id = strict
        .enqueue_with(
            &BigResult { bytes: 10_000 },
            EnqueueOptions::new().queue("results").max_attempts(3),
        )
        .unwrap();
    let worker = jobs::worker(strict.clone())
        .register::<BigResult>()
        .queues(["results"])
        .start()
        .unwrap();
    wait_for("the big result to fail", WAIT, || {
        strict.job(id).unwrap().status == JobStatus::Failed
    });
    worker.stop().unwrap();
    let failed = strict.job(id).unwrap();
    let error = failed.error.unwrap();
    assert_eq!(error.kind, "result_too_large");
    assert!(
        error.message.contains("10002 bytes") && error.message.contains("4096 bytes"),
        "{}",
        error.message
    );
    assert_eq!((failed.attempts, failed.result), (1, None));

    // MySQL: a limit above the server's max_allowed_packet is capped by
    // it, and the error says so (the server would close the connection:
    // "server has gone away").
    if db.backend == Backend::Mysql {
        let wide = db.queue_with(QueueConfig {
            max_payload_bytes: 1 << 30,
            ..QueueConfig::default()
        });
        let limit = wide.max_payload_bytes();
        assert!(limit < 1 << 30, "{limit}");
        let huge = Echo {
            value: "x".repeat(limit + 1).into(),
        };
        too_large(
            wide.enqueue(&huge).unwrap_err(),
            "arguments",
            limit,
            "max_allowed_packet",
        );
        let fits = Echo {
            value: "x".repeat(limit - 20).into(),
        };
        let id = wide.enqueue(&fits).unwrap();
        assert_eq!(
            wide.job(id).unwrap().arguments["value"]
                .as_str()
                .unwrap()
                .len(),
            limit - 20
        );
    }
    assert_invariants(db);
}
