//! Database health, on both backends: every solidq table is listed with
//! plausible rows and sizes after jobs are inserted (PostgreSQL's from its
//! statistics, SQLite's counted or estimated), the backend's own facts are
//! there, and the database password shows nowhere.

use crate::common;

use std::time::Duration;

use common::jobs::Echo;
use common::{TestDb, wait_for};
use solidq::{Backend, DatabaseHealth, EnqueueOptions, Queue};

backend_tests!(
    every_table_is_listed_with_plausible_rows_and_sizes,
    the_password_shows_nowhere,
);

fn table<'a>(health: &'a DatabaseHealth, name: &str) -> &'a solidq::TableHealth {
    health
        .tables
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("{name} listed: {health:#?}"))
}

fn every_table_is_listed_with_plausible_rows_and_sizes(db: &TestDb) {
    let queue = db.queue();
    let jobs: Vec<Echo> = (0..1_000).map(|n| Echo { value: n.into() }).collect();
    queue.enqueue_all(&jobs).unwrap();
    for n in 0..200 {
        queue
            .enqueue_with(
                &Echo { value: n.into() },
                EnqueueOptions::new().delay(Duration::from_secs(3600)),
            )
            .unwrap();
    }
    // PostgreSQL's statistics take their counts from each backend within
    // a second or so of its commit.
    let mut health = queue.database_health().unwrap();
    wait_for(
        "the statistics to see the jobs",
        Duration::from_secs(30),
        || {
            health = queue.database_health().unwrap();
            table(&health, "solidq_jobs").rows >= 1_000
        },
    );
    let names: Vec<&str> = health.tables.iter().map(|t| t.name.as_str()).collect();
    for expected in [
        "solidq_audit_log",
        "solidq_blocked_executions",
        "solidq_claimed_executions",
        "solidq_failed_executions",
        "solidq_job_stats",
        "solidq_jobs",
        "solidq_pauses",
        "solidq_processes",
        "solidq_ready_executions",
        "solidq_recurring_executions",
        "solidq_recurring_tasks",
        "solidq_scheduled_executions",
        "solidq_semaphores",
    ] {
        assert!(names.contains(&expected), "{expected} in {names:?}");
    }
    assert!(names.windows(2).all(|w| w[0] < w[1]), "by name: {names:?}");
    assert!(names.iter().all(|n| n.starts_with("solidq_")), "{names:?}");

    let jobs = table(&health, "solidq_jobs");
    // Estimates may be a little off; not by an order of magnitude.
    assert!((1_000..=2_000).contains(&jobs.rows), "{jobs:?}");
    let ready = table(&health, "solidq_ready_executions");
    let scheduled = table(&health, "solidq_scheduled_executions");
    assert!(ready.rows >= 900 && ready.rows <= 1_100, "{ready:?}");
    assert!(scheduled.rows <= 400, "{scheduled:?}");
    let jobs_bytes = jobs.total_bytes.expect("measured");
    assert!(
        (1_200 * 40..100 << 20).contains(&jobs_bytes),
        "1,200 jobs take some room: {jobs:?}"
    );
    let empty = table(&health, "solidq_failed_executions");
    assert_eq!(empty.rows, 0, "{empty:?}");
    assert_eq!(health.backend, db.backend.to_string());
    let now = chrono::Utc::now();
    assert!((now - health.checked_at).num_seconds().abs() < 60);

    match db.backend {
        Backend::Sqlite => {
            assert!(jobs.rows_exact, "a small table is counted");
            assert_eq!(jobs.rows, 1_200);
            assert_eq!(scheduled.rows, 200);
            assert!(jobs.dead_rows.is_none() && jobs.last_autovacuum.is_none());
            let files = health.sqlite.as_ref().expect("SQLite's files");
            assert!(health.postgres.is_none());
            assert!(files.path.ends_with("test.sqlite3"), "{files:?}");
            assert!(files.page_size >= 512 && files.page_count > 10, "{files:?}");
            assert!(
                files.file_bytes + files.wal_bytes >= files.page_size * 10,
                "{files:?}"
            );
            assert!(files.freelist_pages <= files.page_count);
            let summed: u64 = health.tables.iter().filter_map(|t| t.total_bytes).sum();
            assert!(
                summed <= files.page_size * files.page_count,
                "tables fit in the file: {summed} of {files:?}"
            );
        }
        Backend::Mysql => {
            assert!(!jobs.rows_exact, "InnoDB's rows are estimates");
            assert!(health.sqlite.is_none() && health.postgres.is_none());
            // The estimates come from InnoDB's statistics, fresh after an
            // analysis.
            db.execute("ANALYZE TABLE solidq_jobs");
            let health = queue.database_health().unwrap();
            let jobs = table(&health, "solidq_jobs");
            assert!((1_000..=2_000).contains(&jobs.rows), "{jobs:?}");
            assert!(jobs.total_bytes.is_some_and(|b| b > 0), "{jobs:?}");
        }
        Backend::Postgres => {
            assert!(!jobs.rows_exact, "PostgreSQL's rows are estimates");
            assert!(jobs.dead_rows.is_some());
            let server = health.postgres.as_ref().expect("PostgreSQL's facts");
            assert!(health.sqlite.is_none());
            assert!(server.schema.starts_with("solidq_t_"), "{server:?}");
            assert!(server.database_bytes >= jobs_bytes, "{server:?}");
            assert!(!server.server_version.is_empty());
            // A vacuum shows.
            db.execute("VACUUM solidq_jobs");
            let health = queue.database_health().unwrap();
            let jobs = table(&health, "solidq_jobs");
            assert!(jobs.last_vacuum.is_some(), "{jobs:?}");
            assert!((1_000..=2_000).contains(&jobs.rows), "{jobs:?}");
        }
    }
    let json = serde_json::to_value(&health).unwrap();
    assert!(
        json["tables"]
            .as_array()
            .is_some_and(|t| t.len() == names.len())
    );
}

/// Large SQLite tables are estimated, without counting past 100,000 rows.
#[cfg(feature = "sqlite")]
fn big_sqlite_tables_are_estimated(db: &TestDb) {
    let queue = db.queue();
    // 150,000 finished jobs with a gap of deleted ids in the middle.
    db.execute(
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 150000)
         INSERT INTO solidq_jobs (id, queue_name, kind, arguments, options, scheduled_at, finished_at,
                                  created_at, updated_at)
         SELECT CASE WHEN x > 100000 THEN x + 50000 ELSE x END, 'default', 'echo', '{}', '{}',
                '2026-11-24 10:00:00', '2026-11-24 10:00:01', '2026-11-24 10:00:00',
                '2026-11-24 10:00:01'
         FROM c",
    );
    let health = queue.database_health().unwrap();
    let jobs = table(&health, "solidq_jobs");
    assert!(!jobs.rows_exact, "{jobs:?}");
    assert_eq!(
        jobs.rows, 200_000,
        "no ANALYZE yet: the rowid span, {jobs:?}"
    );
    db.execute("ANALYZE");
    let health = queue.database_health().unwrap();
    let jobs = table(&health, "solidq_jobs");
    assert_eq!(jobs.rows, 150_000, "ANALYZE's count: {jobs:?}");
    assert!(!jobs.rows_exact);
}

#[cfg(feature = "sqlite")]
mod sqlite_only {
    #[test]
    fn big_sqlite_tables_are_estimated() {
        super::big_sqlite_tables_are_estimated(&super::TestDb::sqlite());
    }
}

fn the_password_shows_nowhere(db: &TestDb) {
    // PostgreSQL here trusts local connections, so any password gets in;
    // SQLite has none, but its URL may carry parameters.
    let (url, secret) = match db.backend {
        Backend::Postgres => {
            let url = db.url.replacen(
                "postgres://postgres@",
                "postgres://postgres:hunter2-secret@",
                1,
            );
            (format!("{url}&password=hunter2-param"), "hunter2")
        }
        // MySQL here has root without a password: one in the URL would
        // be refused, so only a query parameter is tried.
        Backend::Sqlite | Backend::Mysql => (db.url.clone(), "hunter2"),
    };
    let queue = Queue::connect(&url).unwrap();
    queue.migrate().unwrap();
    let health = queue.database_health().unwrap();
    let shown = format!("{health:?}\n{}", serde_json::to_string(&health).unwrap());
    assert!(!shown.contains(secret), "{shown}");
    if db.backend == Backend::Postgres {
        assert!(health.database.contains("***"), "{}", health.database);
    }
}
