//! A private MariaDB server for tests that stop and start the database
//! (outages) or fill its disk: `mariadb-install-db` into a temporary
//! directory and `mariadbd` on a free port, with no grant tables (any
//! user connects) and no binary log. Run as root, the server runs as the
//! `mysql` user.
//!
//! Without the server binaries the test is skipped, loudly, unless
//! `SOLIDQ_REQUIRE_MYSQL` is set: then it fails.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{mysql_required, skip};

const MARIADBD: &str = "/usr/sbin/mariadbd";
const INSTALL_DB: &str = "/usr/bin/mariadb-install-db";

/// A MariaDB server of its own; killed when dropped.
pub struct PrivateMariaDb {
    dir: tempfile::TempDir,
    port: u16,
    /// Extra server options (e.g. InnoDB's data file size).
    options: Vec<String>,
    server: Option<Child>,
}

impl PrivateMariaDb {
    /// Creates and starts a server with extra `options`; `None` (skipped,
    /// loudly) without the server binaries.
    pub fn start(options: &[&str]) -> Option<PrivateMariaDb> {
        Self::start_in(None, options)
    }

    /// The same, its data directory under `parent` (a small filesystem).
    pub fn start_in(parent: Option<&Path>, options: &[&str]) -> Option<PrivateMariaDb> {
        if !Path::new(MARIADBD).exists() || !Path::new(INSTALL_DB).exists() {
            let message = format!("no MariaDB server binaries ({MARIADBD}, {INSTALL_DB})");
            assert!(!mysql_required(), "{message}");
            skip(&message);
            return None;
        }
        let mut builder = tempfile::Builder::new();
        builder.prefix("solidq-mariadb-");
        let dir = match parent {
            Some(parent) => builder.tempdir_in(parent),
            None => builder.tempdir(),
        }
        .expect("server directory");
        let mut server = PrivateMariaDb {
            dir,
            port: free_port(),
            options: options.iter().map(|o| o.to_string()).collect(),
            server: None,
        };
        std::fs::create_dir(server.data()).expect("data directory");
        std::fs::create_dir(server.tmp()).expect("temporary directory");
        let mut install = Command::new(INSTALL_DB);
        install
            .arg("--no-defaults")
            .arg(format!("--datadir={}", server.data().display()))
            // Two servers installing at once in the shared /tmp collide on
            // their temporary tables' files.
            .arg(format!("--tmpdir={}", server.tmp().display()))
            .args(["--skip-test-db", "--skip-name-resolve"])
            .args(server.options.iter());
        if is_root() {
            install.arg("--user=mysql");
            chown(server.dir.path());
        }
        let output = install.output().expect("run mariadb-install-db");
        assert!(
            output.status.success(),
            "mariadb-install-db failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        server.start_again();
        let output = Command::new("mariadb")
            .args(["-h127.0.0.1", "-uroot", "-e", "CREATE DATABASE test"])
            .arg(format!("-P{}", server.port))
            .output()
            .expect("run mariadb");
        assert!(
            output.status.success(),
            "CREATE DATABASE: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        Some(server)
    }

    /// The URL of its `test` database.
    pub fn url(&self) -> String {
        format!("mysql://root@127.0.0.1:{}/test", self.port)
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn tmp(&self) -> PathBuf {
        self.dir.path().join("tmp")
    }

    /// The server's error log.
    pub fn server_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// Starts the (stopped) server and waits until it accepts connections.
    pub fn start_again(&mut self) {
        let log = std::fs::File::create(self.dir.path().join("server.log")).expect("log");
        let mut command = Command::new(MARIADBD);
        command
            .arg("--no-defaults")
            .arg(format!("--datadir={}", self.data().display()))
            .arg(format!("--tmpdir={}", self.tmp().display()))
            .arg(format!("--port={}", self.port))
            .arg(format!(
                "--socket={}",
                self.dir.path().join("sock").display()
            ))
            .arg(format!(
                "--pid-file={}",
                self.dir.path().join("pid").display()
            ))
            .args([
                "--bind-address=127.0.0.1",
                "--skip-grant-tables",
                "--skip-log-bin",
                "--skip-name-resolve",
                "--innodb-buffer-pool-size=32M",
                "--innodb-log-file-size=16M",
                "--innodb-flush-log-at-trx-commit=2",
                "--max-connections=300",
            ])
            .args(self.options.iter())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        if is_root() {
            command.arg("--user=mysql");
        }
        self.server = Some(command.spawn().expect("start mariadbd"));
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if let Some(status) = self
                .server
                .as_mut()
                .and_then(|s| s.try_wait().ok().flatten())
            {
                panic!("mariadbd exited ({status}): {}", self.server_log());
            }
            assert!(
                Instant::now() < deadline,
                "mariadbd did not listen: {}",
                self.server_log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the server (SIGTERM: a clean shutdown that ends every
    /// session, as a restart does) and waits for it to exit.
    pub fn stop(&mut self) {
        if let Some(mut server) = self.server.take() {
            // SAFETY: signalling a child we own.
            unsafe {
                libc::kill(server.id() as i32, libc::SIGTERM);
            }
            let _ = server.wait();
        }
    }
}

impl Drop for PrivateMariaDb {
    fn drop(&mut self) {
        if let Some(mut server) = self.server.take() {
            let _ = server.kill();
            let _ = server.wait();
        }
    }
}

fn chown(path: &Path) {
    let status = Command::new("chown")
        .arg("-R")
        .arg("mysql:")
        .arg(path)
        .status()
        .expect("chown");
    assert!(status.success(), "chown {}", path.display());
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

impl PrivateMariaDb {
    /// Runs `sql` on its `test` database through the `mariadb` client;
    /// returns what it printed (tab-separated, no column names).
    pub fn client(&self, sql: &str) -> String {
        let output = Command::new("mariadb")
            .args(["-h127.0.0.1", "-uroot", "-N", "-B", "test", "-e", sql])
            .arg(format!("-P{}", self.port))
            .output()
            .expect("run mariadb");
        assert!(
            output.status.success(),
            "{sql}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    }
}
