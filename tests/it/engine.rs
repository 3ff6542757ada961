//! The core engine on both backends: enqueue, claim order, wildcards,
//! delays, bulk, transactional enqueue, failures, fencing.

use crate::common;

use std::time::Duration;

use common::jobs::{self, Count, Echo, Fail, Ledger, MalformedEcho, Panic, Unregistered};
use common::{TestDb, wait_for};
use serde_json::json;
use solidq::{EnqueueOptions, JobRequest, JobStatus, Queue, Worker};

backend_tests!(
    enqueue_runs_the_job_and_stores_its_result,
    claims_follow_queue_list_then_priority_then_id,
    a_list_of_names_is_claimed_in_its_order_then_priority_then_id,
    a_job_on_an_earlier_listed_queue_goes_before_the_later_queues_rest,
    wildcard_queues_match_prefixes_only,
    delayed_job_waits_for_its_time,
    bulk_enqueue_of_ten_thousand_runs_each_exactly_once,
    an_empty_enqueue_all_is_no_jobs,
    enqueue_on_callers_transaction_rolls_back_with_it,
    failures_panics_unknown_kinds_and_bad_arguments_are_recorded,
    finish_under_a_lost_claim_writes_nothing,
    migrate_twice_is_a_no_op,
    finished_job_without_keep_result_is_deleted,
    worker_whose_row_vanished_registers_again,
    finalize_survives_transient_database_errors,
);

const WAIT: Duration = Duration::from_secs(30);

fn worker(queue: &Queue) -> Worker {
    jobs::worker(queue.clone()).polling_interval(Duration::from_millis(50))
}

fn status(queue: &Queue, id: i64) -> JobStatus {
    queue.job(id).expect("job exists").status
}

fn enqueue_runs_the_job_and_stores_its_result(db: &TestDb) {
    let queue = db.queue();
    let id = queue
        .enqueue(&Echo {
            value: json!({ "hello": "world" }),
        })
        .unwrap();
    assert_eq!(status(&queue, id), JobStatus::Ready);

    let worker = worker(&queue).threads(2).start().unwrap();
    assert_eq!(db.count("solidq_processes"), 1);
    wait_for("the job to succeed", WAIT, || {
        status(&queue, id) == JobStatus::Succeeded
    });
    worker.stop().unwrap();

    let info = queue.job(id).unwrap();
    assert_eq!(info.result, Some(json!({ "hello": "world" })));
    assert_eq!(info.attempts, 1);
    assert_eq!(info.kind, "echo");
    assert!(info.finished_at.unwrap() >= info.created_at);
    assert_eq!(db.count("solidq_processes"), 0, "the worker deregistered");
    assert_eq!(db.count("solidq_claimed_executions"), 0);
}

/// Enqueues a ledger job `n` on `queue` with `priority` for each
/// `(queue, priority, n)` of `plan`, in order; returns their ids.
fn enqueue_plan(db: &TestDb, queue: &Queue, plan: &[(&str, i32, i64)]) -> Vec<i64> {
    plan.iter()
        .map(|&(name, priority, n)| {
            let job = Ledger {
                url: db.url.clone(),
                n,
                sleep_ms: 0,
            };
            queue
                .enqueue_with(&job, EnqueueOptions::new().queue(name).priority(priority))
                .unwrap()
        })
        .collect()
}

fn claims_follow_queue_list_then_priority_then_id(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    // (queue, priority, n), enqueued in this scrambled order.
    let plan = [
        ("low", 5, 1),
        ("critical", 0, 2),
        ("low", -1, 3),
        ("mail_a", 0, 4),
        ("critical", -3, 5),
        ("other", 0, 6),
        ("mail_b", -2, 7),
        ("critical", 0, 8),
    ];
    enqueue_plan(db, &queue, &plan);
    let worker = worker(&queue)
        .queues(["critical", "mail*", "*"])
        .threads(1)
        .start()
        .unwrap();
    wait_for("all eight jobs", WAIT, || {
        db.scalar("SELECT count(*) AS v FROM test_ledger WHERE event = 'end'") == 8
    });
    worker.stop().unwrap();
    let order = db
        .conn()
        .column("SELECT n AS v FROM test_ledger WHERE event = 'start' ORDER BY seq");
    // critical by priority then id; then mail* merged by priority; then the rest.
    assert_eq!(order, [5, 2, 8, 7, 4, 3, 6, 1]);
}

/// A list of names only (claimed by one probe per name in order, see
/// `ClaimQuery::listed`): the list's order, then priority, then id; a
/// queue not listed is not served; a queue named `null` is a name (an
/// unquoted `null` in a PostgreSQL array literal would be a NULL).
fn a_list_of_names_is_claimed_in_its_order_then_priority_then_id(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    // (queue, priority, n), enqueued in this scrambled order.
    let plan = [
        ("low", 5, 1),
        ("critical", 0, 2),
        ("low", -1, 3),
        ("null", 0, 4),
        ("critical", -3, 5),
        ("other", 0, 6),
        ("null", -2, 7),
        ("critical", 0, 8),
    ];
    let ids = enqueue_plan(db, &queue, &plan);
    let other = ids[5];
    let worker = worker(&queue)
        .queues(["critical", "null", "low"])
        .threads(1)
        .start()
        .unwrap();
    wait_for("the seven listed jobs", WAIT, || {
        db.scalar("SELECT count(*) AS v FROM test_ledger WHERE event = 'end'") == 7
    });
    worker.stop().unwrap();
    let order = db
        .conn()
        .column("SELECT n AS v FROM test_ledger WHERE event = 'start' ORDER BY seq");
    assert_eq!(order, [5, 2, 8, 7, 4, 3, 1]);
    assert_eq!(
        status(&queue, other),
        JobStatus::Ready,
        "not a listed queue"
    );
}

/// A worker working down the second queue of its list claims from there
/// on (on PostgreSQL it skips the first, found empty); a job enqueued on
/// the first meanwhile is claimed next, not after the second queue's rest:
/// its notification names its queue. The polling interval is long, so no
/// periodic probe of the whole list finds it instead.
fn a_job_on_an_earlier_listed_queue_goes_before_the_later_queues_rest(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let later: Vec<JobRequest> = (0..300)
        .map(|n| {
            let job = Ledger {
                url: db.url.clone(),
                n,
                sleep_ms: 5,
            };
            JobRequest::new(&job, EnqueueOptions::new().queue("second")).unwrap()
        })
        .collect();
    queue.enqueue_all_with(&later).unwrap();
    let worker = jobs::worker(queue.clone())
        .polling_interval(Duration::from_secs(20))
        .queues(["first", "second"])
        .threads(2)
        .prefetch(4)
        .start()
        .unwrap();
    let starts = || db.scalar("SELECT count(*) AS v FROM test_ledger WHERE event = 'start'");
    wait_for("the second queue to be under way", WAIT, || starts() >= 40);
    let before = starts();
    let early = Ledger {
        url: db.url.clone(),
        n: 1_000,
        sleep_ms: 0,
    };
    let id = queue
        .enqueue_with(&early, EnqueueOptions::new().queue("first"))
        .unwrap();
    wait_for("the first queue's job", WAIT, || {
        status(&queue, id) == JobStatus::Succeeded
    });
    worker.stop().unwrap();
    let order = db
        .conn()
        .column("SELECT n AS v FROM test_ledger WHERE event = 'start' ORDER BY seq");
    let at = order.iter().position(|&n| n == 1_000).unwrap() as i64;
    // What was claimed before it was enqueued (two threads, four ahead)
    // and one claim in flight may start first; not the queue's rest.
    assert!(
        at - before <= 12,
        "{} jobs of the second queue started between the first queue's job's enqueue and its start",
        at - before
    );
}

fn wildcard_queues_match_prefixes_only(db: &TestDb) {
    let queue = db.queue();
    let on = |q: &str| {
        queue
            .enqueue_with(&Echo { value: json!(q) }, EnqueueOptions::new().queue(q))
            .unwrap()
    };
    let mail = [on("mail"), on("mail_a"), on("mailer")];
    let others = [on("other"), on("amail")];
    let worker = worker(&queue).queues(["mail*"]).threads(4).start().unwrap();
    wait_for("mail* jobs", WAIT, || {
        mail.iter()
            .all(|id| status(&queue, *id) == JobStatus::Succeeded)
    });
    worker.stop().unwrap();
    for id in others {
        assert_eq!(
            status(&queue, id),
            JobStatus::Ready,
            "job {id} is not on a mail* queue"
        );
    }
}

fn delayed_job_waits_for_its_time(db: &TestDb) {
    let queue = db.queue();
    let delay = Duration::from_millis(1500);
    let delayed = queue
        .enqueue_with(
            &Echo {
                value: json!("later"),
            },
            EnqueueOptions::new().delay(delay),
        )
        .unwrap();
    let now = queue
        .enqueue(&Echo {
            value: json!("now"),
        })
        .unwrap();
    assert_eq!(status(&queue, delayed), JobStatus::Scheduled);

    let worker = worker(&queue).start().unwrap();
    wait_for("the immediate job", WAIT, || {
        status(&queue, now) == JobStatus::Succeeded
    });
    assert_eq!(
        status(&queue, delayed),
        JobStatus::Scheduled,
        "not before its time"
    );
    wait_for("the delayed job", WAIT, || {
        status(&queue, delayed) == JobStatus::Succeeded
    });
    worker.stop().unwrap();

    let info = queue.job(delayed).unwrap();
    let planned = info.scheduled_at - info.created_at;
    assert!(
        planned >= chrono::Duration::milliseconds(1490),
        "scheduled {planned} after creation"
    );
    assert!(
        info.finished_at.unwrap() >= info.scheduled_at,
        "ran after its time"
    );
}

/// Nothing to enqueue is no jobs and no error, on every backend.
fn an_empty_enqueue_all_is_no_jobs(db: &TestDb) {
    let queue = db.queue();
    let none: Vec<Count> = Vec::new();
    assert_eq!(queue.enqueue_all(&none).unwrap(), Vec::<i64>::new());
    assert_eq!(queue.enqueue_all_with(&[]).unwrap(), Vec::<i64>::new());
    assert_eq!(db.count("solidq_jobs"), 0);
}

fn bulk_enqueue_of_ten_thousand_runs_each_exactly_once(db: &TestDb) {
    let queue = db.queue();
    let key = format!("bulk-{}", db.url);
    let batch: Vec<Count> = (0..10_000).map(|_| Count { key: key.clone() }).collect();
    let ids = queue.enqueue_all(&batch).unwrap();
    assert_eq!(ids.len(), 10_000);
    assert_eq!(db.count("solidq_ready_executions"), 10_000);

    let worker = worker(&queue).threads(8).start().unwrap();
    wait_for("10,000 jobs", Duration::from_secs(120), || {
        db.scalar("SELECT count(*) AS v FROM solidq_jobs WHERE finished_at IS NOT NULL") == 10_000
    });
    worker.stop().unwrap();

    let counts = jobs::counts(&key);
    assert_eq!(counts.len(), 10_000);
    assert!(counts.values().all(|n| *n == 1), "a job ran more than once");
    let mut ran: Vec<i64> = counts.keys().copied().collect();
    ran.sort_unstable();
    let mut enqueued = ids.clone();
    enqueued.sort_unstable();
    assert_eq!(ran, enqueued);
    assert_eq!(
        db.count("solidq_ready_executions") + db.count("solidq_claimed_executions"),
        0
    );
    common::assert_invariants(db);
}

fn enqueue_on_callers_transaction_rolls_back_with_it(db: &TestDb) {
    use diesel::Connection;
    fn check<C: Connection + solidq::EnqueueConnection>(conn: &mut C, queue: &Queue) -> i64 {
        let rolled_back: Result<(), solidq::Error> = conn.transaction(|c| {
            queue.enqueue_on(
                c,
                &Echo {
                    value: json!("rolled back"),
                },
            )?;
            Err(solidq::Error::rollback("the order is out of stock"))
        });
        assert_eq!(
            rolled_back.unwrap_err().to_string(),
            "transaction rolled back: the order is out of stock",
            "the caller's own reason comes back out"
        );
        conn.transaction::<_, solidq::Error, _>(|c| {
            queue.enqueue_on(
                c,
                &Echo {
                    value: json!("kept"),
                },
            )
        })
        .unwrap()
    }
    let queue = db.queue();
    let kept = match db.conn() {
        #[cfg(feature = "postgres")]
        common::TestConn::Pg(mut c) => check(&mut c, &queue),
        #[cfg(feature = "sqlite")]
        common::TestConn::Sqlite(mut c) => check(&mut c, &queue),
        #[cfg(feature = "mysql")]
        common::TestConn::Mysql(mut c) => check(&mut c, &queue),
    };
    // The same through solidq's own connection and write_transaction
    // (BEGIN IMMEDIATE on SQLite).
    let mut own: solidq::AnyConnection = queue.open_connection().unwrap();
    let rolled_back = own.write_transaction(|c| {
        queue.enqueue_on(
            c,
            &Echo {
                value: json!("rolled back too"),
            },
        )?;
        Err::<(), _>(solidq::Error::rollback("changed my mind"))
    });
    assert!(
        matches!(&rolled_back, Err(solidq::Error::RolledBack { reason }) if reason == "changed my mind"),
        "{rolled_back:?}"
    );
    assert_eq!(
        db.count("solidq_jobs"),
        1,
        "the rolled-back jobs left nothing"
    );
    assert_eq!(db.count("solidq_ready_executions"), 1);
    assert_eq!(
        queue.job(kept).unwrap().arguments,
        json!({ "value": "kept" })
    );
}

fn failures_panics_unknown_kinds_and_bad_arguments_are_recorded(db: &TestDb) {
    let queue = db.queue();
    let failing = queue
        .enqueue(&Fail {
            message: "boom".into(),
        })
        .unwrap();
    let panicking = queue
        .enqueue(&Panic {
            message: "kaboom".into(),
        })
        .unwrap();
    let unknown = queue.enqueue(&Unregistered).unwrap();
    let malformed = queue.enqueue(&MalformedEcho { nope: true }).unwrap();

    let worker = worker(&queue).threads(2).start().unwrap();
    for id in [failing, panicking, unknown, malformed] {
        wait_for("the job to fail", WAIT, || {
            status(&queue, id) == JobStatus::Failed
        });
    }
    let after = queue
        .enqueue(&Echo {
            value: json!("still serving"),
        })
        .unwrap();
    wait_for("a job after the failures", WAIT, || {
        status(&queue, after) == JobStatus::Succeeded
    });
    worker.stop().unwrap();

    let error = |id| queue.job(id).unwrap().error.expect("an error is recorded");
    let e = error(failing);
    assert_eq!(
        (e.kind.as_str(), e.message.as_str()),
        ("test_failure", "boom")
    );
    let e = error(panicking);
    assert_eq!((e.kind.as_str(), e.message.as_str()), ("panic", "kaboom"));
    // The tests are solidq-cli's, so their files are `../../tests/…` to
    // the compiler.
    let backtrace = e.backtrace.unwrap();
    assert!(
        backtrace
            .lines()
            .any(|l| l.starts_with("panicked at ") && l.contains("tests/it/common/jobs.rs")),
        "{backtrace}"
    );
    let e = error(unknown);
    assert_eq!(e.kind, "unknown_kind");
    assert!(e.message.contains("\"unregistered\""), "{}", e.message);
    let e = error(malformed);
    assert_eq!(e.kind, "malformed_arguments");
    assert!(e.message.contains("missing field `value`"), "{}", e.message);
    assert_eq!(db.count("solidq_failed_executions"), 4);
    assert_eq!(queue.job(failing).unwrap().attempts, 1);
}

fn finish_under_a_lost_claim_writes_nothing(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let slow = queue
        .enqueue(&Ledger {
            url: db.url.clone(),
            n: 1,
            sleep_ms: 1000,
        })
        .unwrap();
    let worker = worker(&queue).threads(1).start().unwrap();
    wait_for("the slow job to start", WAIT, || {
        db.scalar("SELECT count(*) AS v FROM test_ledger WHERE event = 'start'") == 1
    });
    // Another process now holds the claim, as after a prune and a new claim.
    db.execute(&format!(
        "UPDATE solidq_claimed_executions SET process_id = 999999 WHERE job_id = {slow}"
    ));
    wait_for("the slow job to end", WAIT, || {
        db.scalar("SELECT count(*) AS v FROM test_ledger WHERE event = 'end'") == 1
    });
    // One thread and one completer: this job's outcome is written after
    // the slow job's was attempted.
    let next = queue.enqueue(&Echo { value: json!(1) }).unwrap();
    wait_for("the next job", WAIT, || {
        status(&queue, next) == JobStatus::Succeeded
    });
    worker.stop().unwrap();

    let info = queue.job(slow).unwrap();
    assert_eq!(
        info.status,
        JobStatus::Running,
        "still claimed by the other process"
    );
    assert_eq!(info.process_id, Some(999_999));
    assert_eq!(
        (info.attempts, info.result, info.finished_at),
        (0, None, None)
    );
}

fn migrate_twice_is_a_no_op(db: &TestDb) {
    let queue = db.queue();
    assert!(queue.migrate().unwrap().is_empty());
    assert_eq!(db.count("solidq_jobs"), 0);
}

#[test]
fn every_backend_embeds_the_same_migration_versions() {
    let pg = solidq::embedded_migrations(solidq::Backend::Postgres);
    assert!(!pg.is_empty());
    assert_eq!(pg, solidq::embedded_migrations(solidq::Backend::Sqlite));
    assert_eq!(pg, solidq::embedded_migrations(solidq::Backend::Mysql));
}

fn finished_job_without_keep_result_is_deleted(db: &TestDb) {
    let queue = db.queue();
    let gone = queue
        .enqueue_with(
            &Echo { value: json!(1) },
            EnqueueOptions::new().keep_result(Duration::ZERO),
        )
        .unwrap();
    let kept = queue.enqueue(&Echo { value: json!(2) }).unwrap();
    let worker = worker(&queue).start().unwrap();
    wait_for("both jobs", WAIT, || {
        status(&queue, kept) == JobStatus::Succeeded
            && matches!(queue.job(gone), Err(solidq::Error::JobNotFound(_)))
    });
    worker.stop().unwrap();
    assert_eq!(db.count("solidq_jobs"), 1);
}

fn worker_whose_row_vanished_registers_again(db: &TestDb) {
    let queue = db.queue();
    let config = solidq::WorkerConfig {
        heartbeat_interval: Duration::from_millis(100),
        polling_interval: Duration::from_millis(50),
        ..solidq::WorkerConfig::default()
    };
    let worker = jobs::worker(queue.clone()).config(config).start().unwrap();
    let first = worker.process_id().unwrap();
    let name = db.scalar("SELECT count(*) AS v FROM solidq_processes");
    assert_eq!(name, 1);
    db.execute(&format!("DELETE FROM solidq_processes WHERE id = {first}"));
    wait_for("a new registration", WAIT, || {
        worker.process_id().is_some_and(|id| id != first)
    });
    assert_eq!(db.count("solidq_processes"), 1);
    let id = queue
        .enqueue(&Echo {
            value: json!("after"),
        })
        .unwrap();
    wait_for("a job under the new registration", WAIT, || {
        status(&queue, id) == JobStatus::Succeeded
    });
    worker.stop().unwrap();
    assert_eq!(db.count("solidq_processes"), 0);
}

fn finalize_survives_transient_database_errors(db: &TestDb) {
    let queue = db.queue_with(solidq::QueueConfig {
        sqlite_busy_timeout: Duration::from_millis(50),
        ..solidq::QueueConfig::default()
    });
    let id = queue.enqueue(&jobs::Sleep { ms: 800 }).unwrap();
    let worker = worker(&queue).threads(1).start().unwrap();
    wait_for("the job to run", WAIT, || {
        status(&queue, id) == JobStatus::Running
    });
    match db.backend {
        // The database goes away under the worker: every pooled connection dies.
        solidq::Backend::Postgres | solidq::Backend::Mysql => {
            assert!(db.kill_connections() > 0, "the worker held connections");
            // The queue's own pooled connections died too: a read on one
            // fails once (a lost connection, to retry), and marks the rest
            // for a check before their next use.
            wait_for("the job to finish", WAIT, || {
                queue
                    .job(id)
                    .is_ok_and(|job| job.status == JobStatus::Succeeded)
            });
        }
        // Another process holds the write lock far past the busy timeout.
        solidq::Backend::Sqlite => {
            let mut locker = db.conn();
            locker.execute("BEGIN IMMEDIATE");
            std::thread::sleep(Duration::from_millis(1500));
            assert_eq!(
                status(&queue, id),
                JobStatus::Running,
                "still claimed while the write fails"
            );
            locker.execute("COMMIT");
            wait_for("the job to finish", WAIT, || {
                status(&queue, id) == JobStatus::Succeeded
            });
        }
    }
    worker.stop().unwrap();
    let info = queue.job(id).unwrap();
    assert_eq!((info.attempts, info.result), (1, Some(json!(800))));
}

/// MySQL's bulk enqueue tells its jobs' ids from the first one's where the
/// server gives a statement's rows one run of ids, and inserts them one by
/// one where it may not: on private MariaDB servers with ids 3 apart
/// (`auto_increment_increment`, as on Galera) and with interleaved
/// auto-increment locks (`innodb_autoinc_lock_mode` 2, MySQL 8's default),
/// each id returned is its own job's while another thread enqueues one job
/// at a time beside the bulk enqueues.
#[cfg(feature = "mysql")]
mod mysql_bulk_ids {
    use super::*;
    use common::TestConn;
    use common::mariadb::PrivateMariaDb;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn ids_three_apart_are_each_their_own_jobs() {
        check(
            &["--auto-increment-increment=3"],
            "auto_increment_increment",
            3,
        );
    }

    #[test]
    fn interleaved_auto_increment_locks_give_each_job_its_own_id() {
        check(
            &["--innodb-autoinc-lock-mode=2"],
            "innodb_autoinc_lock_mode",
            2,
        );
    }

    fn check(options: &[&str], setting: &str, value: i64) {
        let _machine = common::machine::shared();
        let Some(server) = PrivateMariaDb::start(options) else {
            return;
        };
        let url = server.url();
        let mut conn = TestConn::open(&url);
        assert_eq!(conn.scalar(&format!("SELECT @@{setting} AS v")), value);
        let queue = Queue::connect(&url).expect("connect");
        queue.migrate().expect("migrate");
        let stop = Arc::new(AtomicBool::new(false));
        let beside = {
            let (queue, stop) = (queue.clone(), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::SeqCst) {
                    let one = JobRequest::new(
                        &Echo { value: json!(-1) },
                        EnqueueOptions::new().priority(-1),
                    )
                    .unwrap();
                    queue.enqueue_all_with(&[one]).unwrap();
                    n += 1;
                }
                n
            })
        };
        let mut expected: Vec<i64> = Vec::new();
        for _ in 0..4 {
            let requests: Vec<JobRequest> = (0..1_000)
                .map(|n| {
                    JobRequest::new(&Echo { value: json!(n) }, EnqueueOptions::new().priority(n))
                        .unwrap()
                })
                .collect();
            let ids = queue.enqueue_all_with(&requests).unwrap();
            assert_eq!(ids.len(), 1_000);
            expected.extend(ids.iter().zip(0..).map(|(id, n)| id * 10_000 + n));
        }
        stop.store(true, Ordering::SeqCst);
        let singles = beside.join().unwrap();
        assert!(singles > 0, "no job was enqueued beside the bulk ones");
        expected.sort_unstable();
        let read = conn.column(
            "SELECT id * 10000 + priority AS v FROM solidq_jobs WHERE priority >= 0 ORDER BY id",
        );
        assert!(
            read == expected,
            "each id holds its own job (id × 10,000 + the job's number): \
             the first that does not, read {:?}",
            read.iter().zip(&expected).find(|(r, e)| r != e)
        );
        let ready = conn.scalar("SELECT count(*) AS v FROM solidq_ready_executions");
        assert_eq!(ready, 4_000 + singles, "every job is ready");
    }
}
