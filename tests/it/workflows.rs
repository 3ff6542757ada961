//! Workflows (src/workflow.rs) on every backend: members of a batch that
//! wait for others run after their parents succeeded, once; a failed
//! parent cancels what waits for it (or lets it run, by option); cycles,
//! unknown parents and dependencies outside a batch are refused with
//! nothing written; a 3-level fan-out and fan-in with a failing parent
//! under SIGKILL every 300 ms.

use crate::common;

use std::time::Duration;

use common::child::{Child, kill_one_every_300ms};
use common::jobs::{Hopeless, Ledger};
use common::{TestDb, assert_invariants, wait_for};
use solidq::{
    BatchOptions, DependencyOutcome, EnqueueOptions, Error, JobRequest, JobStatus, Queue,
};

backend_tests!(
    a_diamond_runs_each_job_once_after_its_parents,
    a_failing_parent_cancels_its_dependants_or_lets_them_run,
    a_three_level_fan_out_and_fan_in_with_a_failing_parent_under_sigkill,
    cycles_unknown_parents_and_dependencies_outside_a_batch_write_nothing,
    a_job_added_later_waits_for_a_stored_member_however_it_is,
    a_fan_in_of_300_parents_ended_by_three_processes_releases_the_join_once,
    a_frozen_worker_whose_parent_was_rerun_releases_nothing_when_thawed,
);

const WAIT: Duration = Duration::from_secs(30);

/// A `ledger` job (a `start` and an `end` row around `sleep_ms`).
fn node(db: &TestDb, n: i64, sleep_ms: u64) -> JobRequest {
    let job = Ledger {
        url: db.url.clone(),
        n,
        sleep_ms,
    };
    JobRequest::new(&job, EnqueueOptions::new().max_stalled_count(1_000)).unwrap()
}

fn hopeless() -> JobRequest {
    JobRequest::new(&Hopeless, EnqueueOptions::new()).unwrap()
}

fn wait_finished(queue: &Queue, batch: i64, timeout: Duration) -> solidq::BatchInfo {
    let mut info = None;
    wait_for("the workflow to finish", timeout, || {
        info = queue.batch_info(batch).unwrap();
        info.as_ref().is_some_and(|i| i.is_finished())
    });
    info.unwrap()
}

/// Runs an in-process worker of 2 threads until `batch` finished.
fn work_until_finished(queue: &Queue, batch: i64) -> solidq::BatchInfo {
    let worker = common::jobs::worker(queue.clone())
        .threads(2)
        .start()
        .unwrap();
    let info = wait_finished(queue, batch, WAIT);
    worker.stop().unwrap();
    info
}

/// Edges of `batch` whose dependant started before its parent's last run
/// ended (ledger rows): must be none.
fn started_early(db: &TestDb, batch: i64) -> i64 {
    db.scalar(&format!(
        "SELECT count(*) AS v FROM solidq_dependencies d
         WHERE d.batch_id = {batch}
           AND (SELECT min(s.at_us) FROM test_ledger s WHERE s.job_id = d.job_id AND s.event = 'start')
             < (SELECT max(e.at_us) FROM test_ledger e WHERE e.job_id = d.parent_id AND e.event = 'end')"
    ))
}

/// How many times job `id`'s code started.
fn starts(db: &TestDb, id: i64) -> i64 {
    db.scalar(&format!(
        "SELECT count(*) AS v FROM test_ledger WHERE job_id = {id} AND event = 'start'"
    ))
}

fn status(queue: &Queue, id: i64) -> JobStatus {
    queue.job(id).unwrap().status
}

fn last_error(queue: &Queue, id: i64) -> String {
    queue
        .job(id)
        .unwrap()
        .error
        .map(|e| e.message)
        .unwrap_or_default()
}

fn a_diamond_runs_each_job_once_after_its_parents(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let jobs = vec![
        node(db, 1, 50).named("a"),
        node(db, 2, 100).named("b").after("a"),
        node(db, 3, 10).named("c").after("a"),
        node(db, 4, 0).named("d").after("b").after("c"),
    ];
    let made = queue.batch(BatchOptions::new(), &jobs).unwrap();
    let [a, b, c, d] = made.jobs[..] else {
        panic!("{:?}", made.jobs)
    };
    assert_eq!(
        [a, b, c, d].map(|id| status(&queue, id)),
        [
            JobStatus::Ready,
            JobStatus::Waiting,
            JobStatus::Waiting,
            JobStatus::Waiting
        ]
    );
    assert_eq!(db.count("solidq_waiting_executions"), 3);
    assert_invariants(db);
    let edges = queue.batch_dependencies(made.id).unwrap();
    assert_eq!(
        edges
            .iter()
            .map(|e| (e.job_id, e.parent_id, e.outcome))
            .collect::<Vec<_>>(),
        vec![(b, a, None), (c, a, None), (d, b, None), (d, c, None)]
    );
    let info = work_until_finished(&queue, made.id);
    assert_eq!(
        (info.total, info.pending, info.succeeded, info.failed),
        (4, 0, 4, 0)
    );
    for id in [a, b, c, d] {
        assert_eq!(status(&queue, id), JobStatus::Succeeded);
        assert_eq!(starts(db, id), 1, "job {id} started once");
    }
    assert_eq!(
        started_early(db, made.id),
        0,
        "a job started before its parents ended"
    );
    assert!(
        queue
            .batch_dependencies(made.id)
            .unwrap()
            .iter()
            .all(|e| e.outcome == Some(DependencyOutcome::Succeeded))
    );
    assert_eq!(db.count("solidq_waiting_executions"), 0);
    assert_invariants(db);
}

fn a_failing_parent_cancels_its_dependants_or_lets_them_run(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let report = |which: &'static str| {
        move |batch: i64| {
            JobRequest::new(
                &common::jobs::Echo {
                    value: serde_json::json!({"callback": which, "batch": batch}),
                },
                EnqueueOptions::new(),
            )
        }
    };
    // a → (b fails, c) → d; e after b runs anyway; f after d is cancelled
    // in turn.
    let jobs = vec![
        node(db, 1, 0).named("a"),
        hopeless().named("b").after("a"),
        node(db, 3, 0).named("c").after("a"),
        node(db, 4, 0).named("d").after("b").after("c"),
        node(db, 5, 0).named("e").after("b").even_if_parents_fail(),
        node(db, 6, 0).named("f").after("d"),
    ];
    let options = BatchOptions::new()
        .on_failure(report("failure"))
        .on_success(report("success"));
    let made = queue.batch(options, &jobs).unwrap();
    let [a, b, c, d, e, f] = made.jobs[..] else {
        panic!("{:?}", made.jobs)
    };
    let info = work_until_finished(&queue, made.id);
    assert_eq!(
        (info.total, info.pending, info.succeeded, info.failed),
        (6, 0, 3, 3),
        "a, c and e succeeded; b failed, d and f were cancelled"
    );
    assert_eq!(
        [a, b, c, d, e, f].map(|id| status(&queue, id)),
        [
            JobStatus::Succeeded,
            JobStatus::Failed,
            JobStatus::Succeeded,
            JobStatus::Discarded,
            JobStatus::Succeeded,
            JobStatus::Discarded,
        ]
    );
    assert_eq!(
        last_error(&queue, d),
        format!("cancelled by dependency: job {b} failed")
    );
    assert_eq!(
        last_error(&queue, f),
        format!("cancelled by dependency: job {d} failed")
    );
    assert_eq!(
        (starts(db, d), starts(db, f)),
        (0, 0),
        "cancelled jobs never ran"
    );
    assert_eq!(starts(db, e), 1);
    assert_eq!(started_early(db, made.id), 0);
    let callbacks = |which: &str| {
        db.scalar(&format!(
            "SELECT count(*) AS v FROM solidq_jobs WHERE kind = 'echo'
             AND arguments LIKE '%\"callback\":\"{which}\"%'"
        ))
    };
    assert_eq!((callbacks("failure"), callbacks("success")), (1, 0));
    // The CLI draws the members as a tree, with each job's status.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_solidq"))
        .args(["batch", &made.id.to_string(), "--database-url", &db.url])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("dependencies"))
        .collect();
    let indent = lines[0].len() - lines[0]["dependencies".len()..].trim_start().len();
    let tree: Vec<&str> = lines.iter().map(|l| &l[indent..]).collect();
    assert_eq!(
        tree,
        [
            format!("{a} ledger succeeded"),
            format!("├─ {b} hopeless failed"),
            format!("│  ├─ {d} ledger discarded"),
            format!("│  │  └─ {f} ledger discarded"),
            format!("│  └─ {e} ledger succeeded"),
            format!("└─ {c} ledger succeeded"),
            format!("   └─ {d} (above)"),
        ],
        "{text}"
    );
    assert_invariants(db);
}

fn a_three_level_fan_out_and_fan_in_with_a_failing_parent_under_sigkill(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    // root → 3 → 9 (3 under each) → join → cleanup (runs anyway). The
    // second of the 3 fails: its 3 children are cancelled, so is the
    // join, and the cleanup runs.
    let mut jobs = vec![node(db, 0, 100).named("root")];
    for i in 1..=3 {
        let middle = if i == 2 { hopeless() } else { node(db, i, 300) };
        jobs.push(middle.named(format!("m{i}")).after("root"));
        for k in 1..=3 {
            jobs.push(
                node(db, 10 * i + k, 300)
                    .named(format!("l{i}{k}"))
                    .after(format!("m{i}")),
            );
        }
    }
    let mut join = node(db, 100, 50).named("join");
    for i in 1..=3 {
        for k in 1..=3 {
            join = join.after(format!("l{i}{k}"));
        }
    }
    jobs.push(join);
    jobs.push(node(db, 101, 0).after("join").even_if_parents_fail());
    let made = queue.batch(BatchOptions::new(), &jobs).unwrap();
    let settings = [
        ("SOLIDQ_TEST_THREADS", "2"),
        ("SOLIDQ_TEST_ALIVE_MS", "1000"),
        ("SOLIDQ_TEST_HEARTBEAT_MS", "100"),
    ];
    // SIGKILL a worker every 300 ms until the workflow finished (at most
    // 20 s), starting another in its place.
    let (workers, kills) =
        kill_one_every_300ms(&db.url, &settings, Duration::from_secs(20), || {
            queue.batch_info(made.id).unwrap().unwrap().is_finished()
        });
    let info = wait_finished(&queue, made.id, Duration::from_secs(120));
    drop(workers);
    let reruns = db.scalar("SELECT count(*) AS v FROM test_ledger WHERE event = 'start'") - 10;
    eprintln!(
        "{}: {kills} kills, {reruns} runs cut short and rerun",
        db.backend
    );
    assert!(kills >= 3, "{kills} kills");
    assert_eq!(
        (info.total, info.pending, info.succeeded, info.failed),
        (15, 0, 10, 5),
        "root, m1, m3, their 6 children and the cleanup succeeded; m2 failed, its 3 children and the join were cancelled"
    );
    let id = |n: usize| made.jobs[n];
    // Indices: 0 root, 1 m1, 2-4 its children, 5 m2, 6-8 its children, 9
    // m3, 10-12 its children, 13 join, 14 cleanup.
    assert_eq!(status(&queue, id(5)), JobStatus::Failed);
    for n in [6, 7, 8] {
        assert_eq!(status(&queue, id(n)), JobStatus::Discarded);
        assert_eq!(starts(db, id(n)), 0);
        assert_eq!(
            last_error(&queue, id(n)),
            format!("cancelled by dependency: job {} failed", id(5))
        );
    }
    assert_eq!(status(&queue, id(13)), JobStatus::Discarded);
    assert_eq!(starts(db, id(13)), 0);
    for n in [0, 1, 2, 3, 4, 9, 10, 11, 12, 14] {
        assert_eq!(status(&queue, id(n)), JobStatus::Succeeded, "job #{n}");
        assert!(starts(db, id(n)) >= 1);
    }
    assert_eq!(
        started_early(db, made.id),
        0,
        "a job started before its parents' last run ended"
    );
    assert_invariants(db);
}

fn cycles_unknown_parents_and_dependencies_outside_a_batch_write_nothing(db: &TestDb) {
    let queue = db.queue();
    let refused = |result: solidq::Result<solidq::BatchEnqueued>| match result {
        Err(Error::Dependency { job, reason }) => format!("{job}: {reason}"),
        other => panic!("expected a dependency error, got {other:?}"),
    };
    let cycle = vec![
        node(db, 1, 0).named("a").after("c"),
        node(db, 2, 0).named("b").after("a"),
        node(db, 3, 0).named("c").after("b"),
    ];
    assert_eq!(
        refused(queue.batch(BatchOptions::new(), &cycle)),
        "\"a\": its dependencies form a cycle"
    );
    let unknown = vec![node(db, 1, 0).named("a"), node(db, 2, 0).after("nope")];
    assert_eq!(
        refused(queue.batch(BatchOptions::new(), &unknown)),
        "job #1 (ledger): no job of the call is named \"nope\""
    );
    assert_eq!(
        (db.count("solidq_jobs"), db.count("solidq_batches")),
        (0, 0),
        "nothing written"
    );
    // A parent id from another batch, added to an open one.
    let other = queue.batch(BatchOptions::new(), &[node(db, 1, 0)]).unwrap();
    let open = queue.open_batch(BatchOptions::new()).unwrap();
    let added = queue.add_to_batch(
        open,
        &[node(db, 2, 0), node(db, 3, 0).after_job(other.jobs[0])],
    );
    match added {
        Err(Error::Dependency { reason, .. }) => assert_eq!(
            reason,
            format!("job {} is not a member of batch {open}", other.jobs[0])
        ),
        other => panic!("expected a dependency error, got {other:?}"),
    }
    assert_eq!(db.count("solidq_jobs"), 1, "nothing added");
    assert_eq!(queue.batch_info(open).unwrap().unwrap().total, 0);
    // Dependencies outside a batch.
    let outside = queue.enqueue_batch(&[node(db, 1, 0).named("a"), node(db, 2, 0).after("a")]);
    assert!(
        matches!(&outside, Err(Error::Dependency { reason, .. }) if reason.contains("members of a batch")),
        "{outside:?}"
    );
    assert_eq!(db.count("solidq_jobs"), 1, "nothing enqueued");
    assert_eq!(db.count("solidq_dependencies"), 0);
    assert_eq!(db.count("solidq_waiting_executions"), 0);
}

fn a_job_added_later_waits_for_a_stored_member_however_it_is(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let open = queue.open_batch(BatchOptions::new()).unwrap();
    let first = queue
        .add_to_batch(open, &[node(db, 1, 0), hopeless()])
        .unwrap();
    let (done, failed) = (first[0], first[1]);
    let worker = common::jobs::worker(queue.clone())
        .threads(2)
        .start()
        .unwrap();
    wait_for("the first members to end", WAIT, || {
        status(&queue, done) == JobStatus::Succeeded && status(&queue, failed) == JobStatus::Failed
    });
    worker.stop().unwrap();
    // After a succeeded parent: ready at once. After a failed one:
    // cancelled at once. After one not ended (a waiting job): waits, and
    // an operator's cancel of its parent cancels it in turn.
    let later = queue
        .add_to_batch(
            open,
            &[
                node(db, 2, 0).after_job(done),
                node(db, 3, 0).after_job(failed),
                node(db, 4, 0)
                    .named("x")
                    .after_job(done)
                    .after_job(failed)
                    .even_if_parents_fail(),
                node(db, 5, 0).named("y").after("x"),
            ],
        )
        .unwrap();
    let (ready, cancelled, x, y) = (later[0], later[1], later[2], later[3]);
    assert_eq!(status(&queue, ready), JobStatus::Ready);
    assert_eq!(status(&queue, cancelled), JobStatus::Discarded);
    assert_eq!(
        last_error(&queue, cancelled),
        format!("cancelled by dependency: job {failed} failed")
    );
    assert_eq!(status(&queue, x), JobStatus::Ready, "runs anyway");
    assert_eq!(status(&queue, y), JobStatus::Waiting);
    let z = queue
        .add_to_batch(open, &[node(db, 6, 0).after_job(y)])
        .unwrap()[0];
    assert_eq!(status(&queue, z), JobStatus::Waiting);
    let cancel = queue.cancel_job(y, "not needed").unwrap();
    assert_eq!(cancel.discarded, 1);
    assert_eq!(status(&queue, y), JobStatus::Discarded);
    assert_eq!(status(&queue, z), JobStatus::Discarded);
    assert_eq!(
        last_error(&queue, z),
        format!("cancelled by dependency: job {y} failed")
    );
    queue.close_batch(open).unwrap();
    let info = work_until_finished(&queue, open);
    assert_eq!(
        (info.total, info.pending, info.succeeded, info.failed),
        (7, 0, 3, 4),
        "succeeded: the first, the one after it, x; failed: the hopeless one, the one after it, y, z"
    );
    assert_eq!(
        (starts(db, cancelled), starts(db, y), starts(db, z)),
        (0, 0, 0)
    );
    assert_invariants(db);
}

fn a_fan_in_of_300_parents_ended_by_three_processes_releases_the_join_once(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    // 300 parents ended by 3 processes of 4 threads: their completions
    // commit in many transactions at once, and the one that ends the last
    // parent must see the others' (the batch row serializes them).
    let mut jobs: Vec<JobRequest> = (0..300)
        .map(|n| node(db, n, 0).named(format!("p{n}")))
        .collect();
    let mut join = node(db, 1_000, 0);
    for n in 0..300 {
        join = join.after(format!("p{n}"));
    }
    jobs.push(join);
    let made = queue.batch(BatchOptions::new(), &jobs).unwrap();
    let join = *made.jobs.last().unwrap();
    let settings = [("SOLIDQ_TEST_THREADS", "4")];
    let workers: Vec<Child> = (0..3).map(|_| Child::worker(&db.url, &settings)).collect();
    let info = wait_finished(&queue, made.id, WAIT);
    drop(workers);
    assert_eq!(
        (info.total, info.pending, info.succeeded, info.failed),
        (301, 0, 301, 0)
    );
    assert_eq!(starts(db, join), 1);
    assert_eq!(started_early(db, made.id), 0);
    let pids = db.scalar("SELECT count(DISTINCT pid) AS v FROM test_ledger");
    assert!(pids >= 2, "the parents ran in {pids} processes");
    assert_invariants(db);
}

/// A worker frozen (SIGSTOP) while it runs a parent is pruned; a peer
/// reruns the parent and its dependant is released once. Thawed, the old
/// worker finishes its copy of the parent: its outcome is fenced by the
/// claim it lost, so it releases nothing and the dependant runs once.
fn a_frozen_worker_whose_parent_was_rerun_releases_nothing_when_thawed(db: &TestDb) {
    db.create_ledger();
    let queue = db.queue();
    let victim = Child::worker(&db.url, &[("SOLIDQ_TEST_THREADS", "1")]);
    let made = queue
        .batch(
            BatchOptions::new(),
            &[
                node(db, 1, 2_000).named("parent"),
                node(db, 2, 0).after("parent"),
            ],
        )
        .unwrap();
    let (parent, child) = (made.jobs[0], made.jobs[1]);
    wait_for("the parent to start", WAIT, || starts(db, parent) == 1);
    victim.freeze_outside_a_write(&db.url);
    let peer = Child::worker(&db.url, &[("SOLIDQ_TEST_ALIVE_MS", "1000")]);
    let info = wait_finished(&queue, made.id, WAIT);
    assert_eq!((info.succeeded, info.failed), (2, 0));
    victim.signal(libc::SIGCONT);
    wait_for("the thawed worker to find its claim lost", WAIT, || {
        victim
            .logs()
            .contains(&format!("claim on job {parent} was lost"))
    });
    drop(peer);
    assert_eq!(starts(db, parent), 2, "the frozen copy and the peer's");
    assert_eq!(starts(db, child), 1, "the dependant ran once");
    assert_eq!(queue.job(parent).unwrap().stalled_count, 1);
    assert_eq!(status(&queue, child), JobStatus::Succeeded);
    let info = queue.batch_info(made.id).unwrap().unwrap();
    assert_eq!(
        (info.total, info.pending, info.succeeded, info.failed),
        (2, 0, 2, 0),
        "the late outcome moved no count"
    );
    assert_invariants(db);
}
