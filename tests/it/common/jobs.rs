//! Job types the tests enqueue.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use diesel::RunQueryDsl;
use serde::{Deserialize, Serialize};
use solidq::{
    ConcurrencyLimit, Job, JobContext, JobError, JobOptions, JobResult, OnConflict, Queue, Worker,
};

use super::{TestConn, now_us};

/// Returns its value as the result.
#[derive(Serialize, Deserialize)]
pub struct Echo {
    pub value: serde_json::Value,
}

impl Job for Echo {
    const KIND: &'static str = "echo";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        Ok(self.value.clone())
    }
}

/// Same kind as [`Echo`], different arguments: deserializing it as an
/// `Echo` fails.
#[derive(Serialize, Deserialize)]
pub struct MalformedEcho {
    pub nope: bool,
}

impl Job for MalformedEcho {
    const KIND: &'static str = "echo";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        unreachable!("never registered")
    }
}

/// A kind no worker registers.
#[derive(Serialize, Deserialize)]
pub struct Unregistered;

impl Job for Unregistered {
    const KIND: &'static str = "unregistered";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        unreachable!("never registered")
    }
}

/// Always fails with its message.
#[derive(Serialize, Deserialize)]
pub struct Fail {
    pub message: String,
}

impl Job for Fail {
    const KIND: &'static str = "fail";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        Err(JobError::new("test_failure", self.message.clone()))
    }
    fn options() -> JobOptions {
        JobOptions::new().max_attempts(1)
    }
}

/// Always panics with its message.
#[derive(Serialize, Deserialize)]
pub struct Panic {
    pub message: String,
}

impl Job for Panic {
    const KIND: &'static str = "panic";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        panic!("{}", self.message)
    }
    fn options() -> JobOptions {
        JobOptions::new().max_attempts(1)
    }
}

/// Sleeps, then returns how long it slept. Ignores cancellation.
#[derive(Serialize, Deserialize)]
pub struct Sleep {
    pub ms: u64,
}

impl Job for Sleep {
    const KIND: &'static str = "sleep";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        std::thread::sleep(Duration::from_millis(self.ms));
        Ok(serde_json::json!(self.ms))
    }
}

/// Counts its executions in this process, under `key`.
#[derive(Serialize, Deserialize)]
pub struct Count {
    pub key: String,
}

static COUNTS: Mutex<Option<HashMap<String, HashMap<i64, u32>>>> = Mutex::new(None);

impl Job for Count {
    const KIND: &'static str = "count";
    fn perform(&self, ctx: &JobContext) -> JobResult {
        let mut counts = COUNTS.lock().unwrap();
        *counts
            .get_or_insert_with(HashMap::new)
            .entry(self.key.clone())
            .or_default()
            .entry(ctx.job_id())
            .or_default() += 1;
        Ok(serde_json::Value::Null)
    }
}

/// Executions per job id counted under `key`.
pub fn counts(key: &str) -> HashMap<i64, u32> {
    COUNTS
        .lock()
        .unwrap()
        .as_ref()
        .and_then(|c| c.get(key).cloned())
        .unwrap_or_default()
}

/// Appends a `start` row to `test_ledger`, sleeps `sleep_ms` (ignoring
/// cancellation), then appends an `end` row.
#[derive(Serialize, Deserialize)]
pub struct Ledger {
    pub url: String,
    pub n: i64,
    pub sleep_ms: u64,
}

thread_local! {
    /// Each thread's connection per URL, with when it was last used.
    static CONNS: RefCell<HashMap<String, (TestConn, Instant)>> = RefCell::new(HashMap::new());
}

/// How long a ledger connection may sit idle before it is checked.
const LEDGER_IDLE_CHECK: Duration = Duration::from_secs(1);

/// Whether `conn` still answers.
fn answers(conn: &mut TestConn) -> bool {
    match conn {
        #[cfg(feature = "postgres")]
        TestConn::Pg(c) => diesel::sql_query("SELECT 1").execute(c).is_ok(),
        #[cfg(feature = "sqlite")]
        TestConn::Sqlite(c) => diesel::sql_query("SELECT 1").execute(c).is_ok(),
        #[cfg(feature = "mysql")]
        TestConn::Mysql(c) => diesel::sql_query("SELECT 1").execute(c).is_ok(),
    }
}

/// Appends a ledger row through this thread's connection to `url`. A
/// connection that failed is dropped (the next append opens another), and
/// one idle for a while is checked first: it may have died meanwhile (a
/// partition, a restarted server) and only a statement that may have
/// reached the server should fail the job.
pub fn ledger_append(url: &str, job_id: i64, n: i64, event: &str) {
    // The moment of the event, not of the write (opening a connection
    // takes milliseconds).
    let at = now_us();
    CONNS.with(|conns| {
        let mut conns = conns.borrow_mut();
        let mut conn = match conns.remove(url) {
            Some((mut conn, used)) => {
                if used.elapsed() < LEDGER_IDLE_CHECK || answers(&mut conn) {
                    conn
                } else {
                    drop(conn);
                    TestConn::open(url)
                }
            }
            None => TestConn::open(url),
        };
        // A panic here drops the connection with the unwinding.
        conn.execute(&format!(
            "INSERT INTO test_ledger (job_id, n, pid, event, at_us) VALUES ({job_id}, {n}, {}, '{event}', {at})",
            std::process::id(),
        ));
        conns.insert(url.to_string(), (conn, Instant::now()));
    });
}

impl Job for Ledger {
    const KIND: &'static str = "ledger";
    fn perform(&self, ctx: &JobContext) -> JobResult {
        ledger_append(&self.url, ctx.job_id(), self.n, "start");
        if self.sleep_ms > 0 {
            std::thread::sleep(Duration::from_millis(self.sleep_ms));
        }
        ledger_append(&self.url, ctx.job_id(), self.n, "end");
        Ok(serde_json::json!({ "n": self.n }))
    }
}

/// Appends a `tx` row to `test_ledger` and records its success in one
/// transaction (`JobContext::complete_in_transaction`): the row exists
/// exactly when the job succeeded. Its first run (attempt 1, never
/// stalled) writes its pid to `marker`, if given, inside the transaction
/// and sleeps `sleep_ms` there before the commit; with `refuse_first` it
/// then returns an error, which rolls the row back. Before its
/// transaction it may wait (up to 20 s) for an operator's cancel
/// (`wait_for_cancel`), or move its own claim to another process id
/// through a connection of its own to `move_claim` (as if its process had
/// been pruned and the job claimed again).
#[derive(Serialize, Deserialize, Default)]
pub struct TxLedger {
    pub n: i64,
    pub sleep_ms: u64,
    pub marker: Option<String>,
    pub refuse_first: bool,
    pub wait_for_cancel: bool,
    pub move_claim: Option<String>,
    /// The first run panics inside its transaction, after its write.
    pub panic_first: bool,
}

impl Job for TxLedger {
    const KIND: &'static str = "tx_ledger";
    fn perform(&self, ctx: &JobContext) -> JobResult {
        let first = ctx.attempt() == 1 && ctx.stalled_count() == 0;
        let waited = Instant::now();
        while self.wait_for_cancel
            && !ctx.is_cancelled_by_operator()
            && waited.elapsed() < Duration::from_secs(20)
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        if let Some(url) = &self.move_claim {
            TestConn::open(url).execute(&format!(
                "UPDATE solidq_claimed_executions SET process_id = process_id + 1000000 WHERE job_id = {}",
                ctx.job_id()
            ));
        }
        ctx.complete_in_transaction(|conn| {
            diesel::sql_query(format!(
                "INSERT INTO test_ledger (job_id, n, pid, event, at_us) VALUES ({}, {}, {}, 'tx', {})",
                ctx.job_id(),
                self.n,
                std::process::id(),
                now_us()
            ))
            .execute(conn)?;
            if first {
                if let Some(marker) = &self.marker {
                    std::fs::write(marker, std::process::id().to_string())?;
                }
                std::thread::sleep(Duration::from_millis(self.sleep_ms));
                if self.refuse_first {
                    return Err(JobError::new("refused", "the first run refuses"));
                }
                if self.panic_first {
                    panic!("the first run panics in its transaction");
                }
            }
            Ok(serde_json::json!({ "n": self.n }))
        })
    }
}

/// Appends a `start` row to `test_ledger`, then waits until it is asked
/// to stop (`ctx.is_cancelled()`): appends `interrupted` and hands itself
/// back ([`JobError::interrupted`]). Run again after that (`snoozes` > 0),
/// it appends `end` at once.
#[derive(Serialize, Deserialize)]
pub struct CancelLedger {
    pub url: String,
}

impl Job for CancelLedger {
    const KIND: &'static str = "cancel_ledger";
    fn perform(&self, ctx: &JobContext) -> JobResult {
        ledger_append(&self.url, ctx.job_id(), 0, "start");
        if ctx.snoozes() == 0 {
            while !ctx.is_cancelled() {
                std::thread::sleep(Duration::from_millis(10));
            }
            ledger_append(&self.url, ctx.job_id(), 0, "interrupted");
            return Err(JobError::interrupted());
        }
        ledger_append(&self.url, ctx.job_id(), 0, "end");
        Ok(serde_json::Value::Null)
    }
}

/// Appends `start <job id> <pid>` to the file at `path` (one `O_APPEND`
/// write): a ledger of every start, fast enough (microseconds) for the job
/// to be claimed ahead, unlike a ledger row.
#[derive(Serialize, Deserialize)]
pub struct FileLedger {
    pub path: String,
    /// How long the job runs after recording its start.
    #[serde(default)]
    pub sleep_ms: u64,
}

impl Job for FileLedger {
    const KIND: &'static str = "file_ledger";
    fn perform(&self, ctx: &JobContext) -> JobResult {
        use std::io::Write;
        let line = format!("start {} {}\n", ctx.job_id(), std::process::id());
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&self.path)
            .and_then(|mut file| file.write_all(line.as_bytes()))?;
        std::thread::sleep(std::time::Duration::from_millis(self.sleep_ms));
        Ok(serde_json::Value::Null)
    }
}

/// A [`FileLedger`] whose arguments carry `pad`, bytes that only take
/// room (a full disk's tests).
#[derive(Serialize, Deserialize)]
pub struct PaddedLedger {
    pub path: String,
    pub pad: String,
}

impl Job for PaddedLedger {
    const KIND: &'static str = "padded_ledger";
    fn perform(&self, ctx: &JobContext) -> JobResult {
        FileLedger {
            path: self.path.clone(),
            sleep_ms: 0,
        }
        .perform(ctx)
    }
}

/// The starts a [`FileLedger`] file holds: (job id, pid) in order.
pub fn file_ledger_starts(path: &std::path::Path) -> Vec<(i64, u32)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let mut words = line.split(' ').skip(1);
            Some((words.next()?.parse().ok()?, words.next()?.parse().ok()?))
        })
        .collect()
}

/// Appends a `start` row to `test_ledger`, then SIGKILLs its own process:
/// a poison job.
#[derive(Serialize, Deserialize)]
pub struct Suicide {
    pub url: String,
}

impl Job for Suicide {
    const KIND: &'static str = "suicide";
    fn perform(&self, ctx: &JobContext) -> JobResult {
        ledger_append(&self.url, ctx.job_id(), 0, "start");
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
        unreachable!("SIGKILL is not survivable")
    }
}

/// Appends a `start` row to `test_ledger`, then aborts its process
/// (SIGABRT): a poison job, as a segfault in a C library or a `panic =
/// "abort"` build would be.
#[derive(Serialize, Deserialize)]
pub struct Abort {
    pub url: String,
}

impl Job for Abort {
    const KIND: &'static str = "abort";
    fn perform(&self, ctx: &JobContext) -> JobResult {
        ledger_append(&self.url, ctx.job_id(), 0, "start");
        std::process::abort()
    }
}

/// Records each attempt in the ledger (`n` = attempt) and fails the first
/// `fail_times` of them.
#[derive(Serialize, Deserialize)]
pub struct Flaky {
    pub url: String,
    pub fail_times: u32,
}

impl Job for Flaky {
    const KIND: &'static str = "flaky";
    fn perform(&self, ctx: &JobContext) -> JobResult {
        ledger_append(&self.url, ctx.job_id(), i64::from(ctx.attempt()), "start");
        if ctx.attempt() <= self.fail_times {
            return Err(JobError::new(
                "flaky",
                format!("attempt {} failed", ctx.attempt()),
            ));
        }
        Ok(serde_json::json!({ "attempt": ctx.attempt() }))
    }
}

/// Always fails; its own `retry_delay` waits 150 ms × the attempt number,
/// whatever its backoff policy says.
#[derive(Serialize, Deserialize)]
pub struct CustomBackoff;

impl Job for CustomBackoff {
    const KIND: &'static str = "custom_backoff";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        Err(JobError::msg("always"))
    }
    fn options() -> JobOptions {
        JobOptions::new().max_attempts(3)
    }
    fn retry_delay(
        attempt: u32,
        _error: &solidq::ErrorInfo,
        _policy: &solidq::Backoff,
    ) -> Duration {
        Duration::from_millis(150 * u64::from(attempt))
    }
}

/// Fails with an error that says "do not retry".
#[derive(Serialize, Deserialize)]
pub struct Hopeless;

impl Job for Hopeless {
    const KIND: &'static str = "hopeless";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        Err(JobError::new("invalid_input", "no point trying again").no_retry())
    }
    fn options() -> JobOptions {
        JobOptions::new().max_attempts(5)
    }
}

/// Job types under a concurrency limit: like [`Ledger`] (a `start` and an
/// `end` row around a sleep), keyed by `key`. The sleep happens only on the
/// first run: a rerun after its process died ends at once. A negative `n`
/// fails its first attempt for good.
macro_rules! limited_job {
    ($(#[$doc:meta])* $name:ident, $kind:literal, $limit:expr) => {
        $(#[$doc])*
        #[derive(Serialize, Deserialize)]
        pub struct $name {
            pub url: String,
            pub n: i64,
            pub sleep_ms: u64,
            pub key: String,
        }

        impl Job for $name {
            const KIND: &'static str = $kind;
            fn perform(&self, ctx: &JobContext) -> JobResult {
                ledger_append(&self.url, ctx.job_id(), self.n, "start");
                if self.n < 0 && ctx.attempt() == 1 {
                    ledger_append(&self.url, ctx.job_id(), self.n, "end");
                    return Err(JobError::new("negative", "n < 0 fails its first attempt").no_retry());
                }
                if ctx.stalled_count() == 0 {
                    std::thread::sleep(Duration::from_millis(self.sleep_ms));
                }
                ledger_append(&self.url, ctx.job_id(), self.n, "end");
                Ok(serde_json::json!({ "n": self.n }))
            }
            fn options() -> JobOptions {
                JobOptions::new().concurrency($limit)
            }
            fn concurrency_key(&self) -> Option<String> {
                Some(self.key.clone())
            }
        }
    };
}

limited_job!(
    /// At most one per key.
    LimitedOne,
    "limited_one",
    ConcurrencyLimit::new(1).duration(Duration::from_secs(120))
);
limited_job!(
    /// At most three per key.
    LimitedThree,
    "limited_three",
    ConcurrencyLimit::new(3).duration(Duration::from_secs(120))
);
limited_job!(
    /// At most one per key; the others are discarded.
    LimitedDiscard,
    "limited_discard",
    ConcurrencyLimit::new(1).on_conflict(OnConflict::Discard)
);
limited_job!(
    /// At most one per key, a slot presumed abandoned after 2 s.
    LimitedBrief,
    "limited_brief",
    ConcurrencyLimit::new(1).duration(Duration::from_secs(2))
);

/// Ten starts a second per `key` (all of them share one limit without a
/// key): records its start in the ledger, then ends.
#[derive(Serialize, Deserialize)]
pub struct Rated {
    pub url: String,
    pub n: i64,
    pub key: Option<String>,
}

impl Job for Rated {
    const KIND: &'static str = "rated";
    fn perform(&self, ctx: &JobContext) -> JobResult {
        ledger_append(&self.url, ctx.job_id(), self.n, "start");
        Ok(serde_json::Value::Null)
    }
    fn options() -> JobOptions {
        JobOptions::new().rate_limit(solidq::RateLimit::new(10, Duration::from_secs(1)))
    }
    fn rate_key(&self) -> Option<String> {
        self.key.clone()
    }
}

/// Ten starts a second: appends `start <job id> <pid> <µs>` to the file at
/// `path` (one `O_APPEND` write), which needs no database (for outages).
#[derive(Serialize, Deserialize)]
pub struct RatedFile {
    pub path: String,
}

impl Job for RatedFile {
    const KIND: &'static str = "rated_file";
    fn perform(&self, ctx: &JobContext) -> JobResult {
        use std::io::Write;
        let line = format!(
            "start {} {} {}\n",
            ctx.job_id(),
            std::process::id(),
            super::now_us()
        );
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&self.path)
            .and_then(|mut file| file.write_all(line.as_bytes()))?;
        Ok(serde_json::Value::Null)
    }
    fn options() -> JobOptions {
        JobOptions::new().rate_limit(solidq::RateLimit::new(10, Duration::from_secs(1)))
    }
}

/// A worker knowing every test job type.
pub fn worker(queue: Queue) -> Worker {
    register(Worker::new(queue))
}

/// Teaches `worker` every test job type.
pub fn register(worker: Worker) -> Worker {
    worker
        .register::<Echo>()
        .register::<Fail>()
        .register::<Panic>()
        .register::<Count>()
        .register::<Ledger>()
        .register::<Sleep>()
        .register::<Suicide>()
        .register::<Abort>()
        .register::<Flaky>()
        .register::<CustomBackoff>()
        .register::<Hopeless>()
        .register::<LimitedOne>()
        .register::<LimitedThree>()
        .register::<LimitedDiscard>()
        .register::<LimitedBrief>()
        .register::<FileLedger>()
        .register::<Stepper>()
        .register::<Rated>()
        .register::<RatedFile>()
        .register::<HoldLock>()
        .register::<PaddedLedger>()
        .register::<CancelLedger>()
        .register::<TxLedger>()
}

/// Takes SQLite's write lock on `db` through a connection of its own
/// (`BEGIN IMMEDIATE` and a write), says so by writing its pid to
/// `marker`, holds the lock `hold_ms`, then commits. A test freezes the
/// process while it holds the lock: every other process then finds the
/// database locked, as behind a frozen writer.
#[derive(Serialize, Deserialize)]
pub struct HoldLock {
    pub db: String,
    pub marker: String,
    pub hold_ms: u64,
}

impl Job for HoldLock {
    const KIND: &'static str = "hold_lock";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        #[cfg(feature = "sqlite")]
        {
            use diesel::Connection;
            use diesel::connection::SimpleConnection;
            let mut conn = diesel::SqliteConnection::establish(&self.db)
                .map_err(|e| JobError::new("open", e.to_string()))?;
            conn.batch_execute(
                "PRAGMA busy_timeout = 60000; BEGIN IMMEDIATE; \
                 CREATE TABLE IF NOT EXISTS test_held (pid INTEGER); \
                 INSERT INTO test_held VALUES (1);",
            )
            .map_err(|e| JobError::new("lock", e.to_string()))?;
            std::fs::write(&self.marker, std::process::id().to_string())?;
            std::thread::sleep(Duration::from_millis(self.hold_ms));
            conn.batch_execute("COMMIT")
                .map_err(|e| JobError::new("commit", e.to_string()))?;
        }
        Ok(serde_json::Value::Null)
    }
}

/// A resumable job of three steps: `one`, then `two` over `items` items
/// (checkpointing after each, `item_ms` apiece), then `three`. Each line of
/// its ledger file names what ran and in which process: `one PID`,
/// `two from CURSOR PID`, `item N PID`, `three PID`. On its first run of
/// step two it fails (`fail_at`), snoozes (`snooze_at`) or panics
/// (`panic_at`) at that item, after checkpointing it. Asked to stop, it
/// hands itself back before its next item.
#[derive(Serialize, Deserialize, Default)]
pub struct Stepper {
    pub path: String,
    pub items: u64,
    #[serde(default)]
    pub item_ms: u64,
    #[serde(default)]
    pub fail_at: Option<u64>,
    #[serde(default)]
    pub snooze_at: Option<u64>,
    #[serde(default)]
    pub panic_at: Option<u64>,
}

impl Stepper {
    fn note(&self, line: &str) {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .expect("stepper ledger");
        // One write of the whole line (O_APPEND): formatted into the file
        // directly, it went out in pieces, and a SIGKILL between them left
        // a line without its end that the resumed run's first line joined.
        let text = format!("{line} {}\n", std::process::id());
        file.write_all(text.as_bytes())
            .expect("stepper ledger write");
    }
}

impl Job for Stepper {
    const KIND: &'static str = "stepper";
    fn perform(&self, ctx: &JobContext) -> JobResult {
        ctx.step("one", |_| {
            self.note("one");
            Ok(())
        })?;
        ctx.step("two", |s| {
            let from: u64 = s.cursor().unwrap_or(0);
            self.note(&format!("two from {from}"));
            let first_run = from == 0;
            for item in from..self.items {
                if ctx.is_cancelled() {
                    return Err(JobError::interrupted());
                }
                self.note(&format!("item {item}"));
                std::thread::sleep(Duration::from_millis(self.item_ms));
                s.checkpoint(item + 1);
                if first_run && self.fail_at == Some(item) {
                    return Err(JobError::new(
                        "stepper",
                        format!("failed after item {item}"),
                    ));
                }
                if first_run && self.snooze_at == Some(item) {
                    return Err(JobError::snooze(Duration::ZERO));
                }
                if first_run && self.panic_at == Some(item) {
                    panic!("stepper panicked after item {item}");
                }
            }
            Ok(())
        })?;
        ctx.step("three", |_| {
            self.note("three");
            Ok(())
        })?;
        Ok(serde_json::json!(ctx.finished_steps()))
    }
}

/// The lines of a [`Stepper`]'s ledger, without their pids.
pub fn stepper_lines(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            l.rsplit_once(' ')
                .map_or(l, |(line, _pid)| line)
                .to_string()
        })
        .collect()
}
