//! Rate limits (`RateLimit` in src/concurrency.rs) on every backend: at
//! most 10 starts in any second across three worker processes for 10 s,
//! counted from a ledger of every start; jobs over the limit go back
//! without spending an attempt or a snooze, spread so that they are not
//! claimed over and over; keys from the arguments have limits of their own.

use crate::common;

use std::time::{Duration, Instant};

use common::child::Child;
use common::jobs::Rated;
use common::{TestDb, wait_for};
use serde::{Deserialize, Serialize};
use solidq::{
    EnqueueOptions, Error, Job, JobContext, JobOptions, JobRequest, JobResult, RateLimit,
};

backend_tests!(a_bad_limit_or_key_is_refused_with_the_offending_value);

backend_tests!(
    alone:
    ten_a_second_across_three_processes_for_ten_seconds,
    each_key_has_its_own_limit_and_jobs_sent_back_are_not_claimed_over_and_over,
    a_backlog_starts_its_full_rate_for_small_and_large_limits,
    claims_that_could_not_be_sent_back_are_released_once_the_database_takes_it,
);

/// The documented accuracy: a start may come this long after its grant.
const MARGIN_US: i64 = 50_000;

fn rated(db: &TestDb, n: i64, key: Option<&str>) -> JobRequest {
    let job = Rated {
        url: db.url.clone(),
        n,
        key: key.map(str::to_string),
    };
    JobRequest::new(&job, EnqueueOptions::new()).unwrap()
}

/// Start times (µs) of the ledger rows of `where_n` (an SQL condition on
/// `n`), in order.
fn starts(db: &TestDb, where_n: &str) -> Vec<i64> {
    let mut at = db.conn().column(&format!(
        "SELECT at_us AS v FROM test_ledger WHERE event = 'start' AND {where_n} ORDER BY at_us"
    ));
    at.sort_unstable();
    at
}

/// The most starts in any window of one second less the margin.
fn busiest_second(starts: &[i64]) -> usize {
    starts
        .iter()
        .enumerate()
        .map(|(i, &t)| {
            starts[i..]
                .iter()
                .take_while(|&&u| u < t + 1_000_000 - MARGIN_US)
                .count()
        })
        .max()
        .unwrap_or(0)
}

fn ten_a_second_across_three_processes_for_ten_seconds(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let jobs: Vec<JobRequest> = (0..300).map(|n| rated(db, n, None)).collect();
    queue.enqueue_all_with(&jobs).unwrap();
    let settings = [("SOLIDQ_TEST_THREADS", "4")];
    let workers: Vec<Child> = (0..3).map(|_| Child::worker(&db.url, &settings)).collect();
    let began = Instant::now();
    wait_for("the first start", Duration::from_secs(30), || {
        !starts(db, "1 = 1").is_empty()
    });
    let first = starts(db, "1 = 1")[0];
    std::thread::sleep(Duration::from_secs(10).saturating_sub(began.elapsed()));
    std::thread::sleep(Duration::from_secs(1));
    let all = starts(db, "1 = 1");
    let within: Vec<i64> = all
        .iter()
        .copied()
        .filter(|&t| t < first + 10_000_000)
        .collect();
    let pids = db.scalar("SELECT count(DISTINCT pid) AS v FROM test_ledger");
    drop(workers);
    let busiest = busiest_second(&within);
    eprintln!(
        "{}: {} starts in the first 10 s from {pids} processes, at most {busiest} in a second",
        db.backend,
        within.len()
    );
    assert!(
        busiest <= 10,
        "{busiest} starts within one second (less {MARGIN_US} µs)"
    );
    assert!(
        within.len() >= 60,
        "only {} starts in 10 s at 10 a second",
        within.len()
    );
    assert!(pids >= 2, "the starts came from {pids} processes");
    let twice = db.scalar(
        "SELECT count(*) AS v FROM (SELECT job_id FROM test_ledger WHERE event = 'start'
         GROUP BY job_id HAVING count(*) > 1) t",
    );
    assert_eq!(twice, 0, "a job started twice");
    let spent = db.scalar(
        "SELECT count(*) AS v FROM solidq_jobs WHERE attempts > 1 OR snoozes > 0
            OR (finished_at IS NULL AND attempts > 0)",
    );
    assert_eq!(spent, 0, "jobs sent back spent attempts or snoozes");
    assert_eq!(db.count("solidq_failed_executions"), 0);
}

fn each_key_has_its_own_limit_and_jobs_sent_back_are_not_claimed_over_and_over(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    // 60 jobs of key a (n < 100), 60 of key b.
    let mut jobs: Vec<JobRequest> = (0..60).map(|n| rated(db, n, Some("a"))).collect();
    jobs.extend((100..160).map(|n| rated(db, n, Some("b"))));
    queue.enqueue_all_with(&jobs).unwrap();
    let worker = common::jobs::worker(queue.clone())
        .threads(4)
        .start()
        .unwrap();
    let began = Instant::now();
    std::thread::sleep(Duration::from_millis(3_500));
    let (a, b) = (starts(db, "n < 100"), starts(db, "n >= 100"));
    let stats = worker.stats();
    worker.stop().unwrap();
    let elapsed = began.elapsed();
    eprintln!(
        "{}: in {elapsed:?}, {} starts of a, {} of b, {} claims of jobs",
        db.backend,
        a.len(),
        b.len(),
        stats.claimed_jobs
    );
    for (key, starts) in [("a", &a), ("b", &b)] {
        assert!(
            busiest_second(starts) <= 10,
            "key {key}: {} starts within a second",
            busiest_second(starts)
        );
        assert!(
            starts.len() >= 20,
            "key {key}: only {} starts in 3.5 s",
            starts.len()
        );
    }
    // Without spreading, every job sent back would come back each second:
    // 120 claims a second. Spread, a job is claimed about once per start
    // plus once when first sent back.
    let started = (a.len() + b.len()) as u64;
    assert!(
        stats.claimed_jobs <= 120 + 2 * started,
        "{} claims for {started} starts of 120 jobs",
        stats.claimed_jobs
    );
}

/// The arguments of the job types below: their rate key.
#[derive(Serialize, Deserialize)]
struct Odd {
    key: String,
}

macro_rules! odd_job {
    ($name:ident, $limit:expr, $period:expr) => {
        #[derive(Serialize, Deserialize)]
        struct $name(Odd);
        impl Job for $name {
            const KIND: &'static str = stringify!($name);
            fn perform(&self, _ctx: &JobContext) -> JobResult {
                Ok(serde_json::Value::Null)
            }
            fn options() -> JobOptions {
                JobOptions::new().rate_limit(RateLimit::new($limit, $period))
            }
            fn rate_key(&self) -> Option<String> {
                Some(self.0.key.clone())
            }
        }
    };
}

odd_job!(NoStarts, 0, Duration::from_secs(1));
odd_job!(NoPeriod, 10, Duration::ZERO);
odd_job!(Fine, 10, Duration::from_secs(1));

fn a_bad_limit_or_key_is_refused_with_the_offending_value(db: &TestDb) {
    let queue = db.queue();
    let odd = |key: &str| Odd { key: key.into() };
    let refused = |result: solidq::Result<i64>| match result {
        Err(Error::InvalidOption { option, value, .. }) => format!("{option}={value}"),
        other => panic!("expected an invalid option, got {other:?}"),
    };
    assert_eq!(refused(queue.enqueue(&NoStarts(odd("k")))), "rate limit=0");
    assert_eq!(
        refused(queue.enqueue(&NoPeriod(odd("k")))),
        "rate limit period=0ns"
    );
    assert_eq!(
        refused(queue.enqueue(&Fine(odd("a\0b")))),
        "rate_key=Fine/a\0b"
    );
    let long = "x".repeat(300);
    assert!(refused(queue.enqueue(&Fine(odd(&long)))).starts_with("rate_key=Fine/xxx"));
    assert_eq!(db.count("solidq_jobs"), 0, "nothing written");
    assert!(queue.enqueue(&Fine(odd("k"))).is_ok());
}

/// The arguments of the paced job types below: where their ledger is.
#[derive(Serialize, Deserialize)]
struct Paced {
    url: String,
}

macro_rules! paced_job {
    ($name:ident, $limit:expr) => {
        #[derive(Serialize, Deserialize)]
        struct $name(Paced);
        impl Job for $name {
            const KIND: &'static str = stringify!($name);
            fn perform(&self, ctx: &JobContext) -> JobResult {
                common::jobs::ledger_append(&self.0.url, ctx.job_id(), $limit, "start");
                Ok(serde_json::Value::Null)
            }
            fn options() -> JobOptions {
                JobOptions::new().rate_limit(RateLimit::new($limit, Duration::from_secs(1)))
            }
        }
    };
}

paced_job!(PacedOne, 1);
paced_job!(PacedTwo, 2);
paced_job!(PacedFive, 5);
paced_job!(PacedHundred, 100);

/// Periods a backlog is watched for.
const PERIODS: i64 = 10;

/// A backlog under a limit of N starts a second starts N a second: at
/// least 0.95 × N per period averaged over 10 periods from its first start,
/// for N = 1, 2, 5 and 100 at once (one worker), and never more than N in
/// any second (less the margin). Jobs sent back are released when the
/// window opens, not at the next poll.
fn a_backlog_starts_its_full_rate_for_small_and_large_limits(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let paced = || Paced {
        url: db.url.clone(),
    };
    let mut jobs: Vec<JobRequest> = Vec::new();
    for _ in 0..(PERIODS + 2) {
        jobs.push(JobRequest::new(&PacedOne(paced()), EnqueueOptions::new()).unwrap());
    }
    for _ in 0..(PERIODS + 2) * 2 {
        jobs.push(JobRequest::new(&PacedTwo(paced()), EnqueueOptions::new()).unwrap());
    }
    for _ in 0..(PERIODS + 2) * 5 {
        jobs.push(JobRequest::new(&PacedFive(paced()), EnqueueOptions::new()).unwrap());
    }
    for _ in 0..(PERIODS + 2) * 100 {
        jobs.push(JobRequest::new(&PacedHundred(paced()), EnqueueOptions::new()).unwrap());
    }
    queue.enqueue_all_with(&jobs).unwrap();
    let worker = common::jobs::worker(queue.clone())
        .register::<PacedOne>()
        .register::<PacedTwo>()
        .register::<PacedFive>()
        .register::<PacedHundred>()
        .threads(8)
        .start()
        .unwrap();
    let limits = [1i64, 2, 5, 100];
    wait_for("every limit's first start", Duration::from_secs(30), || {
        limits
            .iter()
            .all(|n| !starts(db, &format!("n = {n}")).is_empty())
    });
    let last_first = limits
        .iter()
        .map(|n| starts(db, &format!("n = {n}"))[0])
        .max()
        .unwrap();
    wait_for("ten periods", Duration::from_secs(60), || {
        common::now_us() > last_first + PERIODS * 1_000_000 + 200_000
    });
    let stats = worker.stats();
    worker.stop().unwrap();
    let mut report = Vec::new();
    for n in limits {
        let all = starts(db, &format!("n = {n}"));
        let first = all[0];
        let within: Vec<i64> = all
            .iter()
            .copied()
            .filter(|&t| t < first + PERIODS * 1_000_000)
            .collect();
        let rate = within.len() as f64 / PERIODS as f64;
        report.push((n, rate, busiest_second(&all)));
    }
    eprintln!(
        "{}: (limit, starts per second over {PERIODS} s, most in any second) {report:?}; {} claims",
        db.backend, stats.claimed_jobs
    );
    for (n, rate, busiest) in report {
        assert!(
            busiest as i64 <= n,
            "limit {n}: {busiest} starts within a second"
        );
        assert!(
            rate >= 0.95 * n as f64,
            "limit {n}: {rate} starts a second, less than 0.95 × {n}"
        );
    }
}

/// A claimed rate-limited job whose grant fails and which cannot be sent
/// back to the scheduled jobs either (both tables away) stays claimed by a
/// live worker only until the database takes its release: the worker
/// tries again at every poll (it no longer exits for an outage, so its
/// deregistration would come too late). When the tables are back every
/// job runs, none stalled.
fn claims_that_could_not_be_sent_back_are_released_once_the_database_takes_it(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let worker = common::jobs::worker(queue.clone())
        .config(solidq::WorkerConfig {
            threads: 2,
            polling_interval: Duration::from_millis(50),
            ..solidq::WorkerConfig::default()
        })
        .start()
        .unwrap();
    let rename = |from: &str, to: &str| match db.backend {
        solidq::Backend::Mysql => db.execute(&format!("RENAME TABLE {from} TO {to}")),
        _ => db.execute(&format!("ALTER TABLE {from} RENAME TO {to}")),
    };
    rename("solidq_rate_limits", "test_rate_limits_away");
    rename("solidq_scheduled_executions", "test_scheduled_away");
    let ids: Vec<i64> = (0..3)
        .map(|n| {
            queue
                .enqueue(&Rated {
                    url: db.url.clone(),
                    n,
                    key: None,
                })
                .unwrap()
        })
        .collect();
    // Claimed, refused a grant, and released again, over and over.
    wait_for("a claim and a refused grant", WAIT_SHORT, || {
        worker.stats().claimed_jobs >= 3
    });
    std::thread::sleep(Duration::from_millis(300));
    rename("test_rate_limits_away", "solidq_rate_limits");
    rename("test_scheduled_away", "solidq_scheduled_executions");
    wait_for("every job to run", WAIT_SHORT, || {
        ids.iter()
            .all(|&id| queue.job(id).unwrap().status == solidq::JobStatus::Succeeded)
    });
    worker.stop().unwrap();
    let stalled = db.scalar("SELECT count(*) AS v FROM solidq_jobs WHERE stalled_count > 0");
    assert_eq!(
        stalled, 0,
        "nothing stalled: the worker was alive throughout"
    );
}

const WAIT_SHORT: Duration = Duration::from_secs(20);
