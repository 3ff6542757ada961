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
//! Without arguments it runs the suite in two phases: every test that may
//! run beside others, `RUST_TEST_THREADS` at a time (2 unless set), then
//! the few that measure a rate or a time (`::alone::` in their names), one
//! at a time.

use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::Duration;

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

    // Two tests at a time unless told otherwise: each holds pools on both
    // servers, and two fit in their default max_connections (PostgreSQL
    // 100, MariaDB 151). `.ci/run` raises those and runs more.
    let threads = std::env::var("RUST_TEST_THREADS").unwrap_or_else(|_| "2".into());
    let features: Vec<String> = if features.is_empty() {
        Vec::new()
    } else {
        vec!["--features".into(), features.join(",")]
    };
    if !rest.is_empty() {
        // A run of the caller's choosing: as asked, in one go.
        return cargo_test(&features, &rest, &threads);
    }
    // The whole suite in two phases: first every test that may run beside
    // others, `threads` at a time; then the tests that measure a rate or a
    // time (`::alone::` in their names, tests/it/common/mod.rs), one at a
    // time, so none of them waits for the machine to empty first.
    let shared = ["--".to_string(), "--skip".into(), "::alone::".into()];
    let code = cargo_test(&features, &shared, &threads);
    if code != ExitCode::SUCCESS {
        return code;
    }
    let alone = [
        "--test".to_string(),
        "it".into(),
        "--".into(),
        "::alone::".into(),
    ];
    cargo_test(&features, &alone, "1")
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
