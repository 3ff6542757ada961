//! A private PostgreSQL server for tests that stop and start the database
//! (outages) or need servers of their own: `initdb` into a temporary
//! directory and `pg_ctl` on a free port, from the PostgreSQL server
//! binaries (`SOLIDQ_TEST_PG_BIN`, default `/usr/lib/postgresql/15/bin`).
//! Run as root, the server runs as the `postgres` user (`runuser`).
//!
//! Without the binaries the test is skipped, loudly, unless
//! `SOLIDQ_REQUIRE_POSTGRES` is set: then it fails.

use std::path::PathBuf;
use std::process::Command;

use super::{postgres_required, skip};

/// A PostgreSQL server of its own; stopped (immediately) when dropped.
pub struct PrivateCluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    /// Where the data directory is, when not in `dir` (a small
    /// filesystem); the WAL then stays in `dir`.
    data_parent: Option<PathBuf>,
}

impl PrivateCluster {
    /// Creates and starts a cluster; `None` (skipped, loudly) without the
    /// server binaries.
    pub fn start() -> Option<PrivateCluster> {
        PrivateCluster::create(None)
    }

    /// Like [`PrivateCluster::start`], its data directory (the tables, not
    /// the WAL) under `parent`: a small filesystem fills up with tables
    /// while the WAL still has room, as on a server with a WAL volume.
    pub fn start_with_data_in(parent: &std::path::Path) -> Option<PrivateCluster> {
        PrivateCluster::create(Some(parent.to_path_buf()))
    }

    fn create(data_parent: Option<PathBuf>) -> Option<PrivateCluster> {
        let bin = PathBuf::from(
            std::env::var("SOLIDQ_TEST_PG_BIN").unwrap_or("/usr/lib/postgresql/15/bin".into()),
        );
        if !bin.join("initdb").exists() {
            let message = format!("no PostgreSQL server binaries in {}", bin.display());
            assert!(!postgres_required(), "{message}");
            skip(&message);
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("solidq-cluster-")
            .tempdir()
            .expect("cluster directory");
        if is_root() {
            run(Command::new("chown").arg("postgres:").arg(dir.path()));
        }
        let port = free_port();
        if let Some(parent) = &data_parent
            && is_root()
        {
            run(Command::new("chown").arg("postgres:").arg(parent));
        }
        let cluster = PrivateCluster {
            dir,
            bin,
            port,
            data_parent,
        };
        let waldir = format!("--waldir={}", cluster.dir.path().join("wal").display());
        let data = cluster.data();
        let mut args = vec![
            "-D",
            &data,
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-sync",
            "-E",
            "UTF8",
        ];
        if cluster.data_parent.is_some() {
            args.push(&waldir);
        }
        cluster.pg("initdb", &args);
        cluster.start_again();
        Some(cluster)
    }

    /// The URL of its `postgres` database.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Stops the server; `fast` terminates the sessions, as a restart does.
    pub fn stop(&self) {
        self.pg("pg_ctl", &["-D", &self.data(), "-m", "fast", "-w", "stop"]);
    }

    /// Starts the (stopped) server and waits until it accepts connections.
    pub fn start_again(&self) {
        self.start_listening("127.0.0.1");
    }

    /// Starts the (stopped) server listening on `addresses`.
    fn start_listening(&self, addresses: &str) {
        let options = format!(
            "-p {} -k {} -c listen_addresses={addresses} -c fsync=off -c max_connections=200",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("server.log").display().to_string();
        self.pg(
            "pg_ctl",
            &[
                "-D",
                &self.data(),
                "-o",
                &options,
                "-l",
                &log,
                "-w",
                "start",
            ],
        );
    }

    fn data(&self) -> String {
        self.data_parent
            .as_deref()
            .unwrap_or(self.dir.path())
            .join("data")
            .display()
            .to_string()
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

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        let data = self.data();
        let program = self.bin.join("pg_ctl");
        let args = ["-D", data.as_str(), "-m", "immediate", "-w", "stop"];
        let _ = if is_root() {
            Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(&program)
                .args(args)
                .output()
        } else {
            Command::new(&program).args(args).output()
        };
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

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

/// Streaming replication, for failover tests: a standby of a primary,
/// promoted when the primary is gone.
impl PrivateCluster {
    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A streaming standby of `self` (`pg_basebackup -R`), started and
    /// streaming, whose walreceiver calls itself `name` (its
    /// `cluster_name`), the name `synchronous_standby_names` refers to.
    pub fn standby(&self, name: &str) -> PrivateCluster {
        let dir = tempfile::Builder::new()
            .prefix("solidq-standby-")
            .tempdir()
            .expect("standby directory");
        if is_root() {
            run(Command::new("chown").arg("postgres:").arg(dir.path()));
        }
        let standby = PrivateCluster {
            dir,
            bin: self.bin.clone(),
            port: free_port(),
            data_parent: None,
        };
        let port = self.port.to_string();
        standby.pg(
            "pg_basebackup",
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &port,
                "-U",
                "postgres",
                "-D",
                &standby.data(),
                "-R",
                "-X",
                "stream",
                "--no-sync",
            ],
        );
        std::fs::write(
            standby.dir.path().join("data/conf.d-standby.conf"),
            format!("cluster_name = '{name}'\nhot_standby = on\n"),
        )
        .expect("standby settings");
        let conf = standby.dir.path().join("data/postgresql.conf");
        let mut text = std::fs::read_to_string(&conf).expect("postgresql.conf");
        text.push_str("\ninclude = 'conf.d-standby.conf'\n");
        std::fs::write(&conf, text).expect("postgresql.conf");
        standby.start_again();
        standby
    }

    /// Runs `sql` through `psql` on its `postgres` database; returns what
    /// it printed (unaligned, tuples only).
    pub fn psql(&self, sql: &str) -> String {
        let output = Command::new(self.bin.join("psql"))
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["-U", "postgres", "-d", "postgres", "-XAtq", "-c", sql])
            .output()
            .expect("run psql");
        assert!(
            output.status.success(),
            "psql {sql:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    }

    /// Stops the server as a crash would (`-m immediate`): no shutdown
    /// checkpoint, every session cut.
    pub fn crash(&self) {
        self.pg(
            "pg_ctl",
            &["-D", &self.data(), "-m", "immediate", "-w", "stop"],
        );
    }

    /// Promotes a standby to primary and waits until it takes writes.
    pub fn promote(&self) {
        self.pg("pg_ctl", &["-D", &self.data(), "-w", "promote"]);
    }
}

impl PrivateCluster {
    /// Like [`PrivateCluster::start`], but the server also listens on
    /// `addresses` (comma-separated, as `listen_addresses` takes them; they
    /// must exist already) and trusts connections from `trusted` (a CIDR,
    /// e.g. the test's private network namespaces), for tests whose
    /// workers run in network namespaces of their own. Its [`url`] stays
    /// on 127.0.0.1; [`PrivateCluster::url_on`] names another address.
    ///
    /// [`url`]: PrivateCluster::url
    pub fn start_listening_on(addresses: &str, trusted: &str) -> Option<PrivateCluster> {
        let cluster = PrivateCluster::start()?;
        cluster.stop();
        let hba = std::path::Path::new(&cluster.data()).join("pg_hba.conf");
        let mut text = std::fs::read_to_string(&hba).expect("read pg_hba.conf");
        text.push_str(&format!("host all all {trusted} trust\n"));
        std::fs::write(&hba, text).expect("write pg_hba.conf");
        cluster.start_listening(&format!("127.0.0.1,{addresses}"));
        Some(cluster)
    }

    /// The URL of its `postgres` database at `address` (one it listens on).
    pub fn url_on(&self, address: &str) -> String {
        format!("postgres://postgres@{address}:{}/postgres", self.port)
    }

    /// What the server logged so far.
    pub fn server_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }
}
