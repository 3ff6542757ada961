//! What a fleet of 32 worker processes costs its PostgreSQL server, idle
//! and busy, measured on a private server so that nothing else's load is
//! counted (docs/fleet.md reports the figures).
//!
//! It `initdb`s a cluster of its own on a free port (the PostgreSQL server
//! binaries of `--pg-bin`; as root the server runs as the `postgres` user),
//! with `pg_stat_statements` preloaded. Each run gets a fresh database,
//! migrated, and 32 worker processes: this binary re-run as a child, each
//! a plain `solidq::Worker` with solidq's defaults (5 threads, pool of up
//! to 10 connections), in one of two shapes:
//!
//! * `standalone`: 32 × `Worker::new(queue).run()`, what the quickstart
//!   runs: each worker also dispatches and keeps house.
//! * `supervised`: one `Supervisor` (in this process) whose `[[workers]]`
//!   group runs 32 processes of `Worker::from_env()` (each with
//!   `standalone: false`): the supervisor dispatches and keeps house.
//!
//! After the fleet has registered and settled it measures a window of
//! `--seconds`:
//!
//! * statements/s: calls counted by `pg_stat_statements` in the run's
//!   database, split by role:
//!   the fleet's (workers and supervisor) and, busy, the producer's;
//! * server CPU: utime + stime of every process of the cluster (children of
//!   its postmaster, from `/proc/<pid>/stat`, and what the postmaster reaped
//!   from exited ones), as a percentage of one core, split by the role of
//!   the backend (background processes apart);
//! * the fleet's own CPU (the worker processes, plus the supervisor thread's
//!   process share is not separated: it runs in this process) and the
//!   backends it holds at the end of the window.
//!
//! Idle: no jobs at all. Busy: this process enqueues single no-op jobs at
//! `--rate` per second from one thread (`Queue::enqueue`, role `producer`)
//! from before the window until its end; afterwards it waits until every
//! job ran and checks that each one succeeded before reporting anything.
//!
//! ```sh
//! cargo run --release --example fleet_bench                      # everything, 3 runs each
//! cargo run --release --example fleet_bench -- --help
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use solidq::config::SupervisorConfig;
use solidq::{Job, JobContext, JobResult, Queue, Supervisor, Worker};

const USAGE: &str = "\
cargo run --release --example fleet_bench -- [flags]
  --workers N       worker processes (32)
  --seconds S       measured window per run (30)
  --settle S        wait after the fleet registered, before the window (12)
  --rate R          busy: jobs enqueued per second (200)
  --repeat R        runs per figure (3)
  --only a,b        scenarios: idle-standalone, idle-supervised,
                    busy-standalone, busy-supervised (all)
  --pg-bin DIR      PostgreSQL server binaries (/usr/lib/postgresql/15/bin)
";

/// Does nothing.
#[derive(Serialize, Deserialize)]
struct Noop;

impl Job for Noop {
    const KIND: &'static str = "noop";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        Ok(serde_json::Value::Null)
    }
}

struct Args {
    workers: usize,
    seconds: u64,
    settle: u64,
    rate: u64,
    repeat: usize,
    only: Option<Vec<String>>,
    pg_bin: PathBuf,
}

fn parse_args() -> Args {
    let mut args = Args {
        workers: 32,
        seconds: 30,
        settle: 12,
        rate: 200,
        repeat: 3,
        only: None,
        pg_bin: PathBuf::from("/usr/lib/postgresql/15/bin"),
    };
    let mut argv = std::env::args().skip(1);
    while let Some(flag) = argv.next() {
        if flag == "--help" || flag == "-h" {
            print!("{USAGE}");
            std::process::exit(0);
        }
        let Some(value) = argv.next() else {
            eprint!("{flag} needs a value\n{USAGE}");
            std::process::exit(2);
        };
        let number = |v: &str| -> u64 {
            v.parse().unwrap_or_else(|_| {
                eprint!("{flag}: not a number: {v}\n{USAGE}");
                std::process::exit(2)
            })
        };
        match flag.as_str() {
            "--workers" => args.workers = number(&value) as usize,
            "--seconds" => args.seconds = number(&value),
            "--settle" => args.settle = number(&value),
            "--rate" => args.rate = number(&value),
            "--repeat" => args.repeat = number(&value).max(1) as usize,
            "--only" => args.only = Some(value.split(',').map(str::to_string).collect()),
            "--pg-bin" => args.pg_bin = PathBuf::from(value),
            _ => {
                eprint!("unknown flag {flag}\n{USAGE}");
                std::process::exit(2);
            }
        }
    }
    args
}

fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("error")).init();
    let argv: Vec<String> = std::env::args().collect();
    match argv.get(1).map(String::as_str) {
        Some("--standalone-worker") => return standalone_worker(&argv[2]),
        Some("--supervised-worker") => return supervised_worker(),
        _ => {}
    }
    let args = parse_args();
    let cluster = Cluster::start(&args.pg_bin);
    println!(
        "fleet bench: {} worker processes, solidq defaults (5 threads, pool up to 10), \
         {} s window after {} s settling, busy at {} jobs/s, {} runs per figure; \
         private PostgreSQL {} on port {} (fsync on, max_connections {})",
        args.workers,
        args.seconds,
        args.settle,
        args.rate,
        args.repeat,
        cluster.version(),
        cluster.port,
        MAX_CONNECTIONS
    );
    let scenarios = [
        ("idle-standalone", Shape::Standalone, false),
        ("idle-supervised", Shape::Supervised, false),
        ("busy-standalone", Shape::Standalone, true),
        ("busy-supervised", Shape::Supervised, true),
    ];
    let mut rows = Vec::new();
    let mut run = 0;
    for (name, shape, busy) in scenarios {
        if args
            .only
            .as_ref()
            .is_some_and(|only| !only.iter().any(|o| o == name))
        {
            continue;
        }
        println!("\n{name}:");
        let mut figures: Vec<Figures> = Vec::new();
        FIRST_RUNS.with(|f| f.borrow_mut().push(run + 1));
        for _ in 0..args.repeat {
            run += 1;
            let f = measure(&cluster, &args, run, shape, busy);
            println!(
                "  fleet {:.1} statements/s, producer {:.1}/s; \
                 server CPU {:.1} % of a core (fleet's backends {:.1} %, producer's {:.1} %, \
                 background {:.1} %); workers' CPU {:.1} %; {} backends; {} jobs; \
                 {:.2} claims per job; pickup p50 {:.2} ms, p99 {:.2} ms",
                f.fleet_statements,
                f.producer_statements,
                f.server_cpu,
                f.fleet_backend_cpu,
                f.producer_backend_cpu,
                f.background_cpu,
                f.worker_cpu,
                f.backends,
                f.jobs,
                f.claims_per_job,
                f.pickup_p50,
                f.pickup_p99
            );
            figures.push(f);
        }
        rows.push((name, figures));
    }
    println!("\nmedian [range] of {} runs", args.repeat);
    println!(
        "{:<16} {:>24} {:>24} {:>22} {:>22} {:>22} {:>14} {:>18} {:>20} {:>20}",
        "scenario",
        "fleet statements/s",
        "producer statements/s",
        "server CPU %",
        "fleet backends CPU %",
        "workers' CPU %",
        "backends",
        "claims per job",
        "pickup p50 ms",
        "pickup p99 ms"
    );
    for (name, figures) in &rows {
        let col = |f: fn(&Figures) -> f64| summary(&figures.iter().map(f).collect::<Vec<_>>());
        println!(
            "{name:<16} {:>24} {:>24} {:>22} {:>22} {:>22} {:>14} {:>18} {:>20} {:>20}",
            col(|f| f.fleet_statements),
            col(|f| f.producer_statements),
            col(|f| f.server_cpu),
            col(|f| f.fleet_backend_cpu),
            col(|f| f.worker_cpu),
            col(|f| f.backends as f64),
            col(|f| f.claims_per_job),
            col(|f| f.pickup_p50),
            col(|f| f.pickup_p99),
        );
    }
}

// ---------------------------------------------------------------- children

/// A worker as the quickstart runs one: all defaults, standalone.
fn standalone_worker(url: &str) {
    let queue = Queue::connect(url).expect("connect");
    Worker::new(queue).register::<Noop>().run().expect("worker");
}

/// A worker under a supervisor, configured by its environment.
fn supervised_worker() {
    Worker::from_env()
        .expect("worker settings")
        .register::<Noop>()
        .run()
        .expect("worker");
}

// ---------------------------------------------------------------- one run

#[derive(Clone, Copy, PartialEq)]
enum Shape {
    Standalone,
    Supervised,
}

/// One run's measurements, per second of the window.
struct Figures {
    fleet_statements: f64,
    producer_statements: f64,
    server_cpu: f64,
    fleet_backend_cpu: f64,
    producer_backend_cpu: f64,
    background_cpu: f64,
    worker_cpu: f64,
    backends: i64,
    jobs: i64,
    /// Claim statements per job enqueued in the window (busy).
    claims_per_job: f64,
    /// Pickup of the jobs enqueued in the window: the claim's start less
    /// the enqueue's, both on the server's clock (ms).
    pickup_p50: f64,
    pickup_p99: f64,
}

/// What the fleet runs as: the children, or a supervisor and its children.
enum Fleet {
    Standalone(Vec<Child>),
    Supervised(solidq::SupervisorHandle),
}

impl Fleet {
    fn stop(self) {
        match self {
            Fleet::Standalone(children) => {
                for c in &children {
                    // SAFETY: plain kill(2) of our own child.
                    unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
                }
                for mut c in children {
                    let status = c.wait().expect("worker exit");
                    assert!(status.success(), "a worker exited with {status}");
                }
            }
            Fleet::Supervised(handle) => handle.stop().expect("supervisor stop"),
        }
    }
}

fn measure(cluster: &Cluster, args: &Args, run: usize, shape: Shape, busy: bool) -> Figures {
    let db = format!("fleet_run_{run}");
    let mut admin = cluster.admin();
    admin
        .batch_execute(&format!("CREATE DATABASE {db}"))
        .expect("create database");
    let fleet_url = cluster.url("postgres", &db);
    let producer_url = cluster.url("producer", &db);
    Queue::connect(&fleet_url)
        .expect("connect")
        .migrate()
        .expect("migrate");

    let fleet = match shape {
        Shape::Standalone => Fleet::Standalone(
            (0..args.workers)
                .map(|_| {
                    Command::new(std::env::current_exe().expect("bench binary"))
                        .args(["--standalone-worker", &fleet_url])
                        .env("RUST_LOG", "error")
                        .stdin(Stdio::null())
                        .spawn()
                        .expect("spawn worker")
                })
                .collect(),
        ),
        Shape::Supervised => {
            let exe = std::env::current_exe().expect("bench binary");
            let toml = format!(
                "database_url = {fleet_url:?}\n[[workers]]\ncommand = [{:?}, \"--supervised-worker\"]\nprocesses = {}\n",
                exe.display().to_string(),
                args.workers
            );
            let config = SupervisorConfig::parse(&toml, "fleet bench").expect("supervisor config");
            Fleet::Supervised(Supervisor::new(config).start().expect("supervisor start"))
        }
    };
    let registered_by = Instant::now() + Duration::from_secs(60);
    let workers_sql = "SELECT count(*) FROM solidq_processes WHERE kind = 'worker'";
    let mut fleet_db = postgres::Client::connect(&fleet_url, postgres::NoTls).expect("connect");
    while fleet_db
        .query_one(workers_sql, &[])
        .unwrap()
        .get::<_, i64>(0)
        < args.workers as i64
    {
        assert!(
            Instant::now() < registered_by,
            "the workers did not all register within 60 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let worker_pids: Vec<i32> = fleet_db
        .query(
            "SELECT pid FROM solidq_processes WHERE kind = 'worker'",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    drop(fleet_db);

    let stop_producer = Arc::new(AtomicBool::new(false));
    let enqueued = Arc::new(AtomicU64::new(0));
    let producer = busy.then(|| {
        let (stop, enqueued, rate) = (Arc::clone(&stop_producer), Arc::clone(&enqueued), args.rate);
        let queue = Queue::connect(&producer_url).expect("producer connect");
        std::thread::spawn(move || {
            let started = Instant::now();
            while !stop.load(Ordering::SeqCst) {
                let n = enqueued.load(Ordering::SeqCst);
                let due = started + Duration::from_secs_f64(n as f64 / rate as f64);
                if let Some(wait) = due.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
                queue.enqueue(&Noop).expect("enqueue");
                enqueued.fetch_add(1, Ordering::SeqCst);
            }
        })
    });
    std::thread::sleep(Duration::from_secs(args.settle));

    let db_oid: u32 = admin
        .query_one("SELECT oid FROM pg_database WHERE datname = $1", &[&db])
        .unwrap()
        .get(0);
    admin
        .batch_execute("SELECT pg_stat_statements_reset()")
        .unwrap();
    let server_before = cluster.cpu();
    let workers_before = cpu_of(&worker_pids);
    let enqueued_before = enqueued.load(Ordering::SeqCst);
    let window_from: std::time::SystemTime = admin.query_one("SELECT now()", &[]).unwrap().get(0);
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs(args.seconds));
    let server_after = cluster.cpu();
    let workers_after = cpu_of(&worker_pids);
    let window = started.elapsed().as_secs_f64();
    let enqueued_in_window = enqueued.load(Ordering::SeqCst) - enqueued_before;
    let window_to: std::time::SystemTime = admin.query_one("SELECT now()", &[]).unwrap().get(0);
    // The claim statement (`claim_sql` in src/store/postgres/mod.rs).
    let claims: i64 = admin
        .query_one(
            "SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements
             WHERE dbid = $1 AND query LIKE 'WITH alive AS (SELECT id FROM solidq_processes%'",
            &[&db_oid],
        )
        .unwrap()
        .get(0);
    let calls: Vec<(String, i64)> = admin
        .query(
            "SELECT userid::regrole::text, sum(calls)::bigint
             FROM pg_stat_statements WHERE dbid = $1 GROUP BY 1",
            &[&db_oid],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    if run_first(run) {
        for row in admin
            .query(
                "SELECT calls, round(total_exec_time::numeric, 1)::text,
                        left(regexp_replace(query, '\\s+', ' ', 'g'), 90)
                 FROM pg_stat_statements WHERE dbid = $1 ORDER BY total_exec_time DESC LIMIT 6",
                &[&db_oid],
            )
            .unwrap()
        {
            let (calls, ms, query): (i64, String, String) = (row.get(0), row.get(1), row.get(2));
            println!("    {calls:>7} calls {ms:>9} ms  {query}");
        }
    }
    let roles: HashMap<i32, String> = admin
        .query(
            "SELECT pid, coalesce(usename::text, '') FROM pg_stat_activity
             WHERE datname = $1 OR backend_type <> 'client backend'",
            &[&db],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let backends: i64 = admin
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND usename = 'postgres'",
            &[&db],
        )
        .unwrap()
        .get(0);

    stop_producer.store(true, Ordering::SeqCst);
    if let Some(producer) = producer {
        producer.join().expect("producer");
    }
    let jobs = enqueued.load(Ordering::SeqCst) as i64;
    let (mut pickup_p50, mut pickup_p99) = (f64::NAN, f64::NAN);
    if busy {
        assert_all_succeeded(&fleet_url, jobs);
        let mut fleet_db = postgres::Client::connect(&fleet_url, postgres::NoTls).expect("connect");
        let row = fleet_db
            .query_one(
                "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY ms),
                        percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)
                 FROM (SELECT extract(epoch FROM started_at - created_at) * 1000 AS ms
                       FROM solidq_jobs
                       WHERE created_at >= $1::timestamptz AT TIME ZONE 'UTC'
                         AND created_at < $2::timestamptz AT TIME ZONE 'UTC') s",
                &[&window_from, &window_to],
            )
            .unwrap();
        pickup_p50 = row.get::<_, Option<f64>>(0).unwrap_or(f64::NAN);
        pickup_p99 = row.get::<_, Option<f64>>(1).unwrap_or(f64::NAN);
    }
    fleet.stop();
    drop(admin);
    cluster
        .admin()
        .batch_execute(&format!("DROP DATABASE {db} WITH (FORCE)"))
        .expect("drop database");

    let per_second = |role: &str| {
        calls
            .iter()
            .filter(|(r, _)| r == role)
            .map(|(_, n)| *n as f64)
            .sum::<f64>()
            / window
    };
    let cpu_percent = |us: u64| us as f64 / 1e6 / window * 100.0;
    let server = server_after.since(&server_before);
    let by_role = |role: &str| {
        server
            .by_pid
            .iter()
            .filter(|(pid, _)| roles.get(&(**pid as i32)).is_some_and(|r| r == role))
            .map(|(_, us)| *us)
            .sum::<u64>()
    };
    let fleet_backend = by_role("postgres");
    let producer_backend = by_role("producer");
    let total: u64 = server.by_pid.values().sum::<u64>() + server.reaped;
    Figures {
        fleet_statements: per_second("postgres"),
        producer_statements: per_second("producer"),
        server_cpu: cpu_percent(total),
        fleet_backend_cpu: cpu_percent(fleet_backend),
        producer_backend_cpu: cpu_percent(producer_backend),
        background_cpu: cpu_percent(total.saturating_sub(fleet_backend + producer_backend)),
        worker_cpu: cpu_percent(
            workers_after
                .iter()
                .map(|(pid, us)| us.saturating_sub(workers_before.get(pid).copied().unwrap_or(0)))
                .sum(),
        ),
        backends,
        jobs,
        claims_per_job: if busy {
            claims as f64 / enqueued_in_window.max(1) as f64
        } else {
            f64::NAN
        },
        pickup_p50,
        pickup_p99,
    }
}

/// Whether `run` is the first of its scenario (its statements are listed).
fn run_first(run: usize) -> bool {
    FIRST_RUNS.with(|f| f.borrow().contains(&run))
}

thread_local! {
    static FIRST_RUNS: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Waits (up to 2 minutes) until no job is ready, scheduled or claimed, and
/// checks that all `n` jobs finished without an error.
fn assert_all_succeeded(url: &str, n: i64) {
    let mut db = postgres::Client::connect(url, postgres::NoTls).expect("connect");
    let deadline = Instant::now() + Duration::from_secs(120);
    let pending = "SELECT (SELECT count(*) FROM solidq_ready_executions)
                        + (SELECT count(*) FROM solidq_scheduled_executions)
                        + (SELECT count(*) FROM solidq_claimed_executions)";
    while db.query_one(pending, &[]).unwrap().get::<_, i64>(0) > 0 {
        assert!(
            Instant::now() < deadline,
            "jobs still pending 2 minutes after the window"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let row = db
        .query_one(
            "SELECT (SELECT count(*) FROM solidq_jobs WHERE finished_at IS NOT NULL AND errors IS NULL),
                    (SELECT count(*) FROM solidq_jobs)",
            &[],
        )
        .unwrap();
    let (succeeded, all): (i64, i64) = (row.get(0), row.get(1));
    assert_eq!(
        (succeeded, all),
        (n, n),
        "not every job succeeded (succeeded, enqueued)"
    );
}

// ---------------------------------------------------------------- results

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn fmt(v: f64) -> String {
    let v = if v.abs() < 0.05 { 0.0 } else { v };
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn summary(values: &[f64]) -> String {
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{} [{}-{}]", fmt(median(values)), fmt(lo), fmt(hi))
}

// ---------------------------------------------------------------- CPU

/// utime + stime (and, with `children`, cutime + cstime) of `pid` in
/// microseconds, and its parent's pid.
fn proc_cpu(pid: i32, children: bool) -> Option<(u64, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit(')').next()?.split_whitespace().collect();
    // After the command: state, ppid, … utime is field 14 of stat(5), the
    // 12th after the command.
    let ppid = fields.get(1)?.parse().ok()?;
    let take = if children { 4 } else { 2 };
    let ticks: u64 = fields
        .get(11..11 + take)?
        .iter()
        .map(|f| f.parse::<u64>().unwrap_or(0))
        .sum();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Some((ticks * 1_000_000 / hz, ppid))
}

fn cpu_of(pids: &[i32]) -> HashMap<i32, u64> {
    pids.iter()
        .filter_map(|&pid| proc_cpu(pid, false).map(|(us, _)| (pid, us)))
        .collect()
}

/// CPU of a cluster's processes at one moment.
struct ServerCpu {
    by_pid: HashMap<u32, u64>,
    /// The postmaster's own CPU and what it reaped from exited children.
    reaped: u64,
}

impl ServerCpu {
    /// CPU spent since `before`: per process alive now, and what the
    /// postmaster gained (its own plus that of children that exited).
    fn since(&self, before: &ServerCpu) -> ServerCpu {
        ServerCpu {
            by_pid: self
                .by_pid
                .iter()
                .map(|(pid, us)| {
                    (
                        *pid,
                        us.saturating_sub(before.by_pid.get(pid).copied().unwrap_or(0)),
                    )
                })
                .collect(),
            reaped: self.reaped.saturating_sub(before.reaped),
        }
    }
}

// ---------------------------------------------------------------- cluster

const MAX_CONNECTIONS: u32 = 500;

/// A private PostgreSQL server, stopped when dropped.
struct Cluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
}

impl Cluster {
    fn start(bin: &Path) -> Cluster {
        assert!(
            bin.join("initdb").exists(),
            "no PostgreSQL server binaries in {} (--pg-bin)",
            bin.display()
        );
        let dir = tempfile::Builder::new()
            .prefix("solidq-fleet-bench-")
            .tempdir()
            .expect("cluster directory");
        if is_root() {
            run(Command::new("chown").arg("postgres:").arg(dir.path()));
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let cluster = Cluster {
            dir,
            bin: bin.to_path_buf(),
            port,
        };
        let data = cluster.data();
        cluster.pg(
            "initdb",
            &["-D", &data, "-A", "trust", "-U", "postgres", "-E", "UTF8"],
        );
        let options = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c max_connections={MAX_CONNECTIONS} \
             -c shared_preload_libraries=pg_stat_statements",
            cluster.dir.path().display()
        );
        let log = cluster.dir.path().join("server.log").display().to_string();
        cluster.pg(
            "pg_ctl",
            &["-D", &data, "-o", &options, "-l", &log, "-w", "start"],
        );
        cluster
            .admin()
            .batch_execute(
                "CREATE EXTENSION pg_stat_statements;
                 CREATE ROLE producer LOGIN SUPERUSER",
            )
            .expect("set up the cluster");
        cluster
    }

    fn url(&self, user: &str, db: &str) -> String {
        format!("postgres://{user}@127.0.0.1:{}/{db}", self.port)
    }

    fn admin(&self) -> postgres::Client {
        postgres::Client::connect(&self.url("postgres", "postgres"), postgres::NoTls)
            .expect("connect to the private cluster")
    }

    fn version(&self) -> String {
        self.admin()
            .query_one("SHOW server_version", &[])
            .unwrap()
            .get(0)
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn postmaster(&self) -> i32 {
        std::fs::read_to_string(self.dir.path().join("data/postmaster.pid"))
            .expect("postmaster.pid")
            .lines()
            .next()
            .and_then(|l| l.trim().parse().ok())
            .expect("postmaster pid")
    }

    /// CPU of the postmaster and of each of its children.
    fn cpu(&self) -> ServerCpu {
        let postmaster = self.postmaster();
        let mut by_pid = HashMap::new();
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue;
            };
            if let Some((us, ppid)) = proc_cpu(pid, false)
                && ppid == postmaster
            {
                by_pid.insert(pid as u32, us);
            }
        }
        let reaped = proc_cpu(postmaster, true).map_or(0, |(us, _)| us);
        ServerCpu { by_pid, reaped }
    }

    fn pg(&self, program: &str, args: &[&str]) {
        let program = self.bin.join(program);
        let mut command = if is_root() {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(&program);
            command
        } else {
            Command::new(&program)
        };
        command.args(args).current_dir(self.dir.path());
        run(&mut command);
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let data = self.data();
        let _ = std::panic::catch_unwind(|| {
            self.pg("pg_ctl", &["-D", &data, "-m", "immediate", "-w", "stop"])
        });
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn run(command: &mut Command) {
    let output = command.output().expect("run a PostgreSQL server binary");
    assert!(
        output.status.success(),
        "{command:?} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
