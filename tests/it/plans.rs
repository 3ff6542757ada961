//! Every hot statement uses an index, on both backends, with realistic
//! volumes and fresh statistics. `docs/query-plans.md` holds the plans this
//! test printed (run it with `--nocapture` to see them).

use crate::common;

use std::time::Duration;

use common::TestDb;
use common::jobs::Echo;
use serde_json::json;
use solidq::{Backend, EnqueueOptions, JobRequest};

backend_tests!(
    every_hot_statement_uses_an_index,
    churned_tables_get_vacuumed
);

/// (statement, index names of which one must appear in its plan).
const EXPECTED: &[(&str, &[&str], &[&str])] = &[
    // PostgreSQL names, SQLite names.
    (
        "claim from *",
        &["solidq_ready_poll_all"],
        &["solidq_ready_poll_all"],
    ),
    (
        "claim from one queue",
        &["solidq_ready_poll_by_queue"],
        &["solidq_ready_poll_by_queue"],
    ),
    (
        "claim from a prefix",
        &["solidq_ready_poll"],
        &["solidq_ready_poll"],
    ),
    (
        "claim from a list",
        &["solidq_ready_poll_by_queue"],
        &["solidq_ready_poll_by_queue"],
    ),
    // One probe of the queue's index per listed name, in the list's order.
    (
        "claim from listed queues",
        &["solidq_ready_poll_by_queue"],
        &["solidq_ready_poll_by_queue"],
    ),
    ("dispatch due jobs", &["solidq_scheduled_dispatch"], &[]),
    // A worker's look below its floor: the claim's index, from its head.
    (
        "look below a floor in one queue",
        &["solidq_ready_poll_by_queue"],
        &[],
    ),
    // A keyed job's place: its key's last ready row, by the partial index.
    (
        "enqueue many jobs with fairness keys",
        &["solidq_ready_fair"],
        &[],
    ),
    (
        "enqueue: keyed jobs' ready rows",
        &[],
        &["solidq_ready_fair"],
    ),
    (
        "dispatch: find due jobs",
        &[],
        &["solidq_scheduled_dispatch"],
    ),
    // Claims are found by job id, one unique probe each: never by process
    // (an index on it made PostgreSQL walk every dead claim of the process).
    (
        "finish (fence and succeed)",
        &["Index Scan using solidq_claimed_executions_pkey"],
        &[],
    ),
    (
        "fence before a failure",
        &["Index Scan using solidq_claimed_executions_pkey"],
        &[],
    ),
    ("finish: fence", &[], &["INTEGER PRIMARY KEY"]),
    ("finish: succeed", &[], &["INTEGER PRIMARY KEY"]),
    ("claim: out of ready", &[], &["INTEGER PRIMARY KEY"]),
    ("claim: read the jobs", &[], &["INTEGER PRIMARY KEY"]),
    // One row per process: on PostgreSQL a sequential scan of its page or
    // two is the right plan.
    ("heartbeat", &[], &["INTEGER PRIMARY KEY"]),
    (
        "clean finished jobs",
        &["solidq_jobs_expires_at"],
        &["solidq_jobs_expires_at"],
    ),
    (
        "find unique keys",
        &["solidq_jobs_unique_key"],
        &["solidq_jobs_unique_key"],
    ),
    // The dashboard's tab count: the few discarded among the finished.
    (
        "dashboard: count discarded jobs",
        &["solidq_jobs_discarded"],
        &["solidq_jobs_discarded"],
    ),
];

/// MySQL's (statement, index of which one must appear in its plan): its
/// plans name each table by its alias in the statement, then the access
/// type (`eq_ref` is one unique probe per row) and the index.
const MYSQL_EXPECTED: &[(&str, &[&str])] = &[
    ("claim from *", &["solidq_ready_poll_all"]),
    ("claim from one queue", &["solidq_ready_poll_by_queue"]),
    ("claim from a prefix", &["solidq_ready_poll"]),
    ("claim from a list", &["solidq_ready_poll_by_queue"]),
    (
        "claim from listed queues",
        &["r: ref USING solidq_ready_poll_by_queue"],
    ),
    (
        "claim ahead from listed queues",
        &["r: ref USING solidq_ready_poll_by_queue"],
    ),
    (
        "claim ahead from *",
        &["r: index USING solidq_ready_poll_all"],
    ),
    (
        "claim ahead from one queue",
        &["r: ref USING solidq_ready_poll_by_queue"],
    ),
    // From a floor (`store::floor`): a range of the same index, in its
    // order.
    (
        "claim from one queue, from a floor",
        &["r: range USING solidq_ready_poll_by_queue"],
    ),
    (
        "claim from *, from a floor",
        &["r: range USING solidq_ready_poll_all"],
    ),
    (
        "claim ahead from one queue, from a floor",
        &["r: range USING solidq_ready_poll_by_queue"],
    ),
    (
        "look below a floor in one queue",
        &["r: range USING solidq_ready_poll_by_queue"],
    ),
    ("dispatch: find due jobs", &["solidq_scheduled_dispatch"]),
    ("dispatch limited jobs", &["solidq_scheduled_dispatch"]),
    ("dispatch: move them", &["x: eq_ref USING PRIMARY"]),
    // Jobs by id; a keyed job's place by its key's last ready row (the
    // plan of a single job's ready row is MariaDB's constant lookup).
    ("dispatch: make them ready", &["j: eq_ref USING PRIMARY"]),
    (
        "dispatch: make them ready",
        &["f: ref USING solidq_ready_fair"],
    ),
    (
        "claim: lock the picked rows",
        &["solidq_ready_executions: eq_ref USING PRIMARY"],
    ),
    (
        "claim: read the jobs",
        &["solidq_jobs: eq_ref USING PRIMARY"],
    ),
    // Claims are found by job id, never by process (as on PostgreSQL).
    (
        "finish: fence",
        &["solidq_claimed_executions: eq_ref USING PRIMARY"],
    ),
    ("finish: succeed", &["j: eq_ref USING PRIMARY"]),
    ("heartbeat", &["solidq_processes: range USING PRIMARY"]),
    ("clean finished jobs", &["solidq_jobs_expires_at"]),
    // The discarded jobs' own table: MySQL has no partial index.
    (
        "dashboard: count discarded jobs",
        &["solidq_discarded_jobs: "],
    ),
    ("find unique keys", &["solidq_jobs_unique_key"]),
    ("release a blocked job", &["solidq_blocked_release"]),
];

/// Tables that grow with the number of jobs: never read whole.
const BIG_TABLES: [&str; 4] = [
    "solidq_jobs",
    "solidq_ready_executions",
    "solidq_scheduled_executions",
    "solidq_claimed_executions",
];

fn every_hot_statement_uses_an_index(db: &TestDb) {
    let queue = db.queue();
    // 20,000 ready on three queues, 3,000 delayed, 5,000 finished and kept,
    // 2,000 claimed, a few unique keys.
    let mut requests = Vec::new();
    for n in 0..25_000 {
        let queue_name = ["default", "critical", "mail_out"][n % 3];
        let mut options = EnqueueOptions::new()
            .queue(queue_name)
            .priority((n % 5) as i32);
        if n < 3_000 {
            options = options.delay(Duration::from_secs(3_600));
        }
        if n % 1_000 == 0 {
            options = options.unique_key(format!("key-{n}"));
        }
        requests.push(JobRequest::new(&Echo { value: json!(n) }, options).unwrap());
    }
    for chunk in requests.chunks(5_000) {
        queue.enqueue_batch(chunk).unwrap();
    }
    let (now, later, analyze) = match db.backend {
        Backend::Postgres => (
            "LOCALTIMESTAMP",
            "LOCALTIMESTAMP + INTERVAL '1 day'",
            "ANALYZE",
        ),
        Backend::Sqlite => ("datetime('now')", "datetime('now', '+1 day')", "ANALYZE"),
        Backend::Mysql => (
            "UTC_TIMESTAMP(6)",
            "UTC_TIMESTAMP(6) + INTERVAL 1 DAY",
            "ANALYZE TABLE solidq_jobs, solidq_ready_executions, solidq_scheduled_executions,
                 solidq_claimed_executions, solidq_processes",
        ),
    };
    db.execute(&format!(
        "INSERT INTO solidq_processes (kind, name, pid, hostname, metadata, last_heartbeat_at, created_at)
         VALUES ('worker', 'w1', 1, 'h', '{{}}', {now}, {now}), ('worker', 'w2', 2, 'h', '{{}}', {now}, {now});
         UPDATE solidq_jobs SET finished_at = {now}, expires_at = {later}
         WHERE id IN (SELECT job_id FROM (
             SELECT job_id FROM solidq_ready_executions ORDER BY job_id LIMIT 5000) AS t);
         DELETE FROM solidq_ready_executions WHERE job_id IN (SELECT id FROM solidq_jobs WHERE finished_at IS NOT NULL);
         INSERT INTO solidq_claimed_executions (job_id, process_id, created_at)
         SELECT job_id, (SELECT min(id) FROM solidq_processes), {now}
         FROM solidq_ready_executions ORDER BY job_id DESC LIMIT 2000;
         DELETE FROM solidq_ready_executions WHERE job_id IN (SELECT job_id FROM solidq_claimed_executions);
         {analyze};"
    ));
    common::assert_invariants(db);

    let plans = queue.explain_hot_queries().unwrap();
    for (name, plan) in &plans {
        eprintln!("### {name}\n{plan}\n");
    }
    let postgres = db.backend == Backend::Postgres;
    let expectations: Vec<(&str, &[&str])> = match db.backend {
        Backend::Mysql => MYSQL_EXPECTED.to_vec(),
        Backend::Postgres => EXPECTED.iter().map(|(n, p, _)| (*n, *p)).collect(),
        Backend::Sqlite => EXPECTED.iter().map(|(n, _, s)| (*n, *s)).collect(),
    };
    for (name, expected) in expectations {
        if expected.is_empty() {
            continue;
        }
        let plan = &plans
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("no plan for {name:?}"))
            .1;
        assert!(
            expected.iter().any(|index| plan.contains(index)),
            "{name}: expected one of {expected:?} in\n{plan}"
        );
    }
    for (name, plan) in &plans {
        if db.backend == Backend::Mysql {
            // Plans name tables by their aliases: no real table is read
            // whole (`ALL`), only a statement's own JSON list of ids or
            // keys and materialized results (`<derived2>`, `<subquery2>`).
            let full_scan = plan.lines().any(|l| {
                l.split_once(": ALL").is_some_and(|(table, _)| {
                    !table.starts_with('<') && table != "ids" && table != "strs" && table != "names"
                })
            });
            assert!(!full_scan, "{name} reads a table whole:\n{plan}");
            continue;
        }
        for table in BIG_TABLES {
            let full_scan = if postgres {
                plan.contains(&format!("Seq Scan on {table} "))
                    || plan
                        .lines()
                        .any(|l| l.trim_end().ends_with(&format!("Seq Scan on {table}")))
            } else {
                plan.lines().any(|l| {
                    l.trim() == format!("SCAN {table}")
                        || l.trim().starts_with(&format!("SCAN {table} ")) && !l.contains("USING")
                })
            };
            assert!(!full_scan, "{name} reads all of {table}:\n{plan}");
        }
    }
    if db.backend == Backend::Sqlite {
        // The list is the outer loop and each queue is read in its index's
        // order, which is the claim order: nothing sorted, so the probes
        // stop at the limit.
        let listed = &plans
            .iter()
            .find(|(n, _)| n == "claim from listed queues")
            .expect("a plan of the listed claim")
            .1;
        let first = listed.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("SCAN q VIRTUAL TABLE") && !listed.contains("TEMP B-TREE"),
            "the listed claim is not a loop over the names in order:\n{listed}"
        );
    }
}

/// The queue tables see one insert and one delete per job; where autovacuum
/// is off or behind, solidq vacuums them itself once dead rows outnumber
/// live ones (PostgreSQL; SQLite reuses freed pages, so there solidq
/// refreshes the statistics of tables that grew).
fn churned_tables_get_vacuumed(db: &TestDb) {
    let queue = db.queue();
    let now = match db.backend {
        Backend::Postgres => "LOCALTIMESTAMP",
        Backend::Sqlite => "datetime('now')",
        Backend::Mysql => "UTC_TIMESTAMP(6)",
    };
    let insert = format!(
        "INSERT INTO solidq_ready_executions (job_id, queue_name, priority, created_at)
         SELECT n, 'default', 0, {now} FROM (WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 5000) SELECT n FROM s) AS s;"
    );
    if db.backend == Backend::Mysql {
        // InnoDB purges deleted rows itself and keeps its statistics
        // current: tending has nothing to do, even after churn.
        db.execute(&format!(
            "INSERT INTO solidq_ready_executions (job_id, queue_name, priority, created_at)
             SELECT i + 1, 'default', 0, {now} FROM {}",
            common::mysql_numbers(5_000, "s")
        ));
        assert_eq!(db.count("solidq_ready_executions"), 5_000);
        db.execute("DELETE FROM solidq_ready_executions");
        assert_eq!(
            queue.tend_tables().unwrap(),
            Vec::<String>::new(),
            "nothing for solidq to vacuum or analyze on InnoDB"
        );
        return;
    }
    if db.backend == Backend::Sqlite {
        // Nothing to vacuum (freed pages are reused): tending refreshes the
        // statistics of a table that grew, once.
        db.execute(&insert);
        let done = queue.tend_tables().unwrap();
        assert!(
            done.iter().any(|d| d == "ANALYZE solidq_ready_executions "),
            "{done:?}"
        );
        assert!(
            db.scalar(
                "SELECT COUNT(*) AS v FROM sqlite_stat1 WHERE tbl = 'solidq_ready_executions'"
            ) >= 1
        );
        assert_eq!(
            queue.tend_tables().unwrap(),
            Vec::<String>::new(),
            "unchanged tables are left alone"
        );
        return;
    }
    db.execute(&format!("{insert} DELETE FROM solidq_ready_executions;"));
    // The server publishes a backend's table statistics within a second or
    // so of its transaction ending.
    let mut done = Vec::new();
    common::wait_for(
        "the ready table to be vacuumed",
        Duration::from_secs(10),
        || {
            done.extend(queue.tend_tables().unwrap());
            done.iter()
                .any(|d| d.starts_with("VACUUM") && d.contains("solidq_ready_executions "))
        },
    );
    // The server ran it (whether it could remove the rows depends on the
    // oldest snapshot of other tests' transactions, so that is not checked).
    let vacuums = db.scalar(
        "SELECT vacuum_count AS v FROM pg_stat_user_tables
         WHERE schemaname = current_schema() AND relname = 'solidq_ready_executions'",
    );
    assert!(vacuums >= 1, "{done:?}");
    // Tables without churn are left alone.
    assert!(
        !done
            .iter()
            .any(|d| d.contains("solidq_jobs ") || d.contains("solidq_failed_executions ")),
        "{done:?}"
    );
}

/// InnoDB locks every row a locking read reads. A claim whose plan sorts
/// (MariaDB's choice for a table of a few dozen rows, once analyzed) would
/// lock every ready row of its queues while taking a few, and a concurrent
/// claim would skip them all and come back empty: its worker then waited
/// for the fallback poll (seen in `hoarding.rs` in CI). However small the
/// table, the claims read it in index order, and the ahead part filters
/// kinds before its limit.
#[cfg(feature = "mysql")]
#[test]
fn mysql_claims_read_a_small_table_in_index_order() {
    let Some(db) = TestDb::mysql() else {
        return;
    };
    let queue = db.queue();
    let jobs: Vec<Echo> = (0..40).map(|n| Echo { value: json!(n) }).collect();
    queue.enqueue_all(&jobs).unwrap();
    db.execute("ANALYZE TABLE solidq_jobs, solidq_ready_executions, solidq_pauses");
    let plans = queue.explain_hot_queries().unwrap();
    let claims: Vec<_> = plans
        .iter()
        .filter(|(name, _)| name.starts_with("claim from") || name.starts_with("claim ahead"))
        .collect();
    assert_eq!(claims.len(), 11, "{plans:?}");
    for (name, plan) in claims {
        // From a floor: a range of the same indexes.
        let reads_in_order = plan.lines().filter(|l| l.starts_with("r: ")).all(|l| {
            l.starts_with("r: index USING solidq_ready_poll_all")
                || l.starts_with("r: ref USING solidq_ready_poll_by_queue")
                || (name.ends_with("from a floor")
                    && (l.starts_with("r: range USING solidq_ready_poll_all")
                        || l.starts_with("r: range USING solidq_ready_poll_by_queue")))
        });
        assert!(
            reads_in_order && !plan.contains("filesort"),
            "{name} does not read the ready rows in claim order:\n{plan}"
        );
    }
}

/// The claim's ahead part (jobs taken for threads still busy, only of the
/// fast kinds) filters each candidate by its job's kind with one
/// primary-key probe, in the ready index's order, whatever the statistics
/// say. Written as an `EXISTS`, PostgreSQL flattened it into a join, and
/// with statistics taken while the jobs table was empty (a new
/// queue whose finished jobs are kept, analyzed empty) the
/// generic plan drove the claim from a sequential scan of every job and
/// sorted the result: 7,455 buffers a claim in the bench's mixed run,
/// where four threads enqueued at 0.46 of what one enqueued alone.
#[cfg(feature = "postgres")]
#[test]
fn postgres_claims_never_read_every_job_on_stale_statistics() {
    let Some(db) = TestDb::postgres() else {
        return;
    };
    let queue = db.queue();
    db.execute(
        "ALTER TABLE solidq_jobs SET (autovacuum_enabled = false);
         ALTER TABLE solidq_ready_executions SET (autovacuum_enabled = false)",
    );
    // Analyzed empty, as solidq's own upkeep does on a new database
    // moments after it is migrated (autovacuum's next look is a minute
    // away): no statistics of any column, so every filter gets the
    // planner's default selectivity.
    db.execute("ANALYZE solidq_jobs; ANALYZE solidq_ready_executions");
    let echo = |n: usize| Echo { value: json!(n) };
    // 20,000 jobs, all but 100 of them finished and kept.
    let jobs: Vec<Echo> = (0..20_000).map(echo).collect();
    for chunk in jobs.chunks(5_000) {
        queue.enqueue_all(chunk).unwrap();
    }
    db.execute(
        "UPDATE solidq_jobs SET finished_at = LOCALTIMESTAMP,
             expires_at = LOCALTIMESTAMP + INTERVAL '1 day'
         WHERE id IN (SELECT job_id FROM solidq_ready_executions ORDER BY job_id LIMIT 19900);
         DELETE FROM solidq_ready_executions
         WHERE job_id IN (SELECT id FROM solidq_jobs WHERE finished_at IS NOT NULL)",
    );
    let plans = queue.explain_hot_queries().unwrap();
    let claims: Vec<_> = plans
        .iter()
        .filter(|(name, _)| name.starts_with("claim from"))
        .collect();
    assert!(claims.len() >= 4, "the claims' plans: {plans:?}");
    for (name, plan) in claims {
        assert!(
            !plan.contains("Seq Scan on solidq_jobs"),
            "{name} reads every job:\n{plan}"
        );
    }
}
