//! Rate limits (`RateLimit` in src/concurrency.rs) on every backend: at
//! most 10 starts in any second across three worker processes for 10 s,
//! counted from a ledger of every start; jobs over the limit go back
//! without spending an attempt or a snooze, spread so that they are not
//! claimed over and over; keys from the arguments have limits of their own.

use crate::common;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
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
    claims_that_could_not_be_sent_back_are_released_once_the_database_takes_it,
);

/// The full rate of a limit of 100 a second, from 8 threads: with the
/// same test of another backend beside it (.ci/run's alone phase runs
/// three at a time), PostgreSQL and MySQL once reached 94.6 and 93.6.
mod full_rate {
    use super::*;

    backend_tests!(exclusive: a_backlog_starts_its_full_rate_for_small_and_large_limits);
}

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

/// Starts of the ledger rows of `where_n` (an SQL condition on `n`), in
/// order: when (µs) and which job.
fn starts(db: &TestDb, where_n: &str) -> Vec<Start> {
    let mut conn = db.conn();
    let sql = |column: &str| {
        format!(
            "SELECT {column} AS v FROM test_ledger WHERE event = 'start' AND {where_n} \
             ORDER BY at_us, job_id"
        )
    };
    let at = conn.column(&sql("at_us"));
    let job = conn.column(&sql("job_id"));
    at.into_iter()
        .zip(job)
        .map(|(at, job)| Start { at, job })
        .collect()
}

#[derive(Clone, Copy, Debug)]
struct Start {
    at: i64,
    job: i64,
}

/// The grant of every rate-limited start (µs, by the database's clock,
/// by job id), read from `solidq_rate_starts` every 100 ms while it
/// runs: a grant's row stays there for its period at least (a grant
/// prunes only rows older than that).
struct Grants {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<HashMap<i64, i64>>,
}

/// Job ids are shifted above the grant's microseconds since the watch
/// began (2^36 µs: 19 hours), so one column holds both.
const GRANT_BITS: u32 = 36;

impl Grants {
    fn watch(db: &TestDb) -> Grants {
        let base = common::now_us();
        let sql = format!(
            "SELECT {} AS v FROM solidq_rate_starts",
            db.bigint(&format!(
                "job_id * {} + ({} - {base})",
                1i64 << GRANT_BITS,
                db.epoch_us("started_at")
            ))
        );
        let url = db.url.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut conn = common::TestConn::open(&url);
            let mut grants = HashMap::new();
            loop {
                let done = stopped.load(Ordering::SeqCst);
                for v in conn.column(&sql) {
                    grants.insert(v >> GRANT_BITS, base + (v & ((1 << GRANT_BITS) - 1)));
                }
                if done {
                    return grants;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        Grants { stop, thread }
    }

    fn stop(self) -> HashMap<i64, i64> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().unwrap()
    }
}

/// The most starts in any window of one second less the margin, leaving
/// out those whose code began more than the margin after their grant
/// (the documented accuracy: at most `limit` starts plus those that began
/// more than the grant's lag after it; a loaded machine delays a few).
/// A start whose grant was not seen counts. Also returns the most
/// counting the late ones, and the late ones' lags (ms), for the report.
fn busiest_second(grants: &HashMap<i64, i64>, starts: &[Start]) -> (usize, usize, Vec<i64>) {
    let lag = |s: &Start| grants.get(&s.job).map(|g| s.at - g);
    let late = |s: &Start| lag(s).is_some_and(|lag| lag > MARGIN_US);
    let (mut busiest, mut raw) = (0, 0);
    for (i, first) in starts.iter().enumerate() {
        let window = starts[i..]
            .iter()
            .take_while(|s| s.at < first.at + 1_000_000 - MARGIN_US);
        raw = raw.max(window.clone().count());
        busiest = busiest.max(window.filter(|s| !late(s)).count());
    }
    let lags = starts
        .iter()
        .filter(|s| late(s))
        .filter_map(|s| lag(s).map(|us| us / 1000))
        .collect();
    (busiest, raw, lags)
}

fn ten_a_second_across_three_processes_for_ten_seconds(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let jobs: Vec<JobRequest> = (0..300).map(|n| rated(db, n, None)).collect();
    queue.enqueue_all_with(&jobs).unwrap();
    let settings = [("SOLIDQ_TEST_THREADS", "4")];
    let workers: Vec<Child> = (0..3).map(|_| Child::worker(&db.url, &settings)).collect();
    let grants = Grants::watch(db);
    let began = Instant::now();
    wait_for("the first start", Duration::from_secs(30), || {
        !starts(db, "1 = 1").is_empty()
    });
    let first = starts(db, "1 = 1")[0].at;
    std::thread::sleep(Duration::from_secs(10).saturating_sub(began.elapsed()));
    std::thread::sleep(Duration::from_secs(1));
    let all = starts(db, "1 = 1");
    let within: Vec<Start> = all
        .iter()
        .copied()
        .filter(|s| s.at < first + 10_000_000)
        .collect();
    let pids = db.scalar("SELECT count(DISTINCT pid) AS v FROM test_ledger");
    drop(workers);
    let grants = grants.stop();
    let (busiest, raw, late) = busiest_second(&grants, &within);
    eprintln!(
        "{}: {} starts in the first 10 s from {pids} processes, at most {busiest} in a second \
         ({raw} with those that began late after their grant, by {late:?} ms)",
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
    let grants = Grants::watch(db);
    let began = Instant::now();
    std::thread::sleep(Duration::from_millis(3_500));
    let (a, b) = (starts(db, "n < 100"), starts(db, "n >= 100"));
    let stats = worker.stats();
    worker.stop().unwrap();
    let grants = grants.stop();
    let elapsed = began.elapsed();
    eprintln!(
        "{}: in {elapsed:?}, {} starts of a, {} of b, {} claims of jobs",
        db.backend,
        a.len(),
        b.len(),
        stats.claimed_jobs
    );
    for (key, starts) in [("a", &a), ("b", &b)] {
        let (busiest, raw, late) = busiest_second(&grants, starts);
        assert!(
            busiest <= 10,
            "key {key}: {busiest} starts within a second \
             ({raw} with those that began late after their grant, by {late:?} ms)"
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
/// any second (less the margin, leaving out starts late after their grant,
/// see [`busiest_second`]). Jobs sent back are released when the
/// window opens, not at the next poll.
fn a_backlog_starts_its_full_rate_for_small_and_large_limits(db: &TestDb) {
    let full = |report: &[Rates]| report.iter().all(|(n, rate, ..)| *rate >= 0.95 * *n as f64);
    let mut report = backlog_rates(db);
    if !full(&report) {
        // Once more on a fresh database: right after the shared phase,
        // with the servers still vacuuming and purging what it left, CI
        // saw 93.9 a second at the limit of 100 once, with nothing beside
        // it (97.9-98.3 on an idle machine).
        eprintln!(
            "{}: below the full rate at the first attempt; once more",
            db.backend
        );
        report = backlog_rates(&db.another());
    }
    for (n, rate, ..) in report {
        assert!(
            rate >= 0.95 * n as f64,
            "limit {n}: {rate} starts a second, less than 0.95 × {n}"
        );
    }
}

/// Per limit: the limit, starts per second over [`PERIODS`], the most in
/// any second, the same with the starts that began late after their
/// grant, and how late those were (ms).
type Rates = (i64, f64, usize, usize, Vec<i64>);

/// One worker of 8 threads over a backlog of every paced kind: the
/// [`Rates`] of each, asserting that no second held more than its limit.
fn backlog_rates(db: &TestDb) -> Vec<Rates> {
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
    let grants = Grants::watch(db);
    let limits = [1i64, 2, 5, 100];
    wait_for("every limit's first start", Duration::from_secs(30), || {
        limits
            .iter()
            .all(|n| !starts(db, &format!("n = {n}")).is_empty())
    });
    let last_first = limits
        .iter()
        .map(|n| starts(db, &format!("n = {n}"))[0].at)
        .max()
        .unwrap();
    wait_for("ten periods", Duration::from_secs(60), || {
        common::now_us() > last_first + PERIODS * 1_000_000 + 200_000
    });
    let stats = worker.stats();
    worker.stop().unwrap();
    let grants = grants.stop();
    let mut report = Vec::new();
    for n in limits {
        let all = starts(db, &format!("n = {n}"));
        let first = all[0].at;
        let within = all
            .iter()
            .filter(|s| s.at < first + PERIODS * 1_000_000)
            .count();
        let rate = within as f64 / PERIODS as f64;
        let (busiest, raw, late) = busiest_second(&grants, &all);
        report.push((n, rate, busiest, raw, late));
    }
    eprintln!(
        "{}: (limit, starts per second over {PERIODS} s, most in any second, \
         with those that began late after their grant, by ms) {report:?}; {} claims",
        db.backend, stats.claimed_jobs
    );
    // Never more than the limit in any second, whatever the machine.
    for (n, _, busiest, raw, late) in &report {
        assert!(
            *busiest as i64 <= *n,
            "limit {n}: {busiest} starts within a second \
             ({raw} with those that began late after their grant, by {late:?} ms)"
        );
    }
    report
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
