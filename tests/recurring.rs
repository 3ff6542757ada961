//! Recurring tasks on both backends, with real scheduler processes: every
//! tick fires exactly once across three schedulers, also when one is killed
//! and restarted; missed ticks are not back-filled; the tasks table mirrors
//! the configuration; the supervisor runs `[recurring.*]`.

#[macro_use]
mod common;

use std::time::Duration;

use common::child::Child;
use common::jobs::Echo;
use common::{TestDb, wait_for};
use serde_json::json;
use solidq::{Backend, Error, JobStatus, RecurringTask, Scheduler};

backend_tests!(
    three_schedulers_fire_every_second_exactly_once,
    a_scheduler_killed_and_restarted_midway_neither_skips_nor_doubles,
    ticks_missed_while_no_scheduler_ran_are_not_backfilled,
    the_tasks_table_mirrors_the_configuration,
    a_tick_enqueues_the_task_job_with_its_settings,
    the_supervisor_runs_recurring_tasks_from_its_file,
);

const EVERY_SECOND: &str = "* * * * * ?";

/// The run times of `task`'s ticks, in epoch seconds, in order.
fn ticks(db: &TestDb, task: &str) -> Vec<i64> {
    let epoch = match db.backend {
        Backend::Postgres => "CAST(EXTRACT(EPOCH FROM run_at) AS BIGINT)",
        Backend::Sqlite => "CAST(strftime('%s', run_at) AS INTEGER)",
    };
    db.column_of(&format!(
        "SELECT {epoch} AS v FROM solidq_recurring_executions WHERE task_key = '{task}' ORDER BY run_at"
    ))
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
    wait_ticks(db, "tick", 10);
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
    wait_ticks(db, "tick", 4);
    let victim = schedulers.remove(0);
    victim.signal(libc::SIGKILL);
    drop(victim);
    wait_ticks(db, "tick", 6);
    schedulers.push(Child::scheduler(&db.url, "tick", EVERY_SECOND));
    wait_ticks(db, "tick", 11);
    for child in schedulers {
        stop(child);
    }
    let ticks = ticks(db, "tick");
    assert_consecutive(&ticks, 0);
    assert_one_job_per_tick(db, "tick");
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
        db.column_of("SELECT CAST(length(key) * 1000 + length(schedule) AS BIGINT) AS v FROM solidq_recurring_tasks ORDER BY key")
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
    let tokyo = db.scalar(
        "SELECT count(*) AS v FROM solidq_recurring_tasks
         WHERE key = 'ccc' AND timezone = 'Asia/Tokyo' AND description = 'the third' AND kind = 'echo'",
    );
    assert_eq!(tokyo, 1);
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
