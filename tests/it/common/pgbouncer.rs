//! A private PgBouncer in front of a test's PostgreSQL schema: its own ini
//! in a temporary directory, a free port, `auth_type = trust`, in session
//! or transaction mode; stopped when dropped. Never the system service.
//!
//! The schema reaches the server through a login role made for the test
//! (named like the schema) whose `search_path` is the schema: PgBouncer
//! refuses libpq's `options` startup parameter (`unsupported startup
//! parameter: options`), and told to ignore it (`ignore_startup_parameters
//! = options`) it would drop the `search_path` silently. A role's setting
//! also survives the `DISCARD ALL` that session mode runs between clients.
//!
//! Without the `pgbouncer` binary (`SOLIDQ_TEST_PGBOUNCER`, else
//! `/usr/sbin/pgbouncer`, else `pgbouncer` on the `PATH`) the test is
//! skipped, loudly, unless `SOLIDQ_REQUIRE_TOOLS` (or `CI`) is set: then
//! it fails.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use diesel::connection::SimpleConnection;
use diesel::{Connection, PgConnection};

use super::{TestDb, skip};

/// PgBouncer's `pool_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolMode {
    /// A server connection per client connection, for its whole life.
    Session,
    /// A server connection per transaction.
    Transaction,
}

/// A running pgbouncer; killed (and its role dropped) on drop.
pub struct PgBouncer {
    child: Child,
    dir: tempfile::TempDir,
    port: u16,
    role: String,
    admin_url: String,
    server: Server,
}

/// Where the PostgreSQL server of the test database is.
#[derive(Debug, Clone)]
struct Server {
    host: String,
    port: u16,
    dbname: String,
}

impl PgBouncer {
    /// Starts pgbouncer in `mode` in front of `db` (a PostgreSQL test
    /// database), with at most `server_connections` server connections for
    /// the test's role. `None` (skipped, loudly) without the binary.
    pub fn start(db: &TestDb, mode: PoolMode, server_connections: u32) -> Option<PgBouncer> {
        let binary = binary()?;
        let schema = db.schema().expect("a PostgreSQL test database").to_string();
        let admin_url = db
            .admin_url()
            .expect("a PostgreSQL test database")
            .to_string();
        let server = parse_server(&admin_url);
        let role = schema.clone();
        let mut admin = PgConnection::establish(&admin_url).expect("connect as the admin");
        admin
            .batch_execute(&format!(
                "CREATE ROLE {role} LOGIN;
                 GRANT ALL ON SCHEMA {schema} TO {role};
                 ALTER ROLE {role} SET search_path = {schema};"
            ))
            .expect("create the test's role");

        let dir = tempfile::Builder::new()
            .prefix("solidq-pgbouncer-")
            .tempdir()
            .expect("pgbouncer directory");
        set_mode(dir.path(), 0o755);
        let port = free_port();
        let users = dir.path().join("users.txt");
        std::fs::write(&users, format!("\"{role}\" \"\"\n\"postgres\" \"\"\n")).unwrap();
        let mode_name = match mode {
            PoolMode::Session => "session",
            PoolMode::Transaction => "transaction",
        };
        let ini = dir.path().join("pgbouncer.ini");
        std::fs::write(
            &ini,
            format!(
                "[databases]\n\
                 {db} = host={host} port={server_port} dbname={db}\n\
                 [pgbouncer]\n\
                 listen_addr = 127.0.0.1\n\
                 listen_port = {port}\n\
                 unix_socket_dir =\n\
                 auth_type = trust\n\
                 auth_file = {users}\n\
                 admin_users = postgres\n\
                 pool_mode = {mode_name}\n\
                 default_pool_size = {server_connections}\n\
                 max_client_conn = 500\n",
                db = server.dbname,
                host = server.host,
                server_port = server.port,
                users = users.display(),
            ),
        )
        .unwrap();
        for file in [&users, &ini] {
            set_mode(file, 0o644);
        }
        let log = std::fs::File::create(dir.path().join("pgbouncer.log")).unwrap();
        let mut command = Command::new(&binary);
        // pgbouncer refuses to run as root; `-u` drops to postgres.
        if is_root() {
            command.args(["-u", "postgres"]);
        }
        let child = command
            .arg(&ini)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", binary.display()));
        let mut bouncer = PgBouncer {
            child,
            dir,
            port,
            role,
            admin_url,
            server,
        };
        bouncer.wait_until_ready();
        Some(bouncer)
    }

    /// The URL of the test's schema through pgbouncer (the role's
    /// `search_path` names it; `application_name` as [`TestDb`]'s, so
    /// `kill_connections` and `pg_stat_activity` queries find them).
    pub fn url(&self) -> String {
        format!(
            "postgres://{}@127.0.0.1:{}/{}?application_name={}",
            self.role, self.port, self.server.dbname, self.role
        )
    }

    /// The same database, user and schema, straight to the server.
    pub fn direct_url(&self) -> String {
        format!(
            "postgres://{}@{}:{}/{}?application_name={}",
            self.role, self.server.host, self.server.port, self.server.dbname, self.role
        )
    }

    /// The server's host and port (for `listen_host`, `listen_port`).
    pub fn server(&self) -> (String, u16) {
        (self.server.host.clone(), self.server.port)
    }

    /// pgbouncer's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("pgbouncer.log")).unwrap_or_default()
    }

    /// How many server connections pgbouncer holds for the test's role
    /// (active, idle, used, tested, logging in), from its `SHOW POOLS`.
    pub fn server_connections(&self) -> i64 {
        let output = Command::new("psql")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["-U", "postgres", "-d", "pgbouncer", "-At", "-F", ","])
            .args(["-c", "SHOW POOLS"])
            .output()
            .expect("run psql on pgbouncer's console");
        let text = String::from_utf8_lossy(&output.stdout);
        // database,user,cl_active,cl_waiting,cl_active_cancel_req,
        // cl_waiting_cancel_req,sv_active,sv_active_cancel,sv_being_canceled,
        // sv_idle,sv_used,sv_tested,sv_login,maxwait,…
        text.lines()
            .map(|line| line.split(',').collect::<Vec<_>>())
            .filter(|f| f.len() > 12 && f[1] == self.role)
            .map(|f| {
                [6, 9, 10, 11, 12]
                    .iter()
                    .map(|&i| f[i].parse::<i64>().unwrap_or(0))
                    .sum::<i64>()
            })
            .sum()
    }

    fn wait_until_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().expect("pgbouncer's status") {
                panic!("pgbouncer exited ({status}): {}", self.log());
            }
            if PgConnection::establish(&self.url()).is_ok() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "pgbouncer did not accept connections within 10 s: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        // SIGTERM: pgbouncer exits at once, closing its server connections.
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Ok(mut admin) = PgConnection::establish(&self.admin_url) {
            let role = &self.role;
            let _ = admin.batch_execute(&format!(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}';
                 DROP OWNED BY {role} CASCADE;
                 DROP ROLE IF EXISTS {role};"
            ));
        }
    }
}

/// The pgbouncer binary, or `None` after a loud skip.
fn binary() -> Option<PathBuf> {
    let candidates = [
        std::env::var("SOLIDQ_TEST_PGBOUNCER")
            .ok()
            .map(PathBuf::from),
        Some(PathBuf::from("/usr/sbin/pgbouncer")),
    ];
    if let Some(found) = candidates.into_iter().flatten().find(|p| p.exists()) {
        return Some(found);
    }
    if let Ok(output) = Command::new("pgbouncer").arg("--version").output()
        && output.status.success()
    {
        return Some(PathBuf::from("pgbouncer"));
    }
    let message = "no pgbouncer binary (Debian's package `pgbouncer`; .ci/run installs it)";
    let required = ["SOLIDQ_REQUIRE_TOOLS", "CI"].iter().any(|name| {
        std::env::var(name).is_ok_and(|v| {
            matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "1" | "true" | "yes" | "on"
            )
        })
    });
    assert!(
        !required,
        "{message}, and SOLIDQ_REQUIRE_TOOLS or CI requires it"
    );
    skip(message);
    None
}

/// Host, port and database of a `postgres://user@host:port/db?…` URL.
fn parse_server(url: &str) -> Server {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, rest)| rest);
    let (authority, path) = rest.split_once('/').unwrap_or((rest, "postgres"));
    let dbname = path.split('?').next().filter(|d| !d.is_empty());
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) => (host, port.parse().expect("a port number")),
        None => (authority, 5432),
    };
    Server {
        host: if host.is_empty() { "127.0.0.1" } else { host }.to_string(),
        port,
        dbname: dbname.unwrap_or("postgres").to_string(),
    }
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}
