//! solidq through PgBouncer (Debian's `pgbouncer`, a private one per test:
//! `tests/it/common/pgbouncer.rs`). PostgreSQL only (issue 14, item 6).
//!
//! * Session mode: everything works with a plain URL — migrations,
//!   enqueue, workers woken by LISTEN, retries, scheduled jobs, a
//!   supervisor and its children, the CLI.
//! * Transaction mode: diesel's named prepared statements collide on the
//!   shared server connections (shown); with `prepared_statements=false`
//!   in the URL enqueue, claim, complete, retry and scheduled jobs work,
//!   and wake-ups come from a LISTEN connection made straight to the
//!   server (`listen_host`, `listen_port`) or, with `listen=false`, from
//!   polling. Migrations run on a direct URL (their advisory lock is a
//!   session's).

#[cfg(feature = "postgres")]
use crate::common;

#[cfg(feature = "postgres")]
mod postgres {
    use std::time::{Duration, Instant};

    use solidq::{Backoff, EnqueueOptions, JobStatus, Queue, QueueConfig, WorkerConfig};

    use super::common::child::{Child, child_command};
    use super::common::jobs::{Echo, Flaky, worker};
    use super::common::pgbouncer::{PgBouncer, PoolMode};
    use super::common::{TestDb, run_cli_in, wait_for};

    /// Quick retries, so a failed first attempt is retried within the test.
    fn config() -> QueueConfig {
        QueueConfig {
            backoff: Backoff::fixed(Duration::from_millis(100)),
            ..QueueConfig::default()
        }
    }

    /// Waits until the test's role holds a LISTEN connection on the server.
    fn wait_for_listen(db: &TestDb) {
        let role = db.schema().unwrap();
        wait_for("the worker to LISTEN", Duration::from_secs(10), || {
            db.scalar(&format!(
                "SELECT count(*) AS v FROM pg_stat_activity \
                 WHERE usename = '{role}' AND query ILIKE 'LISTEN%'"
            )) >= 1
        });
    }

    fn wait_finished(queue: &Queue, id: i64, within: Duration) -> solidq::JobInfo {
        let mut info = None;
        wait_for(&format!("job {id} to finish"), within, || {
            let job = queue.job(id).unwrap();
            let done = job.finished_at.is_some();
            info = Some(job);
            done
        });
        info.unwrap()
    }

    /// Another client of `url`'s database, as another process would be: a
    /// different URL string, so no in-process wake-up (they go by the URL)
    /// reaches a worker on `url`; only a notification does.
    fn producer(url: &str) -> Queue {
        Queue::connect_with(&format!("{url}&connect_timeout=10"), config()).unwrap()
    }

    /// Enqueue, a retry and a scheduled job, all through `queue` (a
    /// [`producer`]), with a worker running on the same database: returns
    /// the id of the job that succeeded first.
    fn core_flows(db: &TestDb, queue: &Queue) -> i64 {
        let started = Instant::now();
        let echo = queue
            .enqueue(&Echo {
                value: serde_json::json!("through pgbouncer"),
            })
            .unwrap();
        let info = wait_finished(queue, echo, Duration::from_secs(5));
        assert_eq!(info.status, JobStatus::Succeeded);
        assert_eq!(info.result, Some(serde_json::json!("through pgbouncer")));

        let flaky = queue
            .enqueue(&Flaky {
                url: db.url.clone(),
                fail_times: 1,
            })
            .unwrap();
        let info = wait_finished(queue, flaky, Duration::from_secs(10));
        assert_eq!(
            (info.status, info.attempts),
            (JobStatus::Succeeded, 2),
            "failed once, retried, succeeded"
        );

        let delay = Duration::from_millis(500);
        let scheduled = queue
            .enqueue_with(
                &Echo {
                    value: serde_json::json!("later"),
                },
                EnqueueOptions::new().delay(delay),
            )
            .unwrap();
        assert_eq!(queue.job(scheduled).unwrap().status, JobStatus::Scheduled);
        let info = wait_finished(queue, scheduled, Duration::from_secs(10));
        assert_eq!(info.status, JobStatus::Succeeded);
        assert!(info.finished_at.unwrap() >= info.scheduled_at);
        eprintln!("core flows took {:?}", started.elapsed());
        echo
    }

    /// A worker that polls once a minute: jobs move within the tests'
    /// deadlines only when the listener wakes it.
    fn woken_worker(queue: &Queue) -> solidq::WorkerHandle {
        worker(queue.clone())
            .config(WorkerConfig {
                threads: 3,
                polling_interval: Duration::from_secs(60),
                fallback_polling_interval: Duration::from_secs(60),
                heartbeat_interval: Duration::from_millis(500),
                ..WorkerConfig::default()
            })
            .start()
            .unwrap()
    }

    fn cli_shows_succeeded(url: &str, id: i64) {
        let dir = tempfile::tempdir().unwrap();
        let (code, stdout, stderr) =
            run_cli_in(dir.path(), Some(url), &["job", &id.to_string(), "--json"]);
        assert_eq!(code, 0, "{stderr}");
        assert!(stdout.contains("\"succeeded\""), "{stdout}");
    }

    /// A PgBouncer in transaction mode with `servers` server connections,
    /// the schema migrated on the direct URL (migrations hold a session
    /// lock, which transaction mode cannot keep).
    fn transaction_bouncer(db: &TestDb, servers: u32) -> Option<PgBouncer> {
        let bouncer = PgBouncer::start(db, PoolMode::Transaction, servers)?;
        Queue::connect(&bouncer.direct_url())
            .unwrap()
            .migrate()
            .unwrap();
        Some(bouncer)
    }

    #[test]
    fn session_mode_runs_migrations_enqueue_wakeups_retries_scheduled_jobs_and_the_cli() {
        let Some(db) = TestDb::postgres() else { return };
        db.create_ledger();
        let Some(bouncer) = PgBouncer::start(&db, PoolMode::Session, 20) else {
            return;
        };
        let url = bouncer.url();
        let queue = Queue::connect_with(&url, config()).unwrap();
        assert!(
            !queue.migrate().unwrap().is_empty(),
            "migrated through pgbouncer"
        );
        // The tables are in the test's schema (the role's search_path).
        assert_eq!(db.count("solidq_jobs"), 0);
        let running = woken_worker(&queue);
        wait_for_listen(&db);
        let id = core_flows(&db, &producer(&url));
        running.stop().unwrap();
        cli_shows_succeeded(&url, id);
        assert!(
            bouncer.log().contains(&format!(
                "login attempt: db=postgres user={}",
                db.schema().unwrap()
            )),
            "the connections went through pgbouncer: {}",
            bouncer.log()
        );
        common_invariants(&db);
    }

    #[test]
    fn session_mode_runs_a_supervisor_and_its_workers() {
        let Some(db) = TestDb::postgres() else { return };
        let Some(bouncer) = PgBouncer::start(&db, PoolMode::Session, 40) else {
            return;
        };
        let url = bouncer.url();
        let queue = Queue::connect_with(&url, config()).unwrap();
        queue.migrate().unwrap();
        let ids: Vec<i64> = (0..20)
            .map(|n| {
                queue
                    .enqueue(&Echo {
                        value: serde_json::json!(n),
                    })
                    .unwrap()
            })
            .collect();
        let mut supervisor = supervisor(&url, "60s");
        for id in &ids {
            let info = wait_finished(&queue, *id, Duration::from_secs(20));
            assert_eq!(info.status, JobStatus::Succeeded, "{}", supervisor.logs());
        }
        // A job enqueued now is heard of (the workers poll once a minute).
        wait_for_listen(&db);
        let late = producer(&url)
            .enqueue(&Echo {
                value: serde_json::json!("late"),
            })
            .unwrap();
        wait_finished(&queue, late, Duration::from_secs(5));
        stop(&mut supervisor);
        common_invariants(&db);
    }

    /// `solidq supervisor` on `url` with one worker of 2 threads polling
    /// every `polling`.
    fn supervisor(url: &str, polling: &str) -> Child {
        Child::supervisor(&format!(
            r#"
database_url = "{url}"
heartbeat_interval = "500ms"

[dispatcher]
polling_interval = "100ms"

[[workers]]
command = {command:?}
threads = 2
polling_interval = "{polling}"
env = {{ SOLIDQ_TEST_CHILD = "supervised", RUST_LOG = "info" }}
"#,
            command = child_command(),
        ))
    }

    fn stop(supervisor: &mut Child) {
        supervisor.signal(libc::SIGTERM);
        assert!(
            supervisor.wait_timeout(Duration::from_secs(20)).is_some(),
            "the supervisor stopped: {}",
            supervisor.logs()
        );
    }

    #[test]
    fn transaction_mode_breaks_named_prepared_statements_unless_the_url_turns_them_off() {
        let Some(db) = TestDb::postgres() else { return };
        // One server connection shared by every client: what one client
        // prepares under a name, the next finds already there.
        let Some(bouncer) = transaction_bouncer(&db, 1) else {
            return;
        };
        let one = QueueConfig {
            pool_size: 1,
            ..config()
        };
        let job = Echo {
            value: serde_json::json!(1),
        };
        let url = bouncer.url();
        let first = Queue::connect_with(&url, one.clone()).unwrap();
        let second = Queue::connect_with(&url, one.clone()).unwrap();
        first.enqueue(&job).unwrap();
        let error = second
            .enqueue(&job)
            .expect_err("the second client's statement name is taken on the shared server");
        assert!(
            format!("{error:?}").contains("prepared statement"),
            "{error:?}"
        );

        let url = format!("{}&prepared_statements=false", bouncer.url());
        let clients: Vec<Queue> = (0..3)
            .map(|_| Queue::connect_with(&url, one.clone()).unwrap())
            .collect();
        for round in 0..3 {
            for queue in &clients {
                let id = queue.enqueue(&job).unwrap();
                assert_eq!(queue.job(id).unwrap().status, JobStatus::Ready, "{round}");
            }
        }
        assert_eq!(db.count("solidq_jobs"), 1 + 9);
    }

    #[test]
    fn transaction_mode_works_with_prepared_statements_off_and_listen_on_the_server() {
        let Some(db) = TestDb::postgres() else { return };
        db.create_ledger();
        let Some(bouncer) = transaction_bouncer(&db, 3) else {
            return;
        };
        let (host, port) = bouncer.server();
        let url = format!(
            "{}&prepared_statements=false&listen_host={host}&listen_port={port}",
            bouncer.url()
        );
        let queue = Queue::connect_with(&url, config()).unwrap();
        let running = woken_worker(&queue);
        wait_for_listen(&db);
        let id = core_flows(&db, &producer(&url));
        // The worker's pool, its completer, heartbeat, dispatcher and
        // maintenance shared at most 3 server connections.
        let held = bouncer.server_connections();
        assert!((1..=3).contains(&held), "{held} server connections");
        running.stop().unwrap();
        cli_shows_succeeded(&url, id);
        common_invariants(&db);
    }

    #[test]
    fn transaction_mode_with_listen_off_polls_and_runs_a_supervisor() {
        let Some(db) = TestDb::postgres() else { return };
        db.create_ledger();
        let Some(bouncer) = transaction_bouncer(&db, 3) else {
            return;
        };
        let url = format!("{}&prepared_statements=false&listen=false", bouncer.url());
        let queue = Queue::connect_with(&url, config()).unwrap();
        let mut supervisor = supervisor(&url, "100ms");
        let ids: Vec<i64> = (0..10)
            .map(|n| {
                queue
                    .enqueue(&Echo {
                        value: serde_json::json!(n),
                    })
                    .unwrap()
            })
            .collect();
        for id in &ids {
            let info = wait_finished(&queue, *id, Duration::from_secs(20));
            assert_eq!(info.status, JobStatus::Succeeded, "{}", supervisor.logs());
        }
        let flaky = queue
            .enqueue(&Flaky {
                url: db.url.clone(),
                fail_times: 1,
            })
            .unwrap();
        let info = wait_finished(&queue, flaky, Duration::from_secs(20));
        assert_eq!((info.status, info.attempts), (JobStatus::Succeeded, 2));
        let role = db.schema().unwrap();
        assert_eq!(
            db.scalar(&format!(
                "SELECT count(*) AS v FROM pg_stat_activity \
                 WHERE usename = '{role}' AND query ILIKE 'LISTEN%'"
            )),
            0,
            "nobody listens with listen=false"
        );
        stop(&mut supervisor);
        let logs = supervisor.logs();
        assert!(!logs.contains("prepared statement"), "{logs}");
        common_invariants(&db);
    }

    fn common_invariants(db: &TestDb) {
        super::common::assert_invariants(db);
    }
}
