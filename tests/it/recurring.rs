//! Recurring tasks on both backends, with real scheduler processes: every
//! tick fires exactly once across three schedulers, also when one is killed
//! and restarted, and also when the tick's job was deleted before a lagging
//! scheduler or `run_recurring` tried it again; missed ticks are not
//! back-filled; the cleaner ages tick guards out, keeping each task's
//! latest; a tick's job is created by the database's clock at or after its
//! tick; the tasks table mirrors the configuration; NUL is refused at
//! configuration; the supervisor runs `[recurring.*]`.

use crate::common;

use std::time::Duration;

use common::child::Child;
use common::jobs::{self, Echo};
use common::recorder::{Event, Recorder};
use common::{TestDb, wait_for};
use serde_json::json;
use solidq::config::{RECURRING_GUARD_RETENTION, SupervisorConfig};
use solidq::{Backend, Error, JobStatus, Queue, QueueConfig, RecurringTask, Scheduler};

backend_tests!(
    three_schedulers_fire_every_second_exactly_once,
    a_scheduler_killed_and_restarted_midway_neither_skips_nor_doubles,
    a_lagging_scheduler_does_not_fire_again_a_tick_whose_job_was_deleted,
    run_recurring_in_the_same_second_does_not_fire_again_a_tick_whose_job_was_deleted,
    the_cleaner_ages_tick_guards_out_but_keeps_each_tasks_latest,
    every_tick_job_is_created_at_or_after_its_tick_by_the_database_clock,
    ticks_missed_while_no_scheduler_ran_are_not_backfilled,
    the_tasks_table_mirrors_the_configuration,
    nul_in_a_recurring_task_is_refused_at_configuration_naming_the_value,
    a_tick_enqueues_the_task_job_with_its_settings,
    the_supervisor_runs_recurring_tasks_from_its_file,
);

const EVERY_SECOND: &str = "* * * * * ?";

/// SQL for timestamp `column` in epoch seconds.
fn epoch(db: &TestDb, column: &str) -> String {
    match db.backend {
        Backend::Postgres => format!("CAST(EXTRACT(EPOCH FROM {column}) AS BIGINT)"),
        Backend::Sqlite => format!("CAST(strftime('%s', {column}) AS INTEGER)"),
        Backend::Mysql => format!("CAST(UNIX_TIMESTAMP({column}) AS SIGNED)"),
    }
}

/// The run times of `task`'s ticks, in epoch seconds, in order.
fn ticks(db: &TestDb, task: &str) -> Vec<i64> {
    db.column_of(&format!(
        "SELECT {} AS v FROM solidq_recurring_executions WHERE task_key = '{task}' ORDER BY run_at",
        epoch(db, "run_at")
    ))
}

/// The tick guards of `task` after epoch second `after`: (tick, job id).
fn guards_after(db: &TestDb, task: &str, after: i64) -> Vec<(i64, i64)> {
    let filter = format!(
        "FROM solidq_recurring_executions WHERE task_key = '{task}' AND {} > {after} ORDER BY run_at",
        epoch(db, "run_at")
    );
    let at = db.column_of(&format!("SELECT {} AS v {filter}", epoch(db, "run_at")));
    let ids = db.column_of(&format!("SELECT job_id AS v {filter}"));
    at.into_iter().zip(ids).collect()
}

/// Jobs that still exist among those of `guards`.
fn jobs_left(db: &TestDb, guards: &[(i64, i64)]) -> i64 {
    if guards.is_empty() {
        return 0;
    }
    let ids: Vec<String> = guards.iter().map(|(_, id)| id.to_string()).collect();
    db.scalar(&format!(
        "SELECT count(*) AS v FROM solidq_jobs WHERE id IN ({})",
        ids.join(", ")
    ))
}

/// A queue whose jobs are deleted as they finish (`keep_result` 0).
fn keeping_nothing(db: &TestDb) -> Queue {
    db.queue_with(QueueConfig {
        keep_result: Duration::ZERO,
        ..QueueConfig::default()
    })
}

fn echo_task(key: &str, schedule: &str) -> RecurringTask {
    RecurringTask::new(key, schedule, &Echo { value: json!(key) }).unwrap()
}

/// Every tick's job exists, and no other job was enqueued (a scheduler
/// that lost a race left nothing behind).
fn assert_one_job_per_tick(db: &TestDb, task: &str) {
    let ticks = db.scalar(&format!(
        "SELECT count(*) AS v FROM solidq_recurring_executions WHERE task_key = '{task}'"
    ));
    let jobs = db.scalar("SELECT count(*) AS v FROM solidq_jobs");
    let joined = db.scalar(&format!(
        "SELECT count(*) AS v FROM solidq_recurring_executions r JOIN solidq_jobs j ON j.id = r.job_id
         WHERE r.task_key = '{task}'"
    ));
    assert_eq!(
        (jobs, joined),
        (ticks, ticks),
        "one job per tick, no strays"
    );
}

/// Consecutive ticks one second apart, but for the gaps listed.
fn assert_consecutive(ticks: &[i64], allowed_gaps: usize) {
    let gaps: Vec<(i64, i64)> = ticks
        .windows(2)
        .filter(|w| w[1] - w[0] != 1)
        .map(|w| (w[0], w[1]))
        .collect();
    assert!(
        ticks.windows(2).all(|w| w[1] > w[0]),
        "every run_at once: {ticks:?}"
    );
    assert_eq!(gaps.len(), allowed_gaps, "gaps {gaps:?} in {ticks:?}");
}

fn wait_ticks(db: &TestDb, task: &str, n: usize) {
    wait_for(
        &format!("{n} ticks of {task}"),
        Duration::from_secs(60),
        || ticks(db, task).len() >= n,
    );
}

fn stop(mut child: Child) -> String {
    child.signal(libc::SIGTERM);
    let status = child.wait_timeout(Duration::from_secs(30));
    assert!(
        status.is_some_and(|s| s.success()),
        "{status:?}: {}",
        child.logs()
    );
    child.logs()
}

/// How many ticks the logs say were fired, and lost to another scheduler.
fn fired_and_lost(logs: &[String]) -> (usize, usize) {
    let count = |needle: &str| logs.iter().map(|l| l.matches(needle).count()).sum();
    (
        count(" fired for "),
        count("was fired by another scheduler"),
    )
}

fn three_schedulers_fire_every_second_exactly_once(db: &TestDb) {
    db.queue();
    let schedulers: Vec<Child> = (0..3)
        .map(|_| Child::scheduler(&db.url, "tick", EVERY_SECOND))
        .collect();
    wait_ticks(db, "tick", 6);
    let logs: Vec<String> = schedulers.into_iter().map(stop).collect();

    let ticks = ticks(db, "tick");
    assert_consecutive(&ticks, 0);
    assert_one_job_per_tick(db, "tick");
    let (fired, lost) = fired_and_lost(&logs);
    assert_eq!(fired, ticks.len(), "each tick fired by one scheduler");
    assert!(
        lost >= ticks.len(),
        "the others lost their races: {lost} losses for {} ticks",
        ticks.len()
    );
    assert_eq!(
        db.count("solidq_processes"),
        0,
        "every scheduler deregistered"
    );
}

fn a_scheduler_killed_and_restarted_midway_neither_skips_nor_doubles(db: &TestDb) {
    db.queue();
    let mut schedulers: Vec<Child> = (0..3)
        .map(|_| Child::scheduler(&db.url, "tick", EVERY_SECOND))
        .collect();
    wait_ticks(db, "tick", 3);
    let victim = schedulers.remove(0);
    victim.signal(libc::SIGKILL);
    drop(victim);
    wait_ticks(db, "tick", 5);
    schedulers.push(Child::scheduler(&db.url, "tick", EVERY_SECOND));
    wait_ticks(db, "tick", 8);
    for child in schedulers {
        stop(child);
    }
    let ticks = ticks(db, "tick");
    assert_consecutive(&ticks, 0);
    assert_one_job_per_tick(db, "tick");
}

/// The once-per-tick guard outlives the tick's job: a scheduler frozen
/// while another fires its ticks, whose jobs run and are deleted at once
/// (`keep_result` 0), catches up without firing any of those ticks again.
fn a_lagging_scheduler_does_not_fire_again_a_tick_whose_job_was_deleted(db: &TestDb) {
    let queue = keeping_nothing(db);
    // Slow heartbeats: frozen inside an SQLite write, it would lock out
    // everybody else.
    let lagging = Child::scheduler_with(
        &db.url,
        "tick",
        EVERY_SECOND,
        &[("SOLIDQ_TEST_HEARTBEAT_MS", "10000")],
    );
    wait_ticks(db, "tick", 1);
    // Frozen right after its first tick, while it waits for the next.
    lagging.signal(libc::SIGSTOP);
    let frozen_after = *ticks(db, "tick").last().unwrap();
    let worker = jobs::worker(queue.clone())
        .polling_interval(Duration::from_millis(50))
        .start()
        .unwrap();
    let recorder = Recorder::default();
    let punctual = Scheduler::new(queue.clone())
        .task(echo_task("tick", EVERY_SECOND))
        .events(recorder.clone())
        .start()
        .unwrap();
    // What it fired: (tick, job id).
    let fired = || -> Vec<(i64, i64)> {
        recorder
            .all()
            .into_iter()
            .filter_map(|e| match e {
                Event::Fired(f) => Some((f.run_at.timestamp(), f.job_id)),
                _ => None,
            })
            .collect()
    };
    wait_for(
        "three ticks fired and their jobs deleted",
        Duration::from_secs(60),
        || fired().len() >= 3 && jobs_left(db, &fired()) == 0,
    );
    punctual.stop().unwrap();
    let fired = fired();
    wait_for(
        "every job of those ticks deleted",
        Duration::from_secs(30),
        || jobs_left(db, &fired) == 0,
    );
    let last = fired.last().unwrap().0;

    lagging.signal(libc::SIGCONT);
    wait_for(
        "the lagging scheduler to catch up past those ticks",
        Duration::from_secs(60),
        || ticks(db, "tick").last().is_some_and(|&t| t > last),
    );
    let logs = stop(lagging);
    worker.stop().unwrap();

    let now: Vec<(i64, i64)> = guards_after(db, "tick", frozen_after)
        .into_iter()
        .filter(|&(at, _)| at <= last)
        .collect();
    let fired_ticks: Vec<i64> = fired.iter().map(|&(at, _)| at).collect();
    let refired: Vec<&(i64, i64)> = now
        .iter()
        .filter(|(at, id)| fired_ticks.contains(at) && !fired.contains(&(*at, *id)))
        .collect();
    assert!(
        refired.is_empty(),
        "ticks fired again after their jobs were deleted (tick, new job): {refired:?}; first fired as {fired:?}"
    );
    for guard in &fired {
        assert!(now.contains(guard), "guard {guard:?} is gone: {now:?}");
    }
    let (_, lost) = fired_and_lost(&[logs]);
    assert!(
        lost >= fired.len(),
        "the lagging scheduler found {} ticks fired elsewhere, {lost} reported",
        fired.len()
    );
    // Nothing but tick jobs: every job left is some guard's.
    let strays = db.scalar(
        "SELECT count(*) AS v FROM solidq_jobs j
         WHERE NOT EXISTS (SELECT 1 FROM solidq_recurring_executions r WHERE r.job_id = j.id)",
    );
    assert_eq!(strays, 0, "jobs enqueued for no tick");
}

/// `run_recurring` (`solidq recurring run KEY`) in the second whose run
/// exists already enqueues nothing, though that run's job finished and
/// was deleted.
fn run_recurring_in_the_same_second_does_not_fire_again_a_tick_whose_job_was_deleted(db: &TestDb) {
    let queue = keeping_nothing(db);
    // Declares the task; a yearly schedule never fires during the test.
    Scheduler::new(queue.clone())
        .task(echo_task("now", "0 0 0 1 1 ?"))
        .start()
        .unwrap()
        .stop()
        .unwrap();
    let worker = jobs::worker(queue.clone())
        .polling_interval(Duration::from_millis(50))
        .start()
        .unwrap();
    let tick_of = |job: i64| {
        db.scalar(&format!(
            "SELECT {} AS v FROM solidq_recurring_executions WHERE job_id = {job}",
            epoch(db, "run_at")
        ))
    };
    // A second try that lands in the next second shows nothing: try until
    // three landed in the same second as the first.
    let (mut same_second, mut attempts) = (0, 0);
    while same_second < 3 {
        attempts += 1;
        assert!(attempts <= 30, "only {same_second} tries in one second");
        let mut first = None;
        wait_for("a second without a run", Duration::from_secs(5), || {
            first = queue.run_recurring("now").unwrap();
            first.is_some()
        });
        let first = first.unwrap();
        let tick = tick_of(first);
        wait_for(
            "the run's job to finish and be deleted",
            Duration::from_secs(30),
            || matches!(queue.job(first), Err(Error::JobNotFound(_))),
        );
        match queue.run_recurring("now").unwrap() {
            None => {
                same_second += 1;
                assert_eq!(tick_of(first), tick, "the guard of job {first} stays");
            }
            Some(second) => assert_ne!(
                tick_of(second),
                tick,
                "the {tick} run fired twice: jobs {first} and {second}"
            ),
        }
    }
    worker.stop().unwrap();
}

/// Tick guards live for `RECURRING_GUARD_RETENTION` (the cleaner deletes
/// older ones in batches), but each task's latest stays: `solidq
/// recurring` shows it as the last run.
fn the_cleaner_ages_tick_guards_out_but_keeps_each_tasks_latest(db: &TestDb) {
    let queue = db.queue();
    Scheduler::new(queue.clone())
        .tasks(["old", "mixed", "fresh"].map(|key| echo_task(key, "0 0 0 1 1 ?")))
        .start()
        .unwrap()
        .stop()
        .unwrap();
    let retention = RECURRING_GUARD_RETENTION.as_secs() as i64;
    // (task, seconds ago, job id); more than a cleaning batch of old ones.
    let insert = |task: &str, ago: i64, job: i64, count: i64| {
        let sql = match db.backend {
            Backend::Postgres => format!(
                "INSERT INTO solidq_recurring_executions (task_key, run_at, job_id, created_at)
                 SELECT '{task}', LOCALTIMESTAMP - INTERVAL '1 second' * ({ago} + i), {job} + i, LOCALTIMESTAMP
                 FROM generate_series(0, {count} - 1) AS i"
            ),
            Backend::Sqlite => format!(
                "WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i + 1 < {count})
                 INSERT INTO solidq_recurring_executions (task_key, run_at, job_id, created_at)
                 SELECT '{task}', datetime('now', '-' || ({ago} + i) || ' seconds'), {job} + i, datetime('now')
                 FROM s"
            ),
            Backend::Mysql => format!(
                "INSERT INTO solidq_recurring_executions (task_key, run_at, job_id, created_at)
                 SELECT '{task}', UTC_TIMESTAMP(6) - INTERVAL ({ago} + i) SECOND, {job} + i, UTC_TIMESTAMP(6)
                 FROM {}",
                common::mysql_numbers(count, "s")
            ),
        };
        db.execute(&sql);
    };
    let old = retention + 7 * 86_400;
    insert("old", old, 100_000, 2_500);
    insert("old", old - 3_600, 1, 1); // its latest, past the retention too
    insert("mixed", old, 200_000, 10);
    insert("mixed", retention / 2, 2, 1); // within the retention
    insert("mixed", 60, 3, 1); // its latest
    insert("fresh", 60, 4, 1);
    assert_eq!(db.count("solidq_recurring_executions"), 2_514);

    // A standalone worker runs a maintenance round as it starts.
    let worker = jobs::worker(queue.clone()).start().unwrap();
    wait_for("old guards deleted", Duration::from_secs(60), || {
        db.count("solidq_recurring_executions") <= 4
    });
    worker.stop().unwrap();
    assert_eq!(
        db.column_of(
            "SELECT job_id AS v FROM solidq_recurring_executions ORDER BY task_key, run_at"
        ),
        [4, 2, 3, 1],
        "kept: fresh's, mixed's within the retention and latest, old's latest"
    );
    let last: Vec<(String, Option<i64>)> = queue
        .recurring_tasks()
        .unwrap()
        .into_iter()
        .map(|t| (t.key, t.last_job_id))
        .collect();
    assert_eq!(
        last,
        [("fresh", 4), ("mixed", 3), ("old", 1)].map(|(k, id)| (k.to_string(), Some(id))),
        "each task's last run is still known"
    );
}

/// A tick's job is created when the database's clock has reached the tick
/// (never a few milliseconds early because this host's clock runs ahead),
/// and the fired events report what the database stored.
fn every_tick_job_is_created_at_or_after_its_tick_by_the_database_clock(db: &TestDb) {
    let queue = db.queue();
    let recorder = Recorder::default();
    let scheduler = Scheduler::new(queue.clone())
        .tasks((0..10).map(|i| echo_task(&format!("t{i}"), EVERY_SECOND)))
        .events(recorder.clone())
        .start()
        .unwrap();
    wait_for("50 ticks", Duration::from_secs(60), || {
        db.count("solidq_recurring_executions") >= 50
    });
    scheduler.stop().unwrap();

    let late_us = match db.backend {
        Backend::Postgres => {
            "CAST(EXTRACT(EPOCH FROM (j.created_at - r.run_at)) * 1000000 AS BIGINT)".to_string()
        }
        Backend::Mysql => "TIMESTAMPDIFF(MICROSECOND, r.run_at, j.created_at)".to_string(),
        Backend::Sqlite => {
            // Timestamps are text, "YYYY-MM-DD HH:MM:SS[.fraction]".
            let us = |t: &str| {
                format!(
                    "(CAST(strftime('%s', {t}) AS INTEGER) * 1000000
                      + CAST(substr(substr({t}, 21) || '000000', 1, 6) AS INTEGER))"
                )
            };
            format!("{} - {}", us("j.created_at"), us("r.run_at"))
        }
    };
    let joined = "FROM solidq_recurring_executions r JOIN solidq_jobs j ON j.id = r.job_id";
    let lateness = db.column_of(&format!("SELECT {late_us} AS v {joined} ORDER BY r.job_id"));
    let ids = db.column_of(&format!("SELECT r.job_id AS v {joined} ORDER BY r.job_id"));
    assert_eq!(
        lateness.len() as i64,
        db.count("solidq_recurring_executions")
    );
    let early: Vec<(i64, i64)> = ids
        .iter()
        .zip(&lateness)
        .filter(|(_, late)| **late < 0)
        .map(|(&id, &late)| (id, late))
        .collect();
    assert!(
        early.is_empty(),
        "jobs created before their tick (job, µs late): {early:?}"
    );
    let fired: Vec<(i64, i64)> = recorder
        .all()
        .into_iter()
        .filter_map(|e| match e {
            Event::Fired(f) => Some((f.job_id, f.late_by.as_micros() as i64)),
            _ => None,
        })
        .collect();
    assert_eq!(fired.len(), ids.len(), "one fired event per tick");
    for (id, reported) in fired {
        let stored = lateness[ids.iter().position(|&i| i == id).unwrap()];
        assert!(
            (reported - stored).abs() <= 1,
            "job {id}: late_by {reported} µs, stored {stored} µs"
        );
    }
}

fn ticks_missed_while_no_scheduler_ran_are_not_backfilled(db: &TestDb) {
    db.queue();
    let first = Child::scheduler(&db.url, "tick", EVERY_SECOND);
    wait_ticks(db, "tick", 2);
    stop(first);
    let stopped_after = *ticks(db, "tick").last().unwrap();
    // Nothing runs for about three seconds.
    std::thread::sleep(Duration::from_secs(3));
    let second = Child::scheduler(&db.url, "tick", EVERY_SECOND);
    wait_ticks(db, "tick", 5);
    stop(second);
    let ticks = ticks(db, "tick");
    assert_consecutive(&ticks, 1);
    let resumed = ticks.iter().find(|&&t| t > stopped_after).unwrap();
    assert!(
        resumed - stopped_after >= 3,
        "ticks between {stopped_after} and {resumed} were back-filled: {ticks:?}"
    );
    assert_one_job_per_tick(db, "tick");
}

fn the_tasks_table_mirrors_the_configuration(db: &TestDb) {
    let queue = db.queue();
    let echo = |v: &str| Echo { value: json!(v) };
    let rows = || {
        let key = db.quote("key");
        db.column_of(&format!(
            "SELECT {} AS v FROM solidq_recurring_tasks ORDER BY {key}",
            db.bigint(&format!("length({key}) * 1000 + length(schedule)"))
        ))
    };
    let task = |key: &str, schedule: &str| RecurringTask::new(key, schedule, &echo(key)).unwrap();
    // Yearly schedules: nothing fires during the test.
    let yearly = "0 0 1 1 *";
    Scheduler::new(queue.clone())
        .task(task("a", yearly))
        .task(task("bb", yearly))
        .start()
        .unwrap()
        .stop()
        .unwrap();
    assert_eq!(rows(), [1009, 2009]);
    Scheduler::new(queue.clone())
        .task(task("a", "0 0 0 1 1 ?"))
        .task(
            task("ccc", yearly)
                .description("the third")
                .timezone("Asia/Tokyo")
                .unwrap(),
        )
        .start()
        .unwrap()
        .stop()
        .unwrap();
    assert_eq!(rows(), [1011, 3009], "a changed, bb removed, ccc added");
    let tokyo = db.scalar(&format!(
        "SELECT count(*) AS v FROM solidq_recurring_tasks
         WHERE {} = 'ccc' AND timezone = 'Asia/Tokyo' AND description = 'the third' AND kind = 'echo'",
        db.quote("key")
    ));
    assert_eq!(tokyo, 1);
}

/// NUL cannot be stored (PostgreSQL refuses it in text): a recurring
/// task's key, kind or description holding one is refused when the task
/// is configured, in code or in `solidq.toml`, with an error naming the
/// value; nothing is written. NUL inside arguments is JSON-escaped and
/// arrives intact.
fn nul_in_a_recurring_task_is_refused_at_configuration_naming_the_value(db: &TestDb) {
    let queue = db.queue();
    let described = echo_task("described", EVERY_SECOND).description("nightly\0export");
    let scheduler = Scheduler::new(queue.clone()).task(described);
    let refused = |result: solidq::Result<()>, expected: &str, bad: &str| match result {
        Err(Error::InvalidOption { option, value, .. }) => {
            assert_eq!((option, value.as_str()), (expected, bad))
        }
        Err(other) => panic!("wrong error for {bad:?}: {other}"),
        Ok(()) => panic!("{bad:?} was accepted"),
    };
    refused(
        scheduler.check(),
        "recurring task description",
        "nightly\0export",
    );
    refused(
        scheduler.start().map(drop),
        "recurring task description",
        "nightly\0export",
    );
    assert_eq!(db.count("solidq_recurring_tasks"), 0, "nothing written");
    refused(
        RecurringTask::untyped("k", EVERY_SECOND, "ec\0ho", json!({})).map(drop),
        "recurring task kind",
        "ec\0ho",
    );
    refused(
        RecurringTask::untyped("k\0", EVERY_SECOND, "echo", json!({})).map(drop),
        "recurring task key",
        "k\0",
    );

    // The same in solidq.toml, caught by `solidq check`.
    let config = SupervisorConfig::parse(
        &format!(
            "database_url = \"{url}\"\n[recurring.report]\nkind = \"echo\"\nschedule = \"{EVERY_SECOND}\"\ndescription = \"a\\u0000b\"\n",
            url = db.url
        ),
        "solidq.toml",
    )
    .unwrap();
    let message = config.validate("solidq.toml").unwrap_err().to_string();
    for part in ["solidq.toml", "report", "description", "\"a\\0b\""] {
        assert!(message.contains(part), "{part:?} missing from {message}");
    }

    // Arguments are stored as JSON, where NUL is escaped.
    Scheduler::new(queue.clone())
        .task(
            RecurringTask::untyped("args", "0 0 0 1 1 ?", "echo", json!({ "value": "a\0b" }))
                .unwrap(),
        )
        .start()
        .unwrap()
        .stop()
        .unwrap();
    let id = queue.run_recurring("args").unwrap().unwrap();
    assert_eq!(queue.job(id).unwrap().arguments, json!({ "value": "a\0b" }));
}

fn a_tick_enqueues_the_task_job_with_its_settings(db: &TestDb) {
    let queue = db.queue();
    let task = RecurringTask::untyped("report", EVERY_SECOND, "echo", json!({ "value": 42 }))
        .unwrap()
        .queue("reports")
        .priority(3);
    let scheduler = Scheduler::new(queue.clone())
        .register::<Echo>()
        .task(task)
        .start()
        .unwrap();
    wait_ticks(db, "report", 1);
    scheduler.stop().unwrap();
    let id =
        db.scalar("SELECT job_id AS v FROM solidq_recurring_executions ORDER BY run_at LIMIT 1");
    let info = queue.job(id).unwrap();
    assert_eq!(
        (
            info.kind.as_str(),
            info.queue.as_str(),
            info.priority,
            info.status
        ),
        ("echo", "reports", 3, JobStatus::Ready)
    );
    assert_eq!(info.arguments, json!({ "value": 42 }));

    // Arguments a registered kind cannot read are refused at start.
    let bad = RecurringTask::untyped("bad", EVERY_SECOND, "echo", json!({ "nope": 1 })).unwrap();
    match Scheduler::new(queue.clone())
        .register::<Echo>()
        .task(bad)
        .start()
    {
        Err(Error::InvalidOption { option, value, .. }) => {
            assert_eq!(option, "recurring task arguments");
            assert!(value.contains("nope"));
        }
        Err(other) => panic!("wrong error: {other}"),
        Ok(_) => panic!("bad arguments were accepted"),
    }
    // A bad expression names the task, the expression and the field.
    let error = RecurringTask::untyped("broken", "0 61 * * * ?", "echo", json!({})).unwrap_err();
    let message = error.to_string();
    for part in ["broken", "0 61 * * * ?", "minute", "61"] {
        assert!(message.contains(part), "{part:?} missing from {message}");
    }
}

fn the_supervisor_runs_recurring_tasks_from_its_file(db: &TestDb) {
    db.queue();
    let supervisor = Child::supervisor(&format!(
        r#"
database_url = "{url}"
heartbeat_interval = "200ms"
process_alive_threshold = "2s"

[recurring.heartbeat_report]
kind = "echo"
schedule = "{EVERY_SECOND}"
args = {{ value = "tick", n = 1, nested = {{ list = [1, 2.5, true] }} }}
queue = "reports"
description = "every second"
"#,
        url = db.url,
    ));
    wait_ticks(db, "heartbeat_report", 2);
    let logs = stop(supervisor);
    assert!(
        logs.contains("scheduler started with 1 recurring tasks"),
        "{logs}"
    );
    let id =
        db.scalar("SELECT job_id AS v FROM solidq_recurring_executions ORDER BY run_at LIMIT 1");
    let info = db.queue().job(id).unwrap();
    assert_eq!(info.queue, "reports");
    assert_eq!(
        info.arguments,
        json!({ "value": "tick", "n": 1, "nested": { "list": [1, 2.5, true] } })
    );
    assert_consecutive(&ticks(db, "heartbeat_report"), 0);
    assert_one_job_per_tick(db, "heartbeat_report");
}
