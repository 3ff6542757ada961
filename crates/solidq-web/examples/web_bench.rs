//! How long the dashboard takes to render its pages with a large finished
//! table: `--finished` succeeded jobs (1,000,000 by default), among them
//! every 10,000th discarded, plus 1,000 failed, 1,000 ready and 1,000
//! scheduled jobs, on each backend. Each page is rendered `--repeat`
//! times through the router in process (no network): the median and the
//! range, beside the same page on a database with only the waiting and
//! failed jobs (the baseline, same process).
//!
//! `cargo run --release --example web_bench -- [--backend sqlite|postgres|both]
//! [--finished N] [--repeat R] [--postgres-url URL]`

use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use diesel::connection::SimpleConnection;
use diesel::{Connection, PgConnection, SqliteConnection};
use solidq::{EnqueueOptions, Queue, QueueConfig};
use solidq_web::{WebConfig, router};
use tower::ServiceExt;

const PAGES: &[&str] = &[
    "/queues",
    "/jobs?status=failed",
    "/jobs?status=ready",
    "/jobs?status=finished",
    "/jobs?status=discarded",
    "/jobs?status=finished&last=1",
    "/jobs?status=failed&kind=bench&from=2000-01-01T00:00",
    "/jobs/1",
    "/processes",
    "/recurring",
    "/concurrency",
    "/charts",
    "/charts/data",
    "/audit",
    "/database",
    "/metrics",
];

struct Args {
    backends: Vec<String>,
    finished: u64,
    repeat: usize,
    postgres_url: String,
}

fn args() -> Args {
    let mut a = Args {
        backends: vec!["sqlite".into(), "postgres".into()],
        finished: 1_000_000,
        repeat: 3,
        postgres_url: "postgres://postgres@127.0.0.1:5432/postgres".into(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_default();
        match flag.as_str() {
            "--backend" if value == "both" => {}
            "--backend" => a.backends = vec![value],
            "--finished" => a.finished = value.parse().expect("--finished N"),
            "--repeat" => a.repeat = value.parse().expect("--repeat R"),
            "--postgres-url" => a.postgres_url = value,
            other => panic!("unknown flag {other}; see the file's docs"),
        }
    }
    a
}

/// Inserts `n` finished jobs in bulk SQL (the API would take minutes):
/// succeeded, every 10,000th discarded.
fn seed_finished(backend: &str, url: &str, n: u64) {
    let discarded = r#"[{"kind":"discarded","message":"bench"}]"#;
    let sql = |series: &str| {
        format!(
            "INSERT INTO solidq_jobs (queue_name, kind, arguments, priority, options, delivery, \
             max_attempts, attempts, stalled_count, snoozes, result, errors, scheduled_at, \
             finished_at, expires_at, created_at, updated_at) \
             SELECT 'default', 'bench', '{{\"i\":1}}', 0, '{{}}', 'at_least_once', 2, 1, 0, 0, \
             'null', CASE WHEN i % 10000 = 0 THEN '{discarded}' ELSE NULL END, \
             {now}, {now}, {later}, {now}, {now} FROM {series}",
            now = if backend == "sqlite" {
                "datetime('now')"
            } else {
                "now() AT TIME ZONE 'UTC'"
            },
            later = if backend == "sqlite" {
                "datetime('now', '+1 day')"
            } else {
                "(now() AT TIME ZONE 'UTC') + interval '1 day'"
            },
        )
    };
    if backend == "sqlite" {
        let mut conn = SqliteConnection::establish(url).unwrap();
        conn.batch_execute(&format!(
            "BEGIN; WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < {n}) {}; COMMIT; ANALYZE;",
            sql("s")
        ))
        .unwrap();
    } else {
        let mut conn = PgConnection::establish(url).unwrap();
        conn.batch_execute(&format!(
            "{}; ANALYZE;",
            sql(&format!("generate_series(1, {n}) AS s(i)"))
        ))
        .unwrap();
    }
}

fn seed_waiting(queue: &Queue) {
    let ready: Vec<_> = (0..1_000).map(|i| serde_json::json!({ "i": i })).collect();
    for args in &ready {
        queue
            .enqueue_kind("bench", args, EnqueueOptions::default())
            .unwrap();
    }
    for args in &ready {
        queue
            .enqueue_kind(
                "bench_later",
                args,
                EnqueueOptions::new().delay(Duration::from_secs(3600)),
            )
            .unwrap();
    }
}

fn seed_failed(url: &str, backend: &str) {
    // Failed jobs: the ready "bench" jobs moved to failed in SQL.
    let now = if backend == "sqlite" {
        "datetime('now')"
    } else {
        "now() AT TIME ZONE 'UTC'"
    };
    let sql = format!(
        "INSERT INTO solidq_failed_executions (job_id, error, created_at) \
         SELECT job_id, '{{\"kind\":\"bench\",\"message\":\"failed\"}}', {now} \
         FROM solidq_ready_executions WHERE job_id % 2 = 0; \
         DELETE FROM solidq_ready_executions WHERE job_id IN (SELECT job_id FROM solidq_failed_executions);"
    );
    if backend == "sqlite" {
        SqliteConnection::establish(url)
            .unwrap()
            .batch_execute(&sql)
            .unwrap();
    } else {
        PgConnection::establish(url)
            .unwrap()
            .batch_execute(&sql)
            .unwrap();
    }
}

fn render(app: &Router, runtime: &tokio::runtime::Runtime, path: &str) -> Duration {
    runtime.block_on(async {
        let started = Instant::now();
        let response = app
            .clone()
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), 64 << 20)
            .await
            .unwrap();
        let elapsed = started.elapsed();
        assert_eq!(
            status,
            StatusCode::OK,
            "{path}: {}",
            String::from_utf8_lossy(&body)
        );
        elapsed
    })
}

fn measure(app: &Router, runtime: &tokio::runtime::Runtime, path: &str, repeat: usize) -> Vec<f64> {
    render(app, runtime, path); // warm caches
    let mut ms: Vec<f64> = (0..repeat)
        .map(|_| render(app, runtime, path).as_secs_f64() * 1000.0)
        .collect();
    ms.sort_by(f64::total_cmp);
    ms
}

fn fresh(backend: &str, args: &Args, dir: &std::path::Path, name: &str) -> String {
    if backend == "sqlite" {
        dir.join(format!("{name}.db")).display().to_string()
    } else {
        let schema = format!("web_bench_{name}_{}", std::process::id());
        let mut admin = PgConnection::establish(&args.postgres_url).unwrap();
        admin
            .batch_execute(&format!(
                "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema};"
            ))
            .unwrap();
        let sep = if args.postgres_url.contains('?') {
            '&'
        } else {
            '?'
        };
        format!("{}{sep}options=-csearch_path%3D{schema}", args.postgres_url)
    }
}

fn main() {
    let args = args();
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for backend in &args.backends {
        let mut apps = Vec::new();
        for (name, finished) in [("baseline", 0), ("large", args.finished)] {
            let url = fresh(backend, &args, dir.path(), name);
            let queue = Queue::connect_with(&url, QueueConfig::default()).unwrap();
            queue.migrate().unwrap();
            let started = Instant::now();
            if finished > 0 {
                seed_finished(backend, &url, finished);
            }
            seed_waiting(&queue);
            seed_failed(&url, backend);
            eprintln!(
                "{backend} {name}: seeded {finished} finished jobs in {:.1} s",
                started.elapsed().as_secs_f64()
            );
            let mut config = WebConfig::new();
            config.anonymous = true;
            apps.push(router(queue, config).unwrap());
        }
        println!(
            "\n{backend}: ms per page, median [min–max] of {}, {} finished jobs vs none",
            args.repeat, args.finished
        );
        println!(
            "{:<56} {:>22} {:>22} {:>7}",
            "page", "large", "baseline", "ratio"
        );
        for path in PAGES {
            let base = measure(&apps[0], &runtime, path, args.repeat);
            let large = measure(&apps[1], &runtime, path, args.repeat);
            let median = |v: &[f64]| v[v.len() / 2];
            let show = |v: &[f64]| format!("{:.1} [{:.1}–{:.1}]", median(v), v[0], v[v.len() - 1]);
            println!(
                "{:<56} {:>22} {:>22} {:>6.1}×",
                path,
                show(&large),
                show(&base),
                median(&large) / median(&base).max(0.001)
            );
        }
    }
}
