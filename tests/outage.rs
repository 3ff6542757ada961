//! The database away for longer than `process_alive_threshold` (DESIGN:
//! "nobody alive is pruned for it; heartbeats that keep failing stop their
//! process"). Three standalone workers (each a pruner) work a steady stream
//! of jobs while the database goes away for 2.5 s, five times, with a 1 s
//! alive threshold:
//!
//! * PostgreSQL: a private server, stopped (`pg_ctl stop -m fast`) and
//!   started again. Heartbeats fail, so every worker stops itself after the
//!   threshold and exits non-zero; the test restarts what exited, as
//!   systemd would.
//! * SQLite: another connection holds the write lock (`BEGIN EXCLUSIVE`)
//!   while the workers' busy timeout is 300 ms: writes fail as they would
//!   against a stopped server, and workers stop themselves too.
//!
//! Either way, when the database is back, nobody judges anybody by a
//! heartbeat the outage made old: no worker finds its row pruned, no job
//! is started twice (a file ledger counts every start), no stall is
//! counted, and every acknowledged job succeeds.

mod common;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::child::Child;
#[cfg(feature = "postgres")]
use common::cluster::PrivateCluster;
use common::jobs::{FileLedger, file_ledger_starts};
use common::{TestConn, TestDb, wait_for};
#[cfg(feature = "sqlite")]
use diesel::connection::SimpleConnection;
#[cfg(feature = "sqlite")]
use diesel::{Connection, SqliteConnection};
use solidq::{
    Dispatcher, DispatcherConfig, EnqueueOptions, Enqueued, JobStatus, Queue, QueueConfig,
    Scheduler,
};

const ROUNDS: usize = 5;
const OUTAGE: Duration = Duration::from_millis(2500);

const BETWEEN: Duration = Duration::from_secs(3);
const WORKERS: usize = 3;
const WAIT: Duration = Duration::from_secs(60);

#[cfg(feature = "sqlite")]
mod sqlite {
    #[test]
    fn no_live_worker_is_pruned_for_a_database_outage() {
        let db = super::TestDb::sqlite();
        super::run(&db.url, &super::Outage::SqliteLock(db.url.clone()));
    }

    #[test]
    fn an_at_most_once_job_whose_outcome_cannot_be_written_fails_instead_of_running_again() {
        super::unwritten_at_most_once_outcome(&super::TestDb::sqlite());
    }

    #[test]
    fn standalone_dispatchers_and_schedulers_stop_when_heartbeats_keep_failing() {
        let db = super::TestDb::sqlite();
        super::services_stop(&db.url, &super::Outage::SqliteLock(db.url.clone()));
    }

    #[test]
    fn rate_limited_jobs_keep_their_limit_and_run_once_through_outages() {
        let db = super::TestDb::sqlite();
        super::rate_limited(&db.url, &super::Outage::SqliteLock(db.url.clone()));
    }
}

#[cfg(feature = "postgres")]
mod postgres {
    #[test]
    fn no_live_worker_is_pruned_for_a_database_outage() {
        let Some(cluster) = super::PrivateCluster::start() else {
            return;
        };
        let url = cluster.url();
        super::run(&url, &super::Outage::Server(cluster));
    }

    #[test]
    fn an_at_most_once_job_whose_outcome_cannot_be_written_fails_instead_of_running_again() {
        if let Some(db) = super::TestDb::postgres() {
            super::unwritten_at_most_once_outcome(&db);
        }
    }

    #[test]
    fn standalone_dispatchers_and_schedulers_stop_when_heartbeats_keep_failing() {
        let Some(cluster) = super::PrivateCluster::start() else {
            return;
        };
        let url = cluster.url();
        super::services_stop(&url, &super::Outage::Server(cluster));
    }

    #[test]
    fn rate_limited_jobs_keep_their_limit_and_run_once_through_outages() {
        let Some(cluster) = super::PrivateCluster::start() else {
            return;
        };
        let url = cluster.url();
        super::rate_limited(&url, &super::Outage::Server(cluster));
    }
}

/// How the database goes away.
enum Outage {
    /// The server stops and starts again.
    #[cfg(feature = "postgres")]
    Server(PrivateCluster),
    /// A connection to this SQLite URL holds the write lock.
    #[cfg(feature = "sqlite")]
    SqliteLock(String),
}

impl Outage {
    fn happen(&self) {
        match self {
            #[cfg(feature = "postgres")]
            Outage::Server(cluster) => {
                cluster.stop();
                std::thread::sleep(OUTAGE);
                cluster.start_again();
            }
            #[cfg(feature = "sqlite")]
            Outage::SqliteLock(url) => {
                let path = url.trim_start_matches("sqlite://");
                let mut conn = SqliteConnection::establish(path).expect("open the file");
                conn.batch_execute("PRAGMA busy_timeout = 10000; BEGIN EXCLUSIVE")
                    .expect("take the write lock");
                std::thread::sleep(OUTAGE);
                conn.batch_execute("COMMIT").expect("let go of it");
            }
        }
    }
}

fn worker(url: &str) -> Child {
    Child::worker(
        url,
        &[
            ("SOLIDQ_TEST_ALIVE_MS", "1000"),
            ("SOLIDQ_TEST_HEARTBEAT_MS", "200"),
            ("SOLIDQ_TEST_SHUTDOWN_MS", "5000"),
            ("SOLIDQ_TEST_THREADS", "4"),
            // SQLite: writes give up behind the held lock, as they fail
            // against a stopped server.
            ("SOLIDQ_TEST_BUSY_MS", "300"),
        ],
    )
}

/// Enqueues a job every few milliseconds until `stop`, retrying through
/// the outages under a unique key (a retry of an enqueue whose commit went
/// unacknowledged finds the job it made); returns the acknowledged ids.
fn producer(url: String, ledger: PathBuf, stop: Arc<AtomicBool>) -> JoinHandle<Vec<i64>> {
    std::thread::spawn(move || {
        let queue = Queue::connect(&url).expect("connect");
        let mut ids = Vec::new();
        let mut n = 0u64;
        while !stop.load(Ordering::SeqCst) {
            n += 1;
            let job = FileLedger {
                path: ledger.display().to_string(),
                // One in five runs long enough to be running at a cut.
                sleep_ms: if n.is_multiple_of(5) { 300 } else { 0 },
            };
            loop {
                let options = EnqueueOptions::new().unique_key(format!("job-{n}"));
                match queue.enqueue_or_existing(&job, options) {
                    Ok(Enqueued::New(id) | Enqueued::Existing(id)) => {
                        ids.push(id);
                        break;
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(50)),
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        ids
    })
}

fn run(url: &str, outage: &Outage) {
    let queue = Queue::connect(url).expect("connect");
    queue.migrate().expect("migrate");
    let dir = tempfile::tempdir().expect("ledger directory");
    let ledger = dir.path().join("starts");
    let mut workers: Vec<Child> = (0..WORKERS).map(|_| worker(url)).collect();
    let mut conn = TestConn::open(url);
    wait_for("the workers to register", WAIT, || {
        conn.scalar("SELECT COUNT(*) AS v FROM solidq_processes") == WORKERS as i64
    });
    let stop = Arc::new(AtomicBool::new(false));
    let produced = producer(url.to_string(), ledger.clone(), Arc::clone(&stop));

    let mut retired = Vec::new();
    let mut restarts = 0;
    for round in 0..ROUNDS {
        std::thread::sleep(BETWEEN);
        let cut = Instant::now();
        outage.happen();
        eprintln!("round {round}: database away for {:?}", cut.elapsed());
        // Workers that stopped themselves are replaced, as systemd would.
        let until = Instant::now() + BETWEEN;
        while Instant::now() < until {
            for slot in workers.iter_mut() {
                if slot.wait_timeout(Duration::ZERO).is_some() {
                    let old = std::mem::replace(slot, worker(url));
                    retired.push(old);
                    restarts += 1;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    stop.store(true, Ordering::SeqCst);
    let ids = produced.join().expect("producer");

    let mut conn = TestConn::open(url);
    wait_for("every acknowledged job to succeed", WAIT, || {
        ids.iter()
            .all(|&id| queue.job(id).unwrap().status == JobStatus::Succeeded)
    });
    let mut starts: HashMap<i64, usize> = HashMap::new();
    for (id, _) in file_ledger_starts(&ledger) {
        *starts.entry(id).or_default() += 1;
    }
    let twice: Vec<_> = starts.iter().filter(|&(_, &n)| n > 1).collect();
    let stalled = conn.scalar("SELECT COUNT(*) AS v FROM solidq_jobs WHERE stalled_count > 0");
    let logs: String = workers
        .iter()
        .chain(&retired)
        .map(Child::logs)
        .collect::<Vec<_>>()
        .join("\n");
    let pruned_alive = logs.matches("is gone (pruned while alive?)").count();
    let stopped_themselves = logs.matches("heartbeats failed").count();
    eprintln!(
        "{} jobs, {} starts, {restarts} workers restarted after stopping themselves ({stopped_themselves} said so), {pruned_alive} found their row pruned, {} started twice, {stalled} stalled",
        ids.len(),
        starts.values().sum::<usize>(),
        twice.len()
    );
    let evidence: Vec<&str> = logs
        .lines()
        .filter(|l| {
            l.contains("is gone") || l.contains("pruned worker") || l.contains("deregister")
        })
        .collect();
    assert_eq!(pruned_alive, 0, "a live worker was pruned:\n{evidence:#?}");
    assert!(twice.is_empty(), "jobs started twice: {twice:?}");
    assert_eq!(stalled, 0, "stalls counted for live workers");
    assert_eq!(starts.len(), ids.len(), "every job started once");
    assert!(ids.len() > 500, "the load ran: {} jobs", ids.len());
}

/// A standalone dispatcher and scheduler (each with a process row of its
/// own) whose heartbeats fail for longer than the threshold return
/// `Error::HeartbeatLost` from `run`, so whatever runs them restarts them.
fn services_stop(url: &str, outage: &Outage) {
    let config = QueueConfig {
        sqlite_busy_timeout: Duration::from_millis(300),
        ..QueueConfig::default()
    };
    let queue = Queue::connect_with(url, config).expect("connect");
    queue.migrate().expect("migrate");
    let (tx, rx) = crossbeam_channel::unbounded();
    let dispatcher = Dispatcher::new(queue.clone()).config(DispatcherConfig {
        heartbeat_interval: Duration::from_millis(200),
        process_alive_threshold: Duration::from_secs(1),
        ..DispatcherConfig::default()
    });
    let scheduler = Scheduler::new(queue.clone())
        .heartbeat_interval(Duration::from_millis(200))
        .process_alive_threshold(Duration::from_secs(1));
    let sent = tx.clone();
    std::thread::spawn(move || {
        let _ = sent.send(("dispatcher", dispatcher.run()));
    });
    std::thread::spawn(move || {
        let _ = tx.send(("scheduler", scheduler.run()));
    });
    let mut conn = TestConn::open(url);
    wait_for("both to register", WAIT, || {
        conn.scalar("SELECT COUNT(*) AS v FROM solidq_processes") == 2
    });
    drop(conn);
    let cut = Instant::now();
    outage.happen();
    for _ in 0..2 {
        let (who, outcome) = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("both stop within 10 s of the outage");
        eprintln!(
            "{who} stopped {:?} after the cut: {outcome:?}",
            cut.elapsed()
        );
        assert!(
            matches!(outcome, Err(solidq::Error::HeartbeatLost { .. })),
            "{who}: {outcome:?}"
        );
    }
}

/// The database refuses an outcome with a transient error until the
/// worker stops (a trigger stands in for an outage that outlasts the
/// shutdown): the completer gives the outcome up at its deadline, and the
/// job, which ran, is not released to run again but fails, being
/// at-most-once; an at-least-once job beside it goes back to ready.
fn unwritten_at_most_once_outcome(db: &TestDb) {
    let queue = db.queue();
    let refuse = match db.backend {
        solidq::Backend::Postgres => {
            "CREATE FUNCTION refuse_outcome() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN RAISE EXCEPTION 'outcome refused' USING ERRCODE = '40001'; END $$;
             CREATE TRIGGER refuse_outcome BEFORE UPDATE ON solidq_jobs FOR EACH ROW
             WHEN (NEW.finished_at IS NOT NULL AND OLD.finished_at IS NULL AND NEW.kind = 'echo')
             EXECUTE FUNCTION refuse_outcome();"
        }
        solidq::Backend::Sqlite => {
            "CREATE TRIGGER refuse_outcome BEFORE UPDATE ON solidq_jobs
             WHEN NEW.finished_at IS NOT NULL AND OLD.finished_at IS NULL AND NEW.kind = 'echo'
             BEGIN SELECT RAISE(ABORT, 'database is locked'); END;"
        }
        solidq::Backend::Mysql => {
            "CREATE TRIGGER refuse_outcome BEFORE UPDATE ON solidq_jobs FOR EACH ROW
             IF NEW.finished_at IS NOT NULL AND OLD.finished_at IS NULL AND NEW.kind = 'echo' THEN
                 SIGNAL SQLSTATE '40001' SET MESSAGE_TEXT = 'outcome refused';
             END IF"
        }
    };
    db.execute(refuse);
    let once = queue
        .enqueue_with(
            &common::jobs::Echo {
                value: serde_json::json!("once"),
            },
            EnqueueOptions::new().delivery(solidq::Delivery::AtMostOnce),
        )
        .unwrap();
    let least = queue
        .enqueue(&common::jobs::Echo {
            value: serde_json::json!("at least once"),
        })
        .unwrap();
    let worker = common::jobs::worker(queue.clone())
        .config(solidq::WorkerConfig {
            threads: 2,
            shutdown_timeout: Duration::from_millis(500),
            polling_interval: Duration::from_millis(50),
            ..solidq::WorkerConfig::default()
        })
        .start()
        .unwrap();
    wait_for("both jobs to run", WAIT, || {
        [once, least]
            .iter()
            .all(|&id| queue.job(id).unwrap().status == JobStatus::Running)
    });
    // Their outcomes are being retried; stop: the completer gives up.
    std::thread::sleep(Duration::from_millis(300));
    worker.stop().unwrap();
    let info = queue.job(once).unwrap();
    assert_eq!(info.status, JobStatus::Failed, "{info:?}");
    assert_eq!(queue.job(least).unwrap().status, JobStatus::Ready);
}

/// Rate-limited jobs (10 starts a second) worked by two workers while the
/// database goes away twice: a grant, a send-back or a claim may fail at
/// any point, yet no second holds more than 10 starts (50 ms margin), every
/// job starts once, and none spends an attempt or a snooze.
fn rate_limited(url: &str, outage: &Outage) {
    let queue = Queue::connect(url).expect("connect");
    queue.migrate().expect("migrate");
    let dir = tempfile::tempdir().expect("ledger directory");
    let ledger = dir.path().join("starts");
    let jobs: Vec<common::jobs::RatedFile> = (0..60)
        .map(|_| common::jobs::RatedFile {
            path: ledger.display().to_string(),
        })
        .collect();
    let ids = queue.enqueue_all(&jobs).expect("enqueue");
    let mut workers: Vec<Child> = (0..2).map(|_| worker(url)).collect();
    let mut retired = Vec::new();
    for round in 0..2 {
        std::thread::sleep(Duration::from_millis(1500));
        let cut = Instant::now();
        outage.happen();
        eprintln!("round {round}: database away for {:?}", cut.elapsed());
        let until = Instant::now() + Duration::from_millis(500);
        while Instant::now() < until {
            for slot in workers.iter_mut() {
                if slot.wait_timeout(Duration::ZERO).is_some() {
                    retired.push(std::mem::replace(slot, worker(url)));
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    wait_for("every job to succeed", WAIT, || {
        for slot in workers.iter_mut() {
            if slot.wait_timeout(Duration::ZERO).is_some() {
                retired.push(std::mem::replace(slot, worker(url)));
            }
        }
        ids.iter()
            .all(|&id| queue.job(id).unwrap().status == JobStatus::Succeeded)
    });
    drop(workers);
    let lines = std::fs::read_to_string(&ledger).expect("the ledger");
    let mut starts: Vec<(i64, i64)> = lines
        .lines()
        .filter_map(|l| {
            let words: Vec<&str> = l.split(' ').collect();
            Some((words.get(1)?.parse().ok()?, words.get(3)?.parse().ok()?))
        })
        .collect();
    starts.sort_by_key(|&(_, at)| at);
    let mut per_job: HashMap<i64, usize> = HashMap::new();
    for (id, _) in &starts {
        *per_job.entry(*id).or_default() += 1;
    }
    let busiest = starts
        .iter()
        .enumerate()
        .map(|(i, &(_, t))| {
            starts[i..]
                .iter()
                .take_while(|&&(_, u)| u < t + 950_000)
                .count()
        })
        .max()
        .unwrap_or(0);
    let mut conn = TestConn::open(url);
    let spent =
        conn.scalar("SELECT COUNT(*) AS v FROM solidq_jobs WHERE attempts > 1 OR snoozes > 0");
    eprintln!(
        "{} starts of {} jobs, at most {busiest} in a second, {} workers restarted",
        starts.len(),
        ids.len(),
        retired.len()
    );
    assert!(busiest <= 10, "{busiest} starts within a second");
    assert_eq!(per_job.len(), ids.len(), "every job started");
    assert!(
        per_job.values().all(|&n| n == 1),
        "jobs started twice: {:?}",
        per_job.iter().filter(|&(_, &n)| n > 1).collect::<Vec<_>>()
    );
    assert_eq!(spent, 0, "jobs spent attempts or snoozes");
}
