//! Resumable steps (`JobContext::step`, `Step::checkpoint`): after an
//! interruption the next attempt skips the finished steps and resumes the
//! interrupted one from its last stored cursor — after a SIGKILL and the
//! release of the dead worker's job, after an error and its retry, a snooze
//! and a panic. Checkpoints are fenced by the claim and written with the
//! outcome batching (at most a second apart), never per item.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::child::Child;
use common::jobs::{self, Stepper, stepper_lines};
use common::{TestDb, assert_invariants, wait_for, wait_until};
use solidq::{Backoff, EnqueueOptions, JobStatus, Queue};

const WAIT: Duration = Duration::from_secs(30);

backend_tests!(
    a_three_step_job_killed_in_step_two_resumes_step_two_from_its_checkpoint,
    an_error_a_snooze_and_a_panic_in_a_step_resume_it_on_the_next_attempt,
    checkpoints_are_written_on_a_cadence_not_per_item,
    a_frozen_worker_that_lost_its_claim_writes_no_checkpoint,
    sigterm_in_step_two_stores_the_last_cursor_and_nothing_repeats,
);

/// The stored cursor of the step in progress, if the job is in `step`.
fn stored_cursor(queue: &Queue, id: i64, step: &str) -> Option<u64> {
    let checkpoint = queue.job(id).unwrap().checkpoint?;
    (checkpoint["step"] == step).then(|| checkpoint["cursor"].as_u64())?
}

/// A one-thread worker running a [`Stepper`] of `items` items (20 ms each)
/// whose ledger is `ledger`, once a cursor of at least 20 inside step two
/// is stored: the worker and the job's id.
fn in_step_two(db: &TestDb, queue: &Queue, ledger: &Path, items: u64) -> (Child, i64) {
    let worker = Child::worker(&db.url, &[("SOLIDQ_TEST_THREADS", "1")]);
    let id = queue
        .enqueue(&Stepper {
            path: ledger.display().to_string(),
            items,
            item_ms: 20,
            ..Stepper::default()
        })
        .unwrap();
    wait_for("a stored checkpoint inside step two", WAIT, || {
        stored_cursor(queue, id, "two").is_some_and(|c| c >= 20)
    });
    (worker, id)
}

/// How many ledger lines equal `line`.
fn count(lines: &[String], line: &str) -> usize {
    lines.iter().filter(|l| *l == line).count()
}

fn a_three_step_job_killed_in_step_two_resumes_step_two_from_its_checkpoint(db: &TestDb) {
    let queue = db.queue();
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("steps");
    let items = 150;
    // Killed well inside step two, once a checkpoint of it is stored.
    let (mut victim, id) = in_step_two(db, &queue, &ledger, items);
    victim.signal(libc::SIGKILL);
    victim.wait_timeout(WAIT).expect("the victim dies");
    let stored = stored_cursor(&queue, id, "two").expect("a cursor in step two");
    assert!(stored < items, "killed before step two ended");
    let (code, shown, err) = common::run_cli(db, &["job", &id.to_string()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        shown.contains(&format!("done one; in two at {stored}")),
        "`solidq job` shows the steps: {shown}"
    );
    let before = stepper_lines(&ledger);
    let reached = before.iter().filter(|l| l.starts_with("item ")).count() as u64;
    // A standalone peer prunes the dead worker once its heartbeat is a
    // threshold old and runs the released job.
    let _peer = Child::worker(&db.url, &[("SOLIDQ_TEST_ALIVE_MS", "1000")]);
    wait_for("the job to succeed after the kill", WAIT, || {
        queue.job(id).unwrap().status == JobStatus::Succeeded
    });
    let info = queue.job(id).unwrap();
    assert_eq!(info.stalled_count, 1, "the kill counted as a stall");
    assert_eq!(
        info.result,
        Some(serde_json::json!(["one", "two", "three"]))
    );
    assert_eq!(
        info.checkpoint,
        Some(serde_json::json!({ "done": ["one", "two", "three"] }))
    );
    let lines = stepper_lines(&ledger);
    assert_eq!(count(&lines, "one"), 1, "step one ran again: {lines:?}");
    assert_eq!(count(&lines, "three"), 1, "{lines:?}");
    assert_eq!(count(&lines, "two from 0"), 1, "{lines:?}");
    assert_eq!(
        count(&lines, &format!("two from {stored}")),
        1,
        "step two resumed from its stored cursor {stored}: {lines:?}"
    );
    for item in 0..items {
        let runs = count(&lines, &format!("item {item}"));
        // Before the stored cursor: once. From it to where the victim got:
        // the at-least-once part (twice). After: once.
        let expected = if item < stored || item >= reached {
            1
        } else {
            2
        };
        assert_eq!(
            runs, expected,
            "item {item} (stored cursor {stored}, victim reached {reached})"
        );
    }
    eprintln!(
        "stored cursor {stored} when killed at item {}: {} items ran twice",
        reached - 1,
        reached - stored
    );
    assert_invariants(db);
}

fn an_error_a_snooze_and_a_panic_in_a_step_resume_it_on_the_next_attempt(db: &TestDb) {
    let queue = db.queue();
    let dir = tempfile::tempdir().unwrap();
    let options = EnqueueOptions::new()
        .max_attempts(3)
        .backoff(Backoff::fixed(Duration::from_millis(10)));
    let cases = [
        (
            "error",
            Stepper {
                fail_at: Some(3),
                ..Stepper::default()
            },
        ),
        (
            "snooze",
            Stepper {
                snooze_at: Some(3),
                ..Stepper::default()
            },
        ),
        (
            "panic",
            Stepper {
                panic_at: Some(3),
                ..Stepper::default()
            },
        ),
    ];
    let mut enqueued = Vec::new();
    for (name, job) in cases {
        let path = dir.path().join(name);
        let job = Stepper {
            path: path.display().to_string(),
            items: 6,
            ..job
        };
        enqueued.push((
            name,
            path,
            queue.enqueue_with(&job, options.clone()).unwrap(),
        ));
    }
    let worker = jobs::worker(queue.clone())
        .polling_interval(Duration::from_millis(50))
        .start()
        .unwrap();
    for (name, _, id) in &enqueued {
        wait_for(&format!("the {name} case to succeed"), WAIT, || {
            queue.job(*id).unwrap().status == JobStatus::Succeeded
        });
    }
    worker.stop().unwrap();
    let expected: Vec<String> = [
        "one",
        "two from 0",
        "item 0",
        "item 1",
        "item 2",
        "item 3",
        "two from 4",
        "item 4",
        "item 5",
        "three",
    ]
    .map(String::from)
    .to_vec();
    for (name, path, id) in &enqueued {
        assert_eq!(stepper_lines(path), expected, "the {name} case");
        let info = queue.job(*id).unwrap();
        let (attempts, snoozes) = if *name == "snooze" { (1, 1) } else { (2, 0) };
        assert_eq!(
            (info.attempts, info.snoozes),
            (attempts, snoozes),
            "the {name} case"
        );
    }
    assert_invariants(db);
}

/// A step of 2,000 items checkpointed after each one stores its cursor a
/// handful of times, not 2,000: the statements a worker runs grow with the
/// seconds the step takes, not with its items.
fn checkpoints_are_written_on_a_cadence_not_per_item(db: &TestDb) {
    let queue = db.queue();
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("steps");
    let id = queue
        .enqueue(&Stepper {
            path: ledger.display().to_string(),
            items: 2_000,
            item_ms: 1,
            ..Stepper::default()
        })
        .unwrap();
    let worker = jobs::worker(queue.clone())
        .polling_interval(Duration::from_millis(50))
        .start()
        .unwrap();
    // Every distinct stored cursor seen while the step runs.
    let mut seen = std::collections::BTreeSet::new();
    wait_for("the job to succeed", WAIT, || {
        if let Some(cursor) = stored_cursor(&queue, id, "two") {
            seen.insert(cursor);
        }
        queue.job(id).unwrap().status == JobStatus::Succeeded
    });
    worker.stop().unwrap();
    let lines = stepper_lines(Path::new(&ledger));
    assert_eq!(count(&lines, "three"), 1);
    let took = lines.iter().filter(|l| l.starts_with("item ")).count();
    assert_eq!(took, 2_000);
    // 2,000 items of at least 1 ms: at least 2 s, so one write a second
    // shows a few cursors; a write per item would show hundreds.
    assert!(
        !seen.is_empty() && seen.len() <= 15,
        "stored cursors seen while the step ran: {seen:?}"
    );
}

/// A worker frozen (SIGSTOP) inside step two is pruned; a peer resumes the
/// step from the stored cursor and finishes the job. Thawed, the old worker
/// runs its copy to the end: its checkpoints and its outcome are fenced by
/// the claim it lost, so the stored steps and result stay the peer's.
fn a_frozen_worker_that_lost_its_claim_writes_no_checkpoint(db: &TestDb) {
    let queue = db.queue();
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("steps");
    let (victim, id) = in_step_two(db, &queue, &ledger, 100);
    victim.freeze_outside_a_write(&db.url);
    let stored = stored_cursor(&queue, id, "two").expect("a cursor in step two");
    let peer = Child::worker(&db.url, &[("SOLIDQ_TEST_ALIVE_MS", "1000")]);
    let finished = wait_until(WAIT, || {
        let job = queue.job(id).unwrap();
        (job.status == JobStatus::Succeeded).then_some(job)
    })
    .unwrap_or_else(|| {
        panic!(
            "timed out after {WAIT:?} waiting for the peer to finish the job ({:?}); the peer logged:\n{}",
            queue.job(id).unwrap(),
            peer.logs()
        )
    });
    assert_eq!(
        finished.checkpoint,
        Some(serde_json::json!({ "done": ["one", "two", "three"] }))
    );
    victim.signal(libc::SIGCONT);
    // Watched while the thawed copy runs the rest of step two (a second of
    // checkpoints): any write of its own would show its cursor.
    let mut seen = Vec::new();
    wait_for("the thawed worker to find its claim lost", WAIT, || {
        let now = queue.job(id).unwrap().checkpoint;
        if now != finished.checkpoint && seen.last() != Some(&now) {
            seen.push(now);
        }
        victim
            .logs()
            .contains(&format!("claim on job {id} was lost"))
    });
    assert!(
        seen.is_empty(),
        "the thawed worker wrote checkpoints: {seen:?}"
    );
    let lines = stepper_lines(&ledger);
    // Thawed, its lease had lapsed: asked to stop (`is_cancelled`), it
    // stopped at its next item instead of running to its end (before or
    // after writing that item's line).
    assert_eq!(
        count(&lines, "three"),
        1,
        "only the peer ran step three: {lines:?}"
    );
    assert_eq!(count(&lines, "one"), 1, "{lines:?}");
    assert_eq!(count(&lines, &format!("two from {stored}")), 1, "{lines:?}");
    let after = queue.job(id).unwrap();
    assert_eq!(
        after.checkpoint, finished.checkpoint,
        "the thawed worker wrote a checkpoint"
    );
    assert_eq!(after.result, finished.result);
    assert_eq!(after.finished_at, finished.finished_at);
    assert_eq!(after.stalled_count, 1);
    drop(peer);
    assert_invariants(db);
}

/// SIGTERM inside step two: the job hands itself back at its next item, the
/// cursor it set last is stored with that outcome, and the next worker
/// resumes exactly there: no item runs twice, no stall is counted.
fn sigterm_in_step_two_stores_the_last_cursor_and_nothing_repeats(db: &TestDb) {
    let queue = db.queue();
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("steps");
    let items = 150;
    let (mut worker, id) = in_step_two(db, &queue, &ledger, items);
    worker.signal(libc::SIGTERM);
    let status = worker.wait_timeout(WAIT).expect("the worker stops");
    assert!(status.success(), "{}", worker.logs());
    let reached = stepper_lines(&ledger)
        .iter()
        .filter(|l| l.starts_with("item "))
        .count() as u64;
    assert!(reached < items, "stopped before step two ended");
    assert_eq!(
        stored_cursor(&queue, id, "two"),
        Some(reached),
        "the cursor set last, after item {}, is stored",
        reached - 1
    );
    let _next = Child::worker(&db.url, &[]);
    wait_for("the job to succeed after the restart", WAIT, || {
        queue.job(id).unwrap().status == JobStatus::Succeeded
    });
    let info = queue.job(id).unwrap();
    assert_eq!((info.stalled_count, info.attempts), (0, 1));
    let lines = stepper_lines(&ledger);
    assert_eq!(count(&lines, "one"), 1, "{lines:?}");
    assert_eq!(
        count(&lines, &format!("two from {reached}")),
        1,
        "{lines:?}"
    );
    for item in 0..items {
        assert_eq!(count(&lines, &format!("item {item}")), 1, "item {item}");
    }
    assert_invariants(db);
}
