//! Throughput and latency of solidq on this machine, each figure measured
//! `--repeat` times (median and range), beside a raw-SQL baseline of the
//! same lifecycle run in the same process.
//!
//! Flags: `cargo run --release --example bench -- --help` (see [`USAGE`]).
//!
//! * enqueue single: `Queue::enqueue` in a loop; baseline: the same
//!   INSERT of a job and its ready row as one prepared statement
//!   (PostgreSQL), one `BEGIN IMMEDIATE` transaction (SQLite) or one
//!   transaction of two INSERTs, the second taking `LAST_INSERT_ID()`
//!   (MySQL); and the same on the minimal schema of the work-down's limit
//!   (below), ids given by the caller ("against the limit").
//! * enqueue bulk: `enqueue_all` of 1,000 jobs per call.
//! * work-down: `--jobs` no-op jobs enqueued beforehand, then P worker
//!   processes of T threads (this binary with `--worker`); time until none
//!   is ready or claimed. Baselines, the fastest hand-written SQL for the
//!   same lifecycle: 2×P connections, each claiming the batch solidq's
//!   workers claimed on average (`SKIP LOCKED` into the claimed table)
//!   then finishing it (mark finished, delete the claims), one statement
//!   or transaction each, until none is left; ids pass between steps as
//!   index lookups (`= ANY(ARRAY(…))` on PostgreSQL, a JSON array through
//!   `json_each`/`JSON_TABLE` elsewhere), so no generic plan joins two row
//!   sets. On MySQL, which has neither arrays nor writable CTEs, the claim
//!   is `SELECT … FOR UPDATE SKIP LOCKED`, a DELETE and an INSERT…SELECT.
//!   Run twice: on solidq's own migrated tables ("raw": what solidq's code
//!   costs), and on a minimal SolidQueue-like schema of three tables with
//!   primary keys and the claim index only ("raw on a minimal schema", the
//!   limit: the gap between the two is the price of solidq's schema).
//!   Every lane's count is added up and must be every job.
//! * mixed: K threads enqueue single jobs for S seconds while P×T workers
//!   consume them; against one thread enqueuing alone with no worker, on a
//!   database of its own, in the same run (issue 28's "enqueue under load":
//!   both ratios ≥ 1.5 on PostgreSQL); and the K threads enqueuing with no
//!   worker, on a database of their own (what the workers' share of the
//!   machine costs them is the difference).
//! * pickup latency: one job at a time enqueued while the worker is idle;
//!   from just before `enqueue` to the job starting. Worker in another
//!   process; on SQLite also in this process.
//! * big tables (`--only big`, issue 28 item 7): `--big-rows` finished
//!   jobs kept, against an empty database in the same run: an idle
//!   worker's pickup, a work-down, every dashboard page (through
//!   `target/release/solidq web`), and the cleaner's rows/s with the pickup
//!   while it deletes.
//! * what each index of `solidq_jobs` costs (`--only schema`, PostgreSQL
//!   and MySQL, issue 28 item 2): solidq's bulk enqueue and the raw
//!   work-down on its schema as migrated, then without each index of the
//!   jobs table but its primary key, without all, and on PostgreSQL
//!   without all at fillfactor 70 (HOT finishes): jobs/s, server CPU and
//!   WAL (redo log) bytes per job, the share of HOT finishes.
//! * worker peak RSS: VmHWM of the worker processes after a work-down.
//! * idle worker: statements per second of a worker with nothing to do,
//!   and the CPU it and the server spend per second.
//!
//! The MySQL backend (`--backend mysql` or `all`) needs `--features mysql`;
//! each measurement gets a database of its own on the `--mysql-url` server,
//! dropped afterwards.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[cfg(feature = "mysql")]
use diesel::MysqlConnection;
use diesel::backend::Backend as DieselBackend;
use diesel::connection::SimpleConnection;
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::sql_types::{Array, BigInt, Text};
use diesel::{
    Connection, PgConnection, QueryResult, QueryableByName, RunQueryDsl, SqliteConnection,
};
use serde::{Deserialize, Serialize};
use solidq::{
    EnqueueOptions, Job, JobContext, JobRequest, JobResult, JobStatus, Queue, QueueConfig,
    SqliteSynchronous, Worker, WorkerConfig,
};

/// The flags, printed by `--help` and after a bad flag.
const USAGE: &str = "\
cargo run --release --example bench -- [flags]
  --backend sqlite|postgres|mysql|both|all   (both = sqlite,postgres;
                    all adds mysql; mysql needs --features mysql)
  --postgres-url URL               (postgres://postgres@127.0.0.1:5432/postgres)
  --mysql-url URL                  (mysql://root@127.0.0.1:3306/test)
  --jobs N          work-down size (100000)
  --processes P     worker processes (2)
  --threads T       threads per worker process (16)
  --prefetch N      jobs claimed ahead per worker process (solidq's default)
  --repeat R        runs per figure (3)
  --single N        single enqueues per run (5000)
  --bulk N          bulk-enqueued jobs per run, 1,000 per call (100000)
  --mixed-seconds S length of the mixed run (10)
  --producers K     enqueuing threads in the mixed run and soak (4)
  --latency-samples N  idle pickups per run (200)
  --soak N          instead of the rest: N jobs through the mixed workload,
                    throughput and worker RSS per tenth
  --only a,b        run only these sections: enqueue, workdown, mixed,
                    latency, idle, features (work-down of jobs using
                    steps, batches, workflows, rate limits or fairness keys,
                    as a ratio of plain no-op jobs), fairness (one tenant's
                    job after another's burst), queues (20,000 jobs over 20,
                    100 and 1,000 queues drained by one worker of 8 threads
                    serving one queue, `*`, `tenant_*` or the names listed;
                    an idle worker listing 1,000 queues against one),
                    mvcc (PostgreSQL and MySQL, only when named: a
                    transaction held open by another session while a
                    producer offers a steady rate to one worker process,
                    then a work-down with a hold against without)
                    designs (PostgreSQL, only when named: issue 37's claim
                    designs on raw tables under a hold: from the head, from
                    a floor, a ring of tables emptied by TRUNCATE; the
                    first --mvcc-rates rate and the clean and held
                    --mvcc-phases)
                    effects (work-down of jobs that each write one row:
                    in their own transaction with their success,
                    JobContext::complete_in_transaction, against the
                    same row written on a connection of their own)
                    big (only when named: --big-rows finished jobs
                    kept against an empty database: pickup, work-down,
                    every dashboard page through target/release/solidq
                    web; then the cleaner deleting --big-clean expired
                    ones while a worker picks up)
                    schema (PostgreSQL and MySQL, only when named:
                    solidq's bulk enqueue and the raw work-down on its
                    schema as migrated, without each index of
                    solidq_jobs but its primary key, without all, and
                    on PostgreSQL without all at fillfactor 70: jobs/s,
                    server CPU, WAL bytes per job, HOT finishes)
  --big-rows N      finished jobs kept by the big section (10000000)
  --big-clean N     expired jobs its cleaner deletes per run (500000)
  --mvcc-rates a,b  offered jobs/s of the mvcc runs (PostgreSQL 500,2000;
                    MySQL 500)
  --mvcc-phases c,h,r  seconds clean, held, recovering (40,120,40)
  --sqlite-synchronous normal|full   SQLite's synchronous setting for every
                    connection, solidq's and the raw baseline's (solidq's default)
  --watch-ms N      every worker's sqlite_watch_interval and
                    mysql_watch_interval (solidq's defaults)
";

/// `--watch-ms`, handed to the worker processes as this variable.
const WATCH_MS: &str = "SOLIDQ_BENCH_WATCH_MS";

/// `config` with `--watch-ms`'s intervals, when it was given.
fn watching(mut config: WorkerConfig) -> WorkerConfig {
    if let Some(ms) = std::env::var(WATCH_MS).ok().and_then(|v| v.parse().ok()) {
        config.sqlite_watch_interval = Duration::from_millis(ms);
        config.mysql_watch_interval = Duration::from_millis(ms);
    }
    config
}

/// Runs an SQLite transaction again while the database is locked: four
/// lanes of short write transactions in tight loops can keep one lane's
/// busy handler (which sleeps and retries: first come is not first served)
/// from the lock past its 5 s timeout; a hand-written loop would retry.
fn retry_busy<T>(mut transaction: impl FnMut() -> QueryResult<T>) -> QueryResult<T> {
    loop {
        match transaction() {
            Err(diesel::result::Error::DatabaseError(_, info))
                if info.message() == "database is locked" => {}
            other => return other,
        }
    }
}

/// Does nothing.
#[derive(Serialize, Deserialize)]
struct Noop;

impl Job for Noop {
    const KIND: &'static str = "noop";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        Ok(serde_json::Value::Null)
    }
}

thread_local! {
    /// Each worker thread's own connection, for [`Effect`].
    static EFFECT_CONN: std::cell::RefCell<Option<solidq::AnyConnection>> =
        const { std::cell::RefCell::new(None) };
}

/// Writes a row to `bench_effects` on its thread's own connection, then
/// succeeds as usual: the row at least once.
#[derive(Serialize, Deserialize)]
struct Effect;

impl Job for Effect {
    const KIND: &'static str = "effect";
    fn perform(&self, ctx: &JobContext) -> JobResult {
        let queue = ctx.state::<Queue>()?;
        EFFECT_CONN.with(|conn| {
            let mut conn = conn.borrow_mut();
            if conn.is_none() {
                *conn = Some(queue.open_connection()?);
            }
            // A write transaction (SQLite: BEGIN IMMEDIATE), as the guide
            // says a write on one's own connection should be: a plain
            // INSERT may meet SQLITE_BUSY at once under WAL.
            conn.as_mut().expect("opened").write_transaction(|conn| {
                diesel::sql_query(format!(
                    "INSERT INTO bench_effects (job_id) VALUES ({})",
                    ctx.job_id()
                ))
                .execute(conn)
            })?;
            Ok(serde_json::Value::Null)
        })
    }
}

/// The same row, written in the job's own transaction with its success:
/// exactly once.
#[derive(Serialize, Deserialize)]
struct EffectInTransaction;

impl Job for EffectInTransaction {
    const KIND: &'static str = "effect_in_transaction";
    fn perform(&self, ctx: &JobContext) -> JobResult {
        ctx.complete_in_transaction(|conn| {
            diesel::sql_query(format!(
                "INSERT INTO bench_effects (job_id) VALUES ({})",
                ctx.job_id()
            ))
            .execute(conn)?;
            Ok(serde_json::Value::Null)
        })
    }
}

/// Does nothing in three resumable steps, the second over 10 items with a
/// checkpoint after each: what steps and checkpoints cost a job.
#[derive(Serialize, Deserialize)]
struct Stepped;

impl Job for Stepped {
    const KIND: &'static str = "stepped";
    fn perform(&self, ctx: &JobContext) -> JobResult {
        ctx.step("one", |_| Ok(()))?;
        ctx.step("two", |s| {
            for item in s.cursor::<u64>().unwrap_or(0)..10 {
                s.checkpoint(item + 1);
            }
            Ok(())
        })?;
        ctx.step("three", |_| Ok(()))?;
        Ok(serde_json::Value::Null)
    }
}

/// Does nothing under a rate limit of 10,000 starts a second per key, one
/// of 100 keys: what asking for a start costs when the limit does not bite.
#[derive(Serialize, Deserialize)]
struct Rated {
    key: u32,
}

impl Job for Rated {
    const KIND: &'static str = "rated";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        Ok(serde_json::Value::Null)
    }
    fn options() -> solidq::JobOptions {
        solidq::JobOptions::new().rate_limit(solidq::RateLimit::new(10_000, Duration::from_secs(1)))
    }
    fn rate_key(&self) -> Option<String> {
        Some(self.key.to_string())
    }
}

/// Returns when it started (as [`Stamp`]), as the job of tenant `key`
/// (its fairness key).
#[derive(Serialize, Deserialize)]
struct Tenant {
    key: u32,
}

impl Job for Tenant {
    const KIND: &'static str = "tenant";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        Ok(serde_json::json!(now_us()))
    }
    fn fairness_key(&self) -> Option<String> {
        Some(format!("tenant-{}", self.key))
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

#[derive(Clone)]
struct Args {
    backends: Vec<&'static str>,
    postgres_url: String,
    /// The server and account to create each run's database with (its
    /// database part is replaced).
    #[cfg(feature = "mysql")]
    mysql_url: String,
    jobs: usize,
    processes: usize,
    threads: usize,
    repeat: usize,
    single: usize,
    bulk: usize,
    mixed_seconds: u64,
    producers: usize,
    latency_samples: usize,
    prefetch: usize,
    soak: Option<usize>,
    only: Option<Vec<String>>,
    /// `--mvcc-rates`: offered jobs a second of each mvcc run.
    mvcc_rates: Option<Vec<usize>>,
    /// `--mvcc-phases`: seconds clean, held, recovering.
    mvcc_phases: [u64; 3],
    /// `--big-rows`: finished jobs kept in the big section's database.
    big_rows: usize,
    /// `--big-clean`: expired jobs the big section's cleaner deletes a run.
    big_clean: usize,
}

/// `--sqlite-synchronous`: set once in `main`, read by every connection the
/// bench opens (worker processes get it as `SOLIDQ_SQLITE_SYNCHRONOUS`).
static SQLITE_SYNCHRONOUS: std::sync::OnceLock<SqliteSynchronous> = std::sync::OnceLock::new();

fn sqlite_synchronous() -> SqliteSynchronous {
    *SQLITE_SYNCHRONOUS.get_or_init(|| solidq::config::DEFAULT_SQLITE_SYNCHRONOUS)
}

fn parse_args() -> Args {
    let mut args = Args {
        backends: vec!["sqlite", "postgres"],
        postgres_url: "postgres://postgres@127.0.0.1:5432/postgres".into(),
        #[cfg(feature = "mysql")]
        mysql_url: "mysql://root@127.0.0.1:3306/test".into(),
        jobs: 100_000,
        processes: 2,
        threads: 16,
        repeat: 3,
        single: 5_000,
        bulk: 100_000,
        mixed_seconds: 10,
        producers: 4,
        latency_samples: 200,
        prefetch: solidq::config::DEFAULT_PREFETCH,
        soak: None,
        only: None,
        mvcc_rates: None,
        mvcc_phases: [40, 120, 40],
        big_rows: 10_000_000,
        big_clean: 500_000,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .unwrap_or_else(|| usage_error(&format!("{flag} needs a value")))
        };
        match flag.as_str() {
            "--backend" => {
                args.backends = match value().as_str() {
                    "sqlite" => vec!["sqlite"],
                    "postgres" => vec!["postgres"],
                    "both" => vec!["sqlite", "postgres"],
                    "mysql" | "all" if !cfg!(feature = "mysql") => {
                        usage_error("the mysql backend needs a build with `--features mysql`")
                    }
                    "mysql" => vec!["mysql"],
                    "all" => vec!["sqlite", "postgres", "mysql"],
                    other => usage_error(&format!("unknown backend {other:?}")),
                }
            }
            "--postgres-url" => args.postgres_url = value(),
            #[cfg(feature = "mysql")]
            "--mysql-url" => args.mysql_url = value(),
            #[cfg(not(feature = "mysql"))]
            "--mysql-url" => {
                value();
                usage_error("--mysql-url needs a build with `--features mysql`")
            }
            "--jobs" => args.jobs = number(&flag, value()),
            "--processes" => args.processes = number(&flag, value()),
            "--threads" => args.threads = number(&flag, value()),
            "--repeat" => args.repeat = number(&flag, value()),
            "--single" => args.single = number(&flag, value()),
            "--bulk" => args.bulk = number(&flag, value()),
            "--mixed-seconds" => args.mixed_seconds = number(&flag, value()),
            "--watch-ms" => {
                let ms: u64 = number(&flag, value());
                // SAFETY: at startup, before any other thread runs.
                unsafe { std::env::set_var(WATCH_MS, ms.to_string()) };
            }
            "--mvcc-rates" => {
                args.mvcc_rates = Some(
                    value()
                        .split(',')
                        .map(|r| number(&flag, r.to_string()))
                        .collect(),
                )
            }
            "--mvcc-phases" => {
                let phases: Vec<u64> = value()
                    .split(',')
                    .map(|p| number(&flag, p.to_string()))
                    .collect();
                args.mvcc_phases = phases
                    .try_into()
                    .unwrap_or_else(|_| usage_error("--mvcc-phases takes three numbers"));
            }
            "--big-rows" => args.big_rows = number(&flag, value()),
            "--big-clean" => args.big_clean = number(&flag, value()),
            "--producers" => args.producers = number(&flag, value()),
            "--latency-samples" => args.latency_samples = number(&flag, value()),
            "--prefetch" => args.prefetch = number(&flag, value()),
            "--soak" => args.soak = Some(number(&flag, value())),
            "--sqlite-synchronous" => {
                let value = value();
                let setting = value
                    .parse()
                    .unwrap_or_else(|e| usage_error(&format!("{e}")));
                SQLITE_SYNCHRONOUS
                    .set(setting)
                    .unwrap_or_else(|_| usage_error("--sqlite-synchronous given twice"));
            }
            "--only" => {
                let sections: Vec<String> = value().split(',').map(str::to_string).collect();
                if let Some(bad) = sections.iter().find(|s| !SECTIONS.contains(&s.as_str())) {
                    usage_error(&format!("unknown section {bad:?}"));
                }
                args.only = Some(sections);
            }
            "--help" | "-h" => {
                print!("{USAGE}");
                std::process::exit(0);
            }
            other => usage_error(&format!("unknown flag {other:?}")),
        }
    }
    args
}

/// What `--only` can name.
const SECTIONS: [&str; 13] = [
    "enqueue", "workdown", "mixed", "latency", "idle", "features", "fairness", "queues", "mvcc",
    "designs", "big", "effects", "schema",
];

/// Prints `message` and the flags, and exits with status 2.
fn usage_error(message: &str) -> ! {
    eprintln!("bench: {message}\n\n{USAGE}");
    std::process::exit(2);
}

/// `value` as a number, or a usage error naming `flag`.
fn number<T: std::str::FromStr>(flag: &str, value: String) -> T {
    value
        .parse()
        .unwrap_or_else(|_| usage_error(&format!("{flag} needs a number, not {value:?}")))
}

impl Args {
    fn runs(&self, section: &str) -> bool {
        match &self.only {
            Some(only) => only.iter().any(|s| s == section),
            // Minutes a run: only when named.
            None => !["mvcc", "big", "designs", "schema"].contains(&section),
        }
    }
}

fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("error")).init();
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("--worker") {
        return run_worker(
            &argv[2],
            argv[3].parse().expect("threads"),
            argv[4].parse().expect("prefetch"),
            argv[5] == "standalone",
        );
    }
    let args = parse_args();
    println!(
        "solidq bench: {} processes x {} threads, {} jobs per work-down, {} runs per figure, \
         sqlite synchronous={}",
        args.processes,
        args.threads,
        args.jobs,
        args.repeat,
        sqlite_synchronous()
    );
    for backend in args.backends.clone() {
        if let Some(n) = args.soak {
            soak(backend, &args, n);
            continue;
        }
        let mut table = Table::default();
        if args.runs("enqueue") {
            bench_enqueue(backend, &args, &mut table);
        }
        if args.runs("workdown") {
            bench_workdown(backend, &args, &mut table);
        }
        if args.runs("mixed") {
            bench_mixed(backend, &args, &mut table);
        }
        if args.runs("latency") {
            bench_latency(backend, &args, &mut table);
        }
        if args.runs("idle") {
            bench_idle(backend, &args, &mut table);
        }
        if args.runs("features") {
            bench_features(backend, &args, &mut table);
        }
        if args.runs("fairness") {
            bench_fairness(backend, &args, &mut table);
        }
        if args.runs("queues") {
            bench_queues(backend, &args, &mut table);
        }
        if args.runs("mvcc") {
            bench_mvcc(backend, &args, &mut table);
        }
        if args.runs("big") {
            bench_big(backend, &args, &mut table);
        }
        if args.runs("effects") {
            bench_effects(backend, &args, &mut table);
        }
        if args.runs("designs") {
            bench_designs(backend, &args, &mut table);
        }
        if args.runs("schema") {
            bench_schema(backend, &args, &mut table);
        }
        table.print(backend);
    }
}

/// A worker process: runs until SIGTERM, then prints its statement count.
/// `standalone`: also dispatch and keep house (clean, vacuum), as a
/// supervisor would; the first worker of each run does.
fn run_worker(url: &str, threads: usize, prefetch: usize, standalone: bool) {
    let queue = Queue::connect_with(
        url,
        QueueConfig {
            pool_size: threads as u32 + 4,
            ..QueueConfig::from_env().expect("SOLIDQ_SQLITE_SYNCHRONOUS")
        },
    )
    .expect("connect");
    let config = watching(WorkerConfig {
        threads,
        prefetch,
        standalone,
        ..WorkerConfig::default()
    });
    solidq::install_signal_handlers().expect("signals");
    let effects_queue = queue.clone();
    let handle = Worker::new(queue)
        .config(config)
        .register::<Noop>()
        .register::<Stamp>()
        .register::<Stepped>()
        .register::<Rated>()
        .register::<Tenant>()
        .register::<Effect>()
        .register::<EffectInTransaction>()
        .state(effects_queue)
        .start()
        .expect("worker");
    while !solidq::signal_received() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let stats = handle.stats();
    handle.stop().expect("stop");
    println!("statements {}", solidq::events::statements_executed());
    println!("cpu_us {}", own_cpu_us());
    println!("claims {} {}", stats.claims, stats.claimed_jobs);
}

/// This process's CPU time (user + system), in microseconds.
fn own_cpu_us() -> u64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    us(usage.ru_utime) + us(usage.ru_stime)
}

/// The server's process names on this machine, by backend: PostgreSQL's
/// processes (one per connection, and its own), MariaDB's or MySQL's one
/// process (its threads' time included); none for SQLite.
fn server_processes(backend: &str) -> &'static [&'static str] {
    match backend {
        "postgres" => &["postgres"],
        "mysql" => &["mariadbd", "mysqld"],
        _ => &[],
    }
}

/// CPU time of each process of `backend`'s server on this machine, in
/// microseconds, by pid (the server runs here).
fn server_cpu_by_pid(backend: &str) -> std::collections::HashMap<u32, u64> {
    let names = server_processes(backend);
    let mut cpu = std::collections::HashMap::new();
    if names.is_empty() {
        return cpu;
    }
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let path = entry.path();
        let Ok(comm) = std::fs::read_to_string(path.join("comm")) else {
            continue;
        };
        if !names.contains(&comm.trim()) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(path.join("stat")) else {
            continue;
        };
        let fields: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .collect();
        let (utime, stime) = (fields.get(11), fields.get(12));
        if let (Some(u), Some(s)) = (utime, stime) {
            let t = u.parse::<u64>().unwrap_or(0) + s.parse::<u64>().unwrap_or(0);
            cpu.insert(pid, t * 1_000_000 / ticks);
        }
    }
    cpu
}

/// Server CPU spent since `before` by the processes alive now (processes
/// that exited meanwhile are not counted: keep the measured connections
/// open until this is read).
fn server_cpu_since(backend: &str, before: &std::collections::HashMap<u32, u64>) -> u64 {
    server_cpu_by_pid(backend)
        .iter()
        .map(|(pid, now)| now.saturating_sub(before.get(pid).copied().unwrap_or(0)))
        .sum()
}

// ---------------------------------------------------------------- results

/// A measure, its values, and its baseline's name and values.
type Row = (String, Vec<f64>, Option<(String, Vec<f64>)>);

#[derive(Default)]
struct Table {
    rows: Vec<Row>,
}

impl Table {
    fn add(&mut self, measure: impl Into<String>, values: Vec<f64>) {
        let measure = measure.into();
        println!("  {measure}: {}", summary(&values));
        self.rows.push((measure, values, None));
    }

    fn add_vs(
        &mut self,
        measure: impl Into<String>,
        values: Vec<f64>,
        baseline: impl Into<String>,
        base: Vec<f64>,
    ) {
        let measure = measure.into();
        let baseline = baseline.into();
        println!(
            "  {measure}: {}   ({baseline}: {})",
            summary(&values),
            summary(&base)
        );
        self.rows.push((measure, values, Some((baseline, base))));
    }

    fn print(&self, backend: &str) {
        println!("\n== {backend}");
        println!(
            "{:<46} {:>11} {:>21}   {:>7}  baseline",
            "measure", "median", "range", "ratio"
        );
        for (measure, values, baseline) in &self.rows {
            let (lo, hi) = range(values);
            let ratio = baseline
                .as_ref()
                .map(|(_, b)| format!("{:.2}", median(values) / median(b)))
                .unwrap_or_default();
            let base = baseline
                .as_ref()
                .map(|(name, b)| format!("{name}: {}", fmt(median(b))))
                .unwrap_or_default();
            println!(
                "{measure:<46} {:>11} {:>21}   {ratio:>7}  {base}",
                fmt(median(values)),
                format!("{} - {}", fmt(lo), fmt(hi))
            );
        }
    }
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        f64::NAN
    } else {
        v[v.len() / 2]
    }
}

fn range(values: &[f64]) -> (f64, f64) {
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (lo, hi)
}

fn fmt(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

fn summary(values: &[f64]) -> String {
    let (lo, hi) = range(values);
    format!("median {} [{} - {}]", fmt(median(values)), fmt(lo), fmt(hi))
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn rate(n: usize, elapsed: Duration) -> f64 {
    n as f64 / elapsed.as_secs_f64()
}

// ---------------------------------------------------------------- databases

/// A fresh database for one measurement.
struct BenchDb {
    url: String,
    /// The server to drop it on (its URL) and the statement that does.
    cleanup: Option<(String, String)>,
    _dir: Option<tempfile::TempDir>,
}

impl BenchDb {
    fn new(backend: &'static str, args: &Args) -> BenchDb {
        let db = match backend {
            "sqlite" => {
                let dir = tempfile::tempdir().expect("temp dir");
                let url = format!("sqlite://{}", dir.path().join("bench.sqlite3").display());
                BenchDb {
                    url,
                    cleanup: None,
                    _dir: Some(dir),
                }
            }
            #[cfg(feature = "mysql")]
            "mysql" => {
                static CREATED: AtomicU64 = AtomicU64::new(0);
                let name = format!(
                    "solidq_bench_{}_{}",
                    std::process::id(),
                    CREATED.fetch_add(1, Ordering::Relaxed)
                );
                let admin_url = mysql_conninfo(&args.mysql_url);
                let mut admin = MysqlConnection::establish(&admin_url).expect("connect to mysql");
                admin
                    .batch_execute(&format!("CREATE DATABASE {name}"))
                    .expect("create database");
                BenchDb {
                    url: with_database(&admin_url, &name),
                    cleanup: Some((admin_url, format!("DROP DATABASE IF EXISTS {name}"))),
                    _dir: None,
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
                    cleanup: Some((
                        args.postgres_url.clone(),
                        format!("DROP SCHEMA {schema} CASCADE"),
                    )),
                    _dir: None,
                }
            }
        };
        db.queue();
        db
    }

    fn queue(&self) -> Queue {
        let queue = Queue::connect_with(
            &self.url,
            QueueConfig {
                pool_size: 16,
                sqlite_synchronous: sqlite_synchronous(),
                ..QueueConfig::default()
            },
        )
        .expect("connect");
        queue.migrate().expect("migrate");
        queue
    }

    /// Whether any job is still ready or claimed: an index probe, not a
    /// count, so watching costs the server next to nothing.
    fn busy(&self, raw: &mut Raw) -> bool {
        if raw.is_mysql() {
            return raw.scalar(
                "SELECT (EXISTS (SELECT 1 FROM solidq_ready_executions)
                         OR EXISTS (SELECT 1 FROM solidq_claimed_executions)) AS v",
            ) == 1;
        }
        raw.scalar(
            "SELECT CASE WHEN EXISTS (SELECT 1 FROM solidq_ready_executions ORDER BY priority, job_id LIMIT 1)
                          OR EXISTS (SELECT 1 FROM solidq_claimed_executions ORDER BY job_id LIMIT 1)
                     THEN CAST(1 AS BIGINT) ELSE CAST(0 AS BIGINT) END AS v",
        ) == 1
    }

    /// Jobs still ready or claimed (a count: for occasional use).
    fn pending(&self, raw: &mut Raw) -> i64 {
        raw.scalar(
            "SELECT (SELECT count(*) FROM solidq_ready_executions) + (SELECT count(*) FROM solidq_claimed_executions) AS v",
        )
    }

    fn fill(&self, n: usize) {
        self.fill_with(n, || Noop);
    }

    /// `n` no-op jobs as the members of one batch (added 1,000 at a time,
    /// then closed) whose `on_complete` is a no-op job; returns its id.
    fn fill_batch(&self, n: usize) -> i64 {
        let queue = self.queue();
        let options = solidq::BatchOptions::new()
            .on_complete(|_| solidq::JobRequest::new(&Noop, solidq::EnqueueOptions::new()));
        let batch = queue.open_batch(options).expect("open_batch");
        let members: Vec<solidq::JobRequest> = (0..1_000)
            .map(|_| solidq::JobRequest::new(&Noop, solidq::EnqueueOptions::new()).unwrap())
            .collect();
        for _ in 0..n / 1_000 {
            queue.add_to_batch(batch, &members).expect("add_to_batch");
        }
        queue.close_batch(batch).expect("close_batch");
        drop(queue);
        Raw::open(&self.url).analyze_settled(n);
        batch
    }

    /// `n` no-op jobs as one workflow (one batch, added 1,000 at a time,
    /// then closed, with a no-op `on_complete`): groups of 10, a root that
    /// fans out to 8 jobs that fan in to a join (16 edges per group);
    /// returns its id.
    fn fill_workflow(&self, n: usize) -> i64 {
        let queue = self.queue();
        let options = solidq::BatchOptions::new()
            .on_complete(|_| solidq::JobRequest::new(&Noop, solidq::EnqueueOptions::new()));
        let batch = queue.open_batch(options).expect("open_batch");
        let noop = || solidq::JobRequest::new(&Noop, solidq::EnqueueOptions::new()).unwrap();
        let mut members = Vec::with_capacity(1_000);
        for group in 0..100 {
            members.push(noop().named(format!("r{group}")));
            let mut join = noop();
            for k in 0..8 {
                let name = format!("m{group}.{k}");
                members.push(noop().named(&name).after(format!("r{group}")));
                join = join.after(name);
            }
            members.push(join);
        }
        for _ in 0..n / 1_000 {
            queue.add_to_batch(batch, &members).expect("add_to_batch");
        }
        queue.close_batch(batch).expect("close_batch");
        drop(queue);
        Raw::open(&self.url).analyze_settled(n);
        batch
    }

    fn fill_with<J: Job>(&self, n: usize, job: impl Fn() -> J) {
        let queue = self.queue();
        let batch: Vec<J> = (0..1_000).map(|_| job()).collect();
        for _ in 0..n / 1_000 {
            queue.enqueue_all(&batch).expect("enqueue_all");
        }
        drop(queue);
        Raw::open(&self.url).analyze_settled(n);
    }
}

impl Drop for BenchDb {
    fn drop(&mut self) {
        let Some((admin_url, drop)) = &self.cleanup else {
            return;
        };
        #[cfg(feature = "mysql")]
        if admin_url.starts_with("mysql://") {
            if let Ok(mut admin) = MysqlConnection::establish(admin_url) {
                let _ = admin.batch_execute(drop);
            }
            return;
        }
        if let Ok(mut admin) = PgConnection::establish(admin_url) {
            let _ = admin.batch_execute(drop);
        }
    }
}

/// `url` as the MySQL client library reads it (`mariadb://` as `mysql://`).
#[cfg(feature = "mysql")]
fn mysql_conninfo(url: &str) -> String {
    match url.strip_prefix("mariadb://") {
        Some(rest) => format!("mysql://{rest}"),
        None => url.to_string(),
    }
}

/// The MySQL `url` with its database replaced by `database` (its query
/// string kept).
#[cfg(feature = "mysql")]
fn with_database(url: &str, database: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let authority = base.find("://").map_or(0, |i| i + 3);
    let path = base[authority..]
        .find('/')
        .map_or(base.len(), |i| authority + i);
    let mut out = format!("{}/{database}", &base[..path]);
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    out
}

/// MySQL: a batch of ids (a JSON array bound as one `?`) as a table of one
/// column, `value`, as solidq's MySQL store passes them.
#[cfg(feature = "mysql")]
macro_rules! mysql_ids {
    () => {
        "JSON_TABLE(?, '$[*]' COLUMNS (value BIGINT PATH '$')) AS ids"
    };
}

/// A raw SQL statement diesel caches as a prepared statement, as solidq's
/// own statements are: the baselines must not pay a parse per call.
/// A transaction on a raw MySQL connection, its `BEGIN` and `COMMIT`
/// prepared: one round trip each, as solidq's (`store::mysql::begin`),
/// where diesel's text ones take three.
#[cfg(feature = "mysql")]
fn mysql_tx<T>(
    c: &mut diesel::MysqlConnection,
    body: impl FnOnce(&mut diesel::MysqlConnection) -> diesel::QueryResult<T>,
) -> diesel::QueryResult<T> {
    Cached(diesel::sql_query("BEGIN")).execute(c)?;
    match body(c) {
        Ok(value) => {
            Cached(diesel::sql_query("COMMIT")).execute(c)?;
            Ok(value)
        }
        Err(error) => {
            Cached(diesel::sql_query("ROLLBACK")).execute(c)?;
            Err(error)
        }
    }
}

struct Cached<Q>(Q);

impl<Q> QueryId for Cached<Q> {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl<Q: Query> Query for Cached<Q> {
    type SqlType = Q::SqlType;
}

impl<Q: QueryFragment<DB>, DB: DieselBackend> QueryFragment<DB> for Cached<Q> {
    fn walk_ast<'b>(&'b self, pass: AstPass<'_, 'b, DB>) -> QueryResult<()> {
        self.0.walk_ast(pass)
    }
    fn is_safe_to_cache_prepared(&self, _: &DB) -> QueryResult<bool> {
        Ok(true)
    }
}

impl<Q, C> RunQueryDsl<C> for Cached<Q> {}

enum Raw {
    Pg(PgConnection),
    Sqlite(SqliteConnection),
    #[cfg(feature = "mysql")]
    Mysql(MysqlConnection),
}

#[derive(QueryableByName)]
struct Scalar {
    #[diesel(sql_type = BigInt)]
    v: i64,
}

#[derive(QueryableByName)]
struct IdRow {
    #[diesel(sql_type = BigInt)]
    job_id: i64,
}

/// Which tables the raw work-down runs on: solidq's own (migrated, every
/// index and column), or a minimal SolidQueue-like schema beside them
/// (`raw_jobs`, `raw_ready`, `raw_claimed`: the columns the lifecycle
/// writes, primary keys and the claim index only). solidq against the
/// first is the price of its code; against the second, of its schema too.
#[derive(Clone, Copy, PartialEq)]
enum Schema {
    Solidq,
    Minimal,
}

impl Schema {
    /// `sql`, written for solidq's tables, on this schema's.
    fn on(self, sql: &str) -> String {
        match self {
            Schema::Solidq => sql.to_string(),
            Schema::Minimal => sql
                // Its claim index: solidq's orders by place (fairness).
                .replace("priority, position", "priority, job_id")
                .replace("solidq_ready_executions", "raw_ready")
                .replace("solidq_claimed_executions", "raw_claimed")
                .replace("solidq_jobs", "raw_jobs"),
        }
    }
}

impl Raw {
    /// Creates the minimal schema ([`Schema::Minimal`]) and fills it with
    /// `n` ready jobs, as [`BenchDb::fill`] fills solidq's.
    fn fill_minimal(&mut self, n: usize) {
        let (id, text, time, now, engine) = match self {
            Raw::Pg(_) => ("bigint", "text", "timestamp", "LOCALTIMESTAMP", ""),
            Raw::Sqlite(_) => ("INTEGER", "TEXT", "TEXT", "datetime('now')", ""),
            #[cfg(feature = "mysql")]
            Raw::Mysql(_) => (
                "BIGINT",
                "VARCHAR(255)",
                "DATETIME(6)",
                "UTC_TIMESTAMP(6)",
                " ENGINE = InnoDB",
            ),
        };
        self.batch(&format!(
            "CREATE TABLE raw_jobs (id {id} NOT NULL PRIMARY KEY, queue_name {text} NOT NULL,
                 class_name {text} NOT NULL, arguments {text} NOT NULL, priority INTEGER NOT NULL,
                 attempts INTEGER NOT NULL, created_at {time} NOT NULL, updated_at {time} NOT NULL,
                 finished_at {time}, expires_at {time}){engine}"
        ));
        self.batch(&format!(
            "CREATE TABLE raw_ready (job_id {id} NOT NULL PRIMARY KEY, queue_name {text} NOT NULL,
                 priority INTEGER NOT NULL, created_at {time} NOT NULL){engine}"
        ));
        self.batch("CREATE INDEX raw_ready_claim ON raw_ready (priority, job_id)");
        self.batch(&format!(
            "CREATE TABLE raw_claimed (job_id {id} NOT NULL PRIMARY KEY, process_id {id} NOT NULL,
                 created_at {time} NOT NULL){engine}"
        ));
        for first in (1..=n).step_by(1_000) {
            let rows: Vec<String> = (first..(first + 1_000).min(n + 1))
                .map(|id| format!("({id}, 'default', 'noop', '{{}}', 0, 0, {now}, {now})"))
                .collect();
            self.batch(&format!(
                "INSERT INTO raw_jobs (id, queue_name, class_name, arguments, priority, attempts,
                                       created_at, updated_at) VALUES {}",
                rows.join(", ")
            ));
        }
        self.batch(
            "INSERT INTO raw_ready (job_id, queue_name, priority, created_at)
             SELECT id, queue_name, priority, created_at FROM raw_jobs",
        );
        let analyze = match self {
            Raw::Pg(_) => "ANALYZE raw_jobs, raw_ready, raw_claimed",
            Raw::Sqlite(_) => "ANALYZE",
            #[cfg(feature = "mysql")]
            Raw::Mysql(_) => "ANALYZE TABLE raw_jobs, raw_ready, raw_claimed",
        };
        self.batch(analyze);
    }

    fn open(url: &str) -> Raw {
        #[cfg(feature = "mysql")]
        if url.starts_with("mysql://") || url.starts_with("mariadb://") {
            let mut c = MysqlConnection::establish(&mysql_conninfo(url)).expect("connect");
            // As solidq's own sessions: a statement locks the rows it
            // changes, not the gaps between them.
            c.batch_execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
                .expect("session");
            return Raw::Mysql(c);
        }
        match url.strip_prefix("sqlite://") {
            Some(path) => {
                let mut c = SqliteConnection::establish(path).expect("open");
                c.batch_execute(&format!(
                    "PRAGMA busy_timeout = 5000; PRAGMA journal_mode = WAL; PRAGMA synchronous = {}; PRAGMA foreign_keys = ON;",
                    sqlite_synchronous()
                ))
                .expect("pragma");
                Raw::Sqlite(c)
            }
            None => Raw::Pg(PgConnection::establish(url).expect("connect")),
        }
    }

    fn is_mysql(&self) -> bool {
        #[cfg(feature = "mysql")]
        {
            matches!(self, Raw::Mysql(_))
        }
        #[cfg(not(feature = "mysql"))]
        {
            false
        }
    }

    fn scalar(&mut self, sql: &str) -> i64 {
        let row: Scalar = match self {
            Raw::Pg(c) => diesel::sql_query(sql).get_result(c),
            Raw::Sqlite(c) => diesel::sql_query(sql).get_result(c),
            #[cfg(feature = "mysql")]
            Raw::Mysql(c) => diesel::sql_query(sql).get_result(c),
        }
        .expect("query");
        row.v
    }

    /// The rows of `sql`, a name and two numbers each (columns `name`,
    /// `a`, `b`).
    fn named_pairs(&mut self, sql: &str) -> Vec<(String, i64, i64)> {
        #[derive(QueryableByName)]
        struct Named {
            #[diesel(sql_type = Text)]
            name: String,
            #[diesel(sql_type = BigInt)]
            a: i64,
            #[diesel(sql_type = BigInt)]
            b: i64,
        }
        let rows: Vec<Named> = match self {
            Raw::Pg(c) => diesel::sql_query(sql).load(c),
            Raw::Sqlite(c) => diesel::sql_query(sql).load(c),
            #[cfg(feature = "mysql")]
            Raw::Mysql(c) => diesel::sql_query(sql).load(c),
        }
        .expect("named pairs");
        rows.into_iter().map(|r| (r.name, r.a, r.b)).collect()
    }

    fn batch(&mut self, sql: &str) {
        match self {
            Raw::Pg(c) => c.batch_execute(sql),
            Raw::Sqlite(c) => c.batch_execute(sql),
            #[cfg(feature = "mysql")]
            Raw::Mysql(c) => c.batch_execute(sql),
        }
        .expect("batch");
    }

    /// Another session's transaction holding a snapshot open, as a
    /// console's `BEGIN` and a read, a report or `pg_dump` do: PostgreSQL
    /// keeps every row version deleted after it, InnoDB every undo record.
    fn hold(url: &str) -> Raw {
        let mut raw = Raw::open(url);
        if raw.is_mysql() {
            raw.batch(
                "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ;
                 START TRANSACTION WITH CONSISTENT SNAPSHOT",
            );
        } else {
            raw.batch("BEGIN ISOLATION LEVEL REPEATABLE READ");
        }
        raw.scalar("SELECT count(*) AS v FROM solidq_processes");
        raw
    }

    /// The timestamp `sql` returns (column `t`), in µs since the epoch.
    fn epoch_us(&mut self, sql: &str) -> i64 {
        #[derive(QueryableByName)]
        struct T {
            #[diesel(sql_type = diesel::sql_types::Timestamp)]
            t: chrono::NaiveDateTime,
        }
        let row: T = match self {
            Raw::Pg(c) => diesel::sql_query(sql).get_result(c),
            Raw::Sqlite(c) => diesel::sql_query(sql).get_result(c),
            #[cfg(feature = "mysql")]
            Raw::Mysql(c) => diesel::sql_query(sql).get_result(c),
        }
        .expect("timestamp");
        row.t.and_utc().timestamp_micros()
    }

    /// The database's clock, in µs since the epoch.
    fn now_us(&mut self) -> i64 {
        match self {
            Raw::Pg(_) => self.epoch_us("SELECT LOCALTIMESTAMP AS t"),
            Raw::Sqlite(_) => now_us(),
            // solidq writes UTC_TIMESTAMP(6) on MySQL.
            #[cfg(feature = "mysql")]
            Raw::Mysql(_) => self.epoch_us("SELECT UTC_TIMESTAMP(6) AS t"),
        }
    }

    /// [`Raw::analyze`] once the statistics count the fill's `n` jobs
    /// (PostgreSQL; up to 10 s): the fill's connections, closed by now,
    /// report their inserts as they end, and counts reported after the
    /// `ANALYZE` made the worker's first maintenance round analyze the
    /// jobs and ready tables inside the timed work-down (0.29 s of server
    /// CPU, about 3 µs a job of 100,000, `pg_stat_statements`).
    fn analyze_settled(&mut self, n: usize) {
        if let Raw::Pg(_) = self {
            let deadline = Instant::now() + Duration::from_secs(10);
            while self.scalar(
                "SELECT COALESCE(pg_stat_get_tuples_inserted(to_regclass('solidq_jobs')), 0) AS v",
            ) < n as i64
                && Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        self.analyze();
    }

    fn analyze(&mut self) {
        let _ = match self {
            Raw::Pg(c) => c.batch_execute("ANALYZE"),
            Raw::Sqlite(c) => c.batch_execute("ANALYZE"),
            #[cfg(feature = "mysql")]
            Raw::Mysql(c) => c.batch_execute(
                "ANALYZE TABLE solidq_jobs, solidq_ready_executions, solidq_claimed_executions",
            ),
        };
    }

    /// The raw single enqueue: a job and its ready row, in one round trip
    /// (PostgreSQL) or one write transaction (SQLite, MySQL).
    fn enqueue(&mut self) {
        match self {
            Raw::Pg(c) => {
                Cached(
                    diesel::sql_query(
                        "WITH j AS (INSERT INTO solidq_jobs (queue_name, kind, arguments, options, scheduled_at, created_at, updated_at)
                                    VALUES ($1, $2, $3, $4, LOCALTIMESTAMP, LOCALTIMESTAMP, LOCALTIMESTAMP)
                                    RETURNING id, queue_name, priority)
                         INSERT INTO solidq_ready_executions (job_id, queue_name, priority, created_at)
                         SELECT id, queue_name, priority, LOCALTIMESTAMP FROM j",
                    )
                    .bind::<Text, _>("default")
                    .bind::<Text, _>("noop")
                    .bind::<Text, _>("null")
                    .bind::<Text, _>("{}"),
                )
                .execute(c)
                .expect("raw enqueue");
            }
            Raw::Sqlite(c) => {
                c.immediate_transaction::<_, diesel::result::Error, _>(|c| {
                    let now = chrono::Utc::now().naive_utc();
                    let id: IdRow = Cached(
                        diesel::sql_query(
                            "INSERT INTO solidq_jobs (queue_name, kind, arguments, options, scheduled_at, created_at, updated_at)
                             VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?5) RETURNING id AS job_id",
                        )
                        .bind::<Text, _>("default")
                        .bind::<Text, _>("noop")
                        .bind::<Text, _>("null")
                        .bind::<Text, _>("{}")
                        .bind::<diesel::sql_types::Timestamp, _>(now),
                    )
                    .get_result(c)?;
                    Cached(
                        diesel::sql_query(
                            "INSERT INTO solidq_ready_executions (job_id, queue_name, priority, created_at) VALUES (?1, 'default', 0, ?2)",
                        )
                        .bind::<BigInt, _>(id.job_id)
                        .bind::<diesel::sql_types::Timestamp, _>(now),
                    )
                    .execute(c)?;
                    Ok(())
                })
                .expect("raw enqueue");
            }
            #[cfg(feature = "mysql")]
            Raw::Mysql(c) => {
                mysql_tx(c, |c| {
                    Cached(
                        diesel::sql_query(
                            "INSERT INTO solidq_jobs (queue_name, kind, arguments, options, scheduled_at, created_at, updated_at)
                             VALUES (?, ?, ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
                        )
                        .bind::<Text, _>("default")
                        .bind::<Text, _>("noop")
                        .bind::<Text, _>("null")
                        .bind::<Text, _>("{}"),
                    )
                    .execute(c)?;
                    Cached(diesel::sql_query(
                        "INSERT INTO solidq_ready_executions (job_id, queue_name, priority, created_at)
                         VALUES (LAST_INSERT_ID(), 'default', 0, UTC_TIMESTAMP(6))",
                    ))
                    .execute(c)?;
                    Ok(())
                })
                .expect("raw enqueue");
            }
        }
    }

    /// One job enqueued on the minimal schema ([`Raw::fill_minimal`]
    /// made it), with the id given: its job row and its ready row in one
    /// transaction, as [`Raw::enqueue`] on solidq's (issue 28, item 3's
    /// single enqueue against the minimal schema's single statement).
    fn enqueue_minimal(&mut self, id: i64) {
        match self {
            Raw::Pg(c) => {
                Cached(
                    diesel::sql_query(
                        "WITH j AS (INSERT INTO raw_jobs (id, queue_name, class_name, arguments, priority, attempts,
                                                          created_at, updated_at)
                                    VALUES ($1, 'default', 'noop', 'null', 0, 0, LOCALTIMESTAMP, LOCALTIMESTAMP)
                                    RETURNING id, queue_name, priority, created_at)
                         INSERT INTO raw_ready (job_id, queue_name, priority, created_at)
                         SELECT id, queue_name, priority, created_at FROM j",
                    )
                    .bind::<BigInt, _>(id),
                )
                .execute(c)
                .expect("raw enqueue");
            }
            Raw::Sqlite(c) => {
                c.immediate_transaction::<_, diesel::result::Error, _>(|c| {
                    for sql in [
                        "INSERT INTO raw_jobs (id, queue_name, class_name, arguments, priority, attempts,
                                               created_at, updated_at)
                         VALUES (?1, 'default', 'noop', 'null', 0, 0, datetime('now'), datetime('now'))",
                        "INSERT INTO raw_ready (job_id, queue_name, priority, created_at)
                         VALUES (?1, 'default', 0, datetime('now'))",
                    ] {
                        Cached(diesel::sql_query(sql).bind::<BigInt, _>(id)).execute(c)?;
                    }
                    Ok(())
                })
                .expect("raw enqueue");
            }
            #[cfg(feature = "mysql")]
            Raw::Mysql(c) => {
                mysql_tx(c, |c| {
                    for sql in [
                        "INSERT INTO raw_jobs (id, queue_name, class_name, arguments, priority, attempts,
                                               created_at, updated_at)
                         VALUES (?, 'default', 'noop', 'null', 0, 0, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
                        "INSERT INTO raw_ready (job_id, queue_name, priority, created_at)
                         VALUES (?, 'default', 0, UTC_TIMESTAMP(6))",
                    ] {
                        Cached(diesel::sql_query(sql).bind::<BigInt, _>(id)).execute(c)?;
                    }
                    Ok(())
                })
                .expect("raw enqueue");
            }
        }
    }

    /// The raw lifecycle: claim up to `batch` with SKIP LOCKED into
    /// claimed_executions (one transaction), then mark them finished and
    /// delete their claims (another). Returns how many it claimed.
    fn claim_and_finish(&mut self, schema: Schema, lane: i64, batch: usize) -> usize {
        match self {
            Raw::Pg(c) => {
                let claimed: Vec<IdRow> = Cached(
                    diesel::sql_query(schema.on(
                        "WITH picked AS (SELECT job_id FROM solidq_ready_executions ORDER BY priority, position
                                         LIMIT $1 FOR UPDATE SKIP LOCKED),
                              deleted AS (DELETE FROM solidq_ready_executions
                                          WHERE job_id = ANY(ARRAY(SELECT job_id FROM picked))
                                          RETURNING job_id)
                         INSERT INTO solidq_claimed_executions (job_id, process_id, created_at)
                         SELECT job_id, $2, LOCALTIMESTAMP FROM deleted RETURNING job_id",
                    ))
                    .bind::<BigInt, _>(batch as i64)
                    .bind::<BigInt, _>(lane),
                )
                .load(c)
                .expect("raw claim");
                if claimed.is_empty() {
                    return 0;
                }
                let ids: Vec<i64> = claimed.iter().map(|r| r.job_id).collect();
                Cached(
                    diesel::sql_query(schema.on(
                        "WITH fenced AS (DELETE FROM solidq_claimed_executions WHERE process_id = $1
                                         AND job_id = ANY($2) RETURNING job_id)
                         UPDATE solidq_jobs SET finished_at = LOCALTIMESTAMP,
                                expires_at = LOCALTIMESTAMP + INTERVAL '1 day', attempts = attempts + 1,
                                updated_at = LOCALTIMESTAMP
                         WHERE id = ANY(ARRAY(SELECT job_id FROM fenced))",
                    ))
                    .bind::<BigInt, _>(lane)
                    .bind::<Array<BigInt>, _>(&ids),
                )
                .execute(c)
                .expect("raw finish");
                ids.len()
            }
            Raw::Sqlite(c) => {
                let ids: Vec<i64> = retry_busy(|| {
                    c.immediate_transaction::<_, diesel::result::Error, _>(|c| {
                        let picked: Vec<IdRow> = Cached(
                            diesel::sql_query(schema.on(
                                "SELECT job_id FROM solidq_ready_executions ORDER BY priority, position LIMIT ?1",
                            ))
                            .bind::<BigInt, _>(batch as i64),
                        )
                        .load(c)?;
                        let ids: Vec<i64> = picked.iter().map(|r| r.job_id).collect();
                        if ids.is_empty() {
                            return Ok(ids);
                        }
                        let json = serde_json::to_string(&ids).unwrap();
                        Cached(
                            diesel::sql_query(schema.on(
                                "DELETE FROM solidq_ready_executions WHERE job_id IN (SELECT value FROM json_each(?1))",
                            ))
                            .bind::<Text, _>(&json),
                        )
                        .execute(c)?;
                        Cached(
                            diesel::sql_query(schema.on(
                                "INSERT INTO solidq_claimed_executions (job_id, process_id, created_at)
                                 SELECT value, ?2, datetime('now') FROM json_each(?1)",
                            ))
                            .bind::<Text, _>(&json)
                            .bind::<BigInt, _>(lane),
                        )
                        .execute(c)?;
                        Ok(ids)
                    })
                })
                .expect("raw claim");
                if ids.is_empty() {
                    return 0;
                }
                let json = serde_json::to_string(&ids).unwrap();
                retry_busy(|| c.immediate_transaction::<_, diesel::result::Error, _>(|c| {
                    Cached(
                        diesel::sql_query(schema.on(
                            "DELETE FROM solidq_claimed_executions WHERE process_id = ?1
                             AND job_id IN (SELECT value FROM json_each(?2))",
                        ))
                        .bind::<BigInt, _>(lane)
                        .bind::<Text, _>(&json),
                    )
                    .execute(c)?;
                    Cached(
                        diesel::sql_query(schema.on(
                            "UPDATE solidq_jobs SET finished_at = datetime('now'), expires_at = datetime('now', '+1 day'),
                                    attempts = attempts + 1, updated_at = datetime('now')
                             WHERE id IN (SELECT value FROM json_each(?1))",
                        ))
                        .bind::<Text, _>(&json),
                    )
                    .execute(c)?;
                    Ok(())
                }))
                .expect("raw finish");
                ids.len()
            }
            #[cfg(feature = "mysql")]
            Raw::Mysql(c) => {
                let ids: Vec<i64> = mysql_tx(c, |c| {
                    let picked: Vec<IdRow> = Cached(
                        diesel::sql_query(schema.on(
                            "SELECT job_id FROM solidq_ready_executions ORDER BY priority, position
                                 LIMIT ? FOR UPDATE SKIP LOCKED",
                        ))
                        .bind::<BigInt, _>(batch as i64),
                    )
                    .load(c)?;
                    let ids: Vec<i64> = picked.iter().map(|r| r.job_id).collect();
                    if ids.is_empty() {
                        return Ok(ids);
                    }
                    let json = serde_json::to_string(&ids).unwrap();
                    Cached(
                        diesel::sql_query(schema.on(concat!(
                            "DELETE r FROM ",
                            mysql_ids!(),
                            " STRAIGHT_JOIN solidq_ready_executions r ON r.job_id = ids.value"
                        )))
                        .bind::<Text, _>(&json),
                    )
                    .execute(c)?;
                    Cached(
                        diesel::sql_query(schema.on(concat!(
                            "INSERT INTO solidq_claimed_executions (job_id, process_id, created_at)
                                 SELECT ids.value, ?, UTC_TIMESTAMP(6) FROM ",
                            mysql_ids!()
                        )))
                        .bind::<BigInt, _>(lane)
                        .bind::<Text, _>(&json),
                    )
                    .execute(c)?;
                    Ok(ids)
                })
                .expect("raw claim");
                if ids.is_empty() {
                    return 0;
                }
                let json = serde_json::to_string(&ids).unwrap();
                mysql_tx(c, |c| {
                    Cached(
                        diesel::sql_query(schema.on(concat!(
                            "DELETE c FROM ",
                            mysql_ids!(),
                            " STRAIGHT_JOIN solidq_claimed_executions c ON c.job_id = ids.value
                             WHERE c.process_id = ?"
                        )))
                        .bind::<Text, _>(&json)
                        .bind::<BigInt, _>(lane),
                    )
                    .execute(c)?;
                    Cached(
                        diesel::sql_query(schema.on(concat!(
                            "UPDATE ",
                            mysql_ids!(),
                            " STRAIGHT_JOIN solidq_jobs j ON j.id = ids.value
                             SET j.finished_at = UTC_TIMESTAMP(6),
                                 j.expires_at = UTC_TIMESTAMP(6) + INTERVAL 1 DAY,
                                 j.attempts = j.attempts + 1, j.updated_at = UTC_TIMESTAMP(6)"
                        )))
                        .bind::<Text, _>(&json),
                    )
                    .execute(c)?;
                    Ok(())
                })
                .expect("raw finish");
                ids.len()
            }
        }
    }
}

// ---------------------------------------------------------------- workers

struct Workers {
    children: Vec<Child>,
}

impl Workers {
    fn spawn(url: &str, processes: usize, threads: usize, prefetch: usize) -> Workers {
        Workers::spawn_as(url, processes, threads, prefetch, true)
    }

    /// One worker process as a supervisor's child: it neither dispatches
    /// nor keeps house.
    fn spawn_supervised(url: &str, threads: usize, prefetch: usize) -> Workers {
        Workers::spawn_as(url, 1, threads, prefetch, false)
    }

    /// `processes` workers, the first standalone if `standalone`.
    fn spawn_as(
        url: &str,
        processes: usize,
        threads: usize,
        prefetch: usize,
        standalone: bool,
    ) -> Workers {
        let children = (0..processes)
            .map(|i| {
                let role = if i == 0 && standalone {
                    "standalone"
                } else {
                    "supervised"
                };
                Command::new(std::env::current_exe().expect("bench binary"))
                    .args([
                        "--worker",
                        url,
                        &threads.to_string(),
                        &prefetch.to_string(),
                        role,
                    ])
                    .env(
                        "RUST_LOG",
                        std::env::var("BENCH_WORKER_LOG").unwrap_or_else(|_| "error".into()),
                    )
                    .env(
                        solidq::config::ENV_SQLITE_SYNCHRONOUS,
                        sqlite_synchronous().to_string(),
                    )
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .spawn()
                    .expect("spawn worker")
            })
            .collect();
        Workers { children }
    }

    /// Peak resident memory of each worker, in MB.
    fn peak_rss_mb(&self) -> Vec<f64> {
        self.children
            .iter()
            .filter_map(|c| proc_status_kb(c.id(), "VmHWM:"))
            .map(|kb| kb as f64 / 1024.0)
            .collect()
    }

    fn rss_mb(&self) -> Vec<f64> {
        self.children
            .iter()
            .filter_map(|c| proc_status_kb(c.id(), "VmRSS:"))
            .map(|kb| kb as f64 / 1024.0)
            .collect()
    }

    /// SIGTERM, wait, and sum what the workers report.
    fn stop(self) -> Report {
        for c in &self.children {
            unsafe {
                libc::kill(c.id() as i32, libc::SIGTERM);
            }
        }
        let mut report = Report::default();
        for c in self.children {
            let output = c.wait_with_output().expect("worker output");
            for line in String::from_utf8_lossy(&output.stdout).lines() {
                let numbers: Vec<u64> = line
                    .split(' ')
                    .skip(1)
                    .filter_map(|n| n.parse().ok())
                    .collect();
                match (line.split(' ').next(), numbers.as_slice()) {
                    (Some("statements"), [n]) => report.statements += n,
                    (Some("cpu_us"), [n]) => report.cpu_us += n,
                    (Some("claims"), [claims, jobs]) => {
                        report.claims += claims;
                        report.claimed += jobs;
                    }
                    _ => {}
                }
            }
        }
        report
    }
}

/// What the worker processes reported when they stopped.
#[derive(Default)]
struct Report {
    statements: u64,
    cpu_us: u64,
    claims: u64,
    claimed: u64,
}

impl Report {
    /// Jobs per claim, on average.
    fn batch(&self) -> usize {
        (self.claimed as f64 / self.claims.max(1) as f64)
            .round()
            .max(1.0) as usize
    }
}

fn proc_status_kb(pid: u32, field: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Waits until no job is ready or claimed, checks that all `n` jobs
/// succeeded, and returns how long the work took by the database's clock:
/// from `start_us` to the last job's `finished_at`.
fn wait_drained(
    db: &BenchDb,
    raw: &mut Raw,
    n: usize,
    started: Instant,
    start_us: i64,
) -> Duration {
    wait_drained_after(db, raw, n, 0, started, start_us)
}

/// [`wait_drained`] of the `n` jobs after id `after` (a database holding
/// others already finished).
fn wait_drained_after(
    db: &BenchDb,
    raw: &mut Raw,
    n: usize,
    after: i64,
    started: Instant,
    start_us: i64,
) -> Duration {
    while db.busy(raw) {
        assert!(
            started.elapsed() < Duration::from_secs(900),
            "work-down took over 15 minutes"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_succeeded_after(raw, n, after);
    let end_us = raw.epoch_us(&format!(
        "SELECT max(finished_at) AS t FROM solidq_jobs WHERE id > {after}"
    ));
    Duration::from_micros((end_us - start_us).max(1) as u64)
}

/// Every one of the `n` jobs finished without an error: a rate is only
/// reported for work that was done.
fn assert_all_succeeded(raw: &mut Raw, n: usize) {
    assert_succeeded_after(raw, n, 0);
}

/// [`assert_all_succeeded`] of the jobs after id `after`.
fn assert_succeeded_after(raw: &mut Raw, n: usize, after: i64) {
    let succeeded = raw.scalar(&format!(
        "SELECT count(*) AS v FROM solidq_jobs
         WHERE id > {after} AND finished_at IS NOT NULL AND errors IS NULL"
    ));
    let failed = raw.scalar("SELECT count(*) AS v FROM solidq_failed_executions");
    if (succeeded, failed) != (n as i64, 0) {
        // Say why: the first errors recorded.
        for (error, id, _) in raw.named_pairs(&format!(
            "SELECT errors AS name, id AS a, 0 AS b FROM solidq_jobs
             WHERE id > {after} AND errors IS NOT NULL ORDER BY id LIMIT 3"
        )) {
            eprintln!("job {id}: {error}");
        }
    }
    assert_eq!(
        (succeeded, failed),
        (n as i64, 0),
        "not every job succeeded (succeeded, failed)"
    );
}

// ---------------------------------------------------------------- sections

fn bench_enqueue(backend: &'static str, args: &Args, table: &mut Table) {
    let (mut ours, mut raw_single, mut bulk) = (vec![], vec![], vec![]);
    let mut raw_minimal = vec![];
    for _ in 0..args.repeat {
        let db = BenchDb::new(backend, args);
        let queue = db.queue();
        let started = Instant::now();
        for _ in 0..args.single {
            queue.enqueue(&Noop).expect("enqueue");
        }
        ours.push(rate(args.single, started.elapsed()));
        let mut raw = Raw::open(&db.url);
        let started = Instant::now();
        for _ in 0..args.single {
            raw.enqueue();
        }
        raw_single.push(rate(args.single, started.elapsed()));
        raw.fill_minimal(0);
        let started = Instant::now();
        for id in 1..=args.single {
            raw.enqueue_minimal(id as i64);
        }
        raw_minimal.push(rate(args.single, started.elapsed()));
        let batch: Vec<Noop> = (0..1_000).map(|_| Noop).collect();
        let started = Instant::now();
        for _ in 0..args.bulk / 1_000 {
            queue.enqueue_all(&batch).expect("enqueue_all");
        }
        bulk.push(rate(args.bulk / 1_000 * 1_000, started.elapsed()));
    }
    table.add_vs(
        "enqueue single (jobs/s)",
        ours.clone(),
        "raw single statement",
        raw_single,
    );
    table.add_vs(
        "enqueue single, against the limit (jobs/s)",
        ours,
        "raw on a minimal schema",
        raw_minimal,
    );
    table.add("enqueue bulk, 1,000 per call (jobs/s)", bulk);
}

fn bench_workdown(backend: &'static str, args: &Args, table: &mut Table) {
    let n = args.jobs / 1_000 * 1_000;
    let (mut ours, mut base, mut rss, mut per_job) = (vec![], vec![], vec![], vec![]);
    let (mut worker_cpu, mut server_cpu, mut base_server_cpu) = (vec![], vec![], vec![]);
    let (mut limit, mut limit_server_cpu) = (vec![], vec![]);
    let mut batches = vec![];
    for _ in 0..args.repeat {
        let db = BenchDb::new(backend, args);
        db.fill(n);
        let mut raw = Raw::open(&db.url);
        raw.checkpoint();
        let server_before = server_cpu_by_pid(backend);
        let started = Instant::now();
        let start_us = raw.now_us();
        let workers = Workers::spawn(&db.url, args.processes, args.threads, args.prefetch);
        let elapsed = wait_drained(&db, &mut raw, n, started, start_us);
        let server = server_cpu_since(backend, &server_before);
        rss.extend(workers.peak_rss_mb());
        let report = workers.stop();
        ours.push(rate(n, elapsed));
        per_job.push(report.statements as f64 / n as f64);
        worker_cpu.push(report.cpu_us as f64 / n as f64);
        server_cpu.push(server as f64 / n as f64);
        batches.push(report.batch() as f64);

        // The raw baselines, each on a fresh database, claiming what our
        // workers claimed per claim on average: on solidq's schema, then on
        // the minimal one (the limit).
        let batch = report.batch();
        for schema in [Schema::Solidq, Schema::Minimal] {
            let db = BenchDb::new(backend, args);
            match schema {
                Schema::Solidq => db.fill(n),
                Schema::Minimal => Raw::open(&db.url).fill_minimal(n),
            }
            Raw::open(&db.url).checkpoint();
            let (elapsed, cpu, done) =
                raw_lanes(backend, &db.url, schema, 2 * args.processes, batch);
            let cpu = cpu as f64 / n as f64;
            assert_eq!(done, n, "the raw lanes finished every job once");
            match schema {
                Schema::Solidq => {
                    base.push(rate(n, elapsed));
                    base_server_cpu.push(cpu);
                }
                Schema::Minimal => {
                    limit.push(rate(n, elapsed));
                    limit_server_cpu.push(cpu);
                }
            }
        }
    }
    let batch = median(&batches);
    table.add_vs(
        format!(
            "work-down {n} no-op, {}x{} (jobs/s)",
            args.processes, args.threads
        ),
        ours.clone(),
        format!("raw, {} conns, batch {batch:.0}", 2 * args.processes),
        base,
    );
    table.add_vs(
        "work-down, against the limit (jobs/s)",
        ours,
        format!("raw on a minimal schema, {} conns", 2 * args.processes),
        limit,
    );
    table.add("jobs per claim (work-down)", batches);
    table.add("statements per job (work-down)", per_job);
    table.add("worker CPU per job (µs)", worker_cpu);
    if !server_processes(backend).is_empty() {
        table.add_vs(
            "server CPU per job (µs)",
            server_cpu.clone(),
            "raw",
            base_server_cpu,
        );
        table.add_vs(
            "server CPU per job, against the limit (µs)",
            server_cpu,
            "raw on a minimal schema",
            limit_server_cpu,
        );
    }
    table.add(
        format!("worker peak RSS, {} threads (MB)", args.threads),
        rss,
    );
}

/// Work-downs of plain no-op jobs and of jobs using a feature, one after
/// the other in each run: the feature's cost as a ratio in the same run.
/// `n` plain jobs and `n` jobs of each feature (one batch or workflow of
/// `n` jobs is `n` + 1, its callback included, all checked).
fn bench_features(backend: &'static str, args: &Args, table: &mut Table) {
    #[derive(Clone, Copy, PartialEq)]
    enum Feature {
        Plain,
        Steps,
        Batch,
        Workflow,
        Rated,
        Fair,
    }
    let n = args.jobs / 1_000 * 1_000;
    let (mut plain, mut stepped, mut batched, mut flowed, mut rated, mut fair) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    for _ in 0..args.repeat {
        for (rates, feature) in [
            (&mut plain, Feature::Plain),
            (&mut stepped, Feature::Steps),
            (&mut batched, Feature::Batch),
            (&mut flowed, Feature::Workflow),
            (&mut rated, Feature::Rated),
            (&mut fair, Feature::Fair),
        ] {
            let db = BenchDb::new(backend, args);
            let batch = match feature {
                Feature::Plain => {
                    db.fill(n);
                    None
                }
                Feature::Steps => {
                    db.fill_with(n, || Stepped);
                    None
                }
                Feature::Rated => {
                    let key = std::cell::Cell::new(0u32);
                    db.fill_with(n, || {
                        key.set((key.get() + 1) % 100);
                        Rated { key: key.get() }
                    });
                    None
                }
                Feature::Fair => {
                    let key = std::cell::Cell::new(0u32);
                    db.fill_with(n, || {
                        key.set((key.get() + 1) % 100);
                        Tenant { key: key.get() }
                    });
                    None
                }
                Feature::Batch => Some(db.fill_batch(n)),
                Feature::Workflow => Some(db.fill_workflow(n)),
            };
            let total = n + usize::from(batch.is_some());
            let mut raw = Raw::open(&db.url);
            let started = Instant::now();
            let start_us = raw.now_us();
            let workers = Workers::spawn(&db.url, args.processes, args.threads, args.prefetch);
            let elapsed = wait_drained(&db, &mut raw, total, started, start_us);
            workers.stop();
            if feature == Feature::Steps {
                let finished = raw.scalar(
                    "SELECT count(*) AS v FROM solidq_jobs WHERE checkpoint LIKE '%\"three\"%'",
                );
                assert_eq!(finished, n as i64, "every job's three steps were recorded");
            }
            if let Some(batch) = batch {
                let info = db.queue().batch_info(batch).unwrap().expect("the batch");
                assert_eq!(
                    (info.succeeded, info.failed, info.pending),
                    (n as i64, 0, 0),
                    "every member counted"
                );
                assert_eq!(
                    info.fired,
                    vec!["complete".to_string()],
                    "its callback, once"
                );
            }
            rates.push(rate(total, elapsed));
        }
    }
    table.add_vs(
        format!(
            "work-down {n}, 3 steps + 10 checkpoints each, {}x{} (jobs/s)",
            args.processes, args.threads
        ),
        stepped,
        "plain no-op, same run",
        plain.clone(),
    );
    table.add_vs(
        format!(
            "work-down {n}, all in one batch, {}x{} (jobs/s)",
            args.processes, args.threads
        ),
        batched,
        "plain no-op, same run",
        plain.clone(),
    );
    table.add_vs(
        format!(
            "work-down {n}, one workflow of 1+8+1 fan-out/fan-in groups, {}x{} (jobs/s)",
            args.processes, args.threads
        ),
        flowed,
        "plain no-op, same run",
        plain.clone(),
    );
    table.add_vs(
        format!(
            "work-down {n}, rate-limited (10,000/s per key, 100 keys), {}x{} (jobs/s)",
            args.processes, args.threads
        ),
        rated,
        "plain no-op, same run",
        plain.clone(),
    );
    table.add_vs(
        format!(
            "work-down {n}, fairness keys (100 tenants), {}x{} (jobs/s)",
            args.processes, args.threads
        ),
        fair,
        "plain no-op, same run",
        plain,
    );
}

/// Exactly-once effects: `--jobs` jobs that each write one row, committed
/// with their success in one transaction (`complete_in_transaction`),
/// against the same row written on a connection of the job's own and the
/// success recorded by the completer's batches. Every run checks that
/// every job succeeded and wrote its row once; the database server's CPU
/// per job beside each.
fn bench_effects(backend: &'static str, args: &Args, table: &mut Table) {
    let n = args.jobs / 1_000 * 1_000;
    let (mut own, mut in_tx) = (vec![], vec![]);
    let (mut own_cpu, mut in_tx_cpu) = (vec![], vec![]);
    for _ in 0..args.repeat {
        for transaction in [false, true] {
            let db = BenchDb::new(backend, args);
            let mut raw = Raw::open(&db.url);
            raw.batch("CREATE TABLE bench_effects (job_id BIGINT NOT NULL)");
            if transaction {
                db.fill_with(n, || EffectInTransaction);
            } else {
                db.fill_with(n, || Effect);
            }
            let cpu = server_cpu_by_pid(backend);
            let started = Instant::now();
            let start_us = raw.now_us();
            let workers = Workers::spawn(&db.url, args.processes, args.threads, args.prefetch);
            let elapsed = wait_drained(&db, &mut raw, n, started, start_us);
            workers.stop();
            let server_us = server_cpu_since(backend, &cpu) as f64 / n as f64;
            let (rows, jobs) = (
                raw.scalar("SELECT count(*) AS v FROM bench_effects"),
                raw.scalar("SELECT count(DISTINCT job_id) AS v FROM bench_effects"),
            );
            assert_eq!((rows, jobs), (n as i64, n as i64), "every job's row, once");
            if transaction {
                in_tx.push(rate(n, elapsed));
                in_tx_cpu.push(server_us);
            } else {
                own.push(rate(n, elapsed));
                own_cpu.push(server_us);
            }
        }
    }
    table.add_vs(
        format!(
            "work-down {n}, each writing a row in its transaction with its success, {}x{} (jobs/s)",
            args.processes, args.threads
        ),
        in_tx,
        "the row on a connection of the job's own, same run",
        own,
    );
    table.add_vs(
        "the same: database server CPU per job (µs)",
        in_tx_cpu,
        "the row on a connection of the job's own, same run",
        own_cpu,
    );
}

/// Fair share (`store::fair`): tenant 0 enqueues `--jobs` jobs (1,000 per
/// call), workers start on them, then tenant 1 enqueues one job. Measured:
/// how long tenant 1's job waited, and how many of tenant 0's jobs started
/// after its enqueue returned and before it started (the bound the README
/// documents: each worker's threads plus its prefetch, plus one); against
/// the same run without fairness keys, where the single job waits for the
/// rest of the burst. Also the burst's enqueue rate with and without a key.
fn bench_fairness(backend: &'static str, args: &Args, table: &mut Table) {
    let n = args.jobs / 1_000 * 1_000;
    let mut waits = [vec![], vec![]];
    let mut ahead = [vec![], vec![]];
    let mut enqueue = [vec![], vec![]];
    for _ in 0..args.repeat {
        for (k, keyed) in [true, false].into_iter().enumerate() {
            let db = BenchDb::new(backend, args);
            let queue = db.queue();
            let started = Instant::now();
            for _ in 0..n / 1_000 {
                if keyed {
                    let burst: Vec<Tenant> = (0..1_000).map(|_| Tenant { key: 0 }).collect();
                    queue.enqueue_all(&burst).expect("enqueue_all");
                } else {
                    let burst: Vec<Stamp> = (0..1_000).map(|_| Stamp).collect();
                    queue.enqueue_all(&burst).expect("enqueue_all");
                }
            }
            enqueue[k].push(rate(n, started.elapsed()));
            let mut raw = Raw::open(&db.url);
            raw.analyze();
            let workers = Workers::spawn(&db.url, args.processes, args.threads, args.prefetch);
            let deadline = Instant::now() + Duration::from_secs(60);
            while raw.scalar("SELECT count(*) AS v FROM solidq_jobs WHERE finished_at IS NOT NULL")
                < (n / 100) as i64
            {
                assert!(Instant::now() < deadline, "the burst did not start in 60 s");
                std::thread::sleep(Duration::from_millis(1));
            }
            let before = now_us();
            let single = if keyed {
                queue.enqueue(&Tenant { key: 1 })
            } else {
                queue.enqueue(&Stamp)
            }
            .expect("enqueue");
            let enqueued = now_us();
            let started_at = wait_done(&queue, single);
            waits[k].push((started_at - before) as f64 / 1000.0);
            let cast = if backend == "mysql" {
                "SIGNED"
            } else {
                "BIGINT"
            };
            ahead[k].push(raw.scalar(&format!(
                "SELECT count(*) AS v FROM solidq_jobs WHERE id <> {single} AND result IS NOT NULL
                 AND CAST(result AS {cast}) > {enqueued} AND CAST(result AS {cast}) < {started_at}"
            )) as f64);
            let now = raw.now_us();
            wait_drained(&db, &mut raw, n + 1, Instant::now(), now);
            workers.stop();
        }
    }
    let [fair_wait, plain_wait] = waits;
    let [fair_ahead, plain_ahead] = ahead;
    let [fair_enqueue, plain_enqueue] = enqueue;
    table.add_vs(
        format!("enqueue bulk {n}, one fairness key, 1,000 per call (jobs/s)"),
        fair_enqueue,
        "no key, same run",
        plain_enqueue,
    );
    table.add_vs(
        format!(
            "tenant b's one job after a's {n}: wait, {}x{} (ms)",
            args.processes, args.threads
        ),
        fair_wait,
        "no keys, same run",
        plain_wait,
    );
    table.add_vs(
        format!(
            "  a's jobs started between b's enqueue and start, bound {}",
            args.processes * (args.threads + args.prefetch) + 1
        ),
        fair_ahead,
        "no keys, same run",
        plain_ahead,
    );
}

fn bench_mixed(backend: &'static str, args: &Args, table: &mut Table) {
    let (mut produced_rates, mut consumed_rates, mut alone_rates) = (vec![], vec![], vec![]);
    let mut together_rates = vec![];
    let length = Duration::from_secs(args.mixed_seconds);
    for _ in 0..args.repeat {
        // The baseline, in the same run: one thread enqueuing alone, on a
        // database of its own with no worker.
        let db = BenchDb::new(backend, args);
        let (alone, _, elapsed) = run_mixed(&db, 1, length, None);
        alone_rates.push(rate(alone, elapsed));
        drop(db);
        // The producers alone: what they enqueue with no worker beside
        // them, on a database of its own (what the workers' share of the
        // machine costs them is the difference).
        let db = BenchDb::new(backend, args);
        let (together, _, elapsed) = run_mixed(&db, args.producers, length, None);
        together_rates.push(rate(together, elapsed));
        drop(db);
        let db = BenchDb::new(backend, args);
        let workers = Workers::spawn(&db.url, args.processes, args.threads, args.prefetch);
        std::thread::sleep(Duration::from_millis(500));
        let (produced, consumed, elapsed) = run_mixed(&db, args.producers, length, None);
        let _ = workers.stop();
        produced_rates.push(rate(produced, elapsed));
        consumed_rates.push(rate(consumed, elapsed));
    }
    table.add(
        "mixed: one thread enqueuing alone, no worker (jobs/s)",
        alone_rates.clone(),
    );
    table.add_vs(
        format!(
            "mixed: {} threads enqueuing, no worker (jobs/s)",
            args.producers
        ),
        together_rates,
        "one thread alone",
        alone_rates.clone(),
    );
    table.add_vs(
        format!("mixed: enqueued by {} threads (jobs/s)", args.producers),
        produced_rates,
        "one thread alone",
        alone_rates.clone(),
    );
    table.add_vs(
        "mixed: worked by the workers (jobs/s)",
        consumed_rates,
        "one thread alone",
        alone_rates,
    );
}

/// Producers enqueue single jobs until `length` passes or `total` are
/// enqueued; returns (enqueued, finished meanwhile, elapsed).
fn run_mixed(
    db: &BenchDb,
    producers: usize,
    length: Duration,
    total: Option<usize>,
) -> (usize, usize, Duration) {
    let produced = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let producers: Vec<_> = (0..producers)
        .map(|_| {
            let queue = db.queue();
            let produced = Arc::clone(&produced);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if total.is_some_and(|t| produced.fetch_add(1, Ordering::Relaxed) >= t as u64) {
                        produced.fetch_sub(1, Ordering::Relaxed);
                        break;
                    }
                    if total.is_none() {
                        produced.fetch_add(1, Ordering::Relaxed);
                    }
                    queue.enqueue(&Noop).expect("enqueue");
                }
            })
        })
        .collect();
    std::thread::sleep(length);
    stop.store(true, Ordering::Relaxed);
    for p in producers {
        p.join().unwrap();
    }
    let elapsed = started.elapsed();
    let mut raw = Raw::open(&db.url);
    let enqueued = produced.load(Ordering::Relaxed) as usize;
    let pending = db.pending(&mut raw).max(0) as usize;
    assert_eq!(
        raw.scalar(
            "SELECT count(*) AS v FROM solidq_jobs WHERE errors IS NOT NULL OR id IN (SELECT job_id FROM solidq_failed_executions)"
        ),
        0,
        "a job of the mixed run failed"
    );
    (enqueued, enqueued.saturating_sub(pending), elapsed)
}

fn bench_latency(backend: &'static str, args: &Args, table: &mut Table) {
    let mut rows: Vec<(&str, Vec<f64>)> = Vec::new();
    for place in ["other process", "same process"] {
        if place == "same process" && backend != "sqlite" {
            continue;
        }
        let (mut p50, mut p95, mut p99) = (vec![], vec![], vec![]);
        for _ in 0..args.repeat {
            let db = BenchDb::new(backend, args);
            let queue = db.queue();
            let (workers, local) = if place == "other process" {
                (
                    Some(Workers::spawn(&db.url, 1, args.threads, args.prefetch)),
                    None,
                )
            } else {
                let config = watching(WorkerConfig {
                    threads: args.threads,
                    prefetch: args.prefetch,
                    standalone: false,
                    ..WorkerConfig::default()
                });
                let handle = Worker::new(queue.clone())
                    .config(config)
                    .register::<Noop>()
                    .register::<Stamp>()
                    .start()
                    .expect("worker");
                (None, Some(handle))
            };
            let samples = pickups(&queue, |k| k >= args.latency_samples);
            if let Some(w) = workers {
                let _ = w.stop();
            }
            if let Some(l) = local {
                l.stop().expect("stop");
            }
            p50.push(percentile(&samples, 0.50));
            p95.push(percentile(&samples, 0.95));
            p99.push(percentile(&samples, 0.99));
        }
        let label = |p: &str| format!("pickup latency {p}, {place} (ms)");
        rows.push((Box::leak(label("p50").into_boxed_str()), p50));
        rows.push((Box::leak(label("p95").into_boxed_str()), p95));
        rows.push((Box::leak(label("p99").into_boxed_str()), p99));
    }
    for (measure, values) in rows {
        table.add(measure, values);
    }
}

/// The raw lifecycle ([`Raw::claim_and_finish`]) on `url`'s jobs, `lanes`
/// connections claiming `batch` at a time until none is left: how long it
/// took, the server's CPU meanwhile (µs, 0 where it cannot be read) and
/// how many jobs the lanes finished.
fn raw_lanes(
    backend: &str,
    url: &str,
    schema: Schema,
    lanes: usize,
    batch: usize,
) -> (Duration, u64, usize) {
    let server_before = server_cpu_by_pid(backend);
    let started = Instant::now();
    // Lanes hand their connections back, so their server processes are
    // still there to be measured.
    let connections: Vec<(Raw, usize)> = std::thread::scope(|s| {
        let lanes: Vec<_> = (0..lanes)
            .map(|lane| {
                s.spawn(move || {
                    let mut conn = Raw::open(url);
                    let mut done = 0;
                    loop {
                        match conn.claim_and_finish(schema, 1_000 + lane as i64, batch) {
                            0 => break,
                            k => done += k,
                        }
                    }
                    (conn, done)
                })
            })
            .collect();
        lanes.into_iter().map(|l| l.join().expect("lane")).collect()
    });
    let elapsed = started.elapsed();
    let cpu = server_cpu_since(backend, &server_before);
    (elapsed, cpu, connections.iter().map(|(_, k)| k).sum())
}

/// `--only schema` (PostgreSQL and MySQL, only when named; issue 28,
/// item 2): what each index of `solidq_jobs` beyond its primary key
/// costs. Per variant, a fresh database: solidq's schema as migrated,
/// then without each of those indexes, without all of them, and (on
/// PostgreSQL) without them on a table filled at fillfactor 70, room on
/// each page for the finish's new row version so that it can be a HOT
/// update, which writes no index entry. Each is filled with `--jobs`
/// no-op jobs by solidq's bulk enqueue (1,000 a call), then worked down
/// by the raw lifecycle of the work-down's baseline ([`raw_lanes`], 2 ×
/// `--processes` connections, 128 jobs a claim). Per variant: the bulk
/// enqueue's and the work-down's jobs/s, the server's CPU and the bytes
/// of WAL (InnoDB's redo log on MySQL) per job of the work-down, and on
/// PostgreSQL the share of finishes that were HOT. Rounds run the
/// variants in turn, so a slow spell of the machine falls on all of them.
fn bench_schema(backend: &'static str, args: &Args, table: &mut Table) {
    let pg = match backend {
        "postgres" => true,
        "mysql" => false,
        _ => {
            println!("schema: PostgreSQL and MySQL only; not run");
            return;
        }
    };
    let n = args.jobs;
    let indexes: Vec<String> = {
        let db = BenchDb::new(backend, args);
        let list = if pg {
            "SELECT indexname::text AS name, 0::bigint AS a, 0::bigint AS b FROM pg_indexes
             WHERE tablename = 'solidq_jobs' AND indexname <> 'solidq_jobs_pkey'
             ORDER BY indexname"
        } else {
            "SELECT DISTINCT INDEX_NAME AS name, CAST(0 AS SIGNED) AS a, CAST(0 AS SIGNED) AS b
             FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE()
             AND TABLE_NAME = 'solidq_jobs' AND INDEX_NAME <> 'PRIMARY' ORDER BY INDEX_NAME"
        };
        Raw::open(&db.url)
            .named_pairs(list)
            .into_iter()
            .map(|(name, _, _)| name)
            .collect()
    };
    let drop = |index: &String| {
        if pg {
            format!("DROP INDEX {index};")
        } else {
            format!("DROP INDEX {index} ON solidq_jobs;")
        }
    };
    let drop_all: String = indexes.iter().map(drop).collect();
    // (label, statements before the fill)
    let mut variants: Vec<(String, String)> = vec![("as migrated".into(), String::new())];
    for index in &indexes {
        variants.push((format!("without {index}"), drop(index)));
    }
    variants.push(("without all of them".into(), drop_all.clone()));
    if pg {
        variants.push((
            "without all, fillfactor 70".into(),
            format!("{drop_all} ALTER TABLE solidq_jobs SET (fillfactor = 70);"),
        ));
    }
    let log = if pg {
        "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint AS v"
    } else {
        "SELECT CAST(VARIABLE_VALUE AS SIGNED) AS v FROM information_schema.GLOBAL_STATUS
         WHERE VARIABLE_NAME = 'INNODB_LSN_CURRENT'"
    };
    let updates = |raw: &mut Raw| {
        let (_, updated, hot) = raw
            .named_pairs(
                "SELECT 'jobs' AS name, n_tup_upd AS a, n_tup_hot_upd AS b
                 FROM pg_stat_user_tables WHERE relname = 'solidq_jobs'",
            )
            .swap_remove(0);
        (updated, hot)
    };
    let mut figures = vec![[const { Vec::<f64>::new() }; 5]; variants.len()];
    for _ in 0..args.repeat {
        for (v, (_, ddl)) in variants.iter().enumerate() {
            let db = BenchDb::new(backend, args);
            let mut raw = Raw::open(&db.url);
            if !ddl.is_empty() {
                raw.batch(ddl);
            }
            let started = Instant::now();
            db.fill(n);
            figures[v][0].push(rate(n, started.elapsed()));
            let (upd_before, hot_before) = if pg {
                raw.batch("VACUUM ANALYZE solidq_jobs");
                raw.batch("CHECKPOINT");
                updates(&mut raw)
            } else {
                (0, 0)
            };
            let log_before = raw.scalar(log);
            let (elapsed, cpu, done) =
                raw_lanes(backend, &db.url, Schema::Solidq, 2 * args.processes, 128);
            let log_after = raw.scalar(log);
            assert_eq!(done, n, "the raw lanes finished every job once");
            figures[v][1].push(rate(n, elapsed));
            figures[v][2].push(cpu as f64 / n as f64);
            figures[v][3].push((log_after - log_before) as f64 / n as f64);
            if pg {
                // The lanes' counts reach the statistics as their sessions
                // end.
                let deadline = Instant::now() + Duration::from_secs(10);
                let (upd, hot) = loop {
                    let (upd, hot) = updates(&mut raw);
                    if upd - upd_before >= n as i64 || Instant::now() > deadline {
                        break (upd - upd_before, hot - hot_before);
                    }
                    std::thread::sleep(Duration::from_millis(50));
                };
                assert_eq!(
                    upd, n as i64,
                    "every finish counted as an update of its job"
                );
                figures[v][4].push(100.0 * hot as f64 / upd as f64);
            }
        }
    }
    let log_name = if pg { "WAL" } else { "redo log" };
    let base = figures[0].clone();
    for ((label, _), values) in variants.iter().zip(figures) {
        let [enqueue, jobs, cpu, bytes, hot] = values;
        let measures = [
            ("bulk enqueue (jobs/s)".to_string(), enqueue, &base[0]),
            ("raw work-down (jobs/s)".to_string(), jobs, &base[1]),
            ("server CPU per job (µs)".to_string(), cpu, &base[2]),
            (format!("{log_name} bytes per job"), bytes, &base[3]),
        ];
        for (what, values, base) in measures {
            let measure = format!("schema, {label}: {what}");
            if label == "as migrated" {
                table.add(measure, values);
            } else {
                table.add_vs(measure, values, "as migrated", base.clone());
            }
        }
        if pg {
            table.add(format!("schema, {label}: HOT finishes (%)"), hot);
        }
    }
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
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Statements per second of an idle worker: with the defaults (a
/// standalone worker: it also dispatches and keeps house) and as a
/// supervisor's child (`standalone: false`).
fn bench_idle(backend: &'static str, args: &Args, table: &mut Table) {
    for standalone in [true, false] {
        let (mut per_second, mut own_cpu, mut server_cpu) = (vec![], vec![], vec![]);
        for _ in 0..args.repeat {
            let db = BenchDb::new(backend, args);
            let queue = db.queue();
            let config = watching(WorkerConfig {
                threads: args.threads,
                standalone,
                ..WorkerConfig::default()
            });
            let handle = Worker::new(queue)
                .config(config)
                .register::<Noop>()
                .start()
                .expect("worker");
            std::thread::sleep(Duration::from_secs(2));
            let before = solidq::events::statements_executed();
            let (own_before, server_before) = (own_cpu_us(), server_cpu_by_pid(backend));
            let window = Duration::from_secs(20);
            std::thread::sleep(window);
            let statements = solidq::events::statements_executed() - before;
            // CPU ms per second: this process holds nothing but the worker.
            let per_s = |us: u64| us as f64 / 1000.0 / window.as_secs_f64();
            own_cpu.push(per_s(own_cpu_us() - own_before));
            server_cpu.push(per_s(server_cpu_since(backend, &server_before)));
            handle.stop().expect("stop");
            per_second.push(statements as f64 / window.as_secs_f64());
        }
        let label = if standalone {
            "idle worker, defaults (standalone)"
        } else {
            "idle worker, standalone: false (supervised)"
        };
        table.add(format!("{label}, statements/s"), per_second);
        table.add(format!("{label}, its CPU ms/s"), own_cpu);
        if !server_processes(backend).is_empty() {
            table.add(format!("{label}, server CPU ms/s"), server_cpu);
        }
    }
}

/// Many queues (one per tenant): 20,000 no-op jobs spread over N queues
/// (`tenant_0000`…), drained by one worker of 8 threads (in this process)
/// that serves the one queue holding all of them (the same jobs, enqueued
/// in one queue: the figure to match), `*`, `tenant_*`, or the N names
/// listed in order; each drain checks that every job succeeded, and one
/// that has not ended in 120 s is reported as such. Then an idle worker
/// listing 1,000 queues against one listing one: its statements per second
/// and the server's CPU per second.
fn bench_queues(backend: &'static str, args: &Args, table: &mut Table) {
    const JOBS: usize = 20_000;
    const CAP: Duration = Duration::from_secs(120);
    let name = |n: usize| format!("tenant_{n:04}");
    for queues in [20, 100, 1_000] {
        for serves in ["one queue", "*", "tenant_*", "listed"] {
            let mut seconds = vec![];
            for _ in 0..args.repeat {
                let db = BenchDb::new(backend, args);
                let queue = db.queue();
                let requests: Vec<JobRequest> = (0..JOBS)
                    .map(|n| {
                        let into = if serves == "one queue" { 0 } else { n % queues };
                        JobRequest::new(&Noop, EnqueueOptions::new().queue(name(into)))
                            .expect("request")
                    })
                    .collect();
                for chunk in requests.chunks(1_000) {
                    queue.enqueue_all_with(chunk).expect("enqueue");
                }
                let mut raw = Raw::open(&db.url);
                raw.analyze();
                let listed: Vec<String> = match serves {
                    "one queue" => vec![name(0)],
                    "listed" => (0..queues).map(name).collect(),
                    pattern => vec![pattern.to_string()],
                };
                let start_us = raw.now_us();
                let started = Instant::now();
                let handle = Worker::new(db.queue())
                    .queues(listed)
                    .threads(8)
                    .register::<Noop>()
                    .start()
                    .expect("worker");
                let mut drained = true;
                while db.busy(&mut raw) {
                    if started.elapsed() > CAP {
                        drained = false;
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                handle.stop().expect("stop");
                if !drained {
                    let done = raw.scalar(
                        "SELECT count(*) AS v FROM solidq_jobs WHERE finished_at IS NOT NULL",
                    );
                    println!(
                        "  drain of {JOBS} over {queues} queues serving {serves}: not drained in {CAP:?} ({done} of {JOBS})"
                    );
                    seconds.push(CAP.as_secs_f64());
                    continue;
                }
                assert_all_succeeded(&mut raw, JOBS);
                let end_us = raw.epoch_us("SELECT max(finished_at) AS t FROM solidq_jobs");
                seconds.push((end_us - start_us).max(1) as f64 / 1e6);
            }
            table.add(
                format!("drain {JOBS} over {queues} queues, 1x8, serving {serves} (s)"),
                seconds,
            );
        }
    }
    for listed in [1, 1_000] {
        let (mut statements, mut server) = (vec![], vec![]);
        for _ in 0..args.repeat {
            let db = BenchDb::new(backend, args);
            let handle = Worker::new(db.queue())
                .queues((0..listed).map(name))
                .register::<Noop>()
                .start()
                .expect("worker");
            std::thread::sleep(Duration::from_secs(2));
            let before = solidq::events::statements_executed();
            let server_before = server_cpu_by_pid(backend);
            let window = Duration::from_secs(10);
            std::thread::sleep(window);
            let ran = solidq::events::statements_executed() - before;
            let cpu_us = server_cpu_since(backend, &server_before);
            handle.stop().expect("stop");
            statements.push(ran as f64 / window.as_secs_f64());
            server.push(cpu_us as f64 / 1e3 / window.as_secs_f64());
        }
        table.add(
            format!("idle worker listing {listed} queues, statements/s"),
            statements,
        );
        if backend != "sqlite" {
            table.add(
                format!("idle worker listing {listed} queues, server CPU (ms/s)"),
                server,
            );
        }
    }
}

/// Busy jiffies of the whole machine (all cores): user, nice, system,
/// irq, softirq and steal of /proc/stat's first line.
fn machine_busy_jiffies() -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let fields: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    [0, 1, 2, 5, 6, 7]
        .iter()
        .filter_map(|&i| fields.get(i))
        .sum()
}

/// Cores busy between two readings of [`machine_busy_jiffies`] (100 a
/// second on Linux).
fn cores(busy: (u64, Instant), until: (u64, Instant)) -> f64 {
    (until.0 - busy.0) as f64 / 100.0 / (until.1 - busy.1).as_secs_f64()
}

/// PostgreSQL: for each of solidq's tables and indexes, the tuples its
/// scans read (`idx_tup_read`; a table's: its sequential and index scans'
/// fetches) and the buffers they touched (hit or read): where claims walk
/// dead rows.
fn pg_reads(raw: &mut Raw) -> std::collections::BTreeMap<String, (i64, i64)> {
    raw.named_pairs(
        "SELECT 'index ' || s.indexrelname::text AS name, s.idx_tup_read AS a,
                COALESCE(io.idx_blks_hit + io.idx_blks_read, 0) AS b
         FROM pg_stat_user_indexes s JOIN pg_statio_user_indexes io USING (indexrelid)
         WHERE s.schemaname = current_schema()
         UNION ALL
         SELECT 'table ' || t.relname::text, COALESCE(t.seq_tup_read, 0) + COALESCE(t.idx_tup_fetch, 0),
                COALESCE(io.heap_blks_hit + io.heap_blks_read, 0)
         FROM pg_stat_user_tables t JOIN pg_statio_user_tables io USING (relid)
         WHERE t.schemaname = current_schema()",
    )
    .into_iter()
    .map(|(name, a, b)| (name, (a, b)))
    .collect()
}

// ---------------------------------------------------------------- big tables

/// The columns of `solidq_jobs` but `id`; the times among them are moved
/// when the big fill copies rows.
const JOB_COLUMNS: [&str; 27] = [
    "queue_name",
    "kind",
    "arguments",
    "priority",
    "unique_key",
    "concurrency_key",
    "options",
    "delivery",
    "max_attempts",
    "max_stalled_count",
    "attempts",
    "stalled_count",
    "snoozes",
    "progress",
    "checkpoint",
    "batch_id",
    "cancel_requested_at",
    "result",
    "errors",
    "scheduled_at",
    "finished_at",
    "expires_at",
    "created_at",
    "updated_at",
    "fairness_key",
    "started_at",
    "run_alone",
];

/// The time columns of `solidq_jobs`.
const JOB_TIMES: [&str; 6] = [
    "scheduled_at",
    "finished_at",
    "expires_at",
    "created_at",
    "updated_at",
    "started_at",
];

/// Rows a copy statement of the big fill writes at most (one transaction
/// each: MySQL's undo and SQLite's journal stay small).
const FILL_CHUNK: i64 = 500_000;

impl Raw {
    /// PostgreSQL: the jobs table vacuumed and a checkpoint taken, so
    /// what comes next is measured without the vacuum and the writes of
    /// the millions of row versions the step before left (the update that
    /// expires a slice, the cleaner's deletes). Nothing on the others.
    fn settle(&mut self) {
        if let Raw::Pg(_) = self {
            self.batch("VACUUM solidq_jobs");
            self.batch("CHECKPOINT");
        }
    }

    /// PostgreSQL: a checkpoint, taken after a work-down's fill and before
    /// its timed part, so each of the three (solidq, raw on its schema,
    /// the limit) starts a checkpoint cycle alike: at the default
    /// `max_wal_size` a checkpoint starts every 540 MB of WAL, about one
    /// fill and work-down, and without it one phase could pay the
    /// full-page writes after a checkpoint and the next not. Nothing on
    /// the others.
    fn checkpoint(&mut self) {
        if let Raw::Pg(_) = self {
            self.batch("CHECKPOINT");
        }
    }

    /// `column`, a timestamp, `seconds` later (earlier when negative).
    fn shifted(&self, column: &str, seconds: f64) -> String {
        match self {
            Raw::Pg(_) => format!("({column} + make_interval(secs => {seconds:.6}))"),
            Raw::Sqlite(_) => {
                format!("strftime('%Y-%m-%d %H:%M:%f', {column}, '{seconds:+.3} seconds')")
            }
            #[cfg(feature = "mysql")]
            Raw::Mysql(_) => format!(
                "({column} + INTERVAL {} MICROSECOND)",
                (seconds * 1e6).round() as i64
            ),
        }
    }
}

impl BenchDb {
    /// `n` finished jobs as a week of `keep_result` at a steady rate leaves
    /// them (10 million: a week at 16.5 jobs a second): 1,000 no-op jobs run
    /// by a worker, their times moved a week back, each kept a week
    /// (`expires_at` a week after it finished); then copied onto new ids,
    /// doubling, each copy later by its distance in ids, so ids and times
    /// rise together up to now. The job statistics get the seed's minutes
    /// copied back over a day and more (what the cleaner folds).
    fn fill_finished(&self, n: usize) {
        let queue = self.queue();
        let seed: Vec<Noop> = (0..1_000).map(|_| Noop).collect();
        queue.enqueue_all(&seed).expect("enqueue");
        let workers = Workers::spawn(&self.url, 1, 16, solidq::config::DEFAULT_PREFETCH);
        let mut raw = Raw::open(&self.url);
        let start_us = raw.now_us();
        wait_drained(self, &mut raw, 1_000, Instant::now(), start_us);
        let _ = workers.stop();
        let first = raw.scalar("SELECT min(id) AS v FROM solidq_jobs");
        let last = raw.scalar("SELECT max(id) AS v FROM solidq_jobs");
        assert_eq!(last - first, 999, "the seed's ids follow each other");
        let week = 7.0 * 24.0 * 3600.0;
        // `expires_at` first: MySQL reads the columns already set.
        let mut set = vec!["expires_at = finished_at".to_string()];
        for time in JOB_TIMES.iter().filter(|&&c| c != "expires_at") {
            set.push(format!("{time} = {}", raw.shifted(time, -week)));
        }
        raw.batch(&format!("UPDATE solidq_jobs SET {}", set.join(", ")));
        let step = week / n as f64;
        let mut have = 1_000i64;
        while (have as usize) < n {
            let copies = have.min(n as i64 - have);
            let columns = JOB_COLUMNS.join(", ");
            let values: Vec<String> = JOB_COLUMNS
                .iter()
                .map(|&c| {
                    if JOB_TIMES.contains(&c) {
                        raw.shifted(c, have as f64 * step)
                    } else {
                        c.to_string()
                    }
                })
                .collect();
            let mut from = first;
            while from < first + copies {
                let to = (from + FILL_CHUNK).min(first + copies);
                raw.batch(&format!(
                    "INSERT INTO solidq_jobs (id, {columns})
                     SELECT id + {have}, {} FROM solidq_jobs WHERE id >= {from} AND id < {to}",
                    values.join(", ")
                ));
                from = to;
            }
            have += copies;
        }
        if let Raw::Pg(_) = raw {
            raw.batch(
                "SELECT setval(pg_get_serial_sequence('solidq_jobs', 'id'),
                               (SELECT max(id) FROM solidq_jobs))",
            );
        }
        let minutes = (raw.epoch_us("SELECT max(bucket) AS t FROM solidq_job_stats")
            - raw.epoch_us("SELECT min(bucket) AS t FROM solidq_job_stats"))
            / 60_000_000
            + 1;
        let mut span = minutes;
        while span < 24 * 60 {
            let bucket = match raw {
                Raw::Sqlite(_) => format!(
                    "strftime('%Y-%m-%d %H:%M:%S', bucket, '-{} seconds')",
                    span * 60
                ),
                _ => raw.shifted("bucket", -(span as f64) * 60.0),
            };
            raw.batch(&format!(
                "INSERT INTO solidq_job_stats (bucket, queue_name, kind, outcome, jobs, wait_ms, run_ms)
                 SELECT {bucket}, queue_name, kind, outcome, jobs, wait_ms, run_ms FROM solidq_job_stats"
            ));
            span *= 2;
        }
        raw.analyze();
        assert_eq!(
            raw.scalar("SELECT count(*) AS v FROM solidq_jobs") as usize,
            n,
            "the big fill's rows"
        );
    }
}

/// The `solidq` binary beside this one (`target/release/solidq`, built by
/// `cargo build --release -p solidq-cli`), whose `web` serves the pages
/// the big section times; None, said loudly, when it is not there.
fn solidq_binary() -> Option<std::path::PathBuf> {
    let bench = std::env::current_exe().ok()?;
    let bin = bench.parent()?.parent()?.join("solidq");
    if bin.exists() {
        Some(bin)
    } else {
        println!(
            "  SKIPPED: dashboard pages ({} not found; build it first with \
             `cargo build --release -p solidq-cli --features mysql`)",
            bin.display()
        );
        None
    }
}

/// One GET of `path` on `port`: its status and how long the whole answer
/// took.
fn http_get(port: u16, path: &str) -> (u16, Duration) {
    use std::io::{Read, Write};
    let started = Instant::now();
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect to web");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).expect("answer");
    let status = String::from_utf8_lossy(&answer)
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, started.elapsed())
}

/// Each dashboard page and listing served by `solidq web` on `db`: the
/// median of 5 answers after one to warm up, in ms; every answer must be
/// 200.
fn page_times(bin: &std::path::Path, db: &BenchDb) -> Vec<(String, f64)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let mut web = Command::new(bin)
        .args(["web", "--bind", &format!("127.0.0.1:{port}")])
        .args(["--database-url", &db.url])
        .env("RUST_LOG", "error")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn solidq web");
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "solidq web did not listen in 30 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut raw = Raw::open(&db.url);
    let newest = raw.scalar("SELECT max(id) AS v FROM solidq_jobs");
    let day_ago = (chrono::Utc::now() - chrono::Duration::days(1)).format("%Y-%m-%dT%H:%M");
    let pages = [
        "/queues".to_string(),
        "/jobs?status=finished".into(),
        "/jobs?status=finished&last=1".into(),
        "/jobs?status=finished&kind=noop".into(),
        format!("/jobs?status=finished&from={day_ago}#from=<a day ago>"),
        "/jobs?status=failed".into(),
        "/jobs?status=ready".into(),
        format!("/jobs/{newest}#newest"),
        "/processes".into(),
        "/recurring".into(),
        "/concurrency".into(),
        "/audit".into(),
        "/database".into(),
        "/charts".into(),
        "/charts/data".into(),
        "/metrics".into(),
        "/api/queues".into(),
        "/api/jobs?status=succeeded".into(),
    ];
    let times = pages
        .into_iter()
        .map(|page| {
            let mut ms: Vec<f64> = (0..6)
                .map(|_| {
                    let path = page.split('#').next().unwrap_or(&page);
                    let (status, took) = http_get(port, path);
                    assert_eq!(status, 200, "GET {page}");
                    took.as_secs_f64() * 1e3
                })
                .skip(1)
                .collect();
            ms.sort_by(f64::total_cmp);
            // Named by what it shows (which job, which time), the same
            // in every run.
            let label = match page.split_once('#') {
                Some((path, which)) if which.starts_with("from=") => {
                    format!("{}{which}", &path[..path.find("from=").unwrap_or(0)])
                }
                Some((_, which)) => format!("/jobs/<{which}>"),
                None => page,
            };
            (label, median(&ms))
        })
        .collect();
    unsafe {
        libc::kill(web.id() as i32, libc::SIGTERM);
    }
    let _ = web.wait();
    times
}

/// Pickups of one job at a time by an idle worker, enqueued 20–50 ms
/// apart, until `enough` says so (given the count so far): from just
/// before `enqueue` to the job's start, in ms, sorted.
fn pickups(queue: &Queue, enough: impl Fn(usize) -> bool) -> Vec<f64> {
    let warm = queue.enqueue(&Stamp).expect("enqueue");
    wait_done(queue, warm);
    let mut samples = Vec::new();
    while !enough(samples.len()) {
        std::thread::sleep(Duration::from_millis(20 + fastrand::u64(..30)));
        let enqueued = now_us();
        let id = queue.enqueue(&Stamp).expect("enqueue");
        let started = wait_done(queue, id);
        samples.push((started - enqueued) as f64 / 1000.0);
    }
    samples.sort_by(f64::total_cmp);
    samples
}

/// A work-down of `n` no-op jobs on `db` by the run's worker processes,
/// whatever else the database holds: jobs/s.
fn workdown_on(db: &BenchDb, args: &Args, n: usize) -> f64 {
    let mut raw = Raw::open(&db.url);
    let after = raw.scalar("SELECT COALESCE(max(id), 0) AS v FROM solidq_jobs");
    db.fill(n);
    let started = Instant::now();
    let start_us = raw.now_us();
    let workers = Workers::spawn(&db.url, args.processes, args.threads, args.prefetch);
    let elapsed = wait_drained_after(db, &mut raw, n, after, started, start_us);
    let _ = workers.stop();
    rate(n, elapsed)
}

/// `--only big` (issue 28, item 7): `--big-rows` finished jobs kept (a
/// week of `keep_result`: [`BenchDb::fill_finished`]) against an empty
/// database, in the same run: an idle worker's pickup, a work-down of
/// `--jobs`, and every dashboard page (served by `solidq web`, see
/// [`solidq_binary`]); then the cleaner deleting `--big-clean` expired
/// ones (the oldest) while the worker's pickup is measured.
fn bench_big(backend: &'static str, args: &Args, table: &mut Table) {
    let n = args.jobs / 1_000 * 1_000;
    let web = solidq_binary();
    let empty = BenchDb::new(backend, args);
    let big = BenchDb::new(backend, args);
    let filling = Instant::now();
    big.fill_finished(args.big_rows);
    println!(
        "  {} finished jobs filled in {:.0?}",
        args.big_rows,
        filling.elapsed()
    );
    let mut p50 = [vec![], vec![]];
    let mut p99 = [vec![], vec![]];
    let mut rates = [vec![], vec![]];
    let mut pages: Vec<(String, [Vec<f64>; 2])> = Vec::new();
    let mut cleaned = vec![];
    let mut clean_p50 = [vec![], vec![]];
    let mut clean_p99 = [vec![], vec![]];
    for run in 0..args.repeat {
        for (i, db) in [&empty, &big].into_iter().enumerate() {
            let queue = db.queue();
            let workers = Workers::spawn(&db.url, 1, args.threads, args.prefetch);
            let samples = pickups(&queue, |k| k >= args.latency_samples);
            let _ = workers.stop();
            p50[i].push(percentile(&samples, 0.50));
            p99[i].push(percentile(&samples, 0.99));
            rates[i].push(workdown_on(db, args, n));
            for (page, ms) in web.iter().flat_map(|bin| page_times(bin, db)) {
                match pages.iter_mut().find(|(p, _)| *p == page) {
                    Some((_, times)) => times[i].push(ms),
                    None => {
                        let mut times = [vec![], vec![]];
                        times[i].push(ms);
                        pages.push((page, times));
                    }
                }
            }
        }
        // The cleaner: the oldest slice expired, deleted by
        // `clear_finished` (what the maintenance loop runs) while an idle
        // worker (supervised: it cleans nothing itself) picks up jobs;
        // against its pickup just before.
        let mut raw = Raw::open(&big.url);
        let first = raw.scalar("SELECT min(id) AS v FROM solidq_jobs");
        let slice = args.big_clean as i64;
        raw.batch(&format!(
            "UPDATE solidq_jobs SET expires_at = finished_at
             WHERE id >= {first} AND id < {}",
            first + slice
        ));
        raw.settle();
        let queue = big.queue();
        let workers = Workers::spawn_supervised(&big.url, args.threads, args.prefetch);
        let before = pickups(&queue, |k| k >= args.latency_samples);
        let done = AtomicBool::new(false);
        let (deleted, took, during) = std::thread::scope(|s| {
            let cleaner = s.spawn(|| {
                let started = Instant::now();
                let deleted = big.queue().clear_finished(None).expect("clear_finished");
                done.store(true, Ordering::SeqCst);
                (deleted, started.elapsed())
            });
            let during = pickups(&queue, |k| k > 0 && done.load(Ordering::SeqCst));
            let (deleted, took) = cleaner.join().expect("cleaner");
            (deleted, took, during)
        });
        let _ = workers.stop();
        raw.settle();
        assert_eq!(
            deleted as i64, slice,
            "the cleaner deleted the expired slice (run {run})"
        );
        cleaned.push(rate(deleted as usize, took));
        clean_p50[0].push(percentile(&before, 0.50));
        clean_p50[1].push(percentile(&during, 0.50));
        clean_p99[0].push(percentile(&before, 0.99));
        clean_p99[1].push(percentile(&during, 0.99));
    }
    let rows = args.big_rows;
    table.add_vs(
        format!("pickup p50, {rows} finished kept (ms)"),
        p50[1].clone(),
        "empty database",
        p50[0].clone(),
    );
    table.add_vs(
        format!("pickup p99, {rows} finished kept (ms)"),
        p99[1].clone(),
        "empty database",
        p99[0].clone(),
    );
    table.add_vs(
        format!("work-down {n}, {rows} finished kept (jobs/s)"),
        rates[1].clone(),
        "empty database",
        rates[0].clone(),
    );
    table.add(
        format!("cleaner, {} expired of {rows} (rows/s)", args.big_clean),
        cleaned,
    );
    table.add_vs(
        "pickup p50 while the cleaner deletes (ms)",
        clean_p50[1].clone(),
        "just before",
        clean_p50[0].clone(),
    );
    table.add_vs(
        "pickup p99 while the cleaner deletes (ms)",
        clean_p99[1].clone(),
        "just before",
        clean_p99[0].clone(),
    );
    for (page, times) in pages {
        table.add_vs(
            format!("page {page} (ms)"),
            times[1].clone(),
            "empty database",
            times[0].clone(),
        );
    }
}

/// A transaction held open elsewhere (issue 37): one worker process of
/// `--threads` threads, a producer enqueueing a tenth of the offered rate
/// every 100 ms, through a clean phase, a phase while another session
/// holds a snapshot open ([`Raw::hold`]) and a recovery (`--mvcc-phases`).
/// Per 10 s window: offered, started within 10 s, pickup p50 and p99 (the
/// job's start, which it returns, against its enqueue); the machine's CPU
/// per phase; the rows held back at the release. Then a work-down of
/// `--jobs` with a hold opened before the enqueue, against one without
/// (`--repeat` times each). One steady run per rate (its windows are the
/// spread); every run checks that each job succeeded.
fn bench_mvcc(backend: &'static str, args: &Args, table: &mut Table) {
    if backend == "sqlite" {
        println!("mvcc: SQLite keeps no old row versions; not run");
        return;
    }
    let rates = args.mvcc_rates.clone().unwrap_or(if backend == "postgres" {
        vec![500, 2_000]
    } else {
        vec![500]
    });
    let [clean, held, recovery] = args.mvcc_phases.map(Duration::from_secs);
    for rate in rates {
        let (mut phase_p99, mut phase_cpu) = ([vec![], vec![], vec![]], [vec![], vec![], vec![]]);
        // One run per rate: minutes long, its 10 s windows are the spread.
        {
            let db = BenchDb::new(backend, args);
            let queue = db.queue();
            let mut raw = Raw::open(&db.url);
            let workers = Workers::spawn(&db.url, 1, args.threads, args.prefetch);
            let warm = queue.enqueue(&Stamp).expect("enqueue");
            wait_done(&queue, warm);
            let per_tick: Vec<Stamp> = (0..rate.div_ceil(10)).map(|_| Stamp).collect();
            let mut enqueued: Vec<(i64, i64)> = Vec::new();
            let mut holder: Option<Raw> = None;
            let mut behind = None;
            let started = Instant::now();
            let mut marks = vec![(machine_busy_jiffies(), started)];
            let mut reads = vec![];
            let is_pg = backend == "postgres";
            if is_pg {
                reads.push(pg_reads(&mut raw));
            }
            let end = clean + held + recovery;
            for tick in 0.. {
                let due = started + Duration::from_millis(100 * tick);
                if let Some(wait) = due.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
                let t = started.elapsed();
                if t >= end {
                    break;
                }
                if holder.is_none() && marks.len() == 1 && t >= clean {
                    marks.push((machine_busy_jiffies(), Instant::now()));
                    if is_pg {
                        reads.push(pg_reads(&mut raw));
                    }
                    holder = Some(Raw::hold(&db.url));
                }
                if holder.is_some() && t >= clean + held {
                    behind = queue.horizon().expect("horizon").dead_rows;
                    holder.take().expect("held").batch("COMMIT");
                    marks.push((machine_busy_jiffies(), Instant::now()));
                    if is_pg {
                        reads.push(pg_reads(&mut raw));
                    }
                }
                let at = now_us();
                let ids = queue.enqueue_all(&per_tick).expect("enqueue_all");
                enqueued.extend(ids.into_iter().map(|id| (id, at)));
            }
            marks.push((machine_busy_jiffies(), Instant::now()));
            let drain = Instant::now();
            while db.busy(&mut raw) {
                assert!(
                    drain.elapsed() < Duration::from_secs(600),
                    "not drained in 10 minutes"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
            workers.stop();
            assert_all_succeeded(&mut raw, enqueued.len() + 1);
            let cast = if raw.is_mysql() { "SIGNED" } else { "BIGINT" };
            let starts: std::collections::HashMap<i64, i64> = raw
                .named_pairs(&format!(
                    "SELECT CONCAT('', id) AS name, id AS a, CAST(result AS {cast}) AS b \
                     FROM solidq_jobs WHERE kind = 'stamp'"
                ))
                .into_iter()
                .map(|(_, id, start)| (id, start))
                .collect();
            println!(
                "{backend} mvcc, {rate} jobs/s offered: {} jobs, every one succeeded; rows behind the hold at its release: {} ({})",
                enqueued.len(),
                behind.map_or("—".into(), |n: u64| n.to_string()),
                if raw.is_mysql() {
                    "InnoDB history list length"
                } else {
                    "dead rows in solidq's tables"
                }
            );
            let start_us = enqueued.first().map_or(0, |e| e.1);
            let window_of = |at: i64| ((at - start_us) / 10_000_000) as usize;
            let windows = window_of(enqueued.last().map_or(0, |e| e.1)) + 1;
            let mut waits: Vec<Vec<f64>> = vec![Vec::new(); windows];
            let mut phases: [Vec<f64>; 3] = [vec![], vec![], vec![]];
            for (id, at) in &enqueued {
                let wait = (starts[id] - at) as f64 / 1000.0;
                waits[window_of(*at)].push(wait);
                let since = Duration::from_micros((at - start_us) as u64);
                let phase = if since < clean {
                    0
                } else if since < clean + held {
                    1
                } else {
                    2
                };
                phases[phase].push(wait);
            }
            for (w, mut v) in waits.into_iter().enumerate() {
                v.sort_by(f64::total_cmp);
                let on_time = v.iter().filter(|&&ms| ms <= 10_000.0).count();
                let phase = match Duration::from_secs(w as u64 * 10) {
                    t if t < clean => "clean",
                    t if t < clean + held => "held",
                    _ => "recovery",
                };
                println!(
                    "  {:>4}-{:<4} s {phase:<8} offered {:>6}, started within 10 s {:>6}, pickup p50 {:>7.1} ms, p99 {:>7.1} ms",
                    w * 10,
                    w * 10 + 10,
                    v.len(),
                    on_time,
                    percentile(&v, 0.50),
                    percentile(&v, 0.99),
                );
            }
            // Where the held phase's time goes: tuples read and buffers
            // touched per job, clean against held, for what changed.
            if let [before, holding, after] = &reads[..] {
                let jobs = [
                    (clean.as_secs_f64() * rate as f64),
                    (held.as_secs_f64() * rate as f64),
                ];
                println!("  reads per job (tuples / buffers), clean -> held:");
                for (name, (t2, b2)) in after {
                    let (t1, b1) = holding.get(name).copied().unwrap_or_default();
                    let (t0, b0) = before.get(name).copied().unwrap_or_default();
                    let clean_per = ((t1 - t0) as f64 / jobs[0], (b1 - b0) as f64 / jobs[0]);
                    let held_per = ((t2 - t1) as f64 / jobs[1], (b2 - b1) as f64 / jobs[1]);
                    if held_per.0 + held_per.1 >= 0.5 {
                        println!(
                            "    {name:<60} {:>8.1} / {:>6.1} -> {:>8.1} / {:>6.1}",
                            clean_per.0, clean_per.1, held_per.0, held_per.1
                        );
                    }
                }
            }
            for (p, mut v) in phases.into_iter().enumerate() {
                v.sort_by(f64::total_cmp);
                let cpu = cores(marks[p], marks[p + 1]);
                println!(
                    "  {:<8} pickup p50 {:.1} ms, p99 {:.1} ms; machine CPU {cpu:.2} cores, {:.0} µs a job",
                    ["clean", "held", "recovery"][p],
                    percentile(&v, 0.50),
                    percentile(&v, 0.99),
                    cpu * 1e6 / rate as f64,
                );
                phase_p99[p].push(percentile(&v, 0.99));
                phase_cpu[p].push(cpu * 1e6 / rate as f64);
            }
        }
        for (p, name) in ["clean", "held", "recovery"].iter().enumerate() {
            let label = |what: &str| format!("mvcc {rate}/s, {name}: {what}");
            table.add(label("pickup p99 (ms)"), phase_p99[p].clone());
            table.add(label("machine CPU per job (µs)"), phase_cpu[p].clone());
        }
    }

    // Work-down at saturation, with a hold opened before the enqueue.
    let n = args.jobs / 1_000 * 1_000;
    let (mut free, mut pinned) = (vec![], vec![]);
    for _ in 0..args.repeat {
        for hold in [false, true] {
            let db = BenchDb::new(backend, args);
            let holder = hold.then(|| Raw::hold(&db.url));
            db.fill(n);
            let mut raw = Raw::open(&db.url);
            let started = Instant::now();
            let start_us = raw.now_us();
            let workers = Workers::spawn(&db.url, args.processes, args.threads, args.prefetch);
            let elapsed = wait_drained(&db, &mut raw, n, started, start_us);
            workers.stop();
            drop(holder);
            if hold { &mut pinned } else { &mut free }.push(rate(n, elapsed));
        }
    }
    let ratio: Vec<f64> = pinned.iter().zip(&free).map(|(p, f)| p / f).collect();
    table.add("mvcc work-down, no hold (jobs/s)", free);
    table.add(
        "mvcc work-down, held since before the enqueue (jobs/s)",
        pinned,
    );
    table.add("mvcc work-down, held / no hold", ratio);
}

fn soak(backend: &'static str, args: &Args, total: usize) {
    println!(
        "\n== {backend}: soak of {total} jobs, {} producers, {}x{} workers",
        args.producers, args.processes, args.threads
    );
    let db = BenchDb::new(backend, args);
    let workers = Workers::spawn(&db.url, args.processes, args.threads, args.prefetch);
    std::thread::sleep(Duration::from_millis(500));
    let produced = Arc::new(AtomicU64::new(0));
    let producers: Vec<_> = (0..args.producers)
        .map(|_| {
            let queue = db.queue();
            let produced = Arc::clone(&produced);
            std::thread::spawn(move || {
                while produced.fetch_add(1, Ordering::Relaxed) < total as u64 {
                    queue.enqueue(&Noop).expect("enqueue");
                }
            })
        })
        .collect();
    let mut raw = Raw::open(&db.url);
    let started = Instant::now();
    let mut marks = Vec::new();
    let mut next = total / 10;
    let mut rss = Vec::new();
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let enqueued = (produced.load(Ordering::Relaxed) as usize).min(total);
        let done = enqueued.saturating_sub(db.pending(&mut raw).max(0) as usize);
        while done >= next && next <= total {
            marks.push(started.elapsed());
            rss.push(workers.rss_mb());
            next += total / 10;
        }
        if done >= total {
            break;
        }
    }
    for p in producers {
        p.join().unwrap();
    }
    let peak = workers.peak_rss_mb();
    let _ = workers.stop();
    println!(
        "{:>6} {:>12} {:>14}  worker RSS (MB)",
        "tenth", "jobs/s", "elapsed (s)"
    );
    let mut rates = Vec::new();
    let mut previous = Duration::ZERO;
    for (i, mark) in marks.iter().enumerate() {
        let r = rate(total / 10, *mark - previous);
        rates.push(r);
        previous = *mark;
        println!(
            "{:>6} {:>12.0} {:>14.1}  {:?}",
            i + 1,
            r,
            mark.as_secs_f64(),
            rss[i].iter().map(|m| format!("{m:.1}")).collect::<Vec<_>>()
        );
    }
    if let (Some(first), Some(last)) = (rates.first(), rates.last()) {
        println!(
            "last tenth / first tenth: {:.2}; worker peak RSS {peak:.1?} MB",
            last / first
        );
    }
}

// ------------------------------------------------------- claim designs

/// Where a raw claimer of [`bench_designs`] starts its scans.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Design {
    /// From the head of the one ready table, every claim (solidq before
    /// the floor).
    Head,
    /// From the highest place claimed, and from the head once a second
    /// (solidq's floor, its margins left out: one producer commits in
    /// order).
    Floor,
    /// Ready rows in a ring of tables, one per second of inserts; the
    /// claimer drains them oldest first and empties a drained one by
    /// `TRUNCATE` (awa's and pgque's rotation; no MVCC, so a hold keeps
    /// nothing of it), which the producer then fills again.
    Ring,
}

/// How the other session holds its snapshot.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Holder {
    /// `BEGIN ISOLATION LEVEL REPEATABLE READ` and a read of another
    /// table: a console's forgotten transaction, a report.
    Snapshot,
    /// The same holding `ACCESS SHARE` on the ready tables, as `pg_dump`
    /// holds on every table it dumps: `TRUNCATE` waits for it.
    Dump,
}

/// Tables of the ring (and the one ready table of the others: the first).
const RING: usize = 8;

/// The claim designs of issue 37 side by side, on raw tables (PostgreSQL
/// only): a producer inserts `--mvcc-rates`' first rate (2,000) a second
/// in batches every 10 ms while one claimer deletes up to 16 rows a claim
/// (`FOR UPDATE SKIP LOCKED`), `--mvcc-phases`' clean and held seconds;
/// per phase the claimer's statement time and the machine's CPU per job,
/// and the rows left at the end (the claimer kept up when 0).
fn bench_designs(backend: &'static str, args: &Args, table: &mut Table) {
    if backend != "postgres" {
        println!("designs: PostgreSQL only; not run");
        return;
    }
    let rate = args
        .mvcc_rates
        .as_ref()
        .and_then(|r| r.first().copied())
        .unwrap_or(2_000);
    let [clean, held, _] = args.mvcc_phases.map(Duration::from_secs);
    let runs = [
        (Design::Head, Holder::Snapshot),
        (Design::Floor, Holder::Snapshot),
        (Design::Ring, Holder::Snapshot),
        (Design::Floor, Holder::Dump),
        (Design::Ring, Holder::Dump),
    ];
    for (design, holder) in runs {
        let db = BenchDb::new(backend, args);
        let mut setup = Raw::open(&db.url);
        setup.batch("CREATE SEQUENCE dsg_seq");
        for t in 0..RING {
            setup.batch(&format!(
                "CREATE TABLE dsg_ready_{t} (job_id bigint PRIMARY KEY, priority integer NOT NULL,
                     position bigint NOT NULL);
                 CREATE INDEX dsg_ready_{t}_claim ON dsg_ready_{t} (priority, position)"
            ));
        }
        // The generation the producer fills, and the oldest not emptied.
        let filling = Arc::new(AtomicU64::new(0));
        let oldest = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let produced = Arc::new(AtomicU64::new(0));
        let producer = {
            let (url, filling, oldest, stop, produced) = (
                db.url.clone(),
                Arc::clone(&filling),
                Arc::clone(&oldest),
                Arc::clone(&stop),
                Arc::clone(&produced),
            );
            std::thread::spawn(move || {
                let Raw::Pg(mut c) = Raw::open(&url) else {
                    unreachable!()
                };
                let per_tick = (rate / 100).max(1) as i64;
                let started = Instant::now();
                for tick in 0u64.. {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let due = started + Duration::from_millis(10 * tick);
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    let mut g = filling.load(Ordering::SeqCst);
                    // A new generation a second, if its table is empty.
                    if design == Design::Ring
                        && tick > 0
                        && tick.is_multiple_of(100)
                        && g + 1 - oldest.load(Ordering::SeqCst) < RING as u64
                    {
                        g += 1;
                        filling.store(g, Ordering::SeqCst);
                    }
                    let t = g as usize % RING;
                    Cached(
                        diesel::sql_query(format!(
                            "INSERT INTO dsg_ready_{t} (job_id, priority, position)
                             SELECT n, 0, n FROM (SELECT nextval('dsg_seq') AS n
                                                  FROM generate_series(1, $1)) s"
                        ))
                        .bind::<BigInt, _>(per_tick),
                    )
                    .execute(&mut c)
                    .expect("produce");
                    produced.fetch_add(per_tick as u64, Ordering::SeqCst);
                }
            })
        };
        let claimer = {
            let (url, filling, oldest, stop) = (
                db.url.clone(),
                Arc::clone(&filling),
                Arc::clone(&oldest),
                Arc::clone(&stop),
            );
            // (jobs, statement time) per phase, the phase switched by
            // the main thread.
            let phase = Arc::new(AtomicU64::new(0));
            let tally = Arc::new(std::sync::Mutex::new([(0u64, Duration::ZERO); 2]));
            let (phase_c, tally_c) = (Arc::clone(&phase), Arc::clone(&tally));
            let handle = std::thread::spawn(move || {
                #[derive(QueryableByName)]
                struct Pos {
                    #[diesel(sql_type = BigInt)]
                    position: i64,
                }
                let Raw::Pg(mut c) = Raw::open(&url) else {
                    unreachable!()
                };
                c.batch_execute("SET lock_timeout = '50ms'")
                    .expect("session");
                let claim = |c: &mut PgConnection, t: usize, floor: Option<i64>, n: i64| {
                    let from = if floor.is_some() {
                        "WHERE (priority, position) >= (0, $2)"
                    } else {
                        ""
                    };
                    let sql = format!(
                        "DELETE FROM dsg_ready_{t} WHERE job_id = ANY(ARRAY(
                             SELECT job_id FROM dsg_ready_{t} {from}
                             ORDER BY priority, position LIMIT $1 FOR UPDATE SKIP LOCKED))
                         RETURNING position"
                    );
                    let q = diesel::sql_query(sql).bind::<BigInt, _>(n);
                    let rows: Vec<Pos> = match floor {
                        Some(f) => Cached(q.bind::<BigInt, _>(f)).load(c),
                        None => Cached(q).load(c),
                    }
                    .expect("claim");
                    rows
                };
                let mut floor: Option<i64> = None;
                let mut last_head = Instant::now();
                let mut retry_at = Instant::now();
                while !stop.load(Ordering::SeqCst) {
                    let at = Instant::now();
                    let mut got = 0usize;
                    match design {
                        Design::Head => got = claim(&mut c, 0, None, 16).len(),
                        Design::Floor => {
                            let from_head =
                                floor.is_none() || last_head.elapsed() >= Duration::from_secs(1);
                            let rows = claim(&mut c, 0, if from_head { None } else { floor }, 16);
                            if from_head {
                                last_head = at;
                            }
                            got = rows.len();
                            if let Some(top) = rows.iter().map(|r| r.position).max() {
                                floor = Some(floor.map_or(top, |f| f.max(top)));
                            }
                        }
                        Design::Ring => {
                            // Oldest first; a drained table is emptied
                            // when it is the oldest, and when TRUNCATE
                            // waited (a dump holds the tables), not tried
                            // again for a second: its dead rows are
                            // walked meanwhile, as they are in one table.
                            let newest = filling.load(Ordering::SeqCst);
                            let mut g = oldest.load(Ordering::SeqCst);
                            while g <= newest && got < 16 {
                                let asked = 16 - got;
                                let n = claim(&mut c, g as usize % RING, None, asked as i64).len();
                                got += n;
                                if n == asked || g == newest {
                                    break;
                                }
                                if g == oldest.load(Ordering::SeqCst) && Instant::now() >= retry_at
                                {
                                    let t = g as usize % RING;
                                    if c.batch_execute(&format!("TRUNCATE dsg_ready_{t}")).is_ok() {
                                        oldest.store(g + 1, Ordering::SeqCst);
                                    } else {
                                        retry_at = Instant::now() + Duration::from_secs(1);
                                    }
                                }
                                g += 1;
                            }
                        }
                    }
                    let took = at.elapsed();
                    let p = phase_c.load(Ordering::SeqCst) as usize;
                    if p < 2 {
                        let mut tally = tally_c.lock().unwrap();
                        tally[p].0 += got as u64;
                        tally[p].1 += took;
                    }
                    if got == 0 {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                }
            });
            (handle, phase, tally)
        };
        let (handle, phase, tally) = claimer;
        let mut marks = vec![(machine_busy_jiffies(), Instant::now())];
        std::thread::sleep(clean);
        marks.push((machine_busy_jiffies(), Instant::now()));
        phase.store(1, Ordering::SeqCst);
        let mut hold = Raw::hold(&db.url);
        if holder == Holder::Dump {
            let tables: Vec<String> = (0..RING).map(|t| format!("dsg_ready_{t}")).collect();
            hold.batch(&format!(
                "LOCK TABLE {} IN ACCESS SHARE MODE",
                tables.join(", ")
            ));
        }
        std::thread::sleep(held);
        marks.push((machine_busy_jiffies(), Instant::now()));
        phase.store(2, Ordering::SeqCst);
        stop.store(true, Ordering::SeqCst);
        producer.join().expect("producer");
        handle.join().expect("claimer");
        let mut check = Raw::open(&db.url);
        let left: i64 = (0..RING)
            .map(|t| check.scalar(&format!("SELECT count(*) AS v FROM dsg_ready_{t}")))
            .sum();
        hold.batch("COMMIT");
        let tally = *tally.lock().unwrap();
        let label = format!("{design:?}, held by {holder:?}");
        let mut line = format!("designs {rate}/s, {label}:");
        for (p, name) in ["clean", "held"].iter().enumerate() {
            let (jobs, took) = tally[p];
            let cpu = cores(marks[p], marks[p + 1]) * (marks[p + 1].1 - marks[p].1).as_secs_f64();
            let per_job_us = |v: f64| v * 1e6 / jobs.max(1) as f64;
            let claim_us = per_job_us(took.as_secs_f64());
            let cpu_us = per_job_us(cpu);
            line.push_str(&format!(
                " {name}: {jobs} jobs, claim {claim_us:.1} µs a job, machine CPU {cpu_us:.0} µs a job;"
            ));
            table.add(
                format!("designs {rate}/s, {label}, {name}: claim time per job (µs)"),
                vec![claim_us],
            );
            table.add(
                format!("designs {rate}/s, {label}, {name}: machine CPU per job (µs)"),
                vec![cpu_us],
            );
        }
        println!(
            "{line} left behind at the end {left} of {} produced",
            produced.load(Ordering::SeqCst)
        );
    }
}
