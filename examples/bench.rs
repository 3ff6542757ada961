//! Throughput and latency of solidq on this machine, printed as a table.
//!
//! ```text
//! cargo run --release --example bench -- [--backend sqlite|postgres|both]
//!     [--postgres-url URL] [--jobs 50000] [--threads 8] [--processes 1,2]
//!     [--single 2000] [--latency-samples 200]
//! ```
//!
//! For each backend, on a fresh database (an SQLite file in the temp
//! directory, or a new schema in the PostgreSQL database):
//! * enqueue, single: `--single` calls to `enqueue`, one after another;
//! * enqueue, bulk: `--jobs` jobs through `enqueue_all` in batches of 1,000;
//! * work-down: `--jobs` no-op jobs already enqueued, worked down by P
//!   worker processes of `--threads` threads each, for each P in
//!   `--processes` (time from spawning the workers to the last job finished);
//! * pickup latency: one job at a time enqueued while a worker process is
//!   idle, from the enqueue call to the job starting (p50, p99).
//!
//! Worker processes are this binary re-run with `--worker`.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use diesel::connection::SimpleConnection;
use diesel::{Connection, PgConnection, QueryableByName, RunQueryDsl, SqliteConnection};
use serde::{Deserialize, Serialize};
use solidq::{Job, JobContext, JobResult, JobStatus, Queue, QueueConfig, Worker, WorkerConfig};

/// Does nothing.
#[derive(Serialize, Deserialize)]
struct Noop;

impl Job for Noop {
    const KIND: &'static str = "noop";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        Ok(serde_json::Value::Null)
    }
}

/// Returns when it started, in microseconds since the epoch.
#[derive(Serialize, Deserialize)]
struct Stamp;

impl Job for Stamp {
    const KIND: &'static str = "stamp";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        Ok(serde_json::json!(now_us()))
    }
}

fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64
}

struct Args {
    backends: Vec<&'static str>,
    postgres_url: String,
    jobs: usize,
    threads: usize,
    processes: Vec<usize>,
    single: usize,
    latency_samples: usize,
}

fn parse_args() -> Args {
    let mut args = Args {
        backends: vec!["sqlite", "postgres"],
        postgres_url: "postgres://postgres@127.0.0.1:5432/postgres".into(),
        jobs: 50_000,
        threads: 8,
        processes: vec![1, 2],
        single: 2_000,
        latency_samples: 200,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--backend" => {
                args.backends = match value().as_str() {
                    "sqlite" => vec!["sqlite"],
                    "postgres" => vec!["postgres"],
                    "both" => vec!["sqlite", "postgres"],
                    other => panic!("unknown backend {other}"),
                }
            }
            "--postgres-url" => args.postgres_url = value(),
            "--jobs" => args.jobs = value().parse().expect("--jobs N"),
            "--threads" => args.threads = value().parse().expect("--threads N"),
            "--processes" => {
                args.processes = value()
                    .split(',')
                    .map(|p| p.parse().expect("--processes 1,2"))
                    .collect()
            }
            "--single" => args.single = value().parse().expect("--single N"),
            "--latency-samples" => {
                args.latency_samples = value().parse().expect("--latency-samples N")
            }
            other => panic!("unknown flag {other}; see the doc comment of examples/bench.rs"),
        }
    }
    args
}

fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("error")).init();
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("--worker") {
        return run_worker(&argv[2], argv[3].parse().expect("threads"));
    }
    let args = parse_args();
    println!(
        "solidq bench: {} jobs, {} threads per worker process, processes {:?}",
        args.jobs, args.threads, args.processes
    );
    let mut rows = Vec::new();
    for backend in &args.backends {
        rows.extend(bench_backend(backend, &args));
    }
    println!("\n{:<9} {:<44} {:>14}", "backend", "measure", "value");
    for (backend, measure, value) in rows {
        println!("{backend:<9} {measure:<44} {value:>14}");
    }
}

fn run_worker(url: &str, threads: usize) {
    let queue = Queue::connect_with(
        url,
        QueueConfig {
            pool_size: threads as u32 + 4,
            ..QueueConfig::default()
        },
    )
    .expect("connect");
    let config = WorkerConfig {
        threads,
        dispatch_scheduled: false,
        ..WorkerConfig::default()
    };
    Worker::new(queue)
        .config(config)
        .register::<Noop>()
        .register::<Stamp>()
        .run()
        .expect("worker");
}

/// A fresh database for one measurement.
struct BenchDb {
    url: String,
    cleanup: Option<(String, String)>,
    _dir: Option<tempfile::TempDir>,
}

impl BenchDb {
    fn new(backend: &str, args: &Args) -> BenchDb {
        match backend {
            "sqlite" => {
                let dir = tempfile::tempdir().expect("temp dir");
                let url = format!("sqlite://{}", dir.path().join("bench.sqlite3").display());
                BenchDb {
                    url,
                    cleanup: None,
                    _dir: Some(dir),
                }
            }
            _ => {
                let schema = format!(
                    "solidq_bench_{}_{:x}",
                    std::process::id(),
                    fastrand::u32(..)
                );
                let mut admin =
                    PgConnection::establish(&args.postgres_url).expect("connect to postgres");
                admin
                    .batch_execute(&format!("CREATE SCHEMA {schema}"))
                    .expect("create schema");
                let sep = if args.postgres_url.contains('?') {
                    '&'
                } else {
                    '?'
                };
                let url = format!(
                    "{}{sep}options=-c%20search_path%3D{schema}",
                    args.postgres_url
                );
                BenchDb {
                    url,
                    cleanup: Some((args.postgres_url.clone(), schema)),
                    _dir: None,
                }
            }
        }
    }

    fn queue(&self) -> Queue {
        let queue = Queue::connect(&self.url).expect("connect");
        queue.migrate().expect("migrate");
        queue
    }

    fn unfinished(&self, conn: &mut Raw) -> i64 {
        conn.scalar("SELECT count(*) AS v FROM solidq_jobs WHERE finished_at IS NULL")
    }
}

impl Drop for BenchDb {
    fn drop(&mut self) {
        if let Some((admin_url, schema)) = &self.cleanup
            && let Ok(mut admin) = PgConnection::establish(admin_url)
        {
            let _ = admin.batch_execute(&format!("DROP SCHEMA {schema} CASCADE"));
        }
    }
}

enum Raw {
    Pg(PgConnection),
    Sqlite(SqliteConnection),
}

#[derive(QueryableByName)]
struct Scalar {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    v: i64,
}

impl Raw {
    fn open(url: &str) -> Raw {
        match url.strip_prefix("sqlite://") {
            Some(path) => {
                let mut c = SqliteConnection::establish(path).expect("open");
                c.batch_execute("PRAGMA busy_timeout = 5000")
                    .expect("pragma");
                Raw::Sqlite(c)
            }
            None => Raw::Pg(PgConnection::establish(url).expect("connect")),
        }
    }

    fn scalar(&mut self, sql: &str) -> i64 {
        let row: Scalar = match self {
            Raw::Pg(c) => diesel::sql_query(sql).get_result(c),
            Raw::Sqlite(c) => diesel::sql_query(sql).get_result(c),
        }
        .expect("query");
        row.v
    }
}

fn spawn_workers(url: &str, processes: usize, threads: usize) -> Vec<Child> {
    (0..processes)
        .map(|_| {
            Command::new(std::env::current_exe().expect("bench binary"))
                .args(["--worker", url, &threads.to_string()])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .spawn()
                .expect("spawn worker")
        })
        .collect()
}

fn stop_workers(workers: Vec<Child>) {
    for w in &workers {
        unsafe {
            libc::kill(w.id() as i32, libc::SIGTERM);
        }
    }
    for mut w in workers {
        let _ = w.wait();
    }
}

fn bench_backend(backend: &'static str, args: &Args) -> Vec<(&'static str, String, String)> {
    let mut rows = Vec::new();
    let mut row = |measure: String, value: String| {
        println!("  {backend}: {measure}: {value}");
        rows.push((backend, measure, value));
    };

    // Enqueue: single, then bulk.
    {
        let db = BenchDb::new(backend, args);
        let queue = db.queue();
        let started = Instant::now();
        for _ in 0..args.single {
            queue.enqueue(&Noop).expect("enqueue");
        }
        row(
            "enqueue single (jobs/s)".into(),
            rate(args.single, started.elapsed()),
        );
        let batch: Vec<Noop> = (0..1_000).map(|_| Noop).collect();
        let started = Instant::now();
        for _ in 0..args.jobs / 1_000 {
            queue.enqueue_all(&batch).expect("enqueue_all");
        }
        row(
            "enqueue bulk, 1,000 per call (jobs/s)".into(),
            rate(args.jobs / 1_000 * 1_000, started.elapsed()),
        );
    }

    // Work-down.
    for &processes in &args.processes {
        let db = BenchDb::new(backend, args);
        let queue = db.queue();
        let batch: Vec<Noop> = (0..1_000).map(|_| Noop).collect();
        for _ in 0..args.jobs / 1_000 {
            queue.enqueue_all(&batch).expect("enqueue_all");
        }
        let total = args.jobs / 1_000 * 1_000;
        let mut raw = Raw::open(&db.url);
        let started = Instant::now();
        let workers = spawn_workers(&db.url, processes, args.threads);
        while db.unfinished(&mut raw) > 0 {
            assert!(
                started.elapsed() < Duration::from_secs(600),
                "work-down took over 10 minutes"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let elapsed = started.elapsed();
        stop_workers(workers);
        row(
            format!(
                "work-down {total} no-op, {processes} proc x {} thr (jobs/s)",
                args.threads
            ),
            rate(total, elapsed),
        );
    }

    // Pickup latency with an idle worker process.
    {
        let db = BenchDb::new(backend, args);
        let queue = db.queue();
        let workers = spawn_workers(&db.url, 1, args.threads);
        let warm = queue.enqueue(&Stamp).expect("enqueue");
        wait_done(&queue, warm);
        let mut samples = Vec::with_capacity(args.latency_samples);
        for _ in 0..args.latency_samples {
            std::thread::sleep(Duration::from_millis(5 + fastrand::u64(..15)));
            let enqueued = now_us();
            let id = queue.enqueue(&Stamp).expect("enqueue");
            let started = wait_done(&queue, id);
            samples.push((started - enqueued) as f64 / 1000.0);
        }
        stop_workers(workers);
        samples.sort_by(f64::total_cmp);
        row(
            "pickup latency p50, other process (ms)".into(),
            format!("{:.2}", percentile(&samples, 0.50)),
        );
        row(
            "pickup latency p99, other process (ms)".into(),
            format!("{:.2}", percentile(&samples, 0.99)),
        );
    }
    rows
}

/// Waits for job `id` to succeed; returns the start time it recorded.
fn wait_done(queue: &Queue, id: i64) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let info = queue.job(id).expect("job");
        if info.status == JobStatus::Succeeded {
            return info.result.and_then(|r| r.as_i64()).expect("stamp result");
        }
        assert!(Instant::now() < deadline, "job {id} not picked up in 30 s");
        std::thread::sleep(Duration::from_micros(500));
    }
}

fn rate(jobs: usize, elapsed: Duration) -> String {
    format!("{:.0}", jobs as f64 / elapsed.as_secs_f64())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}
