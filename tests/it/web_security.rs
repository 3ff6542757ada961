//! The web server against a hostile browser, over real HTTP: `solidq web`
//! on a loopback port (the port it chose, read from its log), spoken to
//! through a plain TCP socket so every header is the test's to choose, in
//! each access mode (anonymous, bearer tokens, basic auth).
//!
//! - DNS rebinding: a request naming a `Host` that is not allowed is
//!   answered 421 before anything else, for pages, the API, /metrics and
//!   the assets, whatever its credential; each allowed form is answered;
//!   the rebinding chain (read the CSRF token under a foreign name, then
//!   pause a queue and enqueue a job) fails at its first step.
//! - `X-Forwarded-Host` is ignored unless trusted; trusted, each of its
//!   names must be allowed and a POST's `Origin` is compared with it.
//! - Bad host settings (flag, environment, file) stop the server at once,
//!   naming the setting and the value.
//! - Every answer (pages, fragments, API, metrics, assets, errors,
//!   refusals) carries the browser headers: a Content-Security-Policy
//!   without inline script or framing, `X-Frame-Options: DENY`,
//!   `nosniff`, `Referrer-Policy`, and `no-store` but for the assets; no
//!   page holds an inline script, style or event handler (the browser test,
//!   `tests/it/web_e2e.rs`, shows the pages working under the policy).
//! - Each refused credential is counted in /metrics by scheme and logged
//!   at warn with the remote address and path, never the credential, at
//!   most `AUTH_LOG_PER_MINUTE` lines a minute.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use common::TestDb;
use serde_json::json;
use solidq::JobFilter;
use solidq_web::{AllowedHost, WebConfig, router};

backend_tests!(
    foreign_hosts_are_refused_before_anything_in_every_mode,
    the_dns_rebinding_chain_fails_at_its_first_step,
    forwarded_hosts_count_only_when_trusted,
    bad_host_settings_stop_the_server_naming_them,
    a_router_mounted_in_an_app_checks_hosts_too,
    every_answer_carries_the_browser_headers,
    refused_credentials_are_counted_and_logged_without_them,
);

const ADMIN: &str = "admin-token-e9f1";
const READ: &str = "read-token-77c2";
const USER: &str = "ops";
const PASSWORD: &str = "pass-word-31a8";

// ---- A server and a raw HTTP client -------------------------------------

/// How a server lets callers in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Anonymous,
    Tokens,
    Basic,
}

impl Mode {
    const ALL: [Mode; 3] = [Mode::Anonymous, Mode::Tokens, Mode::Basic];

    /// The environment that configures it.
    fn env(self) -> Vec<(&'static str, &'static str)> {
        match self {
            Mode::Anonymous => vec![],
            Mode::Tokens => vec![
                ("SOLIDQ_WEB_ADMIN_TOKEN", ADMIN),
                ("SOLIDQ_WEB_READ_TOKEN", READ),
            ],
            Mode::Basic => vec![
                ("SOLIDQ_WEB_USERNAME", USER),
                ("SOLIDQ_WEB_PASSWORD", PASSWORD),
            ],
        }
    }

    /// The `Authorization` a legitimate caller sends.
    fn authorization(self) -> Option<String> {
        match self {
            Mode::Anonymous => None,
            Mode::Tokens => Some(format!("Bearer {ADMIN}")),
            Mode::Basic => Some(basic(USER, PASSWORD)),
        }
    }
}

fn basic(user: &str, password: &str) -> String {
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {encoded}")
}

/// A raw HTTP/1.1 client of one loopback port: every header is the
/// caller's to choose (`Host` included).
struct Client {
    port: u16,
}

impl Client {
    /// The server's own address, as a browser on it names it.
    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Sends `head` as it is (a request line and headers; the body and
    /// `Content-Length` are added when `body` is given).
    fn raw(&self, head: &str, body: Option<&str>) -> Answer {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut request = head.trim_end_matches("\r\n").to_string();
        request.push_str("\r\nConnection: close\r\n");
        if let Some(body) = body {
            request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
        } else {
            request.push_str("\r\n");
        }
        stream.write_all(request.as_bytes()).unwrap();
        let mut bytes = Vec::new();
        stream.read_to_end(&mut bytes).unwrap();
        Answer::parse(&bytes)
    }

    /// `method path` with `Host: host` (none when `None`) and `headers`.
    fn request(
        &self,
        method: &str,
        path: &str,
        host: Option<&str>,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> Answer {
        let mut head = format!("{method} {path} HTTP/1.1\r\n");
        if let Some(host) = host {
            head.push_str(&format!("Host: {host}\r\n"));
        }
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        self.raw(&head, body)
    }
}

/// `solidq web` on a port of its choosing, killed when dropped.
struct Server {
    child: Child,
    client: Client,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl std::ops::Deref for Server {
    type Target = Client;

    fn deref(&self) -> &Client {
        &self.client
    }
}

impl Server {
    fn start(db: &TestDb, mode: Mode, args: &[&str]) -> Server {
        Server::start_with(db, &mode.env(), args)
    }

    fn start_with(db: &TestDb, env: &[(&str, &str)], args: &[&str]) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("solidq-web.log");
        let out = std::fs::File::create(&log).unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_solidq"));
        command
            .args(["web", "--database-url", &db.url, "--bind", "127.0.0.1:0"])
            .args(args)
            .env("RUST_LOG", "info")
            .env_remove("SOLIDQ_DATABASE_URL")
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out);
        for name in [
            "SOLIDQ_WEB_ADMIN_TOKEN",
            "SOLIDQ_WEB_READ_TOKEN",
            "SOLIDQ_WEB_USERNAME",
            "SOLIDQ_WEB_PASSWORD",
            "SOLIDQ_WEB_ALLOWED_HOSTS",
            "SOLIDQ_WEB_TRUST_FORWARDED_HOST",
        ] {
            command.env_remove(name);
        }
        command.envs(env.iter().copied());
        let child = command.spawn().expect("start solidq web");
        let mut server = Server {
            child,
            client: Client { port: 0 },
            log,
            _dir: dir,
        };
        server.client.port = server.wait_listening();
        server
    }

    fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The port of its "listening on http://127.0.0.1:PORT/" line.
    fn wait_listening(&mut self) -> u16 {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("solidq web exited ({status}):\n{}", self.logs());
            }
            let logs = self.logs();
            if let Some(rest) = logs.split("listening on http://127.0.0.1:").nth(1) {
                let port = rest.split('/').next().unwrap();
                return port.parse().expect("a port in the log");
            }
            assert!(
                Instant::now() < deadline,
                "solidq web did not listen within 30 s:\n{logs}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A parsed HTTP response.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl std::fmt::Debug for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let body: String = self.body.chars().take(400).collect();
        write!(f, "{} {:?} {body:?}", self.status, self.headers)
    }
}

impl Answer {
    fn parse(bytes: &[u8]) -> Answer {
        let text = String::from_utf8_lossy(bytes);
        let (head, body) = text.split_once("\r\n\r\n").expect("a response head");
        let mut lines = head.split("\r\n");
        let status = lines.next().unwrap().split(' ').nth(1).unwrap();
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let mut body = body.to_string();
        let chunked = text
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked");
        if chunked {
            body = unchunk(&body);
        }
        Answer {
            status: status.parse().unwrap(),
            headers,
            body,
        }
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

fn unchunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 || after.len() < size {
            break;
        }
        out.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    out
}

/// The CSRF token a page carries (in htmx's `hx-headers`), if any.
fn csrf_of(page: &str) -> Option<String> {
    let marker = "X-CSRF-Token&quot;:&quot;";
    let start = page.find(marker)? + marker.len();
    page[start..].split("&quot;").next().map(str::to_string)
}

/// What every refusal of a host says: the status and the setting.
fn assert_misdirected(answer: &Answer, what: &str) {
    assert_eq!(answer.status, 421, "{what}: {answer:?}");
    assert!(
        answer.body.contains("allowed_hosts"),
        "{what}: the refusal names the setting: {}",
        answer.body
    );
    assert_eq!(
        answer.body.trim_end().lines().count(),
        1,
        "{what}: one line: {}",
        answer.body
    );
    assert!(
        csrf_of(&answer.body).is_none() && !answer.body.contains("<html"),
        "{what}: nothing of the dashboard: {}",
        answer.body
    );
}

// ---- Tests ----------------------------------------------------------------

fn foreign_hosts_are_refused_before_anything_in_every_mode(db: &TestDb) {
    let queue = db.queue();
    queue
        .enqueue_kind("noop", &json!({}), solidq::EnqueueOptions::default())
        .unwrap();
    let started = Instant::now();
    let mut requests = 0;
    for mode in Mode::ALL {
        let server = Server::start(
            db,
            mode,
            &[
                "--allowed-host",
                "jobs.example.com",
                "--allowed-host",
                ".example.org",
            ],
        );
        let port = server.port;
        let auth = mode.authorization();
        let mut headers: Vec<(&str, &str)> = Vec::new();
        if let Some(auth) = &auth {
            headers.push(("Authorization", auth));
        }
        let foreign = [
            format!("evil.example:{port}"),
            "evil.example".to_string(),
            format!("localhost.evil.example:{port}"),
            format!("jobs.example.com.evil.example:{port}"),
            format!("127.0.0.1.nip.io:{port}"),
            format!("example.org.evil.example:{port}"),
            format!("localhost:{}", port.wrapping_add(1)),
            "localhost".to_string(),
            format!("[::2]:{port}"),
            String::new(),
            "*".to_string(),
        ];
        let routes: [(&str, &str, Option<&str>); 10] = [
            ("GET", "/queues", None),
            ("GET", "/jobs?status=failed", None),
            ("GET", "/queues/live", None),
            ("GET", "/api/queues", None),
            ("GET", "/metrics", None),
            ("GET", "/assets/htmx.min.js", None),
            ("GET", "/api/openapi.json", None),
            ("GET", "/no-such-page", None),
            ("POST", "/queues/default/pause", Some("")),
            (
                "POST",
                "/api/jobs",
                Some(r#"{"kind":"send_email","args":{"to":"attacker@example.com"}}"#),
            ),
        ];
        for host in &foreign {
            for (method, path, body) in routes {
                let mut headers = headers.clone();
                if body.is_some() {
                    headers.push(("Content-Type", "application/json"));
                }
                let answer = server.request(method, path, Some(host), &headers, body);
                requests += 1;
                let what = format!("{mode:?}: {method} {path} with Host {host:?}");
                assert_misdirected(&answer, &what);
                let content_type = answer.header("content-type").unwrap_or("");
                if path.starts_with("/api/") || path == "/metrics" {
                    assert!(
                        content_type.starts_with("application/json"),
                        "{what}: {answer:?}"
                    );
                    let json: serde_json::Value = serde_json::from_str(&answer.body)
                        .unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {}", answer.body));
                    assert_eq!(json["code"], 421, "{what}");
                } else {
                    assert!(content_type.starts_with("text/plain"), "{what}: {answer:?}");
                }
            }
        }
        // A second Host header, or an absolute-form target, naming a
        // foreign host is refused too.
        let twice = server.raw(
            &format!(
                "GET /queues HTTP/1.1\r\nHost: {}\r\nHost: evil.example:{port}\r\n",
                server.host()
            ),
            None,
        );
        assert_misdirected(&twice, &format!("{mode:?}: two Host headers"));
        let absolute = server.raw(
            &format!(
                "GET http://evil.example:{port}/queues HTTP/1.1\r\nHost: {}\r\n{}",
                server.host(),
                auth.as_ref()
                    .map(|a| format!("Authorization: {a}\r\n"))
                    .unwrap_or_default()
            ),
            None,
        );
        assert_misdirected(&absolute, &format!("{mode:?}: an absolute-form target"));
        requests += 2;
        // Nothing was changed by any of them.
        assert!(!queue.queue_stats("default").unwrap().paused, "{mode:?}");
        assert_eq!(queue.jobs(&JobFilter::new()).unwrap().len(), 1, "{mode:?}");

        // Every allowed form is answered.
        let allowed = [
            server.host(),
            format!("localhost:{port}"),
            format!("LocalHost:{port}"),
            format!("localhost.:{port}"),
            format!("[::1]:{port}"),
            "jobs.example.com".to_string(),
            "jobs.example.com:443".to_string(),
            format!("JOBS.example.com:{port}"),
            "example.org".to_string(),
            format!("a.b.example.org:{port}"),
        ];
        for host in &allowed {
            for path in ["/queues", "/api/queues", "/metrics", "/assets/htmx.min.js"] {
                let answer = server.request("GET", path, Some(host), &headers, None);
                requests += 1;
                assert_eq!(
                    answer.status, 200,
                    "{mode:?}: GET {path} with Host {host:?}: {answer:?}"
                );
            }
        }
        // No Host at all (HTTP/1.0): no browser sent it.
        let old = server.raw(
            &format!(
                "GET /queues HTTP/1.0\r\n{}",
                auth.as_ref()
                    .map(|a| format!("Authorization: {a}\r\n"))
                    .unwrap_or_default()
            ),
            None,
        );
        requests += 1;
        assert_eq!(old.status, 200, "{mode:?}: HTTP/1.0 without Host: {old:?}");
        // The Host check opens nothing: an allowed name without the
        // credential is still refused.
        if mode != Mode::Anonymous {
            let answer = server.request("GET", "/queues", Some(&server.host()), &[], None);
            requests += 1;
            assert_eq!(answer.status, 401, "{mode:?}: {answer:?}");
        }
        // The log says which names are answered.
        let logs = server.logs();
        assert!(
            logs.contains(&format!("localhost:{port}")) && logs.contains("jobs.example.com"),
            "{logs}"
        );
    }
    eprintln!(
        "{requests} requests to 3 servers in {:.1?}",
        started.elapsed()
    );
}

fn the_dns_rebinding_chain_fails_at_its_first_step(db: &TestDb) {
    let queue = db.queue();
    let server = Server::start(db, Mode::Anonymous, &[]);
    let port = server.port;
    let evil_host = format!("evil.example:{port}");
    let evil_origin = format!("http://evil.example:{port}");
    // The attacker's page, rebound to 127.0.0.1, reads the dashboard to
    // learn the CSRF token: refused, so no token.
    let page = server.request("GET", "/queues", Some(&evil_host), &[], None);
    assert_misdirected(&page, "the rebound page's GET");
    let token = csrf_of(&page.body).unwrap_or_default();
    assert_eq!(token, "");
    // Its POSTs, same-origin for the browser: refused alike.
    let same_origin = [
        ("Origin", evil_origin.as_str()),
        ("X-CSRF-Token", token.as_str()),
        ("Sec-Fetch-Site", "same-origin"),
    ];
    let pause = server.request(
        "POST",
        "/queues/default/pause",
        Some(&evil_host),
        &same_origin,
        Some(""),
    );
    assert_misdirected(&pause, "the rebound pause");
    let mut json = same_origin.to_vec();
    json.push(("Content-Type", "application/json"));
    let enqueue = server.request(
        "POST",
        "/api/jobs",
        Some(&evil_host),
        &json,
        Some(r#"{"kind":"send_email","args":{"to":"attacker@example.com"}}"#),
    );
    assert_misdirected(&enqueue, "the rebound enqueue");
    assert!(!queue.queue_stats("default").unwrap().paused);
    assert!(queue.jobs(&JobFilter::new()).unwrap().is_empty());

    // The same chain under the server's own name works (so the refusals
    // above are the Host check's): the page carries the token, and the
    // dashboard's own POST pauses the queue.
    let own = server.host();
    let page = server.request("GET", "/queues", Some(&own), &[], None);
    assert_eq!(page.status, 200, "{page:?}");
    let token = csrf_of(&page.body).expect("the page carries the CSRF token");
    let origin = format!("http://{own}");
    let pause = server.request(
        "POST",
        "/queues/default/pause",
        Some(&own),
        &[
            ("Origin", &origin),
            ("X-CSRF-Token", &token),
            ("Sec-Fetch-Site", "same-origin"),
        ],
        Some(""),
    );
    assert_eq!(pause.status, 200, "{pause:?}");
    assert!(queue.queue_stats("default").unwrap().paused);
}

fn forwarded_hosts_count_only_when_trusted(db: &TestDb) {
    let queue = db.queue();
    // Behind a proxy that rewrites Host to the upstream address and sends
    // the browser's in X-Forwarded-Host (configured by environment).
    let mut env = Mode::Basic.env();
    env.push((
        "SOLIDQ_WEB_ALLOWED_HOSTS",
        "jobs.example.com, .example.net,",
    ));
    env.push(("SOLIDQ_WEB_TRUST_FORWARDED_HOST", "true"));
    let trusted = Server::start_with(db, &env, &[]);
    let auth = Mode::Basic.authorization().unwrap();
    let get = |server: &Server, forwarded: &str| {
        server.request(
            "GET",
            "/queues",
            Some(&server.host()),
            &[("Authorization", &auth), ("X-Forwarded-Host", forwarded)],
            None,
        )
    };
    for refused in [
        "evil.example",
        "jobs.example.com, evil.example",
        "evil.example, jobs.example.com",
    ] {
        assert_misdirected(&get(&trusted, refused), &format!("forwarded {refused}"));
    }
    let page = get(&trusted, "jobs.example.com");
    assert_eq!(page.status, 200, "{page:?}");
    assert_eq!(get(&trusted, "a.example.net:8443").status, 200);
    // The proxy's own Host must be allowed as well.
    let behind_evil = trusted.request(
        "GET",
        "/queues",
        Some("evil.example"),
        &[
            ("Authorization", &auth),
            ("X-Forwarded-Host", "jobs.example.com"),
        ],
        None,
    );
    assert_misdirected(
        &behind_evil,
        "an allowed forwarded host through a foreign Host",
    );
    // A POST from the page at https://jobs.example.com: its Origin is
    // compared with the forwarded host, not with the upstream address.
    let token = csrf_of(&page.body).expect("a CSRF token");
    let pause = |server: &Server, origin: &str| {
        server.request(
            "POST",
            "/queues/default/pause",
            Some(&server.host()),
            &[
                ("Authorization", &auth),
                ("X-Forwarded-Host", "jobs.example.com"),
                ("Origin", origin),
                ("X-CSRF-Token", &token),
            ],
            Some(""),
        )
    };
    assert_eq!(pause(&trusted, "https://evil.example").status, 403);
    assert!(!queue.queue_stats("default").unwrap().paused);
    let paused = pause(&trusted, "https://jobs.example.com");
    assert_eq!(paused.status, 200, "{paused:?}");
    assert!(queue.queue_stats("default").unwrap().paused);

    // Untrusted (the default), the header is ignored both ways: a foreign
    // name in it refuses nothing, an allowed one allows nothing.
    let untrusted = Server::start(db, Mode::Basic, &["--allowed-host", "jobs.example.com"]);
    assert_eq!(get(&untrusted, "evil.example").status, 200);
    let token = csrf_of(&get(&untrusted, "jobs.example.com").body).expect("a CSRF token");
    let answer = untrusted.request(
        "POST",
        "/queues/default/resume",
        Some(&untrusted.host()),
        &[
            ("Authorization", &auth),
            ("X-Forwarded-Host", "jobs.example.com"),
            ("Origin", "https://jobs.example.com"),
            ("X-CSRF-Token", &token),
        ],
        Some(""),
    );
    assert_eq!(answer.status, 403, "{answer:?}");
    assert!(queue.queue_stats("default").unwrap().paused);
    // The flag turns trust on as the variable does.
    let flagged = Server::start(
        db,
        Mode::Basic,
        &[
            "--allowed-host",
            "jobs.example.com",
            "--trust-forwarded-host",
        ],
    );
    assert_misdirected(&get(&flagged, "evil.example"), "trusted by the flag");
}

/// A host setting `solidq web` must refuse, and what its error says.
struct BadSetting {
    env: &'static [(&'static str, &'static str)],
    args: &'static [&'static str],
    /// A `solidq.toml` after its `database_url`.
    file: Option<&'static str>,
    says: &'static [&'static str],
}

fn bad_host_settings_stop_the_server_naming_them(db: &TestDb) {
    db.queue();
    let run = |env: &[(&str, &str)], args: &[&str], config: Option<&str>| {
        let dir = tempfile::tempdir().unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_solidq"));
        command.arg("web");
        if let Some(toml) = config {
            let path = dir.path().join("solidq.toml");
            std::fs::write(&path, format!("database_url = {:?}\n{toml}", db.url)).unwrap();
            command.args(["--config", path.to_str().unwrap()]);
        } else {
            command.args(["--database-url", &db.url]);
        }
        command
            .args(["--bind", "127.0.0.1:0"])
            .args(args)
            .env_remove("SOLIDQ_DATABASE_URL")
            .env_remove("SOLIDQ_WEB_ALLOWED_HOSTS")
            .env_remove("SOLIDQ_WEB_TRUST_FORWARDED_HOST")
            .envs(env.iter().copied())
            .current_dir(dir.path())
            .stdin(Stdio::null());
        let output = command.output().unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let cases = [
        BadSetting {
            env: &[],
            args: &["--allowed-host", "*"],
            file: None,
            says: &["--allowed-host", "\"*\"", "DNS rebinding"],
        },
        BadSetting {
            env: &[(
                "SOLIDQ_WEB_ALLOWED_HOSTS",
                "ok.example,https://jobs.example.com",
            )],
            args: &[],
            file: None,
            says: &["SOLIDQ_WEB_ALLOWED_HOSTS", "https://jobs.example.com"],
        },
        BadSetting {
            env: &[],
            args: &[],
            file: Some("[web]\nallowed_hosts = [\"jobs example\"]\n"),
            says: &["web.allowed_hosts", "jobs example"],
        },
        BadSetting {
            env: &[("SOLIDQ_WEB_ALLOWED_HOSTS", " ")],
            args: &[],
            file: None,
            says: &["SOLIDQ_WEB_ALLOWED_HOSTS", "must not be empty"],
        },
        BadSetting {
            env: &[("SOLIDQ_WEB_TRUST_FORWARDED_HOST", "maybe")],
            args: &[],
            file: None,
            says: &["SOLIDQ_WEB_TRUST_FORWARDED_HOST", "maybe"],
        },
        BadSetting {
            env: &[],
            args: &["--allowed-host", "::1"],
            file: None,
            says: &["--allowed-host", "brackets"],
        },
    ];
    for BadSetting {
        env,
        args,
        file: config,
        says: expected,
    } in cases
    {
        let (code, stderr) = run(env, args, config);
        assert_eq!(code, Some(2), "{env:?} {args:?} {config:?}: {stderr}");
        for text in expected {
            assert!(
                stderr.contains(text),
                "{env:?} {args:?}: no {text:?} in {stderr}"
            );
        }
        assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
    }
    // A good file entry is taken.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("solidq.toml");
    std::fs::write(
        &path,
        format!(
            "database_url = {:?}\n[web]\nallowed_hosts = [\"*.example.com\"]\n",
            db.url
        ),
    )
    .unwrap();
    let server = Server::start_with(db, &[], &["--config", path.to_str().unwrap()]);
    assert_eq!(
        server
            .request("GET", "/queues", Some("x.example.com"), &[], None)
            .status,
        200
    );
    assert_misdirected(
        &server.request("GET", "/queues", Some("example.com"), &[], None),
        "the domain itself under *.",
    );
}

fn a_router_mounted_in_an_app_checks_hosts_too(db: &TestDb) {
    // An application of the user's: its own page at /, the dashboard
    // nested under /ops, served on a port of its own.
    let queue = db.queue();
    let mut config = WebConfig::new();
    config.anonymous = true;
    config.allowed_hosts = AllowedHost::parse_list(["jobs.example.com"], "test").unwrap();
    let app = axum::Router::new()
        .route("/", axum::routing::get(|| async { "the app's own page" }))
        .nest("/ops", router(queue, config).unwrap());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    runtime.spawn(async move { axum::serve(listener, app).await });
    let client = Client { port };
    for host in [format!("evil.example:{port}"), "10.0.0.1".to_string()] {
        for path in [
            "/ops/queues",
            "/ops/api/queues",
            "/ops/metrics",
            "/ops/assets/htmx.min.js",
        ] {
            let answer = client.request("GET", path, Some(&host), &[], None);
            assert_misdirected(&answer, &format!("mounted: {path} with Host {host}"));
        }
    }
    // Not knowing its port, it takes the loopback names on any, and the
    // configured ones.
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        "localhost".to_string(),
        "jobs.example.com".to_string(),
    ] {
        let answer = client.request("GET", "/ops/queues", Some(&host), &[], None);
        assert_eq!(answer.status, 200, "mounted, Host {host}: {answer:?}");
        assert!(answer.body.contains("href=\"/ops/jobs\""), "{answer:?}");
    }
    // The app's own routes are its own business.
    let own = client.request("GET", "/", Some("evil.example"), &[], None);
    assert_eq!(own.status, 200, "{own:?}");
    runtime.shutdown_background();
}

/// Inline code a Content-Security-Policy without `'unsafe-inline'` would
/// block: the first found in `html`, if any.
fn inline_code(html: &str) -> Option<String> {
    let lower = html.to_ascii_lowercase();
    let mut rest = lower.as_str();
    while let Some(at) = rest.find("<script") {
        let tag = &rest[at..rest[at..].find('>').map_or(rest.len(), |e| at + e + 1)];
        if !tag.contains(" src=") {
            return Some(tag.to_string());
        }
        rest = &rest[at + tag.len()..];
    }
    if let Some(at) = lower.find("<style") {
        return Some(lower[at..].chars().take(60).collect());
    }
    // Attributes: ` style="`, ` onclick="` and the like, `hx-on`,
    // `javascript:` URLs.
    let bytes = lower.as_bytes();
    for (i, _) in lower.match_indices(' ') {
        let attribute: String = lower[i + 1..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == ':')
            .collect();
        let after = i + 1 + attribute.len();
        if bytes.get(after) != Some(&b'=') {
            continue;
        }
        let handler = attribute.len() > 2
            && attribute.starts_with("on")
            && attribute[2..].bytes().all(|b| b.is_ascii_lowercase());
        if attribute == "style" || handler || attribute.starts_with("hx-on") {
            return Some(lower[i..].chars().take(60).collect());
        }
    }
    lower
        .find("javascript:")
        .map(|at| lower[at..].chars().take(60).collect())
}

fn every_answer_carries_the_browser_headers(db: &TestDb) {
    let queue = db.queue();
    let failed = queue
        .enqueue(&common::jobs::Fail {
            message: "boom".into(),
        })
        .unwrap();
    solidq::Worker::new(queue.clone())
        .register::<common::jobs::Fail>()
        .drain_ready()
        .unwrap();
    let anonymous = Server::start(db, Mode::Anonymous, &[]);
    let guarded = Server::start(db, Mode::Tokens, &[]);
    let job = format!("/jobs/{failed}");
    let pages = [
        "/queues",
        "/jobs?status=failed",
        "/jobs?status=running",
        job.as_str(),
        "/processes",
        "/recurring",
        "/concurrency",
        "/charts",
        "/audit",
        "/database",
        "/no-such-page",
        "/jobs?status=lost",
    ];
    let data = [
        "/queues/live",
        "/jobs/live?status=failed",
        "/charts/data",
        "/api/queues",
        "/api/jobs?status=failed",
        "/api/openapi.json",
        "/metrics",
        "/favicon.ico",
        "/",
    ];
    let assets = [
        "/assets/htmx.min.js",
        "/assets/uPlot.iife.min.js",
        "/assets/uPlot.min.css",
        "/assets/dashboard.css",
        "/assets/charts.js",
    ];
    let own = anonymous.host();
    let mut answers: Vec<(String, Answer)> = Vec::new();
    for path in pages.iter().chain(&data).chain(&assets) {
        answers.push((
            path.to_string(),
            anonymous.request("GET", path, Some(&own), &[], None),
        ));
    }
    // A POST without its CSRF token, a foreign Host, no credential.
    answers.push((
        "POST without a token".into(),
        anonymous.request("POST", "/queues/default/pause", Some(&own), &[], Some("")),
    ));
    answers.push((
        "foreign Host".into(),
        anonymous.request("GET", "/queues", Some("evil.example"), &[], None),
    ));
    answers.push((
        "no credential".into(),
        guarded.request("GET", "/queues", Some(&guarded.host()), &[], None),
    ));
    answers.push((
        "API without a credential".into(),
        guarded.request("GET", "/api/queues", Some(&guarded.host()), &[], None),
    ));
    let mut statuses = std::collections::BTreeSet::new();
    for (what, answer) in &answers {
        statuses.insert(answer.status);
        let header = |name: &str| {
            answer
                .header(name)
                .unwrap_or_else(|| panic!("{what}: no {name}: {answer:?}"))
        };
        assert_eq!(header("x-content-type-options"), "nosniff", "{what}");
        assert_eq!(header("x-frame-options"), "DENY", "{what}");
        assert_eq!(header("referrer-policy"), "same-origin", "{what}");
        let csp = header("content-security-policy");
        assert_eq!(csp, solidq_web::CONTENT_SECURITY_POLICY, "{what}");
        for directive in [
            "frame-ancestors 'none'",
            "script-src 'self';",
            "default-src 'none'",
        ] {
            assert!(csp.contains(directive), "{what}: {csp}");
        }
        assert!(!csp.contains("unsafe"), "{what}: {csp}");
        let cache = header("cache-control");
        if assets.contains(&what.as_str()) {
            assert_eq!(answer.status, 200, "{what}");
            assert!(cache.starts_with("public"), "{what}: {cache}");
        } else {
            assert_eq!(cache, "no-store", "{what}");
        }
        if answer
            .header("content-type")
            .is_some_and(|t| t.starts_with("text/html"))
        {
            assert!(
                inline_code(&answer.body).is_none(),
                "{what}: inline code {:?}",
                inline_code(&answer.body)
            );
        }
    }
    // Pages, errors and every kind of refusal were among them.
    for status in [200, 204, 303, 400, 401, 403, 404, 421] {
        assert!(statuses.contains(&status), "no {status} in {statuses:?}");
    }
    // The scan finds what it looks for.
    for inline in [
        "<script>alert(1)</script>",
        "<div style=\"color:red\">",
        "<a onclick=\"x()\">",
        "<button hx-on:click=\"x()\">",
        "<a href=\"javascript:x()\">",
        "<style>p{}</style>",
    ] {
        assert!(inline_code(inline).is_some(), "{inline}");
    }
    assert_eq!(
        inline_code("<script src=\"/assets/a.js\"></script><a data-on=\"x\">"),
        None
    );
}

fn refused_credentials_are_counted_and_logged_without_them(db: &TestDb) {
    db.queue();
    let mut env = Mode::Tokens.env();
    env.extend(Mode::Basic.env());
    let server = Server::start_with(db, &env, &[]);
    let host = server.host();
    let wrong_token = "WRONG-bearer-6d1f";
    let wrong_password = "guess-pw-a41c";
    let mut sent: Vec<String> = Vec::new();
    let mut refuse = |authorization: Option<String>, path: &str, extra: &[(&str, &str)]| {
        let mut headers: Vec<(&str, &str)> = extra.to_vec();
        if let Some(a) = &authorization {
            headers.push(("Authorization", a));
            sent.push(a.clone());
        }
        let answer = server.request("GET", path, Some(&host), &headers, None);
        assert_eq!(answer.status, 401, "{authorization:?} {path}: {answer:?}");
    };
    // Basic auth: a wrong password, a wrong user, and not base64.
    refuse(Some(basic(USER, wrong_password)), "/queues", &[]);
    refuse(Some(basic("root", wrong_password)), "/jobs", &[]);
    refuse(Some("Basic !!!not-base64".into()), "/queues", &[]);
    // Another scheme.
    refuse(Some("Digest username=\"ops\"".into()), "/metrics", &[]);
    // Bearer: guesses, and near misses of the real tokens.
    for i in 0..14 {
        let path = ["/queues", "/api/queues", "/metrics"][i % 3];
        let forwarded: &[(&str, &str)] = if i == 0 {
            &[("X-Forwarded-For", "203.0.113.7")]
        } else {
            &[]
        };
        refuse(Some(format!("Bearer {wrong_token}-{i}")), path, forwarded);
    }
    refuse(Some(format!("Bearer {ADMIN}x")), "/api/queues", &[]);
    refuse(Some(format!("Bearer {}", &READ[1..])), "/api/queues", &[]);
    // No credential at all (a browser's first visit): counted, not
    // logged.
    refuse(None, "/queues", &[]);
    refuse(None, "/api/queues", &[]);
    // A foreign Host is refused before credentials are looked at: not
    // counted.
    for _ in 0..3 {
        let answer = server.request(
            "GET",
            "/queues",
            Some("evil.example"),
            &[("Authorization", &format!("Bearer {wrong_token}"))],
            None,
        );
        assert_eq!(answer.status, 421);
    }
    // The good credentials are not counted either.
    let metrics = server.request(
        "GET",
        "/metrics",
        Some(&host),
        &[("Authorization", &format!("Bearer {READ}"))],
        None,
    );
    assert_eq!(metrics.status, 200, "{metrics:?}");
    for (scheme, n) in [("bearer", 16), ("basic", 3), ("other", 1), ("none", 2)] {
        let line = format!("solidq_web_auth_failures_total{{scheme=\"{scheme}\"}} {n}\n");
        assert!(
            metrics.body.contains(&line),
            "no {line:?} in\n{}",
            metrics.body
        );
    }
    assert!(
        metrics
            .body
            .contains("# TYPE solidq_web_auth_failures counter")
    );

    // The log: the first AUTH_LOG_PER_MINUTE refusals (the budget), the
    // last saying more are only counted.
    let budget = solidq_web::AUTH_LOG_PER_MINUTE as usize;
    let refused_lines = |logs: &str| -> Vec<String> {
        logs.lines()
            .filter(|l| l.contains("solidq web: refused "))
            .map(str::to_string)
            .collect()
    };
    let logs = server.logs();
    let lines = refused_lines(&logs);
    assert_eq!(lines.len(), budget, "{logs}");
    assert!(lines.iter().all(|l| l.contains("WARN")), "{logs}");
    assert!(
        lines.iter().all(|l| l.contains("from 127.0.0.1:")),
        "{logs}"
    );
    assert!(lines[budget - 1].contains("not logged"), "{logs}");
    for (n, said) in [
        (3, "basic auth with a wrong user name or password"),
        (1, "an Authorization scheme other than Bearer and Basic"),
        (
            budget - 4,
            "a bearer token that matches no configured token",
        ),
    ] {
        assert_eq!(
            lines.iter().filter(|l| l.contains(said)).count(),
            n.min(budget),
            "{said}: {logs}"
        );
    }
    assert!(lines[0].contains("for GET \"/queues\""), "{}", lines[0]);
    assert!(
        logs.contains("X-Forwarded-For \"203.0.113.7\", unverified"),
        "{logs}"
    );
    // Never a credential, nor the user name that came with it.
    let mut secrets: Vec<String> = vec![
        wrong_token.into(),
        wrong_password.into(),
        ADMIN.into(),
        READ[1..].into(),
        PASSWORD.into(),
        "root".into(),
        "not-base64".into(),
        "username=".into(),
    ];
    for authorization in &sent {
        let credential = authorization.split_once(' ').map_or("", |(_, c)| c);
        if credential.len() > 4 {
            secrets.push(credential.to_string());
        }
    }
    for secret in &secrets {
        assert!(
            !logs.contains(secret.as_str()),
            "the log shows {secret:?}:\n{logs}"
        );
    }
}
