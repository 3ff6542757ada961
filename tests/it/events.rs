//! Event hooks on both backends: a recording hook sees the right sequence
//! for a job that fails once then succeeds, one that fails for good, one
//! discarded at its limit, a stalled job released by an in-process
//! supervisor after its worker process was killed, and recurring ticks
//! fired by one scheduler and skipped by another.

use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use common::child::Child;
use common::jobs::{self, Echo, Fail, Flaky, LimitedDiscard, LimitedOne};
use common::recorder::{Event, Recorder};
use common::{TestDb, wait_for};
use serde_json::json;
use solidq::config::SupervisorConfig;
use solidq::events::{JobClaimed, PruneReason, RecurringFired, SkipReason};
use solidq::{Backoff, Dispatcher, EnqueueOptions, RecurringTask, Scheduler, Supervisor};

backend_tests!(
    a_job_failing_once_then_succeeding_reports_each_step,
    a_job_failing_for_good_reports_failed_to_the_workers_hooks,
    jobs_over_a_discard_limit_report_discarded_at_enqueue_and_dispatch,
    a_killed_workers_job_is_reported_stalled_then_runs_again,
    a_second_scheduler_reports_the_ticks_the_first_fired_as_skipped,
);

const WAIT: Duration = Duration::from_secs(30);

fn a_job_failing_once_then_succeeding_reports_each_step(db: &TestDb) {
    db.create_ledger();
    let recorder = Recorder::default();
    let queue = db.queue().with_events(recorder.clone());
    let retry_delay = Duration::from_millis(600);
    let id = queue
        .enqueue_with(
            &Flaky {
                url: db.url.clone(),
                fail_times: 1,
            },
            EnqueueOptions::new()
                .queue("events")
                .max_attempts(3)
                .backoff(Backoff::fixed(retry_delay)),
        )
        .unwrap();
    // The worker has no hooks of its own: it reports to its queue's.
    let worker = jobs::worker(queue.clone())
        .polling_interval(Duration::from_millis(50))
        .start()
        .unwrap();
    recorder.wait_until("the second attempt to succeed", WAIT, |r| {
        r.has(id, "succeeded")
    });
    let process_id = worker.process_id().unwrap();
    worker.stop().unwrap();

    assert_eq!(
        recorder.names_of_job(id),
        ["enqueued", "claimed", "retried", "claimed", "succeeded"]
    );
    let events = recorder.of_job(id);
    let Event::Enqueued(enqueued) = &events[0] else {
        unreachable!()
    };
    assert_eq!(
        (
            enqueued.kind.as_str(),
            enqueued.queue.as_str(),
            enqueued.run_at
        ),
        ("flaky", "events", None)
    );
    let claims: Vec<&JobClaimed> = events
        .iter()
        .filter_map(|e| match e {
            Event::Claimed(c) => Some(c),
            _ => None,
        })
        .collect();
    for (claim, attempt) in claims.iter().zip([1, 2]) {
        assert_eq!(claim.attempt, attempt);
        assert_eq!(
            (claim.kind.as_str(), claim.queue.as_str()),
            ("flaky", "events")
        );
        assert_eq!((claim.stalled_count, claim.process_id), (0, process_id));
        assert!(claim.wait < WAIT, "queue latency {:?}", claim.wait);
    }
    let Event::Retried(retried) = &events[2] else {
        unreachable!()
    };
    assert_eq!(
        (retried.attempt, retried.delay, retried.process_id),
        (1, retry_delay, process_id)
    );
    assert_eq!(
        (retried.error_kind.as_str(), retried.error.as_str()),
        ("flaky", "attempt 1 failed")
    );
    assert!(retried.run_time > Duration::ZERO);
    let Event::Succeeded(succeeded) = &events[4] else {
        unreachable!()
    };
    assert_eq!(
        (
            succeeded.attempt,
            succeeded.kind.as_str(),
            succeeded.queue.as_str()
        ),
        (2, "flaky", "events")
    );
    assert!(succeeded.run_time > Duration::ZERO);
    assert_eq!(succeeded.enqueued_at, claims[0].enqueued_at);
    // The retry became due `retry_delay` after the failure was recorded,
    // and the second claim's latency counts from then, not from the
    // enqueue (which would add the first run and the delay). The events
    // are timed when heard, each some time after its commit: half the
    // delay allows for the retry's being heard later than the claim's
    // (104 ms more once under .ci/run's load).
    let times = recorder.times_of_job(id);
    let after_due = (times[3] - times[2]).saturating_sub(retry_delay);
    assert!(
        claims[1].wait <= after_due + retry_delay / 2,
        "waited {:?}, claimed {after_due:?} after the retry was due",
        claims[1].wait
    );

    let registered = recorder.registered();
    assert!(
        registered.iter().any(|r| r.kind == "worker"
            && r.process_id == process_id
            && r.pid as u32 == std::process::id()),
        "{registered:?}"
    );
}

fn a_job_failing_for_good_reports_failed_to_the_workers_hooks(db: &TestDb) {
    let queue_hooks = Recorder::default();
    let worker_hooks = Recorder::default();
    let queue = db.queue().with_events(queue_hooks.clone());
    let id = queue
        .enqueue(&Fail {
            message: "no luck".into(),
        })
        .unwrap();
    let worker = jobs::worker(queue.clone())
        .events(worker_hooks.clone())
        .polling_interval(Duration::from_millis(50))
        .start()
        .unwrap();
    worker_hooks.wait_until("the job to fail", WAIT, |r| r.has(id, "failed"));
    worker.stop().unwrap();

    assert_eq!(queue_hooks.names_of_job(id), ["enqueued"]);
    assert_eq!(worker_hooks.names_of_job(id), ["claimed", "failed"]);
    let Event::Failed(failed) = &worker_hooks.of_job(id)[1] else {
        unreachable!()
    };
    assert_eq!(
        (
            failed.attempt,
            failed.kind.as_str(),
            failed.queue.as_str(),
            failed.error_kind.as_str(),
            failed.error.as_str()
        ),
        (1, "fail", "default", "test_failure", "no luck")
    );
    assert!(
        worker_hooks.registered().iter().any(|r| r.kind == "worker"),
        "the worker's own hooks hear of its registration"
    );
    assert!(queue_hooks.registered().is_empty());
}

fn jobs_over_a_discard_limit_report_discarded_at_enqueue_and_dispatch(db: &TestDb) {
    db.create_ledger();
    let recorder = Recorder::default();
    let queue = db.queue().with_events(recorder.clone());
    let job = || LimitedDiscard {
        url: db.url.clone(),
        n: 1,
        sleep_ms: 0,
        key: "k".into(),
    };
    // Nobody runs the first: it keeps the key's only slot.
    let first = queue.enqueue(&job()).unwrap();
    let second = queue.enqueue(&job()).unwrap();
    let before = Utc::now();
    let delayed = queue
        .enqueue_with(
            &job(),
            EnqueueOptions::new().delay(Duration::from_millis(100)),
        )
        .unwrap();
    assert_eq!(recorder.names_of_job(first), ["enqueued"]);
    assert_eq!(recorder.names_of_job(second), ["enqueued", "discarded"]);
    let Event::Discarded(discarded) = &recorder.of_job(second)[1] else {
        unreachable!()
    };
    assert_eq!(
        (
            discarded.kind.as_str(),
            discarded.queue.as_str(),
            discarded.concurrency_key.as_str(),
            discarded.limit
        ),
        ("limited_discard", "default", "limited_discard/k", 1)
    );
    let Event::Enqueued(enqueued) = &recorder.of_job(delayed)[0] else {
        unreachable!()
    };
    assert!(
        enqueued
            .run_at
            .is_some_and(|at| at >= before + chrono::Duration::milliseconds(100)),
        "{enqueued:?}"
    );

    // The delayed one is discarded when it comes due; a dispatcher built
    // from the queue reports to the queue's hooks.
    let dispatcher = Dispatcher::new(queue.clone());
    wait_for("the delayed job to be discarded", WAIT, || {
        dispatcher.run_once().unwrap();
        recorder.has(delayed, "discarded")
    });
    assert_eq!(recorder.names_of_job(delayed), ["enqueued", "discarded"]);

    // A duplicate is not a new job.
    let keyed = || EnqueueOptions::new().unique_key("once");
    let echo = Echo { value: json!(1) };
    let id = queue.enqueue_or_existing(&echo, keyed()).unwrap().id();
    assert!(!queue.enqueue_or_existing(&echo, keyed()).unwrap().is_new());
    assert_eq!(recorder.names_of_job(id), ["enqueued"]);
}

fn a_killed_workers_job_is_reported_stalled_then_runs_again(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    // It sleeps on its first run only: a rerun after a stall ends at once.
    let id = queue
        .enqueue(&LimitedOne {
            url: db.url.clone(),
            n: 1,
            sleep_ms: 60_000,
            key: "stall".into(),
        })
        .unwrap();
    let mut child = Child::worker(&db.url, &[("SOLIDQ_TEST_THREADS", "1")]);
    wait_for("the worker process to start the job", WAIT, || {
        db.scalar(&format!(
            "SELECT count(*) AS v FROM test_ledger WHERE job_id = {id} AND event = 'start'"
        )) == 1
    });
    let child_row = db.scalar("SELECT id AS v FROM solidq_processes WHERE kind = 'worker'");
    child.signal(libc::SIGKILL);
    child.wait_timeout(WAIT).expect("the killed worker to exit");

    let supervisor_hooks = Recorder::default();
    let config = SupervisorConfig::parse(
        &format!(
            r#"
database_url = "{url}"
heartbeat_interval = "200ms"
process_alive_threshold = "1s"
shutdown_timeout = "1s"
"#,
            url = db.url
        ),
        "test",
    )
    .unwrap();
    let supervisor = Supervisor::new(config)
        .events(supervisor_hooks.clone())
        .start()
        .unwrap();
    // The release's two events, the job's stall and its process's prune,
    // are told one after the other once its transaction commits: wait for
    // both (woken at the first, the test would read the list between them).
    supervisor_hooks.wait_until("the supervisor to release the job", WAIT, |r| {
        r.has(id, "stalled") && r.all().iter().any(|e| e.name() == "pruned")
    });
    let released_seen = Instant::now();
    let events = supervisor_hooks.all();
    let names: Vec<_> = events.iter().map(Event::name).collect();
    assert_eq!(names, ["registered", "stalled", "pruned"], "{events:?}");
    let Event::Registered(registered) = &events[0] else {
        unreachable!()
    };
    assert_eq!(
        (registered.kind.as_str(), registered.process_id),
        ("supervisor", supervisor.process_id())
    );
    let Event::Stalled(stalled) = &events[1] else {
        unreachable!()
    };
    assert_eq!(
        (
            stalled.kind.as_str(),
            stalled.queue.as_str(),
            stalled.process_id,
            stalled.stalled_count,
            stalled.failed.as_deref()
        ),
        ("limited_one", "default", child_row, 1, None)
    );
    let Event::Pruned(pruned) = &events[2] else {
        unreachable!()
    };
    assert_eq!(
        (
            pruned.process_id,
            pruned.kind.as_str(),
            pruned.pid as u32,
            pruned.reason,
            pruned.released,
            pruned.failed
        ),
        (
            child_row,
            "worker",
            child.pid(),
            PruneReason::HeartbeatExpired,
            1,
            0
        )
    );

    // The job runs again, on this process's worker.
    let worker_hooks = Recorder::default();
    let worker = jobs::worker(queue.clone())
        .events(worker_hooks.clone())
        .polling_interval(Duration::from_millis(50))
        .start()
        .unwrap();
    worker_hooks.wait_until("the job to run again", WAIT, |r| r.has(id, "succeeded"));
    let since_release = released_seen.elapsed();
    let process_id = worker.process_id().unwrap();
    worker.stop().unwrap();
    supervisor.stop().unwrap();

    assert_eq!(worker_hooks.names_of_job(id), ["claimed", "succeeded"]);
    let Event::Claimed(claimed) = &worker_hooks.of_job(id)[0] else {
        unreachable!()
    };
    // A stall does not use an attempt.
    assert_eq!(
        (claimed.attempt, claimed.stalled_count, claimed.process_id),
        (1, 1, process_id)
    );
    // Its queue latency counts from its release, not from its enqueue
    // (which was more than the alive threshold earlier).
    assert!(
        claimed.wait <= since_release + Duration::from_millis(500),
        "waited {:?}, released {since_release:?} ago",
        claimed.wait
    );
    let Event::Succeeded(succeeded) = &worker_hooks.of_job(id)[1] else {
        unreachable!()
    };
    assert_eq!((succeeded.attempt, succeeded.process_id), (1, process_id));
    assert!(
        worker_hooks
            .registered()
            .iter()
            .any(|r| r.kind == "worker" && r.process_id == process_id)
    );
    assert_eq!(db.count("solidq_processes"), 0, "both deregistered");
}

fn a_second_scheduler_reports_the_ticks_the_first_fired_as_skipped(db: &TestDb) {
    let queue = db.queue();
    let task = RecurringTask::new(
        "every_second",
        "* * * * * ?",
        &Echo {
            value: json!("tick"),
        },
    )
    .unwrap();
    let (one, two) = (Recorder::default(), Recorder::default());
    let first = Scheduler::new(queue.clone())
        .task(task.clone())
        .events(one.clone())
        .heartbeat_interval(Duration::from_millis(200))
        .start()
        .unwrap();
    let fired = |recorder: &Recorder| -> Vec<RecurringFired> {
        recorder
            .all()
            .into_iter()
            .filter_map(|e| match e {
                Event::Fired(f) => Some(f),
                _ => None,
            })
            .collect()
    };
    one.wait_until("a tick to fire", WAIT, |r| !fired(r).is_empty());
    let tick = fired(&one)[0].clone();
    assert_eq!(
        (
            tick.task_key.as_str(),
            tick.kind.as_str(),
            tick.queue.as_str()
        ),
        ("every_second", "echo", "default")
    );
    assert_eq!(queue.job(tick.job_id).unwrap().kind, "echo");
    assert_eq!(one.names_of_job(tick.job_id), ["enqueued"]);
    assert!(one.registered().iter().any(|r| r.kind == "scheduler"));

    // Per tick, what each scheduler reported: fired or skipped.
    let reports = |recorder: &Recorder| -> HashMap<DateTime<Utc>, Vec<&'static str>> {
        let mut by_tick: HashMap<DateTime<Utc>, Vec<&'static str>> = HashMap::new();
        for event in recorder.all() {
            match event {
                Event::Fired(f) => by_tick.entry(f.run_at).or_default().push("fired"),
                Event::Skipped(s) => {
                    assert_eq!(
                        (s.reason, s.ticks, s.through),
                        (SkipReason::FiredElsewhere, 1, s.run_at)
                    );
                    by_tick.entry(s.run_at).or_default().push("skipped")
                }
                _ => {}
            }
        }
        by_tick
    };
    let second = Scheduler::new(queue.clone())
        .task(task)
        .events(two.clone())
        .heartbeat_interval(Duration::from_millis(200))
        .start()
        .unwrap();
    let both = || {
        let (a, b) = (reports(&one), reports(&two));
        a.keys().filter(|t| b.contains_key(t)).count()
    };
    wait_for("three ticks seen by both schedulers", WAIT, || both() >= 3);
    first.stop().unwrap();
    second.stop().unwrap();

    let (a, b) = (reports(&one), reports(&two));
    let mut ticks: BTreeMap<DateTime<Utc>, Vec<&'static str>> = BTreeMap::new();
    for (tick, seen) in a.iter().chain(b.iter()) {
        assert_eq!(seen.len(), 1, "a scheduler reports each tick once");
        ticks.entry(*tick).or_default().extend(seen);
    }
    let mut in_both = 0;
    for (tick, seen) in &ticks {
        assert_eq!(
            seen.iter().filter(|s| **s == "fired").count(),
            1,
            "tick {tick} fired once: {seen:?}"
        );
        if seen.len() == 2 {
            in_both += 1;
            assert!(seen.contains(&"skipped"), "tick {tick}: {seen:?}");
        }
    }
    assert!(in_both >= 3);
    let fired_ids: Vec<i64> = fired(&one)
        .into_iter()
        .chain(fired(&two))
        .map(|f| f.job_id)
        .collect();
    assert_eq!(
        db.count("solidq_recurring_executions") as usize,
        fired_ids.len(),
        "one fired event per tick row"
    );
    assert_eq!(db.count("solidq_jobs") as usize, fired_ids.len());
}
