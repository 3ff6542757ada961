//! Worker "hosts" in network namespaces of their own, for partition tests.
//!
//! [`Network::create`] makes, under names unique to this test process
//! (`sqp<pid>…`):
//!
//! * a veth pair in the test's own namespace holding the database's
//!   address, `10.B.0.1/32` (both ends up, so the address is local and
//!   stays reachable while a host's link is down);
//! * per host `N`, a namespace `sqp<pid>-hN` joined to the test's by a veth
//!   pair: `10.B.N.1/24` on the test's side, `10.B.N.2/24` inside, and
//!   inside a route to the database's address only (no default route:
//!   nothing a host sends can leave these namespaces).
//!
//! `B` (100–199) is chosen from the pid, skipping any `10.B.` already in
//! use. [`Network::cut`] sets a host's link down on the test's side (its
//! packets are dropped silently, as in a real partition: no RST reaches
//! either end), [`Network::restore`] sets it up again. Everything is
//! deleted when the `Network` is dropped, a panicking test included; what a
//! test process killed before dropping it left behind is deleted by the
//! next run.
//!
//! It needs root (CAP_NET_ADMIN) and `ip` (Debian's `iproute2`). Without
//! them [`Network::create`] returns `None` after a `*** SKIPPED` line,
//! unless `SOLIDQ_REQUIRE_TOOLS=1` (or `CI`): then it fails.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The namespaces, links and addresses of one test; deleted when dropped.
pub struct Network {
    prefix: String,
    octet: u8,
    hosts: usize,
}

fn flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

/// Panics when `SOLIDQ_REQUIRE_TOOLS` (or `CI`) is set, else prints a
/// `*** SKIPPED` line where it is seen (not captured by the harness).
fn skip_or_fail(message: &str) {
    use std::io::Write;
    assert!(
        !(flag("SOLIDQ_REQUIRE_TOOLS") || flag("CI")),
        "{message}, and SOLIDQ_REQUIRE_TOOLS or CI requires it"
    );
    let test = std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string();
    let _ = writeln!(
        std::io::stderr().lock(),
        "\n*** SKIPPED {test}: {message} (set SOLIDQ_REQUIRE_TOOLS=1 to fail instead)"
    );
}

/// Runs `ip args…`; its combined output, or an error naming the command.
fn ip(args: &[&str]) -> Result<String, String> {
    let output = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    if output.status.success() {
        Ok(text)
    } else {
        Err(format!("ip {} failed: {}", args.join(" "), text.trim()))
    }
}

/// Panics with the error of `ip args…`.
fn ip_ok(args: &[&str]) -> String {
    ip(args).unwrap_or_else(|e| panic!("{e}"))
}

impl Network {
    /// Creates `hosts` namespaces (see the module docs); `None` (skipped,
    /// loudly) without `ip` or the privilege to use it.
    pub fn create(hosts: usize) -> Option<Network> {
        assert!((1..=250).contains(&hosts));
        let pid = std::process::id();
        remove_stale();
        let prefix = format!("sqp{pid}");
        // Can this process make namespaces at all?
        let probe = format!("{prefix}-probe");
        if let Err(error) = ip(&["netns", "add", &probe]) {
            skip_or_fail(&format!(
                "cannot create network namespaces (root and `ip` from iproute2 are needed): {error}"
            ));
            return None;
        }
        let _ = ip(&["netns", "del", &probe]);
        let used = ip_ok(&["-4", "-o", "addr", "show"]);
        let octet = (0..100)
            .map(|i| 100 + ((pid as usize + i) % 100) as u8)
            .find(|b| !used.contains(&format!(" 10.{b}.")))
            .expect("a free 10.B.0.0/16");
        let network = Network {
            prefix,
            octet,
            hosts,
        };
        network.build();
        Some(network)
    }

    fn build(&self) {
        let (db_a, db_b) = (self.db_link(0), self.db_link(1));
        ip_ok(&["link", "add", &db_a, "type", "veth", "peer", "name", &db_b]);
        ip_ok(&[
            "addr",
            "add",
            &format!("{}/32", self.db_address()),
            "dev",
            &db_a,
        ]);
        ip_ok(&["link", "set", &db_a, "up"]);
        ip_ok(&["link", "set", &db_b, "up"]);
        for host in 1..=self.hosts {
            let ns = self.namespace(host);
            let (outer, inner) = (self.outer_link(host), self.inner_link(host));
            ip_ok(&["netns", "add", &ns]);
            ip_ok(&[
                "link", "add", &outer, "type", "veth", "peer", "name", &inner, "netns", &ns,
            ]);
            ip_ok(&[
                "addr",
                "add",
                &format!("{}/24", self.outer_address(host)),
                "dev",
                &outer,
            ]);
            ip_ok(&["link", "set", &outer, "up"]);
            let inside = |args: &[&str]| {
                let mut all = vec!["netns", "exec", ns.as_str(), "ip"];
                all.extend_from_slice(args);
                ip_ok(&all)
            };
            inside(&[
                "addr",
                "add",
                &format!("{}/24", self.host_address(host)),
                "dev",
                &inner,
            ]);
            inside(&["link", "set", &inner, "up"]);
            inside(&["link", "set", "lo", "up"]);
            inside(&[
                "route",
                "add",
                &format!("{}/32", self.db_address()),
                "via",
                &self.outer_address(host),
            ]);
        }
    }

    /// The database's address, reachable from every host while its link
    /// is up.
    pub fn db_address(&self) -> String {
        format!("10.{}.0.1", self.octet)
    }

    /// Every address the hosts connect from (for `pg_hba.conf`).
    pub fn cidr(&self) -> String {
        format!("10.{}.0.0/16", self.octet)
    }

    /// The name of host `host`'s namespace (1-based).
    pub fn namespace(&self, host: usize) -> String {
        format!("{}-h{host}", self.prefix)
    }

    /// The hostname processes of host `host` see (each host runs in a UTS
    /// namespace of its own too, so its process rows name it).
    pub fn hostname(&self, host: usize) -> String {
        format!("{}-h{host}", self.prefix)
    }

    /// Host `host`'s own address (the database sees its connections
    /// come from it).
    pub fn host_address(&self, host: usize) -> String {
        format!("10.{}.{host}.2", self.octet)
    }

    fn db_link(&self, end: usize) -> String {
        format!("{}d{end}", self.prefix)
    }

    fn outer_link(&self, host: usize) -> String {
        format!("{}h{host}", self.prefix)
    }

    fn inner_link(&self, host: usize) -> String {
        format!("{}n{host}", self.prefix)
    }

    fn outer_address(&self, host: usize) -> String {
        format!("10.{}.{host}.1", self.octet)
    }

    /// Cuts host `host` off: its link is set down on the test's side.
    pub fn cut(&self, host: usize) {
        ip_ok(&["link", "set", &self.outer_link(host), "down"]);
    }

    /// Joins host `host` again.
    pub fn restore(&self, host: usize) {
        ip_ok(&["link", "set", &self.outer_link(host), "up"]);
    }

    /// Runs `argv` in host `host`'s namespaces (network, and UTS with
    /// [`Network::hostname`]) with `env` added, restarting it a second
    /// after each exit, as systemd's `Restart=always` would; its stderr
    /// (every run's) goes to a log file.
    pub fn spawn_restarting(
        &self,
        host: usize,
        argv: &[String],
        env: &[(&str, &str)],
    ) -> HostProcess {
        let log = tempfile::NamedTempFile::new().expect("log file");
        let script = r#"hostname "$0" || exit 1
while :; do
    "$@"
    echo "*** exited with status $?: restarting in 1 s" >&2
    sleep 1
done"#;
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", &self.namespace(host)])
            .args(["unshare", "--uts", "--", "sh", "-c", script])
            .arg(self.hostname(host))
            .args(argv)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log.reopen().expect("log file"))
            // Its own process group: dropping it kills the loop and every
            // process under it.
            .process_group(0)
            .env_remove("SOLIDQ_DATABASE_URL");
        for (key, value) in env {
            command.env(key, value);
        }
        let child = command.spawn().expect("spawn in a namespace");
        HostProcess { child, log }
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        for host in 1..=self.hosts {
            // Deleting a namespace deletes its end of the veth pair, and
            // with it the other end.
            let _ = ip(&["netns", "del", &self.namespace(host)]);
            let _ = ip(&["link", "del", &self.outer_link(host)]);
        }
        let _ = ip(&["link", "del", &self.db_link(0)]);
    }
}

/// Deletes the namespaces and links of `sqp<pid>` test processes that are
/// gone.
fn remove_stale() {
    let dead = |name: &str| {
        let digits: String = name
            .strip_prefix("sqp")
            .unwrap_or("")
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        !digits.is_empty() && !Path::new(&format!("/proc/{digits}")).exists()
    };
    if let Ok(list) = ip(&["netns", "list"]) {
        for name in list.lines().filter_map(|l| l.split_whitespace().next()) {
            if dead(name) {
                let _ = ip(&["netns", "del", name]);
            }
        }
    }
    if let Ok(links) = ip(&["-o", "link", "show"]) {
        for line in links.lines() {
            // "12: sqp42h1@if11: <…"
            let name = line
                .split(": ")
                .nth(1)
                .and_then(|n| n.split('@').next())
                .unwrap_or("");
            if dead(name) {
                let _ = ip(&["link", "del", name]);
            }
        }
    }
}

/// A process group started by [`Network::spawn_restarting`]; killed
/// (SIGKILL to the whole group) when dropped.
pub struct HostProcess {
    child: std::process::Child,
    log: tempfile::NamedTempFile,
}

impl HostProcess {
    /// Everything its runs logged so far.
    pub fn logs(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    /// SIGTERM to the whole group, then SIGKILL to what is left after
    /// `grace`.
    pub fn stop(&mut self, grace: Duration) {
        let group = self.child.id() as i32;
        // SAFETY: kill(2) of our own process group.
        unsafe {
            libc::kill(-group, libc::SIGTERM);
        }
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
    }

    fn kill(&mut self) {
        // SAFETY: kill(2) of our own process group.
        unsafe {
            libc::kill(-(self.child.id() as i32), libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

impl Drop for HostProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

impl super::TestDb {
    /// A `TestDb` over a PostgreSQL database the caller owns (a
    /// [`PrivateCluster`](super::cluster::PrivateCluster)'s), so the
    /// helpers taking a `TestDb` (`assert_invariants`, `create_ledger`)
    /// work on it; nothing is dropped with it.
    pub fn unowned_postgres(url: &str) -> super::TestDb {
        super::TestDb {
            url: url.to_string(),
            backend: solidq::Backend::Postgres,
            // The one guard that deletes nothing in the database.
            guard: super::Guard::Sqlite(tempfile::tempdir().expect("temporary directory")),
            kept: Default::default(),
        }
    }
}
