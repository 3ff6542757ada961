//! Real worker processes for multi-process and crash tests. The test binary
//! re-runs itself with `--ignored --exact common::child::child_process` and
//! `SOLIDQ_TEST_CHILD` set; that ignored test then acts as the child.

use std::io::Read;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use solidq::{Queue, QueueConfig, WorkerConfig};

use super::jobs;

#[test]
#[ignore = "entry point of the worker processes that multi-process tests spawn"]
fn child_process() {
    let Ok(role) = std::env::var("SOLIDQ_TEST_CHILD") else {
        return;
    };
    let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
        .is_test(false)
        .format_timestamp_millis()
        .try_init();
    match role.as_str() {
        "worker" => run_worker(),
        "enqueuer" => run_enqueuer(),
        "burst" => run_burst(),
        "scheduler" => run_scheduler(),
        // Spawned by a supervisor: everything comes from the environment.
        "supervised" => {
            let mut worker = solidq::Worker::from_env().expect("worker from env");
            if let Ok(prefetch) = std::env::var("SOLIDQ_TEST_PREFETCH") {
                worker = worker.prefetch(prefetch.parse().expect("SOLIDQ_TEST_PREFETCH"));
            }
            jobs::register(worker).run().expect("worker run")
        }
        other => panic!("unknown child role {other:?}"),
    }
}

/// The command line that runs this test binary as a child of `role`.
pub fn child_command() -> Vec<String> {
    let exe = std::env::current_exe()
        .expect("test binary")
        .display()
        .to_string();
    [
        exe.as_str(),
        "--exact",
        "common::child::child_process",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
        "-q",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// The command that runs this test binary as a child of `role` on `url`,
/// logging at `log` (`RUST_LOG`).
fn role_command(role: &str, url: &str, log: &str) -> Command {
    let argv = child_command();
    let mut command = Command::new(&argv[0]);
    command
        .args(&argv[1..])
        .env("SOLIDQ_TEST_CHILD", role)
        .env("SOLIDQ_TEST_URL", url)
        .env("RUST_LOG", log);
    command
}

fn var<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn run_worker() {
    let url = std::env::var("SOLIDQ_TEST_URL").expect("SOLIDQ_TEST_URL");
    let threads: usize = var("SOLIDQ_TEST_THREADS", 4);
    let queue = Queue::connect_with(
        &url,
        QueueConfig {
            pool_size: threads as u32 + 4,
            sqlite_busy_timeout: Duration::from_millis(var("SOLIDQ_TEST_BUSY_MS", 5000)),
            ..QueueConfig::default()
        },
    )
    .expect("connect");
    let config = WorkerConfig {
        threads,
        queues: std::env::var("SOLIDQ_TEST_QUEUES")
            .map(|q| q.split(',').map(str::to_string).collect())
            .unwrap_or_else(|_| vec!["*".into()]),
        polling_interval: Duration::from_millis(var("SOLIDQ_TEST_POLLING_MS", 50)),
        fallback_polling_interval: Duration::from_millis(var(
            "SOLIDQ_TEST_FALLBACK_MS",
            solidq::config::DEFAULT_FALLBACK_POLLING_INTERVAL.as_millis() as u64,
        )),
        heartbeat_interval: Duration::from_millis(var("SOLIDQ_TEST_HEARTBEAT_MS", 200)),
        process_alive_threshold: Duration::from_millis(var("SOLIDQ_TEST_ALIVE_MS", 5000)),
        shutdown_timeout: Duration::from_millis(var("SOLIDQ_TEST_SHUTDOWN_MS", 2000)),
        standalone: var("SOLIDQ_TEST_STANDALONE", true),
        prefetch: var("SOLIDQ_TEST_PREFETCH", solidq::config::DEFAULT_PREFETCH),
        wait_for_migrations: var("SOLIDQ_TEST_WAIT_FOR_MIGRATIONS", false),
        wake_all: var("SOLIDQ_TEST_WAKE_ALL", false),
        ..WorkerConfig::default()
    };
    jobs::worker(queue)
        .config(config)
        .run()
        .expect("worker run");
}

/// A spawned child process; SIGKILLed when dropped if still running.
pub struct Child {
    child: std::process::Child,
    log: tempfile::NamedTempFile,
    _files: Vec<tempfile::NamedTempFile>,
}

impl Child {
    /// Spawns `command`, its stderr going to a log file.
    pub fn spawn(mut command: Command) -> Child {
        let log = tempfile::NamedTempFile::new().expect("log file");
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log.reopen().expect("log file"));
        let child = command.spawn().expect("spawn child");
        Child {
            child,
            log,
            _files: Vec::new(),
        }
    }

    /// Spawns a standalone worker process on `url` with extra
    /// `SOLIDQ_TEST_*` settings.
    pub fn worker(url: &str, settings: &[(&str, &str)]) -> Child {
        let log = std::env::var("SOLIDQ_TEST_CHILD_LOG").unwrap_or("info".into());
        let mut command = role_command("worker", url, &log);
        for (key, value) in settings {
            command.env(key, value);
        }
        Child::spawn(command)
    }

    /// Runs `solidq supervisor` on the configuration `toml`.
    pub fn supervisor(toml: &str) -> Child {
        let file = tempfile::NamedTempFile::new().expect("config file");
        std::fs::write(file.path(), toml).expect("write config");
        let mut command = Command::new(env!("CARGO_BIN_EXE_solidq"));
        command
            .args(["supervisor", "--config"])
            .arg(file.path())
            .env("RUST_LOG", "info")
            .env_remove("SOLIDQ_DATABASE_URL");
        let mut child = Child::spawn(command);
        child._files.push(file);
        child
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` (a `libc::SIG*`) to the process.
    pub fn signal(&self, signal: i32) {
        unsafe {
            libc::kill(self.child.id() as i32, signal);
        }
    }

    /// SIGSTOPs the process at a moment it holds no write lock of the
    /// SQLite database at `url` (on other backends: at once). A process
    /// frozen inside an SQLite write stops every other writer of the file
    /// until it thaws, which a test of what the others do meanwhile must
    /// not stumble into by chance (the outage tests freeze one inside a
    /// write on purpose). Thaws it and tries again while the lock is taken.
    pub fn freeze_outside_a_write(&self, url: &str) {
        self.signal(libc::SIGSTOP);
        if !url.starts_with("sqlite") {
            return;
        }
        let mut conn = super::TestConn::open(url);
        for _ in 0..200 {
            // SIGSTOP is delivered asynchronously: until every thread is
            // stopped, one may still take the lock after the check below.
            self.wait_stopped();
            // BEGIN IMMEDIATE takes the write lock if nobody holds it.
            let free = conn
                .try_execute("PRAGMA busy_timeout = 50; BEGIN IMMEDIATE; ROLLBACK")
                .is_ok();
            if free {
                return;
            }
            let _ = conn.try_execute("ROLLBACK");
            self.signal(libc::SIGCONT);
            std::thread::sleep(Duration::from_millis(5 + fastrand::u64(..20)));
            self.signal(libc::SIGSTOP);
        }
        panic!("the process held the SQLite write lock at each of 200 tries");
    }

    /// Waits (up to a second) until every thread of the process is
    /// stopped (`T` in `/proc/<pid>/task/*/stat`), after a SIGSTOP.
    fn wait_stopped(&self) {
        let tasks = format!("/proc/{}/task", self.child.id());
        let deadline = Instant::now() + Duration::from_secs(1);
        while Instant::now() < deadline {
            let Ok(entries) = std::fs::read_dir(&tasks) else {
                return;
            };
            let all_stopped = entries.flatten().all(|task| {
                std::fs::read_to_string(task.path().join("stat")).is_ok_and(|stat| {
                    // "pid (comm) S ...": the state follows the last ')'.
                    stat.rsplit_once(')').is_some_and(|(_, rest)| {
                        matches!(rest.trim_start().chars().next(), Some('T' | 't'))
                    })
                })
            });
            if all_stopped {
                return;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// Waits up to `timeout` for the process to exit.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// What the child logged so far.
    pub fn logs(&self) -> String {
        let mut text = String::new();
        let _ = self
            .log
            .reopen()
            .and_then(|mut f| f.read_to_string(&mut text));
        text
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Enqueues `Echo` with unique key `SOLIDQ_TEST_KEY` `SOLIDQ_TEST_ROUNDS`
/// times, printing `new <id>` or `existing <id>` per attempt on stderr.
pub fn run_enqueuer() {
    let url = std::env::var("SOLIDQ_TEST_URL").expect("SOLIDQ_TEST_URL");
    let key = std::env::var("SOLIDQ_TEST_KEY").expect("SOLIDQ_TEST_KEY");
    let rounds: usize = var("SOLIDQ_TEST_ROUNDS", 20);
    let queue = Queue::connect(&url).expect("connect");
    for _ in 0..rounds {
        let options = solidq::EnqueueOptions::new()
            .unique_key(key.clone())
            .keep_result(Duration::from_secs(3));
        match queue
            .enqueue_or_existing(
                &jobs::Echo {
                    value: serde_json::json!(key),
                },
                options,
            )
            .expect("enqueue")
        {
            solidq::Enqueued::New(id) => eprintln!("new {id}"),
            solidq::Enqueued::Existing(id) => eprintln!("existing {id}"),
        }
    }
}

impl Child {
    /// Spawns an enqueuer process (see [`run_enqueuer`]).
    pub fn enqueuer(url: &str, key: &str, rounds: usize) -> Child {
        let mut command = role_command("enqueuer", url, "error");
        command
            .env("SOLIDQ_TEST_KEY", key)
            .env("SOLIDQ_TEST_ROUNDS", rounds.to_string());
        Child::spawn(command)
    }
}

/// Enqueues `SOLIDQ_TEST_JOBS` `Echo` jobs (values 0 to n − 1) one per
/// call, as fast as it can, from two threads with a queue handle each,
/// prints `rate <jobs/s>` on stderr and returns: the process ends with
/// its last enqueues' notifications still pending (on PostgreSQL, held
/// by the notifier's pace under load).
pub fn run_burst() {
    let url = std::env::var("SOLIDQ_TEST_URL").expect("SOLIDQ_TEST_URL");
    let n: usize = var("SOLIDQ_TEST_JOBS", 1_000);
    let started = Instant::now();
    let threads: Vec<_> = (0..2)
        .map(|first| {
            let url = url.clone();
            std::thread::spawn(move || {
                let queue = Queue::connect(&url).expect("connect");
                for value in (first..n).step_by(2) {
                    queue
                        .enqueue(&jobs::Echo {
                            value: serde_json::json!(value),
                        })
                        .expect("enqueue");
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("enqueuing thread");
    }
    eprintln!("rate {:.0}", n as f64 / started.elapsed().as_secs_f64());
}

impl Child {
    /// Spawns a burst of `jobs` enqueues that then exits (see
    /// [`run_burst`]).
    pub fn burst(url: &str, jobs: usize) -> Child {
        let mut command = role_command("burst", url, "warn");
        command.env("SOLIDQ_TEST_JOBS", jobs.to_string());
        Child::spawn(command)
    }
}

/// Runs a standalone scheduler with one task, `SOLIDQ_TEST_TASK` on
/// `SOLIDQ_TEST_SCHEDULE`, enqueuing `Echo`, until SIGTERM; it heartbeats
/// every `SOLIDQ_TEST_HEARTBEAT_MS` (200).
pub fn run_scheduler() {
    let url = std::env::var("SOLIDQ_TEST_URL").expect("SOLIDQ_TEST_URL");
    let key = std::env::var("SOLIDQ_TEST_TASK").expect("SOLIDQ_TEST_TASK");
    let schedule = std::env::var("SOLIDQ_TEST_SCHEDULE").expect("SOLIDQ_TEST_SCHEDULE");
    let queue = Queue::connect(&url).expect("connect");
    let task = solidq::RecurringTask::new(
        key,
        &schedule,
        &jobs::Echo {
            value: serde_json::json!("tick"),
        },
    )
    .expect("task");
    solidq::Scheduler::new(queue)
        .task(task)
        .heartbeat_interval(Duration::from_millis(var("SOLIDQ_TEST_HEARTBEAT_MS", 200)))
        .run()
        .expect("scheduler run");
}

impl Child {
    /// Spawns a scheduler process (see [`run_scheduler`]).
    pub fn scheduler(url: &str, task: &str, schedule: &str) -> Child {
        Child::scheduler_with(url, task, schedule, &[])
    }

    /// Spawns a scheduler process with extra `SOLIDQ_TEST_*` settings.
    pub fn scheduler_with(
        url: &str,
        task: &str,
        schedule: &str,
        settings: &[(&str, &str)],
    ) -> Child {
        let mut command = role_command("scheduler", url, "solidq=debug");
        command
            .env("SOLIDQ_TEST_TASK", task)
            .env("SOLIDQ_TEST_SCHEDULE", schedule);
        for (key, value) in settings {
            command.env(key, value);
        }
        Child::spawn(command)
    }
}

/// Chaos: three standalone workers on `url` with `settings`; every 300 ms
/// one of them, at random, is killed with SIGKILL and another started in
/// its place (the living prune the dead), until `length` has passed or
/// `done()` holds. Returns the workers left running and how many were
/// killed.
pub fn kill_one_every_300ms(
    url: &str,
    settings: &[(&str, &str)],
    length: Duration,
    mut done: impl FnMut() -> bool,
) -> (Vec<Child>, usize) {
    let mut workers: Vec<Child> = (0..3).map(|_| Child::worker(url, settings)).collect();
    let mut kills = 0;
    let end = Instant::now() + length;
    while Instant::now() < end && !done() {
        std::thread::sleep(Duration::from_millis(300));
        let victim = fastrand::usize(..workers.len());
        workers[victim].signal(libc::SIGKILL);
        workers[victim] = Child::worker(url, settings);
        kills += 1;
    }
    (workers, kills)
}
