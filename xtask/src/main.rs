//! `cargo xtask test [-- ARGS]`: solidq's tests on a machine that may have
//! nothing but Rust.
//!
//! It runs `cargo test` in the workspace root with the features this
//! machine can build, and says loudly what it leaves out and why:
//!
//! * `mysql` only when `pkg-config` finds the MariaDB (or MySQL) client
//!   library, which that feature links (Debian: `libmariadb-dev`);
//! * `bundled-libpq` (libpq built from source) when `pkg-config` finds no
//!   system libpq (Debian: `libpq-dev`), so the PostgreSQL backend builds
//!   and its tests run against a server if one answers.
//!
//! The tests themselves skip each PostgreSQL or MySQL test whose server
//! does not answer with a `*** SKIPPED` line (tests/common/mod.rs), unless
//! `SOLIDQ_REQUIRE_POSTGRES=1` / `SOLIDQ_REQUIRE_MYSQL=1`; this command
//! says up front which servers it found. Arguments after `--` go to
//! `cargo test` (`cargo xtask test -- outage::`), in one run.
//!
//! Without arguments it builds every test binary once, then runs the
//! suite in two phases: every test that may run beside others (the
//! integration tests `RUST_TEST_THREADS` at a time, unless set 2 to 4 by
//! what the servers' `max_connections` allow, with the
//! other test binaries and the doctests beside them), then the few that
//! measure a rate or a time (`::alone::` in their names), three at a time
//! with nothing else running.

use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

const POSTGRES_DEFAULT: &str = "postgres://postgres@127.0.0.1:5432/postgres";
const MYSQL_DEFAULT: &str = "mysql://root@127.0.0.1:3306/test";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("test") => test(&args[1..]),
        _ => {
            eprintln!("usage: cargo xtask test [-- CARGO TEST ARGS]");
            ExitCode::from(2)
        }
    }
}

fn test(rest: &[String]) -> ExitCode {
    let rest: Vec<String> = match rest.first().map(String::as_str) {
        Some("--") => rest[1..].to_vec(),
        _ => rest.to_vec(),
    };
    let mut features = Vec::new();

    if pkg_config("libmariadb") || pkg_config("mysqlclient") {
        features.push("mysql");
        println!("xtask: MySQL/MariaDB client library found: testing with --features mysql");
    } else {
        loud(
            "the MySQL/MariaDB backend is not built, so none of its tests run: pkg-config finds \
             no libmariadb or mysqlclient (Debian: apt-get install pkg-config libmariadb-dev)",
        );
    }
    if !pkg_config("libpq") {
        features.push("bundled-libpq");
        println!(
            "xtask: pkg-config finds no system libpq: building it from source \
             (--features bundled-libpq)"
        );
    }

    probe(
        "PostgreSQL",
        "SOLIDQ_TEST_POSTGRES_URL",
        POSTGRES_DEFAULT,
        5432,
        "SOLIDQ_REQUIRE_POSTGRES",
    );
    if features.contains(&"mysql") {
        probe(
            "MySQL",
            "SOLIDQ_TEST_MYSQL_URL",
            MYSQL_DEFAULT,
            3306,
            "SOLIDQ_REQUIRE_MYSQL",
        );
    }

    // As many tests at a time as the servers' connections allow, 2 to 4
    // unless told otherwise: each holds pools on both servers (about 50
    // connections at most on PostgreSQL), so two fit in their defaults
    // (PostgreSQL 100, MariaDB 151), and four in what `.ci/run` sets
    // (400 and 500).
    let threads = std::env::var("RUST_TEST_THREADS")
        .unwrap_or_else(|_| default_threads(features.contains(&"mysql")).to_string());
    let features: Vec<String> = if features.is_empty() {
        Vec::new()
    } else {
        vec!["--features".into(), features.join(",")]
    };
    if !rest.is_empty() {
        // A run of the caller's choosing: as asked, in one go.
        return cargo_test(&features, &rest, &threads);
    }
    suite(&features, &threads)
}

/// The whole suite, built once, then run in two phases:
///
/// 1. every test that may run beside others: the integration binary
///    (`it`, `threads` tests at a time, without its `::alone::` tests)
///    and, beside it, each other test binary one after another (the unit
///    tests, `deadlocks`), then the doctests; `cargo test` would run the
///    binaries one after another, and `deadlocks` alone takes about 40 s
///    of mostly waiting;
/// 2. the tests that measure a rate or a time (`::alone::` in their
///    names, tests/it/common/mod.rs), one at a time, so none of them
///    waits for the machine to empty first.
fn suite(features: &[String], threads: &str) -> ExitCode {
    let binaries = match build(features) {
        Ok(binaries) => binaries,
        Err(code) => return code,
    };
    let (it, others): (Vec<&TestBinary>, Vec<&TestBinary>) =
        binaries.iter().partition(|b| b.name == "it");
    let Some(it) = it.first() else {
        eprintln!("xtask: cargo built no `it` test binary");
        return ExitCode::FAILURE;
    };
    let started = Instant::now();
    // The longest tests first, in a process of their own, so they do not
    // start last and end the phase alone.
    let mut first_args = Vec::new();
    let mut rest_args = vec!["--skip", "::alone::"];
    for filter in FIRST {
        first_args.push(*filter);
        rest_args.extend(["--skip", filter]);
    }
    first_args.extend(["--skip", "::alone::"]);
    let first = it.spawn(&first_args, &FIRST_AT_ONCE.to_string());
    let shared = it.spawn(&rest_args, threads);
    // Beside it: the other binaries in turn, their output held and shown
    // whole when each ends (so it does not interleave with `it`'s).
    let mut failed = Vec::new();
    for binary in &others {
        let output = binary.output(&[], "4");
        print!("{output}");
        if !output.passed {
            failed.push(binary.label());
        }
    }
    if !doctests(features) {
        failed.push("the doctests".into());
    }
    for (lane, child) in [("the longest tests", first), ("shared phase", shared)] {
        wait_lane(it, lane, child, &mut failed);
    }
    println!("xtask: phase 1 (shared) took {:.1?}", started.elapsed());
    if !failed.is_empty() {
        eprintln!("xtask: failed: {}", failed.join(", "));
        return ExitCode::FAILURE;
    }
    let started = Instant::now();
    // The tests that run with nothing at all beside them first, one after
    // another (run among the others, each would wait for the running
    // ones to end and leave their places empty meanwhile), then the rest.
    // The longest of the rest start at once in a lane of their own, one
    // at a time, beside the others `ALONE_AT_ONCE` at a time: in name
    // order they would start last and end the phase alone. They measure
    // no rate or time of their own (they are alone for the kills' sake).
    let mut rest_args = vec!["::alone::", "--skip", "::alone::exclusive::"];
    for filter in ALONE_FIRST {
        rest_args.extend(["--skip", filter]);
    }
    let lanes: [&[(&str, Vec<&str>, usize)]; 2] = [
        &[("exclusive", vec!["::alone::exclusive::"], 1)],
        &[
            ("alone, longest", ALONE_FIRST.to_vec(), 1),
            ("alone", rest_args, ALONE_AT_ONCE),
        ],
    ];
    let mut failed = Vec::new();
    for lanes in lanes {
        let children: Vec<_> = lanes
            .iter()
            .map(|(lane, args, at_once)| {
                let child = it
                    .command(args, &at_once.to_string())
                    .env("SOLIDQ_TEST_ALONE_AT_ONCE", at_once.to_string())
                    .spawn();
                (lane, child)
            })
            .collect();
        for (lane, child) in children {
            wait_lane(it, lane, child, &mut failed);
        }
    }
    println!("xtask: phase 2 (alone) took {:.1?}", started.elapsed());
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!("xtask: failed: {}", failed.join(", "));
        ExitCode::FAILURE
    }
}

/// Waits for a lane of `it` to end; adds it to `failed` unless it passed.
fn wait_lane(
    it: &TestBinary,
    lane: &str,
    child: std::io::Result<std::process::Child>,
    failed: &mut Vec<String>,
) {
    match child.and_then(|mut child| child.wait()) {
        Ok(status) if status.success() => {}
        Ok(_) => failed.push(format!("{} ({lane})", it.label())),
        Err(error) => {
            eprintln!("xtask: could not run {}: {error}", it.label());
            failed.push(it.label());
        }
    }
}

/// How many of the tests that measure a rate or a time run at once in
/// the second phase: each keeps its margins with two others beside it
/// (rates of ten a second, kills every 300 ms; the machine has two
/// cores), none with the full suite.
const ALONE_AT_ONCE: usize = 3;

/// The tests of the second phase that take longest (a fleet killed every
/// 300 ms for 10 s, then drained: 15 to 30 s each), by name. (The
/// exactly-once chaos runs, 10,000 jobs through kills every 300 ms, are
/// exclusive: beside them a hand-back timed at a second took four on
/// MySQL, and a rate of ten a second gave 18 starts in 3.5 s.)
const ALONE_FIRST: &[&str] = &["supervisor::chaos::"];

/// The integration tests that take longest and spend it waiting, by
/// name, run from the start in a lane of their own, [`FIRST_AT_ONCE`] at
/// a time: a browser clicking through the dashboard (each about 12 s
/// alone, 25 s in a full run), and schedules waiting for the clock's next
/// seconds (15 tests of 5 to 8 s). The other lane keeps the tests that
/// use the machine, `RUST_TEST_THREADS` at a time; the waiting ones
/// would otherwise fill its places at the end of the phase, when the
/// cores are idle.
const FIRST: &[&str] = &[
    "deploy::",
    "exit::",
    "outage::",
    "recurring::",
    "steps::",
    "supervisor::",
    "web_e2e::",
];

/// How many of the [`FIRST`] tests run at once.
const FIRST_AT_ONCE: usize = 3;

/// A test binary cargo built, and the package directory it runs in (as
/// `cargo test` runs it).
struct TestBinary {
    name: String,
    kind: String,
    executable: PathBuf,
    dir: PathBuf,
}

/// What a test binary printed, and whether it passed.
struct Output {
    text: String,
    passed: bool,
}

impl std::fmt::Display for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl TestBinary {
    fn label(&self) -> String {
        format!("{} ({})", self.name, self.kind)
    }

    fn command(&self, args: &[&str], threads: &str) -> Command {
        let mut command = Command::new(&self.executable);
        command
            .args(args)
            .current_dir(&self.dir)
            .env("RUST_TEST_THREADS", threads);
        println!(
            "xtask: RUST_TEST_THREADS={threads} {}{}",
            self.label(),
            args.iter().map(|a| format!(" {a}")).collect::<String>()
        );
        command
    }

    fn spawn(&self, args: &[&str], threads: &str) -> std::io::Result<std::process::Child> {
        self.command(args, threads).spawn()
    }

    fn output(&self, args: &[&str], threads: &str) -> Output {
        match self.command(args, threads).output() {
            Ok(output) => Output {
                text: format!(
                    "{}{}",
                    String::from_utf8_lossy(&output.stdout),
                    String::from_utf8_lossy(&output.stderr)
                ),
                passed: output.status.success(),
            },
            Err(error) => Output {
                text: format!("xtask: could not run {}: {error}\n", self.label()),
                passed: false,
            },
        }
    }
}

/// Builds every test binary of the workspace's default members (`cargo
/// test --no-run`), and lists them.
fn build(features: &[String]) -> Result<Vec<TestBinary>, ExitCode> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    println!(
        "xtask: cargo test --no-run{}",
        features.iter().map(|a| format!(" {a}")).collect::<String>()
    );
    let output = Command::new(cargo)
        .current_dir(workspace_root())
        .args([
            "test",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ])
        .args(features)
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|error| {
            eprintln!("xtask: could not run cargo: {error}");
            ExitCode::FAILURE
        })?;
    if !output.status.success() {
        return Err(ExitCode::from(
            output.status.code().unwrap_or(1).clamp(1, 255) as u8,
        ));
    }
    let mut binaries = Vec::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if message["reason"] != "compiler-artifact" || message["profile"]["test"] != true {
            continue;
        }
        let Some(executable) = message["executable"].as_str() else {
            continue;
        };
        let manifest = PathBuf::from(message["manifest_path"].as_str().unwrap_or_default());
        binaries.push(TestBinary {
            name: message["target"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            kind: message["target"]["kind"][0]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            executable: PathBuf::from(executable),
            dir: manifest.parent().map(PathBuf::from).unwrap_or_default(),
        });
    }
    Ok(binaries)
}

/// The doctests (`cargo test --doc`), with the features the binaries
/// were built with.
fn doctests(features: &[String]) -> bool {
    cargo_test(features, &["--doc".to_string()], "2") == ExitCode::SUCCESS
}

/// Runs `cargo test FEATURES ARGS` in the workspace root, `threads` tests
/// at a time.
fn cargo_test(features: &[String], args: &[String], threads: &str) -> ExitCode {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .current_dir(workspace_root())
        .arg("test")
        .args(features)
        .args(args)
        .env("RUST_TEST_THREADS", threads);
    println!(
        "xtask: RUST_TEST_THREADS={threads} cargo test{}",
        features
            .iter()
            .chain(args)
            .map(|a| format!(" {a}"))
            .collect::<String>()
    );
    match command.status() {
        Ok(status) if status.success() => ExitCode::SUCCESS,
        Ok(status) => ExitCode::from(status.code().unwrap_or(1).clamp(1, 255) as u8),
        Err(error) => {
            eprintln!("xtask: could not run cargo: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root: the parent of this crate's directory.
fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}

fn loud(message: &str) {
    eprintln!("*** SKIPPED: {message}");
}

/// Whether `pkg-config` knows `library` (false when pkg-config is missing).
fn pkg_config(library: &str) -> bool {
    Command::new("pkg-config")
        .args(["--exists", library])
        .status()
        .map(|status| status.success())
        .unwrap_or(false)
}

/// How many integration tests run at once when `RUST_TEST_THREADS` is
/// not set: one per 100 connections PostgreSQL allows and per 125 MySQL
/// allows (`max_connections`, read with `psql` and `mysql`; a limit that
/// cannot be read, no client installed or no server answering, counts as
/// 2), at least 2 and at most 4.
fn default_threads(mysql: bool) -> usize {
    let postgres_url =
        std::env::var("SOLIDQ_TEST_POSTGRES_URL").unwrap_or_else(|_| POSTGRES_DEFAULT.into());
    let mut fits = Vec::new();
    let postgres = Command::new("psql")
        .args([postgres_url.as_str(), "-tAc", "SHOW max_connections"])
        .stderr(std::process::Stdio::null())
        .output();
    // A limit that cannot be read counts as the default's two.
    match parsed(postgres) {
        Some(n) => fits.push(("PostgreSQL", Some(n), n / 100)),
        None => fits.push(("PostgreSQL", None, 2)),
    }
    if mysql {
        let url = std::env::var("SOLIDQ_TEST_MYSQL_URL").unwrap_or_else(|_| MYSQL_DEFAULT.into());
        let (host, port) = host_port(&url)
            .rsplit_once(':')
            .map(|(h, p)| (h.to_string(), p.to_string()))
            .unwrap_or_else(|| (host_port(&url), "3306".into()));
        let user = url
            .split_once("://")
            .and_then(|(_, rest)| rest.split_once('@'))
            .map(|(user, _)| user.split(':').next().unwrap_or("root").to_string())
            .unwrap_or_else(|| "root".into());
        let mut command = Command::new("mysql");
        command.args(["-h", &host, "-P", &port, "-u", &user, "-N", "-B"]);
        if let Some(password) = url
            .split_once("://")
            .and_then(|(_, rest)| rest.split_once('@'))
            .and_then(|(user, _)| user.split_once(':'))
            .map(|(_, password)| password.to_string())
        {
            command.env("MYSQL_PWD", password);
        }
        let output = command
            .args(["-e", "SELECT @@max_connections"])
            .stderr(std::process::Stdio::null())
            .output();
        match parsed(output) {
            Some(n) => fits.push(("MySQL", Some(n), n / 125)),
            None => fits.push(("MySQL", None, 2)),
        }
    }
    let threads = fits
        .iter()
        .map(|(_, _, fit)| *fit)
        .min()
        .unwrap_or(2)
        .clamp(2, 4);
    println!(
        "xtask: {threads} tests at a time (RUST_TEST_THREADS unset; max_connections: {})",
        fits.iter()
            .map(|(name, n, _)| match n {
                Some(n) => format!("{name} {n}"),
                None => format!("{name} not read"),
            })
            .collect::<Vec<_>>()
            .join(", ")
    );
    threads
}

/// The number a client printed, if it ran and printed one.
fn parsed(output: std::io::Result<std::process::Output>) -> Option<usize> {
    let output = output.ok().filter(|o| o.status.success())?;
    String::from_utf8_lossy(&output.stdout).trim().parse().ok()
}

/// Says up front whether the server of `variable` (or `default`) accepts
/// a TCP connection; its tests skip themselves loudly when it does not.
fn probe(name: &str, variable: &str, default: &str, default_port: u16, require: &str) {
    let url = std::env::var(variable).unwrap_or_else(|_| default.to_string());
    let answering = address(&url, default_port)
        .map(|addr| TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_ok())
        .unwrap_or(false);
    if answering {
        println!(
            "xtask: {name} answers at {} ({variable}): its tests run",
            host_port(&url)
        );
    } else {
        loud(&format!(
            "{name} does not answer at {} ({variable}): its tests will print `*** SKIPPED` and \
             pass without running (set {variable} to a server, or {require}=1 to fail instead)",
            host_port(&url),
        ));
    }
}

/// `host:port` of a `scheme://user:pw@host:port/db?…` URL (the first host
/// of a list).
fn host_port(url: &str) -> String {
    let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = after_scheme.split(['/', '?']).next().unwrap_or("");
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    host.split(',').next().unwrap_or("").to_string()
}

fn address(url: &str, default_port: u16) -> Option<SocketAddr> {
    let host = host_port(url);
    let with_port = if host.starts_with('[') {
        if host.contains("]:") {
            host
        } else {
            format!("{host}:{default_port}")
        }
    } else if host.contains(':') {
        host
    } else {
        format!("{host}:{default_port}")
    };
    with_port.to_socket_addrs().ok()?.next()
}
