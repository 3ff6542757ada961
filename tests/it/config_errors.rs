//! Bad configuration: `solidq supervisor` and `solidq check` print one
//! clear line naming the problem, exit non-zero, and start nothing.

use crate::common;

use std::path::Path;
use std::process::Command;

/// Runs `solidq <command> --config <file>`; returns (exit code, stderr).
fn solidq(command: &str, config: &Path) -> (i32, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_solidq"))
        .args([command, "--config"])
        .arg(config)
        .env_remove("SOLIDQ_DATABASE_URL")
        .env("RUST_LOG", "error")
        .output()
        .expect("run solidq");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn each_bad_configuration_gets_one_clear_line_and_starts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("started");
    let migrated = common::TestDb::sqlite();
    migrated.queue();
    let workers = format!(
        "[[workers]]\ncommand = [\"/bin/sh\", \"-c\", \"touch {}\"]\n",
        marker.display()
    );
    let good_db = format!("database_url = \"{}\"\n", migrated.url);
    let fresh_db = format!(
        "database_url = \"sqlite://{}\"\n",
        dir.path().join("fresh.sqlite3").display()
    );
    // An empty file is an SQLite database without tables; a missing one is
    // refused before anything could create it.
    std::fs::write(dir.path().join("fresh.sqlite3"), "").unwrap();
    let typo = dir.path().join("ordrs.sqlite3");
    // (name, file contents or None for a missing file, expected text, exit code)
    let cases: Vec<(&str, Option<String>, &str, i32)> = vec![
        ("missing file", None, "cannot read the file", 2),
        (
            "malformed toml",
            Some("database_url = \"x\n".into()),
            "line 1",
            2,
        ),
        (
            "unknown key",
            Some(format!("{good_db}shutdown_timout = \"1s\"\n{workers}")),
            "unknown field `shutdown_timout`",
            2,
        ),
        (
            "bad duration",
            Some(format!(
                "{good_db}shutdown_timeout = \"10 parsecs\"\n{workers}"
            )),
            "line 2",
            2,
        ),
        (
            "bad sqlite_synchronous",
            Some(format!(
                "{good_db}sqlite_synchronous = \"fsync\"\n{workers}"
            )),
            r#"invalid sqlite_synchronous "fsync": expected "normal" or "full""#,
            2,
        ),
        (
            "empty command",
            Some(format!("{good_db}[[workers]]\ncommand = []\n")),
            "workers[0].command is empty",
            2,
        ),
        (
            "zero threads",
            Some(format!("{good_db}{workers}threads = 0\n")),
            "workers[0].threads must be at least 1",
            2,
        ),
        (
            "bad queue",
            Some(format!("{good_db}{workers}queues = [\"a b\"]\n")),
            "workers[0].queues",
            2,
        ),
        (
            "missing program",
            Some(format!(
                "{good_db}[[workers]]\ncommand = [\"/nonexistent/app\", \"work\"]\n"
            )),
            "\"/nonexistent/app\" is not an executable file",
            2,
        ),
        (
            "bad cron field",
            Some(format!(
                "{good_db}{workers}[recurring.nightly]\nkind = \"export\"\nschedule = \"0 30 25 * * ?\"\n"
            )),
            "recurring task \"nightly\": cron expression \"0 30 25 * * ?\": bad hour field \"25\"",
            2,
        ),
        (
            "bad cron field count",
            Some(format!(
                "{good_db}[recurring.nightly]\nkind = \"export\"\nschedule = \"0 30 2 *\"\n"
            )),
            "expected 5 fields",
            2,
        ),
        (
            "bad time zone",
            Some(format!(
                "{good_db}[recurring.nightly]\nkind = \"export\"\nschedule = \"30 2 * * *\"\ntimezone = \"Europe/Atlantis\"\n"
            )),
            "\"Europe/Atlantis\"",
            2,
        ),
        (
            "date in args",
            Some(format!(
                "{good_db}[recurring.nightly]\nkind = \"export\"\nschedule = \"30 2 * * *\"\nargs = {{ since = 2026-01-01 }}\n"
            )),
            "recurring task \"nightly\": args: 2026-01-01 is a TOML date",
            2,
        ),
        (
            "unknown recurring key",
            Some(format!(
                "{good_db}[recurring.nightly]\nkind = \"export\"\nschedule = \"30 2 * * *\"\nqueues = \"x\"\n"
            )),
            "unknown field `queues`",
            2,
        ),
        (
            "no database",
            Some(workers.clone()),
            "database_url is missing",
            2,
        ),
        (
            "bad url",
            Some(format!("database_url = \"redis://u:pw@h/db\"\n{workers}")),
            "unsupported scheme \"redis\"",
            2,
        ),
        (
            "unreachable database",
            Some(format!(
                "database_url = \"postgres://u:secret@127.0.0.1:1/db\"\n{workers}"
            )),
            "cannot connect to postgres://u:***@127.0.0.1:1/db",
            1,
        ),
        (
            "no such database file",
            Some(format!("database_url = \"{}\"\n{workers}", typo.display())),
            "no such database file",
            1,
        ),
        (
            "not migrated",
            Some(format!("{fresh_db}{workers}")),
            "run `solidq migrate",
            2,
        ),
    ];
    for (name, contents, expected, code) in cases {
        let path = dir.path().join(format!("{}.toml", name.replace(' ', "_")));
        if let Some(contents) = &contents {
            std::fs::write(&path, contents).unwrap();
        }
        for command in ["check", "supervisor"] {
            if name == "unreachable database" && command == "supervisor" {
                // Not a configuration error: the supervisor waits for it
                // (`a_supervisor_waits_for_a_database_that_does_not_answer`).
                continue;
            }
            let (exit, stderr) = solidq(command, &path);
            let lines: Vec<&str> = stderr.lines().collect();
            assert_eq!(
                lines.len(),
                1,
                "{name} ({command}): one line, got {stderr:?}"
            );
            assert!(
                lines[0].starts_with("solidq: "),
                "{name} ({command}): {stderr:?}"
            );
            assert!(
                lines[0].contains(expected),
                "{name} ({command}): expected {expected:?} in {stderr:?}"
            );
            assert!(
                !lines[0].contains("secret"),
                "{name}: the password leaked: {stderr:?}"
            );
            assert_eq!(
                exit, code,
                "{name} ({command}): exit code, stderr {stderr:?}"
            );
            assert!(!marker.exists(), "{name} ({command}) started a worker");
        }
    }
    assert_eq!(
        migrated.count("solidq_processes"),
        0,
        "no process registered"
    );
    assert!(!typo.exists(), "a mistyped SQLite path was created");
}

/// `SOLIDQ_SQLITE_SYNCHRONOUS` is read by every command that connects (and
/// by worker processes, through `QueueConfig::from_env`): a bad value is
/// one line naming the variable and the value, exit 2, nothing written.
#[test]
fn a_bad_sqlite_synchronous_in_the_environment_is_one_clear_line() {
    let db = common::TestDb::sqlite();
    db.queue();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("solidq.toml");
    std::fs::write(&config, format!("database_url = \"{}\"\n", db.url)).unwrap();
    let runs: [&[&str]; 3] = [
        &["queues", "--database-url", &db.url],
        &["enqueue", "echo", "--database-url", &db.url],
        &["check", "--config", config.to_str().unwrap()],
    ];
    for args in runs {
        let output = Command::new(env!("CARGO_BIN_EXE_solidq"))
            .args(args)
            .env_remove("SOLIDQ_DATABASE_URL")
            .env("SOLIDQ_SQLITE_SYNCHRONOUS", "fsync")
            .env("RUST_LOG", "error")
            .output()
            .expect("run solidq");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(
            stderr.trim(),
            r#"solidq: invalid SOLIDQ_SQLITE_SYNCHRONOUS "fsync": expected "normal" or "full""#,
            "{args:?}"
        );
    }
    assert_eq!(db.count("solidq_jobs"), 0, "nothing enqueued");
}

#[test]
fn check_accepts_a_good_configuration_without_starting_anything() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("started");
    let db = common::TestDb::sqlite();
    db.queue();
    let path = dir.path().join("solidq.toml");
    std::fs::write(
        &path,
        format!(
            "database_url = \"{}\"\n[[workers]]\ncommand = [\"/bin/sh\", \"-c\", \"touch {}\"]\nprocesses = 3\n",
            db.url,
            marker.display()
        ),
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_solidq"))
        .args(["check", "--config"])
        .arg(&path)
        .env_remove("SOLIDQ_DATABASE_URL")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains(": ok (3 worker processes"), "{stdout}");
    assert!(!marker.exists());
    assert_eq!(db.count("solidq_processes"), 0);
}

/// A database that does not answer at the start is an outage, not a bad
/// configuration: `solidq supervisor` says so in one line (the URL's
/// password redacted), starts nothing, waits, and stops at once on
/// SIGTERM with status 0. (`solidq check` exits 1 for it, above.)
#[test]
fn a_supervisor_waits_for_a_database_that_does_not_answer() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("started");
    let path = dir.path().join("solidq.toml");
    std::fs::write(
        &path,
        format!(
            "database_url = \"postgres://u:secret@127.0.0.1:1/db\"\n[[workers]]\ncommand = [\"/bin/sh\", \"-c\", \"touch {}\"]\n",
            marker.display()
        ),
    )
    .unwrap();
    /// Killed when the test ends, passed or not.
    struct Killed(std::process::Child);
    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let stderr_path = dir.path().join("stderr");
    let child = Command::new(env!("CARGO_BIN_EXE_solidq"))
        .args(["supervisor", "--config"])
        .arg(&path)
        .env_remove("SOLIDQ_DATABASE_URL")
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .expect("run solidq");
    let mut child = Killed(child);
    let said = || std::fs::read_to_string(&stderr_path).unwrap_or_default();
    common::wait_for(
        "the supervisor to say it waits",
        std::time::Duration::from_secs(20),
        || said().contains("waiting for it"),
    );
    assert_eq!(
        child.0.try_wait().unwrap(),
        None,
        "still running: {}",
        said()
    );
    let stderr = said();
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.contains("cannot connect to postgres://u:***@127.0.0.1:1/db"),
        "{stderr}"
    );
    assert!(!stderr.contains("secret"), "the password leaked: {stderr}");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.0.id() as i32, libc::SIGTERM) };
    let mut status = None;
    common::wait_for(
        "the supervisor to stop",
        std::time::Duration::from_secs(10),
        || {
            status = child.0.try_wait().unwrap();
            status.is_some()
        },
    );
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{}", said());
    assert!(!marker.exists(), "a worker was started");
}
