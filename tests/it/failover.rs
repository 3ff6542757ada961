//! PostgreSQL failover with real servers (issue 14, item 3): a primary and
//! a streaming standby of its own (`initdb`, `pg_basebackup`), with
//! `synchronous_standby_names` so a committed enqueue is on both. Producers
//! enqueue one job at a time (a unique key each, every acknowledged id
//! recorded) and a supervisor with 2 worker processes works them, all
//! through the multi-host URL `postgres://primary,standby/postgres` (solidq
//! adds `target_session_attrs=read-write`). The workers poll once a minute
//! while their LISTEN connection is down (every 5 s, the default fallback,
//! while it is up): what wakes them after the failover is their listener
//! reconnecting through the host list and the producers' notifier
//! reconnecting too. Mid-run the primary is stopped with `-m immediate`,
//! as a crash would, and the standby is promoted.
//!
//! Asserted: every acknowledged job exists on the new primary and ends
//! succeeded (0 lost), no job row nobody acknowledged; a job's code ran
//! twice only if it had started before the promotion; work resumes within
//! 10 s of the promotion; the supervisor and the producers rode through it
//! (nothing restarted by hand; the supervisor stops cleanly at the end).
//! The figures (time to resume, duplicates, lost, producers' errors) are
//! printed. Skipped, loudly, without the server binaries, and a failure
//! then under `SOLIDQ_REQUIRE_POSTGRES`.

#[cfg(feature = "postgres")]
use crate::common;

#[cfg(feature = "postgres")]
mod postgres {
    use std::collections::{HashMap, HashSet};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use solidq::{EnqueueOptions, Enqueued, JobStatus, Queue};

    use super::common::child::{Child, child_command};
    use super::common::cluster::PrivateCluster;
    use super::common::jobs::{FileLedger, file_ledger_starts};
    use super::common::{TestConn, init_logs, wait_for};

    const PRODUCERS: usize = 2;
    /// Pause between one producer's enqueues.
    const PACE: Duration = Duration::from_millis(15);
    /// How long each job's code runs.
    const JOB_MS: u64 = 20;
    /// How long the fleet works before and after the failover.
    const STEADY: Duration = Duration::from_secs(4);
    /// The required bound on the time from the promotion to work resuming.
    const RESUME_BOUND: Duration = Duration::from_secs(10);

    /// What the producers saw.
    #[derive(Default)]
    struct Produced {
        /// Acknowledged job ids (new or existing: either way the caller
        /// knows its job is stored).
        acknowledged: Vec<i64>,
        /// Failed enqueue calls (all retried): those that may have
        /// committed, and those that surely did not.
        may_have_committed: usize,
        not_committed: usize,
        /// Non-transient errors (must stay 0).
        fatal: Vec<String>,
        /// When each acknowledgement came.
        acknowledged_at: Vec<Instant>,
    }

    fn produce(
        queue: Queue,
        producer: usize,
        ledger: String,
        stop: Arc<AtomicBool>,
        produced: Arc<Mutex<Produced>>,
    ) {
        let mut n = 0;
        while !stop.load(Ordering::SeqCst) {
            let job = FileLedger {
                path: ledger.clone(),
                sleep_ms: JOB_MS,
            };
            let key = format!("p{producer}-{n}");
            // The same call again until it is acknowledged: the unique key
            // makes a retry safe even when the first may have committed.
            loop {
                match queue.enqueue_or_existing(&job, EnqueueOptions::new().unique_key(&key)) {
                    Ok(Enqueued::New(id) | Enqueued::Existing(id)) => {
                        let mut produced = produced.lock().unwrap();
                        produced.acknowledged.push(id);
                        produced.acknowledged_at.push(Instant::now());
                        break;
                    }
                    Err(error) => {
                        let mut produced = produced.lock().unwrap();
                        if !error.is_transient() {
                            produced.fatal.push(error.to_string());
                            return;
                        }
                        if error.may_have_committed() {
                            produced.may_have_committed += 1;
                        } else {
                            produced.not_committed += 1;
                        }
                        drop(produced);
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            }
            n += 1;
            std::thread::sleep(PACE);
        }
    }

    fn finished(conn: &mut TestConn) -> i64 {
        conn.scalar("SELECT count(*) AS v FROM solidq_jobs WHERE finished_at IS NOT NULL")
    }

    /// A primary with a synchronous streaming standby, and the multi-host
    /// URL naming both, primary first.
    pub(super) fn replicated_pair() -> Option<(PrivateCluster, PrivateCluster, String)> {
        init_logs();
        let primary = PrivateCluster::start()?;
        let standby = primary.standby("standby1");
        wait_for("the standby to stream", Duration::from_secs(30), || {
            primary.psql("SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")
                == "1"
        });
        primary.psql("ALTER SYSTEM SET synchronous_standby_names = 'standby1'");
        primary.psql("SELECT pg_reload_conf()");
        wait_for(
            "the standby to be synchronous",
            Duration::from_secs(30),
            || primary.psql("SELECT sync_state FROM pg_stat_replication") == "sync",
        );
        let url = format!(
            "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/postgres",
            primary.port(),
            standby.port()
        );
        Some((primary, standby, url))
    }

    #[test]
    fn a_failover_to_a_synchronous_standby_loses_no_acknowledged_job() {
        let Some((primary, standby, url)) = replicated_pair() else {
            return;
        };
        let queue = Queue::connect(&url).expect("connect through the host list");
        queue.migrate().expect("migrate");

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
polling_interval = "60s"
env = {{ SOLIDQ_TEST_CHILD = "supervised", RUST_LOG = "info" }}
"#,
            command = child_command(),
        ));
        let stop = Arc::new(AtomicBool::new(false));
        let produced = Arc::new(Mutex::new(Produced::default()));
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                let (queue, ledger, stop, produced) = (
                    queue.clone(),
                    ledger.clone(),
                    stop.clone(),
                    produced.clone(),
                );
                std::thread::spawn(move || produce(queue, p, ledger, stop, produced))
            })
            .collect();

        // Steady state: jobs enqueued and finished.
        let mut on_primary = TestConn::open(&url);
        wait_for("work before the failover", Duration::from_secs(60), || {
            finished(&mut on_primary) >= 50
        });
        std::thread::sleep(STEADY);
        drop(on_primary);

        let crashed = Instant::now();
        primary.crash();
        let starts_before = file_ledger_starts(ledger_file.path()).len();
        standby.promote();
        let promoted = Instant::now();
        let starts_at_promotion = file_ledger_starts(ledger_file.path()).len();
        let acknowledged_at_promotion = produced.lock().unwrap().acknowledged.len();

        // Work resumes: jobs finish on the new primary, enqueues are
        // acknowledged again.
        let mut on_new_primary = TestConn::open(&format!(
            "postgres://postgres@127.0.0.1:{}/postgres",
            standby.port()
        ));
        let finished_at_promotion = finished(&mut on_new_primary);
        wait_for(
            "jobs to finish on the new primary",
            RESUME_BOUND * 3,
            || finished(&mut on_new_primary) > finished_at_promotion,
        );
        let resumed = promoted.elapsed();
        wait_for(
            "an enqueue to be acknowledged again",
            RESUME_BOUND * 3,
            || produced.lock().unwrap().acknowledged.len() > acknowledged_at_promotion,
        );
        let enqueue_resumed = produced
            .lock()
            .unwrap()
            .acknowledged_at
            .get(acknowledged_at_promotion)
            .map(|at| at.saturating_duration_since(promoted))
            .unwrap_or_default();

        std::thread::sleep(STEADY);
        stop.store(true, Ordering::SeqCst);
        for producer in producers {
            producer.join().expect("producer thread");
        }
        let produced = Arc::try_unwrap(produced)
            .ok()
            .expect("producers done")
            .into_inner()
            .unwrap();
        assert!(
            produced.fatal.is_empty(),
            "producers failed: {:?}",
            produced.fatal
        );
        let acknowledged: HashSet<i64> = produced.acknowledged.iter().copied().collect();
        let total = acknowledged.len() as i64;

        wait_for("every job to finish", Duration::from_secs(90), || {
            on_new_primary.scalar("SELECT count(*) AS v FROM solidq_jobs WHERE finished_at IS NULL")
                == 0
        });
        let mut lost = Vec::new();
        for &id in &acknowledged {
            match queue.job(id) {
                Ok(info) if info.status == JobStatus::Succeeded => {}
                Ok(info) => lost.push(format!("{id}: {:?}", info.status)),
                Err(error) => lost.push(format!("{id}: {error}")),
            }
        }
        let rows = on_new_primary.scalar("SELECT count(*) AS v FROM solidq_jobs");

        // Starts per job, and which jobs had started by the promotion.
        let starts = file_ledger_starts(ledger_file.path());
        let mut per_job: HashMap<i64, u32> = HashMap::new();
        for (job, _) in &starts {
            *per_job.entry(*job).or_default() += 1;
        }
        let started_early: HashSet<i64> = starts[..starts_at_promotion]
            .iter()
            .map(|(job, _)| *job)
            .collect();
        let duplicates: Vec<i64> = per_job
            .iter()
            .filter(|(_, n)| **n > 1)
            .map(|(job, _)| *job)
            .collect();
        let unexplained: Vec<i64> = duplicates
            .iter()
            .copied()
            .filter(|job| !started_early.contains(job))
            .collect();
        let pids: HashSet<u32> = starts.iter().map(|(_, pid)| *pid).collect();

        eprintln!(
            "failover: {total} jobs acknowledged; outage {:?} (crash to promotion); \
             jobs finishing again {resumed:?} and enqueues acknowledged again {enqueue_resumed:?} \
             after the promotion; {} lost; {} run twice ({} of them started before the \
             promotion); producers' failed calls: {} may have committed, {} surely not; \
             {} starts before the crash, {} worker pids",
            promoted - crashed,
            lost.len(),
            duplicates.len(),
            duplicates.len() - unexplained.len(),
            produced.may_have_committed,
            produced.not_committed,
            starts_before,
            pids.len(),
        );
        assert!(lost.is_empty(), "acknowledged jobs lost: {lost:?}");
        assert_eq!(rows, total, "a job row no producer acknowledged");
        assert!(
            unexplained.is_empty(),
            "jobs run twice that had not started before the promotion: {unexplained:?}"
        );
        assert!(
            resumed <= RESUME_BOUND,
            "work resumed {resumed:?} after the promotion (bound {RESUME_BOUND:?})"
        );
        assert!(
            enqueue_resumed <= RESUME_BOUND,
            "enqueues resumed {enqueue_resumed:?} after the promotion"
        );
        assert_eq!(
            per_job.len() as i64,
            total,
            "every acknowledged job's code ran"
        );
        assert!(
            supervisor.wait_timeout(Duration::ZERO).is_none(),
            "the supervisor exited: {}",
            supervisor.logs()
        );
        supervisor.signal(libc::SIGTERM);
        let status = supervisor
            .wait_timeout(Duration::from_secs(30))
            .unwrap_or_else(|| panic!("supervisor did not stop: {}", supervisor.logs()));
        assert!(status.success(), "{status:?}: {}", supervisor.logs());
    }
}

/// The other way a primary stops being one (riverqueue/river#1225): it
/// stays up, read-only (an Aurora writer rebooted as a reader, a
/// switchover), so nothing disconnects solidq. Connections to it must be
/// dropped when it refuses a write (SQLSTATE 25006), and the LISTEN
/// connection and the notifier, which it does not refuse, must follow.
#[cfg(feature = "postgres")]
mod read_only {
    use std::time::{Duration, Instant};

    use solidq::{JobStatus, Queue, WorkerConfig};

    use super::common::jobs::{Echo, worker};
    use super::common::wait_for;
    use super::postgres::replicated_pair;

    #[test]
    fn a_primary_turned_read_only_is_left_for_the_promoted_standby_listener_included() {
        let Some((primary, standby, url)) = replicated_pair() else {
            return;
        };
        // Two processes' worth: the producer's and the worker's stores are
        // separate, and their URLs differ so that no in-process wake-up
        // reaches the worker; polling once a minute, only a notification
        // heard on its LISTEN connection wakes it, or its duty changing
        // hands (it claims once on taking the duty: src/worker/duty.rs).
        let producer = Queue::connect(&format!("{url}?application_name=producer")).unwrap();
        producer.migrate().unwrap();
        let consumer = Queue::connect(&format!("{url}?application_name=worker")).unwrap();
        let running = worker(consumer)
            .config(WorkerConfig {
                polling_interval: Duration::from_secs(60),
                fallback_polling_interval: Duration::from_secs(60),
                heartbeat_interval: Duration::from_millis(500),
                ..WorkerConfig::default()
            })
            .start()
            .unwrap();
        let echo = |n: usize| Echo {
            value: serde_json::json!(n),
        };
        let all_succeed = |ids: &[i64], what: &str| {
            wait_for(what, Duration::from_secs(20), || {
                ids.iter()
                    .all(|id| producer.job(*id).unwrap().status == JobStatus::Succeeded)
            })
        };
        let before: Vec<i64> = (0..10)
            .map(|n| producer.enqueue(&echo(n)).unwrap())
            .collect();
        all_succeed(&before, "the jobs enqueued before the switch");

        // The switch: the primary refuses writes but keeps its sessions;
        // then the standby, which has every commit, is promoted.
        primary.psql("ALTER SYSTEM SET default_transaction_read_only = on");
        primary.psql("SELECT pg_reload_conf()");
        std::thread::sleep(Duration::from_millis(300));
        standby.promote();
        let promoted = Instant::now();

        // No enqueue surfaces the refusal: solidq runs it again on a
        // connection libpq opens to the host that takes writes.
        let after: Vec<i64> = (10..30)
            .map(|n| {
                producer
                    .enqueue(&echo(n))
                    .unwrap_or_else(|error| panic!("enqueue {n} after the switch: {error}"))
            })
            .collect();
        all_succeed(
            &after,
            "the jobs enqueued after the switch (woken by LISTEN)",
        );
        let resumed = promoted.elapsed();
        eprintln!(
            "read-only switchover: 20 jobs enqueued and worked {resumed:?} after the promotion"
        );
        assert_eq!(
            primary.psql("SELECT count(*) FROM pg_stat_activity WHERE query ILIKE 'LISTEN%'"),
            "0",
            "nobody listens on the old primary any more"
        );
        // The duty's session follows the switch on its own and its new
        // holder claims once: the jobs above may have run before the
        // listener was back.
        wait_for(
            "the worker to listen on the new primary",
            Duration::from_secs(10),
            || {
                standby.psql("SELECT count(*) FROM pg_stat_activity WHERE query ILIKE 'LISTEN%'")
                    == "1"
            },
        );
        // Now only a notification on the new primary wakes it.
        let last: Vec<i64> = (30..35)
            .map(|n| producer.enqueue(&echo(n)).unwrap())
            .collect();
        all_succeed(
            &last,
            "the jobs enqueued once it listens there (woken by LISTEN)",
        );
        running.stop().unwrap();
    }
}
