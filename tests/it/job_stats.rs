//! Job statistics, on both backends: a worker counts every outcome it
//! records with its queue and kind (succeeded, failed, retried, snoozed,
//! discarded) and writes them at its heartbeats and when it stops; a job
//! whose worker was SIGKILLed is counted as stalled by whoever releases
//! it; folding old minutes into the totals rows deletes them and leaves
//! every total as it was, by hand and in the cleaner's round; waiting jobs
//! an operator discards are counted too (their queue and kind stay known).

use crate::common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use chrono::Utc;
use common::child::Child;
use common::jobs::{self, CustomBackoff, Echo, Fail, Ledger, Sleep};
use common::{TestDb, wait_for};
use serde::{Deserialize, Serialize};
use solidq::config::JOB_STATS_RETENTION;
use solidq::{
    Dispatcher, DispatcherConfig, EnqueueOptions, Job, JobContext, JobError, JobOptions, JobResult,
    JobStatus, Queue, WorkerConfig,
};

backend_tests!(
    outcomes_are_counted_with_queue_and_kind_when_the_worker_stops,
    a_running_worker_writes_its_counts_at_its_heartbeats,
    a_drain_counts_what_it_ran,
    a_job_whose_worker_was_killed_is_counted_as_stalled,
    folding_deletes_old_minutes_and_keeps_every_total,
    the_cleaner_folds_minutes_older_than_a_day,
    an_operator_discarding_waiting_jobs_counts_them,
);

const WAIT: Duration = Duration::from_secs(30);

/// Snoozes once, then succeeds.
#[derive(Serialize, Deserialize)]
struct SnoozeOnce;

impl Job for SnoozeOnce {
    const KIND: &'static str = "snooze_once";
    fn perform(&self, ctx: &JobContext) -> JobResult {
        if ctx.snoozes() == 0 {
            return Err(JobError::snooze(Duration::ZERO));
        }
        Ok(serde_json::Value::Null)
    }
    fn options() -> JobOptions {
        JobOptions::new().max_attempts(1)
    }
}

/// Runs until an operator cancels it, then returns an error (recorded as
/// discarded).
#[derive(Serialize, Deserialize)]
struct UntilCancelled;

impl Job for UntilCancelled {
    const KIND: &'static str = "until_cancelled";
    fn perform(&self, ctx: &JobContext) -> JobResult {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !ctx.is_cancelled_by_operator() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        Err(JobError::interrupted())
    }
}

/// (queue, kind, outcome) → (jobs, wait_ms, run_ms), from the totals.
fn totals(queue: &Queue) -> BTreeMap<(String, String, String), (u64, u64, u64)> {
    queue
        .job_totals()
        .unwrap()
        .into_iter()
        .map(|c| ((c.queue, c.kind, c.outcome), (c.jobs, c.wait_ms, c.run_ms)))
        .collect()
}

fn jobs_of(
    counts: &BTreeMap<(String, String, String), (u64, u64, u64)>,
) -> BTreeMap<(&str, &str, &str), u64> {
    counts
        .iter()
        .map(|((q, k, o), (jobs, _, _))| ((q.as_str(), k.as_str(), o.as_str()), *jobs))
        .collect()
}

fn on(queue: &str) -> EnqueueOptions {
    EnqueueOptions::new().queue(queue)
}

fn outcomes_are_counted_with_queue_and_kind_when_the_worker_stops(db: &TestDb) {
    let queue = db.queue();
    for n in 0..3 {
        queue
            .enqueue_with(&Echo { value: n.into() }, on("mail"))
            .unwrap();
    }
    queue.enqueue_with(&Sleep { ms: 300 }, on("mail")).unwrap();
    for n in 0..2 {
        queue
            .enqueue_with(
                &Fail {
                    message: format!("boom {n}"),
                },
                on("billing"),
            )
            .unwrap();
    }
    let retrying = queue.enqueue_with(&CustomBackoff, on("billing")).unwrap();
    let snoozing = queue.enqueue(&SnoozeOnce).unwrap();
    let cancelled = queue.enqueue(&UntilCancelled).unwrap();
    // Every job waits at least this long for the worker.
    std::thread::sleep(Duration::from_millis(250));
    let worker = jobs::worker(queue.clone())
        .register::<SnoozeOnce>()
        .register::<UntilCancelled>()
        .config(WorkerConfig {
            threads: 4,
            // No heartbeat during the test: the counts are written at the stop.
            heartbeat_interval: Duration::from_secs(60),
            process_alive_threshold: Duration::from_secs(300),
            polling_interval: Duration::from_millis(50),
            ..WorkerConfig::default()
        })
        .start()
        .unwrap();
    wait_for("the cancellable job to run", WAIT, || {
        queue.job(cancelled).unwrap().status == JobStatus::Running
    });
    assert_eq!(queue.cancel_job(cancelled, "test").unwrap().stopping, 1);
    wait_for("every job to end", WAIT, || {
        [retrying, snoozing, cancelled].iter().all(|id| {
            matches!(
                queue.job(*id).unwrap().status,
                JobStatus::Failed | JobStatus::Succeeded | JobStatus::Discarded
            )
        }) && queue
            .queues()
            .unwrap()
            .iter()
            .all(|q| q.ready + q.running == 0)
    });
    assert!(
        queue.job_totals().unwrap().is_empty(),
        "nothing written before a heartbeat or the stop"
    );
    worker.stop().unwrap();

    let counts = totals(&queue);
    assert_eq!(
        jobs_of(&counts),
        BTreeMap::from([
            (("billing", "custom_backoff", "failed"), 1),
            (("billing", "custom_backoff", "retried"), 2),
            (("billing", "fail", "failed"), 2),
            (("default", "snooze_once", "snoozed"), 1),
            (("default", "snooze_once", "succeeded"), 1),
            (("default", "until_cancelled", "discarded"), 1),
            (("mail", "echo", "succeeded"), 3),
            (("mail", "sleep", "succeeded"), 1),
        ])
    );
    let key = |q: &str, k: &str, o: &str| counts[&(q.to_string(), k.to_string(), o.to_string())];
    let (_, wait_ms, run_ms) = key("mail", "sleep", "succeeded");
    assert!(run_ms >= 300, "the sleep's run time: {run_ms} ms");
    assert!(wait_ms >= 250, "its wait for the worker: {wait_ms} ms");
    let (jobs, wait_ms, _) = key("mail", "echo", "succeeded");
    assert!(wait_ms >= 250 * jobs, "echo waits: {wait_ms} ms");
    let (_, wait_ms, run_ms) = key("default", "until_cancelled", "discarded");
    assert!(run_ms > 0 && wait_ms < 60_000, "{wait_ms} {run_ms}");

    // The same counts, per minute.
    let series = queue
        .job_series(Utc::now() - chrono::Duration::hours(1))
        .unwrap();
    let mut per_key: BTreeMap<(String, String, String), u64> = BTreeMap::new();
    for bucket in &series {
        assert_eq!(bucket.bucket.timestamp() % 60, 0, "a minute's start");
        assert!(bucket.bucket > Utc::now() - chrono::Duration::minutes(5));
        *per_key
            .entry((
                bucket.queue.clone(),
                bucket.kind.clone(),
                bucket.outcome.clone(),
            ))
            .or_default() += bucket.jobs;
    }
    let total_jobs: BTreeMap<_, _> = counts.iter().map(|(k, v)| (k.clone(), v.0)).collect();
    assert_eq!(per_key, total_jobs);
    assert!(
        queue
            .job_series(Utc::now() + chrono::Duration::minutes(2))
            .unwrap()
            .is_empty(),
        "nothing in the future"
    );
    let json = serde_json::to_value(&series[0]).unwrap();
    assert!(
        json["bucket"].is_string() && json["jobs"].is_u64(),
        "{json}"
    );
}

fn a_running_worker_writes_its_counts_at_its_heartbeats(db: &TestDb) {
    let queue = db.queue();
    let worker = jobs::worker(queue.clone())
        .config(WorkerConfig {
            heartbeat_interval: Duration::from_millis(200),
            process_alive_threshold: Duration::from_secs(5),
            polling_interval: Duration::from_millis(50),
            ..WorkerConfig::default()
        })
        .start()
        .unwrap();
    let ids: Vec<i64> = (0..20)
        .map(|n| queue.enqueue(&Echo { value: n.into() }).unwrap())
        .collect();
    wait_for("the counts, while the worker runs", WAIT, || {
        jobs_of(&totals(&queue)).get(&("default", "echo", "succeeded")) == Some(&20)
    });
    for id in ids {
        assert_eq!(queue.job(id).unwrap().status, JobStatus::Succeeded);
    }
    worker.stop().unwrap();
    assert_eq!(
        jobs_of(&totals(&queue)),
        BTreeMap::from([(("default", "echo", "succeeded"), 20)]),
        "the stop adds nothing twice"
    );
}

fn a_drain_counts_what_it_ran(db: &TestDb) {
    let queue = db.queue();
    queue.enqueue(&Echo { value: 1.into() }).unwrap();
    queue
        .enqueue(&Fail {
            message: "no".into(),
        })
        .unwrap();
    let drained = jobs::worker(queue.clone()).drain().unwrap();
    assert_eq!((drained.succeeded, drained.failed), (1, 1));
    assert_eq!(
        jobs_of(&totals(&queue)),
        BTreeMap::from([
            (("default", "echo", "succeeded"), 1),
            (("default", "fail", "failed"), 1),
        ])
    );
}

fn a_job_whose_worker_was_killed_is_counted_as_stalled(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let victim = Child::worker(&db.url, &[("SOLIDQ_TEST_ALIVE_MS", "1000")]);
    let id = queue
        .enqueue_with(
            &Ledger {
                url: db.url.clone(),
                n: 1,
                sleep_ms: 60_000,
            },
            on("reports"),
        )
        .unwrap();
    wait_for("the job to start", WAIT, || {
        queue.job(id).unwrap().status == JobStatus::Running
    });
    victim.signal(libc::SIGKILL);
    let dispatcher = Dispatcher::new(queue.clone())
        .config(DispatcherConfig {
            heartbeat_interval: Duration::from_millis(200),
            process_alive_threshold: Duration::from_secs(1),
            ..DispatcherConfig::default()
        })
        .start()
        .unwrap();
    wait_for("the dead worker's job to be released", WAIT, || {
        queue.job(id).unwrap().status == JobStatus::Ready
    });
    dispatcher.stop().unwrap();
    assert_eq!(queue.job(id).unwrap().stalled_count, 1);
    assert_eq!(
        jobs_of(&totals(&queue)),
        BTreeMap::from([(("reports", "ledger", "stalled"), 1)]),
        "counted by the release, in its transaction"
    );
    let series = queue
        .job_series(Utc::now() - chrono::Duration::minutes(5))
        .unwrap();
    assert_eq!(series.len(), 1);
    assert_eq!((series[0].outcome.as_str(), series[0].jobs), ("stalled", 1));
    drop(victim);
}

/// `minutes` ago, as a bucket literal both backends read as a timestamp.
fn bucket_ago(minutes: i64) -> String {
    let t = Utc::now().naive_utc() - chrono::Duration::minutes(minutes);
    format!("{}", t.format("%Y-%m-%d %H:%M:00"))
}

fn insert(db: &TestDb, bucket: &str, kind: &str, outcome: &str, jobs: i64) {
    db.execute(&format!(
        "INSERT INTO solidq_job_stats (bucket, queue_name, kind, outcome, jobs, wait_ms, run_ms)
         VALUES ('{bucket}', 'default', '{kind}', '{outcome}', {jobs}, {wait}, {run})",
        wait = jobs * 10,
        run = jobs * 3,
    ));
}

fn stats_rows(db: &TestDb) -> i64 {
    db.count("solidq_job_stats")
}

fn folding_deletes_old_minutes_and_keeps_every_total(db: &TestDb) {
    let queue = db.queue();
    let day = 24 * 60;
    insert(db, &bucket_ago(3 * day), "mail", "succeeded", 5);
    insert(db, &bucket_ago(2 * day), "mail", "succeeded", 7);
    insert(db, &bucket_ago(2 * day), "mail", "failed", 1);
    insert(db, &bucket_ago(day + 5), "sms", "succeeded", 2);
    insert(db, &bucket_ago(10), "mail", "succeeded", 11);
    insert(db, &bucket_ago(1), "sms", "stalled", 1);
    let before = totals(&queue);
    assert_eq!(
        before[&("default".into(), "mail".into(), "succeeded".into())],
        (23, 230, 69)
    );

    assert_eq!(queue.fold_job_stats(JOB_STATS_RETENTION).unwrap(), 4);
    assert_eq!(totals(&queue), before, "every total unchanged");
    assert_eq!(
        stats_rows(db),
        3 + 2,
        "three totals rows and the two recent minutes"
    );
    let epoch_rows = db
        .scalar("SELECT count(*) AS v FROM solidq_job_stats WHERE bucket = '1970-01-01 00:00:00'");
    assert_eq!(epoch_rows, 3, "one per queue, kind and outcome folded");
    let series = queue
        .job_series(Utc::now() - chrono::Duration::days(7))
        .unwrap();
    let listed: Vec<(&str, &str, u64)> = series
        .iter()
        .map(|b| (b.kind.as_str(), b.outcome.as_str(), b.jobs))
        .collect();
    assert_eq!(
        listed,
        [("mail", "succeeded", 11), ("sms", "stalled", 1)],
        "folded minutes and totals rows are not in the series"
    );

    // Nothing old left: nothing folded, nothing changed.
    assert_eq!(queue.fold_job_stats(JOB_STATS_RETENTION).unwrap(), 0);
    assert_eq!(totals(&queue), before);

    // More old minutes add to the existing totals rows.
    insert(db, &bucket_ago(2 * day), "mail", "succeeded", 100);
    let expected = totals(&queue);
    assert_eq!(
        expected[&("default".into(), "mail".into(), "succeeded".into())].0,
        123
    );
    assert_eq!(queue.fold_job_stats(JOB_STATS_RETENTION).unwrap(), 1);
    assert_eq!(totals(&queue), expected);
    // Folding everything but the last minute keeps the totals too.
    assert_eq!(
        queue.fold_job_stats(Duration::from_secs(5 * 60)).unwrap(),
        1
    );
    assert_eq!(totals(&queue), expected);
    assert_eq!(stats_rows(db), 3 + 1, "the totals rows and the last minute");
}

fn the_cleaner_folds_minutes_older_than_a_day(db: &TestDb) {
    let queue = db.queue();
    insert(db, &bucket_ago(3 * 24 * 60), "mail", "succeeded", 5);
    insert(db, &bucket_ago(2), "mail", "succeeded", 1);
    let before = totals(&queue);
    // A standalone worker runs the cleaner at once, then every heartbeat.
    let worker = jobs::worker(queue.clone())
        .config(WorkerConfig {
            heartbeat_interval: Duration::from_millis(200),
            ..WorkerConfig::default()
        })
        .start()
        .unwrap();
    wait_for("the old minute to be folded", WAIT, || {
        db.scalar(
            "SELECT count(*) AS v FROM solidq_job_stats
             WHERE bucket > '1970-01-01 00:00:00' AND queue_name = 'default' AND jobs = 5",
        ) == 0
    });
    worker.stop().unwrap();
    assert_eq!(totals(&queue), before);
    assert_eq!(stats_rows(db), 2, "the totals row and the recent minute");
}

/// Jobs discarded by an operator before any worker took them are counted
/// as discarded, in the cancel's transaction: the statistics keep every
/// queue and kind of a job that ended, which is what the names operators
/// type are checked against (issue 26 item 3).
fn an_operator_discarding_waiting_jobs_counts_them(db: &TestDb) {
    let queue = db.queue();
    let later = || {
        EnqueueOptions::new()
            .queue("mail")
            .delay(Duration::from_secs(3600))
    };
    let ids: Vec<i64> = (0..2)
        .map(|n| {
            queue
                .enqueue_with(&Echo { value: n.into() }, later())
                .unwrap()
        })
        .collect();
    let done = queue
        .cancel_jobs(&solidq::JobFilter::new().queue("mail"), "not needed")
        .unwrap();
    assert_eq!(done.discarded, 2);
    assert_eq!(
        jobs_of(&totals(&queue)),
        BTreeMap::from([(("mail", "echo", "discarded"), 2)])
    );
    assert!(queue.queues().unwrap().iter().any(|q| q.name == "mail"));
    assert!(queue.known_names().unwrap().has_queue("mail"));
    assert_eq!(queue.job(ids[0]).unwrap().status, JobStatus::Discarded);
}
