//! The server cutting solidq's sessions and refusing new ones (issue 14,
//! item 5), PostgreSQL only:
//!
//! * For 15 s, every solidq backend of the test is terminated
//!   (`pg_terminate_backend`, SQLSTATE 57P01) five times a second while a
//!   producer enqueues and a supervisor's two worker processes work: no
//!   acknowledged job is lost, none runs twice, no process exits, and the
//!   throughput is back within a few seconds of the last kill.
//! * A private server's connection slots all held by idle sessions: an
//!   enqueue fails with a clear, transient error that says it did not
//!   commit and names the server's refusal, a worker logs the refusal and
//!   waits, and both carry on when the slots are released.

#[cfg(feature = "postgres")]
use crate::common;

#[cfg(feature = "postgres")]
mod postgres {
    use std::collections::{HashMap, HashSet};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use diesel::{Connection, PgConnection};
    use solidq::{EnqueueOptions, Enqueued, JobStatus, Queue, QueueConfig};

    use super::common::child::{Child, child_command};
    use super::common::cluster::PrivateCluster;
    use super::common::jobs::{Echo, FileLedger, file_ledger_starts};
    use super::common::{TestConn, TestDb, wait_for};

    const KILLING: Duration = Duration::from_secs(15);
    const KILL_EVERY: Duration = Duration::from_millis(200);
    /// Pause between the producer's enqueues (about 100 jobs/s).
    const PACE: Duration = Duration::from_millis(10);

    /// `db`'s URL under another `application_name`: the test's own
    /// sessions, which the killer spares.
    fn spared_url(db: &TestDb, schema: &str) -> String {
        db.url.replace(
            &format!("application_name={schema}"),
            "application_name=spared",
        )
    }

    fn schema_of(db: &TestDb) -> String {
        db.url
            .rsplit("application_name=")
            .next()
            .expect("the test URL names its schema as application_name")
            .to_string()
    }

    /// Jobs finished so far.
    fn finished_count(conn: &mut TestConn) -> i64 {
        conn.scalar("SELECT count(*) AS v FROM solidq_jobs WHERE finished_at IS NOT NULL")
    }

    /// It compares throughput before, during and after: with no other
    /// test beside it (beside two other alone tests in .ci/run, "after"
    /// was once 61/s against 84/s "before").
    mod alone {
        /// `::alone::exclusive::` in its name, as `backend_tests!(exclusive:
        /// …)` names theirs: `cargo xtask test` runs it with no other test.
        mod exclusive {
            #[test]
            fn terminating_every_backend_five_times_a_second_loses_nothing_and_stops_nobody() {
                let _machine = crate::common::machine::exclusive();
                super::super::terminating_every_backend();
            }
        }
    }

    fn terminating_every_backend() {
        let Some(db) = TestDb::postgres() else { return };
        db.queue();
        let schema = schema_of(&db);
        let ledger_file = tempfile::NamedTempFile::new().unwrap();
        let ledger = ledger_file.path().display().to_string();
        let mut supervisor = Child::supervisor(&format!(
            r#"
database_url = "{url}"
heartbeat_interval = "1s"
process_alive_threshold = "15s"

[[workers]]
command = {command:?}
processes = 2
threads = 4
polling_interval = "200ms"
env = {{ SOLIDQ_TEST_CHILD = "supervised", RUST_LOG = "info" }}
"#,
            url = db.url,
            command = child_command(),
        ));
        let queue = db.queue();
        let stop = Arc::new(AtomicBool::new(false));
        let acknowledged = Arc::new(Mutex::new(Vec::<i64>::new()));
        let producer_errors = Arc::new(Mutex::new(Vec::<String>::new()));
        let producer = {
            let (queue, stop, acknowledged, errors, ledger) = (
                queue.clone(),
                stop.clone(),
                acknowledged.clone(),
                producer_errors.clone(),
                ledger.clone(),
            );
            std::thread::spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::SeqCst) {
                    let job = FileLedger {
                        path: ledger.clone(),
                        sleep_ms: 5,
                    };
                    let key = format!("job-{n}");
                    loop {
                        match queue
                            .enqueue_or_existing(&job, EnqueueOptions::new().unique_key(&key))
                        {
                            Ok(Enqueued::New(id) | Enqueued::Existing(id)) => {
                                acknowledged.lock().unwrap().push(id);
                                break;
                            }
                            Err(error) => {
                                let fatal = !error.is_transient();
                                errors.lock().unwrap().push(error.to_string());
                                if fatal {
                                    return;
                                }
                                std::thread::sleep(Duration::from_millis(20));
                            }
                        }
                    }
                    n += 1;
                    std::thread::sleep(PACE);
                }
            })
        };

        let mut monitor = TestConn::open(&spared_url(&db, &schema));
        wait_for("two workers", Duration::from_secs(30), || {
            monitor.scalar("SELECT count(*) AS v FROM solidq_processes WHERE kind = 'worker'") == 2
        });
        let workers_before = monitor.column(
            "SELECT CAST(pid AS BIGINT) AS v FROM solidq_processes WHERE kind = 'worker' ORDER BY pid",
        );
        // Throughput before: jobs finished per second over 3 s.
        let rate = |monitor: &mut TestConn, over: Duration| {
            let first = finished_count(monitor);
            std::thread::sleep(over);
            (finished_count(monitor) - first) as f64 / over.as_secs_f64()
        };
        let before = rate(&mut monitor, Duration::from_secs(3));

        let mut killer = PgConnection::establish(&spared_url(&db, &schema)).unwrap();
        let kill = format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE application_name = '{schema}' AND pid <> pg_backend_pid()"
        );
        let started = Instant::now();
        let mut killed = 0usize;
        let first_finished = finished_count(&mut monitor);
        while started.elapsed() < KILLING {
            use diesel::RunQueryDsl;
            #[derive(diesel::QueryableByName)]
            struct Killed {
                #[diesel(sql_type = diesel::sql_types::Bool)]
                #[allow(dead_code)]
                pg_terminate_backend: bool,
            }
            killed += diesel::sql_query(&kill)
                .load::<Killed>(&mut killer)
                .unwrap()
                .len();
            std::thread::sleep(KILL_EVERY);
        }
        let during = (finished_count(&mut monitor) - first_finished) as f64 / KILLING.as_secs_f64();
        let kills_stopped = Instant::now();
        // Recovered: a whole second at 80% of the rate before, within 5 s.
        let mut after = 0.0;
        while kills_stopped.elapsed() < Duration::from_secs(5) {
            after = rate(&mut monitor, Duration::from_secs(1));
            if after >= before * 0.8 {
                break;
            }
        }
        let recovered_in = kills_stopped.elapsed();
        stop.store(true, Ordering::SeqCst);
        producer.join().unwrap();

        let acknowledged: HashSet<i64> = acknowledged.lock().unwrap().iter().copied().collect();
        let deadline = Instant::now() + Duration::from_secs(60);
        while monitor.scalar("SELECT count(*) AS v FROM solidq_jobs WHERE finished_at IS NULL") > 0
        {
            if Instant::now() > deadline {
                let claimed = monitor.column(
                    "SELECT c.job_id AS v FROM solidq_claimed_executions c \
                     JOIN solidq_jobs j ON j.id = c.job_id WHERE j.finished_at IS NULL",
                );
                let ready = monitor.column("SELECT job_id AS v FROM solidq_ready_executions");
                let started: HashSet<i64> = file_ledger_starts(ledger_file.path())
                    .into_iter()
                    .map(|(job, _)| job)
                    .collect();
                let claimed_never_started: Vec<i64> = claimed
                    .iter()
                    .copied()
                    .filter(|j| !started.contains(j))
                    .collect();
                panic!(
                    "jobs unfinished after 60 s: claimed {claimed:?} (never started: \
                     {claimed_never_started:?}), ready {ready:?}; supervisor: {}",
                    supervisor.logs()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let lost: Vec<i64> = acknowledged
            .iter()
            .copied()
            .filter(|id| !matches!(queue.job(*id), Ok(j) if j.status == JobStatus::Succeeded))
            .collect();
        let mut starts: HashMap<i64, u32> = HashMap::new();
        for (job, _) in file_ledger_starts(ledger_file.path()) {
            *starts.entry(job).or_default() += 1;
        }
        let twice: Vec<i64> = starts
            .iter()
            .filter(|(_, n)| **n > 1)
            .map(|(j, _)| *j)
            .collect();
        let workers_after = monitor.column(
            "SELECT CAST(pid AS BIGINT) AS v FROM solidq_processes WHERE kind = 'worker' ORDER BY pid",
        );
        let errors = producer_errors.lock().unwrap().clone();
        eprintln!(
            "backend kills: {killed} sessions terminated in {KILLING:?}; {} jobs acknowledged \
             ({} enqueue calls failed and were retried); jobs/s before {before:.0}, during \
             {during:.0}, after {after:.0} (reached {recovered_in:?} after the last kill); \
             {} lost, {} run twice",
            acknowledged.len(),
            errors.len(),
            lost.len(),
            twice.len(),
        );
        assert!(
            killed > 100,
            "the killer terminated solidq's sessions: {killed}"
        );
        assert!(lost.is_empty(), "lost: {lost:?}");
        assert!(twice.is_empty(), "run twice: {twice:?}");
        assert_eq!(starts.len(), acknowledged.len(), "every job's code ran");
        assert_eq!(
            workers_before, workers_after,
            "the same worker processes throughout"
        );
        assert!(
            after >= before * 0.8,
            "throughput {after:.0}/s, 5 s after the kills, below 80% of {before:.0}/s"
        );
        assert!(
            supervisor.wait_timeout(Duration::ZERO).is_none(),
            "the supervisor exited: {}",
            supervisor.logs()
        );
        let starts_logged = supervisor
            .logs()
            .lines()
            .filter(|line| line.contains(": started workers"))
            .count();
        assert_eq!(
            starts_logged,
            2,
            "no worker restarted: {}",
            supervisor.logs()
        );
        supervisor.signal(libc::SIGTERM);
        let status = supervisor.wait_timeout(Duration::from_secs(30)).unwrap();
        assert!(status.success(), "{status:?}: {}", supervisor.logs());
    }

    #[test]
    fn every_connection_slot_taken_is_a_clear_error_and_work_resumes_when_freed() {
        let Some(cluster) = PrivateCluster::start() else {
            return;
        };
        let url = cluster.url();
        let queue = Queue::connect_with(
            &url,
            QueueConfig {
                pool_timeout: Duration::from_secs(2),
                ..QueueConfig::default()
            },
        )
        .unwrap();
        queue.migrate().unwrap();
        let mut worker = Child::worker(
            &url,
            &[
                ("SOLIDQ_TEST_ALIVE_MS", "60000"),
                ("SOLIDQ_TEST_HEARTBEAT_MS", "1000"),
                ("SOLIDQ_TEST_THREADS", "2"),
            ],
        );
        let echo = |n: usize| Echo {
            value: serde_json::json!(n),
        };
        let first = queue.enqueue(&echo(0)).unwrap();
        wait_for("a job before", Duration::from_secs(30), || {
            queue.job(first).unwrap().status == JobStatus::Succeeded
        });

        // Every solidq session cut, then every slot taken by idle sessions.
        // The worker is frozen meanwhile, so that it cannot take a freed
        // slot back before the holder has them all; thawed, it finds its
        // sessions gone and no slot free.
        worker.signal(libc::SIGSTOP);
        let mut admin = PgConnection::establish(&format!("{url}?application_name=holder")).unwrap();
        {
            use diesel::RunQueryDsl;
            diesel::sql_query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE application_name = 'solidq'",
            )
            .execute(&mut admin)
            .unwrap();
        }
        let mut held = vec![admin];
        let refusal = loop {
            match PgConnection::establish(&format!("{url}?application_name=holder")) {
                Ok(conn) => held.push(conn),
                Err(error) => break error.to_string(),
            }
        };
        assert!(refusal.contains("too many clients"), "{refusal}");
        worker.signal(libc::SIGCONT);

        // A pooled connection used within the last second is not checked
        // before use: the first call may meet the terminated session
        // (which cannot tell whether it committed); the next ones find no
        // slot.
        let error = (0..3)
            .map(|_| {
                queue
                    .enqueue(&echo(1))
                    .expect_err("no connection slot is free")
            })
            .find(|error| matches!(error, solidq::Error::Pool { .. }))
            .expect("a pool error within three calls");
        let text = error.to_string();
        assert!(
            error.is_transient() && !error.may_have_committed(),
            "{text}"
        );
        assert!(
            text.contains("too many clients"),
            "the server's refusal is named: {text}"
        );
        wait_for(
            "the worker to log the refusal",
            Duration::from_secs(20),
            || worker.logs().contains("too many clients"),
        );

        eprintln!(
            "slots held: {} sessions; enqueue failed with: {text}",
            held.len()
        );
        drop(held);
        let ids: Vec<i64> = (2..12)
            .map(|n| {
                let mut tries = 0;
                loop {
                    match queue.enqueue(&echo(n)) {
                        Ok(id) => break id,
                        Err(error) if tries < 20 && error.is_transient() => {
                            tries += 1;
                            std::thread::sleep(Duration::from_millis(100));
                        }
                        Err(error) => panic!("enqueue after the release: {error}"),
                    }
                }
            })
            .collect();
        wait_for(
            "the jobs after the release",
            Duration::from_secs(20),
            || {
                ids.iter()
                    .all(|id| queue.job(*id).unwrap().status == JobStatus::Succeeded)
            },
        );
        assert!(
            worker.wait_timeout(Duration::ZERO).is_none(),
            "the worker exited: {}",
            worker.logs()
        );
        worker.signal(libc::SIGTERM);
        let status = worker.wait_timeout(Duration::from_secs(30)).unwrap();
        assert!(status.success(), "{status:?}: {}", worker.logs());
    }
}
