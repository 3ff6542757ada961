//! The web dashboard in a real browser, on both backends: a database
//! seeded with jobs in every state (ready, scheduled, retrying, running in
//! a live worker, blocked by a concurrency limit, failed with a backtrace,
//! succeeded, discarded), a paused queue, a registered process and a
//! recurring task with ticks is served by `solidq web`, and
//! `tests/e2e/dashboard.mjs` drives Debian's Chromium through
//! playwright-core over every page (a full-page PNG of each in
//! `target/screenshots/<backend>/`) and its buttons: retry and discard of
//! failed jobs, pause then resume of a queue, run now of a scheduled job
//! and of a recurring task, cancel of a ready job, retry of a selection.
//! Then the database must show what each click asked for, and no script
//! hidden in a kind, an argument, an error message or a flash message may
//! have run; a `password` argument is never shown.
//!
//! All of it under the server's Content-Security-Policy (no inline script
//! or style, no eval, no framing): every page's answer carries the policy
//! and the other browser headers, the live parts poll, the charts draw,
//! the filters filter, and the browser reports no violation on any page;
//! an inline script and an inline style added on purpose are reported
//! (the watch works), and a page of another origin cannot frame the
//! dashboard.
//!
//! It needs node, /usr/bin/chromium and `tests/e2e/node_modules` (`npm ci
//! --prefix tests/e2e`); `.ci/run` installs them. Without one the test is
//! skipped with a `*** SKIPPED` line, unless `SOLIDQ_REQUIRE_TOOLS=1` (or
//! `CI=true`), which makes that a failure.

use crate::common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{TestDb, wait_for};
use crossbeam_channel::{Receiver, Sender};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use solidq::{
    Backoff, ConcurrencyLimit, EnqueueOptions, Error, Job, JobContext, JobError, JobFilter,
    JobOptions, JobResult, JobStatus, Queue, RecurringTask, Scheduler, Worker, WorkerConfig,
    WorkerHandle,
};

backend_tests!(the_dashboard_shows_every_state_and_its_buttons_change_the_database);

const CHROMIUM: &str = "/usr/bin/chromium";
/// Stored in a kind, an argument and error messages: shown as text, never
/// run.
const XSS: &str = "<script>alert(1)</script>";
/// A `password` argument's value: no page may show it.
const SECRET: &str = "hunter2-e2e-secret";
/// The queue the browser pauses and resumes.
const PAUSE_QUEUE: &str = "waiting";
/// A queue paused before the browser comes, and left paused.
const PAUSED_QUEUE: &str = "mail";
const TASK: &str = "nightly-report";
/// How long the browser script may take before it is stopped.
const BROWSER_TIMEOUT: Duration = Duration::from_secs(180);

// ---- Job types --------------------------------------------------------

#[derive(Serialize, Deserialize)]
struct Note {
    text: String,
}

impl Job for Note {
    const KIND: &'static str = "note";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        Ok(json!({ "noted": self.text }))
    }
}

/// Panics (a failure with a backtrace) with a script tag in its message.
#[derive(Serialize, Deserialize)]
struct Boom {
    note: String,
    password: String,
}

impl Job for Boom {
    const KIND: &'static str = "boom";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        panic!("{} went wrong for {}", XSS, self.note);
    }
    fn options() -> JobOptions {
        JobOptions::new().max_attempts(1)
    }
}

/// Fails with a script tag in its message; its retry is an hour away.
#[derive(Serialize, Deserialize)]
struct Later;

impl Job for Later {
    const KIND: &'static str = "later";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        Err(JobError::msg(format!("{XSS} not yet")))
    }
    fn options() -> JobOptions {
        JobOptions::new()
            .max_attempts(5)
            .backoff(Backoff::fixed(Duration::from_secs(3600)))
    }
}

/// The recurring task's job, with a secret in its arguments.
#[derive(Serialize, Deserialize)]
struct Digest {
    password: String,
}

impl Job for Digest {
    const KIND: &'static str = "digest";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        Ok(Value::Null)
    }
}

/// One at a time: a second one waits blocked.
#[derive(Serialize, Deserialize)]
struct Limited {
    n: u32,
}

impl Job for Limited {
    const KIND: &'static str = "limited";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        Ok(Value::Null)
    }
    fn options() -> JobOptions {
        JobOptions::new().concurrency(ConcurrencyLimit::new(1).duration(Duration::from_secs(600)))
    }
}

/// Runs until the test lets it go (or its sender is dropped).
#[derive(Serialize, Deserialize)]
struct Hold;

struct Gate(Receiver<()>);

impl Job for Hold {
    const KIND: &'static str = "hold";
    fn perform(&self, ctx: &JobContext) -> JobResult {
        let gate = ctx.state::<Gate>()?;
        ctx.set_progress(json!({ "fraction": 0.4 }));
        let _ = gate.0.recv_timeout(Duration::from_secs(300));
        Ok(Value::Null)
    }
}

// ---- Tools, server, browser -------------------------------------------

fn repo() -> &'static Path {
    crate::common::repo_root()
}

fn flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

/// Says `message` where it is seen: straight to the process's stderr (the
/// harness shows captured output only for failures).
fn say(message: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{message}");
}

/// node, when node, Chromium and the script's packages are all there;
/// `None` (after a `*** SKIPPED` line) when one is missing and not
/// required.
fn tools() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let node = std::env::split_paths(&path)
        .map(|dir| dir.join("node"))
        .find(|p| p.is_file());
    let mut missing = Vec::new();
    if node.is_none() {
        missing.push("node (Node.js 20 or later)".to_string());
    }
    if !Path::new(CHROMIUM).is_file() {
        missing.push(format!("{CHROMIUM} (apt-get install chromium)"));
    }
    let packages = repo().join("tests/e2e/node_modules/playwright-core/package.json");
    if !packages.is_file() {
        missing.push("tests/e2e/node_modules (npm ci --prefix tests/e2e)".to_string());
    }
    if missing.is_empty() {
        return node;
    }
    let message = format!("missing {}; .ci/run installs them", missing.join(", "));
    assert!(
        !(flag("SOLIDQ_REQUIRE_TOOLS") || flag("CI")),
        "{message}, and SOLIDQ_REQUIRE_TOOLS or CI requires them"
    );
    let test = std::thread::current()
        .name()
        .unwrap_or("web_e2e")
        .to_string();
    say(&format!(
        "\n*** SKIPPED {test}: {message} (set SOLIDQ_REQUIRE_TOOLS=1 to fail instead)"
    ));
    None
}

/// `solidq web` on a free loopback port, killed when dropped.
struct Server {
    child: Child,
    base: String,
    log: PathBuf,
}

impl Server {
    fn start(db: &TestDb, dir: &Path) -> Server {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let log = dir.join("solidq-web.log");
        let out = std::fs::File::create(&log).expect("server log");
        let child = Command::new(env!("CARGO_BIN_EXE_solidq"))
            .args(["web", "--database-url", &db.url, "--bind"])
            .arg(format!("127.0.0.1:{port}"))
            .env("RUST_LOG", "info")
            .env_remove("SOLIDQ_DATABASE_URL")
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("server log"))
            .stderr(out)
            .spawn()
            .expect("start solidq web");
        let mut server = Server {
            child,
            base: format!("http://127.0.0.1:{port}"),
            log,
        };
        server.wait_ready(port);
        server
    }

    fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Until `GET /queues` answers 200.
    fn wait_ready(&mut self, port: u16) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().expect("server status") {
                panic!(
                    "solidq web exited ({status}) before answering:\n{}",
                    self.logs()
                );
            }
            if get_status(port, "/queues") == Some(200) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "solidq web did not answer GET /queues with 200 within 30 s:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The status code of a plain HTTP/1.0 GET, or `None` if nothing answers.
fn get_status(port: u16, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n"
    )
    .ok()?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

/// The worker holding the running job, and the gate that lets it go:
/// dropped, the gate opens first so the worker stops at once.
struct Holding {
    release: Option<Sender<()>>,
    worker: Option<WorkerHandle>,
}

impl Holding {
    fn stop(mut self) {
        self.release.take();
        if let Some(worker) = self.worker.take() {
            worker.stop().expect("stop the worker");
        }
    }
}

impl Drop for Holding {
    fn drop(&mut self) {
        self.release.take();
        if let Some(worker) = self.worker.take() {
            let _ = worker.stop();
        }
    }
}

/// The node process, killed if still running when dropped.
struct Browser(Child);

impl Drop for Browser {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            // playwright closes Chromium on SIGTERM, not on SIGKILL.
            // SAFETY: kill(2) on our own child's pid, which it keeps until
            // waited for.
            unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
            std::thread::sleep(Duration::from_secs(2));
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// Runs the browser script; returns its JSON report, or panics with its
/// output.
fn run_browser(node: &Path, base: &str, shots: &Path, plan: &Value, server: &Server) -> Value {
    let mut child = Command::new(node)
        .arg(repo().join("tests/e2e/dashboard.mjs"))
        .arg(base)
        .arg(shots)
        .arg(plan.to_string())
        .current_dir(repo())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run node");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let mut browser = Browser(child);
    let deadline = Instant::now() + BROWSER_TIMEOUT;
    let status = loop {
        if let Some(status) = browser.0.try_wait().expect("node status") {
            break Some(status);
        }
        if Instant::now() >= deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    drop(browser);
    let (stdout, stderr) = (out.join().unwrap(), err.join().unwrap());
    let explain = || {
        format!(
            "stderr:\n{stderr}\nstdout:\n{stdout}\nserver log:\n{}",
            server.logs()
        )
    };
    match status {
        None => panic!(
            "dashboard.mjs took longer than {BROWSER_TIMEOUT:?}\n{}",
            explain()
        ),
        Some(s) if !s.success() => panic!("dashboard.mjs failed ({s})\n{}", explain()),
        Some(_) => serde_json::from_str(&stdout).unwrap_or_else(|e| {
            panic!("dashboard.mjs printed no JSON report ({e})\n{}", explain())
        }),
    }
}

// ---- Seeding ----------------------------------------------------------

/// The ids the browser acts on, and the ones that must stay as they are.
struct Seeded {
    retry: i64,
    discard: i64,
    retry_selected: [i64; 2],
    backtrace: i64,
    run_now: i64,
    cancel: i64,
    xss: i64,
    running: i64,
    blocked: i64,
    retrying: i64,
    succeeded: i64,
    discarded: i64,
    ticks: usize,
}

fn seed(db: &TestDb, queue: &Queue) -> (Seeded, Holding) {
    // Succeeded, failed (a panic: its location and backtrace) and retrying,
    // run by a drain of queue "work".
    let succeeded = queue
        .enqueue_with(
            &Note {
                text: "shipped".into(),
            },
            EnqueueOptions::new().queue("work"),
        )
        .unwrap();
    let failed: Vec<i64> = ["retry", "discard", "pick-1", "pick-2"]
        .into_iter()
        .map(|note| {
            let boom = Boom {
                note: note.into(),
                password: SECRET.into(),
            };
            queue
                .enqueue_with(&boom, EnqueueOptions::new().queue("work"))
                .unwrap()
        })
        .collect();
    let retrying = queue
        .enqueue_with(&Later, EnqueueOptions::new().queue("work"))
        .unwrap();
    let drained = Worker::new(queue.clone())
        .queues(["work"])
        .register::<Note>()
        .register::<Boom>()
        .register::<Later>()
        .drain_ready()
        .unwrap();
    assert_eq!(
        (drained.succeeded, drained.failed, drained.retried),
        (1, 4, 1),
        "{drained:?}"
    );

    // Waiting: ready (one to cancel, one with a script in its kind and
    // arguments), scheduled (to run now), discarded by an operator, and a
    // job on a paused queue.
    let cancel = queue
        .enqueue_with(
            &Note {
                text: "cancel me".into(),
            },
            EnqueueOptions::new().queue(PAUSE_QUEUE),
        )
        .unwrap();
    let xss = queue
        .enqueue_kind(
            XSS,
            &json!({ "note": XSS, "password": SECRET, "nested": { "Password": SECRET } }),
            EnqueueOptions::new().queue(PAUSE_QUEUE),
        )
        .unwrap();
    let run_now = queue
        .enqueue_with(
            &Note {
                text: "tomorrow".into(),
            },
            EnqueueOptions::new()
                .queue(PAUSE_QUEUE)
                .delay(Duration::from_secs(3600)),
        )
        .unwrap();
    let discarded = queue
        .enqueue_with(
            &Note {
                text: "unwanted".into(),
            },
            EnqueueOptions::new().queue(PAUSE_QUEUE),
        )
        .unwrap();
    queue.cancel_job(discarded, "seeded as discarded").unwrap();
    queue
        .enqueue_with(
            &Note {
                text: "newsletter".into(),
            },
            EnqueueOptions::new().queue(PAUSED_QUEUE),
        )
        .unwrap();
    assert!(queue.pause(PAUSED_QUEUE).unwrap());

    // Blocked: the second of a limit of one.
    let holder = queue
        .enqueue_with(&Limited { n: 1 }, EnqueueOptions::new().queue("limited"))
        .unwrap();
    let blocked = queue
        .enqueue_with(&Limited { n: 2 }, EnqueueOptions::new().queue("limited"))
        .unwrap();
    assert_eq!(queue.job(holder).unwrap().status, JobStatus::Ready);

    // Running: a real worker (a registered process) on queue "busy",
    // holding its job until the test ends.
    let (release, gate) = crossbeam_channel::bounded::<()>(0);
    let running = queue
        .enqueue_with(&Hold, EnqueueOptions::new().queue("busy"))
        .unwrap();
    let worker = Worker::new(queue.clone())
        .config(WorkerConfig {
            queues: vec!["busy".into()],
            threads: 1,
            polling_interval: Duration::from_millis(50),
            name: Some("e2e-worker".into()),
            ..WorkerConfig::default()
        })
        .state(Gate(gate))
        .register::<Hold>()
        .start()
        .unwrap();
    let holding = Holding {
        release: Some(release),
        worker: Some(worker),
    };
    wait_for(
        "the held job's code to run",
        Duration::from_secs(15),
        || queue.job(running).unwrap().progress.is_some(),
    );

    // A recurring task with ticks: a scheduler fires it every second for
    // two ticks, then stops (the ledger then shows the ticks it missed).
    let task = RecurringTask::new(
        TASK,
        "* * * * * ?",
        &Digest {
            password: SECRET.into(),
        },
    )
    .unwrap()
    .queue("reports")
    .description("Sums up the day");
    let scheduler = Scheduler::new(queue.clone()).task(task).start().unwrap();
    let ticks = || {
        db.scalar(&format!(
            "SELECT count(*) AS v FROM solidq_recurring_executions WHERE task_key = '{TASK}'"
        ))
    };
    wait_for("two ticks", Duration::from_secs(10), || ticks() >= 2);
    scheduler.stop().unwrap();
    let ticks = ticks() as usize;

    let status = |id: i64| queue.job(id).unwrap().status;
    for (id, expected) in [
        (succeeded, JobStatus::Succeeded),
        (retrying, JobStatus::Retrying),
        (cancel, JobStatus::Ready),
        (xss, JobStatus::Ready),
        (run_now, JobStatus::Scheduled),
        (discarded, JobStatus::Discarded),
        (blocked, JobStatus::Blocked),
        (running, JobStatus::Running),
    ] {
        assert_eq!(status(id), expected, "seeded job {id}");
    }
    for &id in &failed {
        assert_eq!(status(id), JobStatus::Failed, "seeded job {id}");
    }
    let backtrace = queue.job(failed[0]).unwrap();
    assert!(
        backtrace.errors.iter().any(|e| e.backtrace.is_some()),
        "the panic's backtrace is stored: {:?}",
        backtrace.errors
    );
    (
        Seeded {
            retry: failed[0],
            discard: failed[1],
            retry_selected: [failed[2], failed[3]],
            backtrace: failed[0],
            run_now,
            cancel,
            xss,
            running,
            blocked,
            retrying,
            succeeded,
            discarded,
            ticks,
        },
        holding,
    )
}

/// Jobs of each status tab, by the tab's name.
fn counts(queue: &Queue) -> serde_json::Map<String, Value> {
    [
        ("failed", JobStatus::Failed),
        ("ready", JobStatus::Ready),
        ("running", JobStatus::Running),
        ("claimed", JobStatus::Claimed),
        ("blocked", JobStatus::Blocked),
        ("waiting", JobStatus::Waiting),
        ("scheduled", JobStatus::Scheduled),
        ("retrying", JobStatus::Retrying),
        ("finished", JobStatus::Succeeded),
        ("discarded", JobStatus::Discarded),
    ]
    .into_iter()
    .map(|(name, status)| {
        let n = queue
            .jobs(&JobFilter::new().status(status).limit(1_000))
            .unwrap()
            .len();
        (name.to_string(), json!(n))
    })
    .collect()
}

/// `target/screenshots/<backend>/`, emptied.
fn screenshot_dir(db: &TestDb) -> PathBuf {
    let bin = Path::new(env!("CARGO_BIN_EXE_solidq"));
    let target = bin
        .parent()
        .and_then(Path::parent)
        .expect("the binary is in <target>/<profile>/");
    let dir = target.join("screenshots").join(match db.backend {
        solidq::Backend::Sqlite => "sqlite",
        solidq::Backend::Postgres => "postgres",
        solidq::Backend::Mysql => "mysql",
    });
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("screenshot directory");
    dir
}

// ---- The test ---------------------------------------------------------

fn the_dashboard_shows_every_state_and_its_buttons_change_the_database(db: &TestDb) {
    let Some(node) = tools() else {
        return;
    };
    let started = Instant::now();
    let queue = db.queue();
    let (s, holding) = seed(db, &queue);
    let seeded_in = started.elapsed();

    let dir = tempfile::tempdir().unwrap();
    let t = Instant::now();
    let server = Server::start(db, dir.path());
    let server_in = t.elapsed();

    let shots = screenshot_dir(db);
    let plan = json!({
        "secret": SECRET,
        "liveRefreshMs": solidq_web::LIVE_REFRESH.as_millis() as u64,
        "counts": counts(&queue),
        "pauseQueue": PAUSE_QUEUE,
        "pausedQueue": PAUSED_QUEUE,
        "retry": s.retry,
        "discard": s.discard,
        "retrySelected": s.retry_selected,
        "backtrace": s.backtrace,
        "runNow": s.run_now,
        "cancel": s.cancel,
        "recurring": TASK,
        "ticks": s.ticks,
        "xssJob": s.xss,
        // The four failed jobs are all Boom's; Later's is retrying.
        "filter": { "kind": "boom", "count": 4, "other": "later" },
        "visit": {
            "running": s.running,
            "blocked": s.blocked,
            "retrying": s.retrying,
            "succeeded": s.succeeded,
            "discarded": s.discarded,
        },
    });
    let t = Instant::now();
    let report = run_browser(&node, &server.base, &shots, &plan, &server);
    let browser_in = t.elapsed();

    // What each click asked for is in the database.
    let status = |id: i64| queue.job(id).unwrap().status;
    assert_eq!(status(s.retry), JobStatus::Ready, "retried from its page");
    assert!(
        matches!(queue.job(s.discard), Err(Error::JobNotFound(_))),
        "a discarded failed job is deleted"
    );
    for id in s.retry_selected {
        assert_eq!(status(id), JobStatus::Ready, "retried with its checkbox");
    }
    assert!(
        !queue.queue_stats(PAUSE_QUEUE).unwrap().paused,
        "paused, then resumed"
    );
    assert!(
        queue.queue_stats(PAUSED_QUEUE).unwrap().paused,
        "the queue nobody touched stays paused"
    );
    assert_eq!(status(s.run_now), JobStatus::Ready, "run now");
    assert_eq!(status(s.cancel), JobStatus::Discarded, "cancelled");
    let cancelled = queue.job(s.cancel).unwrap();
    let reason = cancelled.error.map(|e| e.message).unwrap_or_default();
    assert!(
        reason.contains("from the dashboard"),
        "the cancel names where it came from: {reason}"
    );
    let actions = report["actions"].as_array().expect("actions");
    let run = actions
        .iter()
        .find(|a| a["action"] == "run")
        .expect("the recurring task was run");
    let job = run["job"].as_i64().expect("the run's job id");
    let info = queue.job(job).unwrap();
    assert_eq!(
        (info.kind.as_str(), info.queue.as_str()),
        ("digest", "reports")
    );
    let fired = db.scalar(&format!(
        "SELECT count(*) AS v FROM solidq_recurring_executions WHERE task_key = '{TASK}' AND job_id = {job}"
    ));
    assert_eq!(fired, 1, "run now went through the task's ledger");
    // Nothing else moved.
    for (id, expected) in [
        (s.running, JobStatus::Running),
        (s.blocked, JobStatus::Blocked),
        (s.retrying, JobStatus::Retrying),
        (s.xss, JobStatus::Ready),
        (s.succeeded, JobStatus::Succeeded),
        (s.discarded, JobStatus::Discarded),
    ] {
        assert_eq!(status(id), expected, "job {id} was not acted on");
    }
    // No stored script ran, no dialog came unasked.
    assert_eq!(report["xss"], json!([]), "scripts ran: {report:#}");
    let done: Vec<&str> = actions
        .iter()
        .filter_map(|a| a["action"].as_str())
        .collect();
    assert_eq!(
        done,
        [
            "pause",
            "resume",
            "retry",
            "discard",
            "run-now",
            "run",
            "cancel",
            "retry-selected"
        ]
    );

    // Every page worked under the policy, and the watch was shown to
    // work.
    let csp = &report["csp"];
    assert_eq!(csp["violations"], json!([]), "{report:#}");
    assert_eq!(
        csp["probes"],
        json!({ "script": "script-src-elem", "style": "style-src-elem" }),
        "the inline probes were blocked and reported: {report:#}"
    );
    let pages = report["pages"].as_array().map_or(0, Vec::len);
    assert!(
        csp["headersChecked"].as_u64().unwrap_or(0) as usize >= pages,
        "{report:#}"
    );
    assert_eq!(
        report["framing"]["dashboardShown"],
        json!(false),
        "{report:#}"
    );
    let polled: Vec<&str> = report["polls"]
        .as_array()
        .expect("polls")
        .iter()
        .filter_map(|p| p["path"].as_str())
        .collect();
    for path in ["/queues/live", "/jobs/live", "/jobs", "/processes"] {
        assert!(polled.contains(&path), "no poll of {path}: {polled:?}");
    }
    assert_eq!(report["charts"]["drawn"], json!(true), "{report:#}");
    assert_eq!(
        report["filters"],
        json!([{ "kind": "boom", "rows": 4 }, { "kind": "later", "rows": 0 }])
    );

    holding.stop();
    drop(server);
    common::assert_invariants(db);
    let shots_taken = report["screenshots"].as_array().map_or(0, Vec::len);
    say(&format!(
        "web_e2e {:?}: seeded in {seeded_in:.1?}, server up in {server_in:.1?}, browser {browser_in:.1?} \
         ({pages} pages, {} actions, {shots_taken} screenshots in {}), total {:.1?}",
        db.backend,
        actions.len(),
        shots.display(),
        started.elapsed()
    ));
}
