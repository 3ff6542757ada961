//! The web dashboard, the HTTP API and the Prometheus metrics, as one axum
//! [`Router`] (mount it in your own axum app, under any path prefix) or as
//! a server of its own ([`serve`], which `solidq web` runs). A crate of its
//! own, so that the `solidq` library builds no web server: the rest of
//! solidq stays synchronous, and this crate runs every database call on
//! tokio's blocking threads.
//!
//! ```no_run
//! # fn main() -> solidq::Result<()> {
//! # let config = solidq::config::SupervisorConfig::load(std::path::Path::new("solidq.toml"))?;
//! # let queue = solidq::Queue::connect("sqlite://app.sqlite3")?;
//! let app: axum::Router = axum::Router::new()
//!     .nest("/jobs", solidq_web::router(queue.clone(), solidq_web::WebConfig::from_section(&config.web)?)?);
//! # Ok(())
//! # }
//! ```
//!
//! # Host names
//! Before anything else, a request must name an allowed `Host` (the
//! server's own address, loopback names on loopback, and
//! [`WebConfig::allowed_hosts`]); any other is answered 421 Misdirected
//! Request, whatever its credentials. A page the operator opens could
//! otherwise point its own name at the server (DNS rebinding) and use it
//! as its own origin. See [`AllowedHost`] for the forms and the defaults.
//!
//! # Access
//! Closed by default. A request is allowed by, in order:
//! - `Authorization: Bearer <admin token>`: everything;
//! - `Authorization: Bearer <read token>`: reads only (GET): pages, job
//!   and task info, metrics — what LeanCloud lets browser clients do;
//! - HTTP basic auth with the configured user and password: everything
//!   (the browser prompts for it);
//! - nothing, only when no credential is configured and
//!   [`WebConfig::anonymous`] was set, which [`serve`] does only on a
//!   loopback address (it refuses any other address without credentials).
//!
//! State changes are POSTs only. One made with browser credentials (basic
//! auth or anonymous) must carry the server's CSRF token in an
//! `X-CSRF-Token` header (the dashboard's htmx requests do) and must not
//! come from another origin (`Origin`, `Sec-Fetch-Site`); bearer-token
//! requests carry no ambient credential and need neither. Every stored
//! string is escaped by the templates; argument keys such as `password`
//! are shown as `[FILTERED]` ([`WebConfig::filtered_keys`]).
//!
//! Every refused credential is counted in /metrics
//! (`solidq_web_auth_failures_total{scheme}`) and logged at warn level
//! with the remote address, path and scheme, never the credential; at most
//! [`AUTH_LOG_PER_MINUTE`] lines a minute.
//!
//! # What the browser is told
//! Every answer forbids framing (`frame-ancestors 'none'`,
//! `X-Frame-Options: DENY`), inline scripts and styles
//! ([`CONTENT_SECURITY_POLICY`]: the pages load only the files under
//! `/assets/`), type sniffing (`nosniff`) and referrers to other sites,
//! and every answer but the assets is `Cache-Control: no-store`.
//!
//! # Live updates
//! The queue counts, the status tabs and the running jobs with their
//! progress bars are re-fetched every [`LIVE_REFRESH`] (htmx polling: no
//! connection held open per tab, works through any proxy).
//!
//! # Assets
//! htmx 2.0.11 and uPlot 1.6.32, from the npm registry, are vendored in
//! `crates/solidq-web/src/assets/` with their licences and compiled into the binary: no
//! CDN is reached.

mod access;
mod api;
mod assets;
mod audit;
mod filter;
mod headers;
mod hosts;
mod layout;
mod metrics;
mod pages;
mod refusals;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};

use solidq::Queue;
use solidq::config::{DEFAULT_FILTERED_KEYS, DEFAULT_WEB_COUNT_CAP, WebSection};
use solidq::config::{
    ENV_WEB_ADMIN_TOKEN, ENV_WEB_ALLOWED_HOSTS, ENV_WEB_PASSWORD, ENV_WEB_READ_TOKEN,
    ENV_WEB_TRUST_FORWARDED_HOST, ENV_WEB_USERNAME,
};
use solidq::{Error, Result};

pub use access::Access;
pub use headers::CONTENT_SECURITY_POLICY;
pub use hosts::AllowedHost;
pub use refusals::AUTH_LOG_PER_MINUTE;

/// How often the dashboard re-fetches its live parts (counts, running
/// jobs, progress).
pub const LIVE_REFRESH: Duration = Duration::from_secs(2);
/// Jobs per page of the dashboard's listings.
pub const PAGE_SIZE: usize = 25;
/// The most jobs one request of the HTTP API's bulk enqueue may carry.
pub const MAX_BULK_ENQUEUE: usize = 1_000;

/// What the router needs besides the queue: credentials and display
/// settings. Build it from `[web]` with [`WebConfig::from_section`] (which
/// reads the environment's credentials too) or in code.
#[derive(Clone, Default)]
pub struct WebConfig {
    /// Bearer token allowed everything.
    pub admin_token: Option<String>,
    /// Bearer token allowed reads only.
    pub read_token: Option<String>,
    /// HTTP basic auth user and password, allowed everything.
    pub basic: Option<(String, String)>,
    /// Allow requests without credentials (everything) when none is
    /// configured. Off by default; [`serve`] sets it on loopback only.
    pub anonymous: bool,
    /// Argument keys shown as `[FILTERED]`, matched in any case at any
    /// depth.
    pub filtered_keys: Vec<String>,
    /// Counts above this are shown as "N+"; see
    /// [`DEFAULT_WEB_COUNT_CAP`].
    pub count_cap: u64,
    /// `Host` names answered besides the defaults (see [`AllowedHost`]):
    /// behind a reverse proxy, the public name it forwards. Defaults to
    /// none.
    pub allowed_hosts: Vec<AllowedHost>,
    /// Read `X-Forwarded-Host`: each of its names must be allowed too, and
    /// a POST's `Origin` is compared with its first. Set it only behind a
    /// proxy that sets (or strips) that header, since any client may send
    /// it. Defaults to `false`: the header is ignored.
    pub trust_forwarded_host: bool,
    /// The address the router is served on, when known ([`serve`] sets
    /// it): that address with its port is allowed as `Host`, and on
    /// loopback `localhost`, `127.0.0.1` and `[::1]` with the port; on
    /// `0.0.0.0` or `[::]` any IP address and those names, with the port.
    /// Defaults to `None`, for a router mounted in your own app: then the
    /// three loopback names are allowed on any port, and every other name
    /// must be in [`allowed_hosts`](WebConfig::allowed_hosts).
    pub listen: Option<SocketAddr>,
}

impl std::fmt::Debug for WebConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebConfig")
            .field("admin_token", &self.admin_token.as_ref().map(|_| "…"))
            .field("read_token", &self.read_token.as_ref().map(|_| "…"))
            .field("basic", &self.basic.as_ref().map(|(user, _)| user))
            .field("anonymous", &self.anonymous)
            .field("filtered_keys", &self.filtered_keys)
            .field("count_cap", &self.count_cap)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("trust_forwarded_host", &self.trust_forwarded_host)
            .field("listen", &self.listen)
            .finish()
    }
}

impl WebConfig {
    /// No credential, the default filtered keys and count cap.
    pub fn new() -> WebConfig {
        WebConfig {
            filtered_keys: DEFAULT_FILTERED_KEYS
                .iter()
                .map(|k| k.to_string())
                .collect(),
            count_cap: DEFAULT_WEB_COUNT_CAP,
            ..WebConfig::default()
        }
    }

    /// `[web]` of solidq.toml, each credential overridden by its
    /// environment variable ([`ENV_WEB_ADMIN_TOKEN`] and the others), the
    /// allowed hosts by [`ENV_WEB_ALLOWED_HOSTS`] (comma-separated) and
    /// `trust_forwarded_host` by [`ENV_WEB_TRUST_FORWARDED_HOST`].
    /// A user without a password (or the reverse), an empty token, or a
    /// host name that is not one, is an error naming the setting.
    pub fn from_section(section: &WebSection) -> Result<WebConfig> {
        let setting = |env: &str, file: &Option<String>, option: &'static str| {
            let value = std::env::var(env).ok().or_else(|| file.clone());
            match value {
                Some(v) if v.is_empty() => Err(Error::InvalidOption {
                    option,
                    value: v,
                    reason: format!("must not be empty (unset it, or {env}, to turn it off)"),
                }),
                other => Ok(other),
            }
        };
        let admin_token = setting(ENV_WEB_ADMIN_TOKEN, &section.admin_token, "web.admin_token")?;
        let read_token = setting(ENV_WEB_READ_TOKEN, &section.read_token, "web.read_token")?;
        let username = setting(ENV_WEB_USERNAME, &section.username, "web.username")?;
        let password = setting(ENV_WEB_PASSWORD, &section.password, "web.password")?;
        let basic = match (username, password) {
            (Some(user), Some(password)) => Some((user, password)),
            (None, None) => None,
            (Some(user), None) => {
                return Err(Error::InvalidOption {
                    option: "web.password",
                    value: String::new(),
                    reason: format!("web.username {user:?} is set without a password"),
                });
            }
            (None, Some(_)) => {
                return Err(Error::InvalidOption {
                    option: "web.username",
                    value: String::new(),
                    reason: "web.password is set without a user name".into(),
                });
            }
        };
        let mut config = WebConfig::new();
        config.admin_token = admin_token;
        config.read_token = read_token;
        config.basic = basic;
        if let Some(keys) = &section.filtered_keys {
            config.filtered_keys = keys.clone();
        }
        config.allowed_hosts = match std::env::var(ENV_WEB_ALLOWED_HOSTS) {
            Ok(list) if list.trim().is_empty() => {
                return Err(Error::InvalidOption {
                    option: ENV_WEB_ALLOWED_HOSTS,
                    value: list,
                    reason: "must not be empty (unset it to take allowed_hosts of [web])".into(),
                });
            }
            Ok(list) => AllowedHost::parse_list(
                list.split(',').map(str::trim).filter(|s| !s.is_empty()),
                ENV_WEB_ALLOWED_HOSTS,
            )?,
            Err(_) => AllowedHost::parse_list(
                section.allowed_hosts.iter().flatten().map(String::as_str),
                "web.allowed_hosts",
            )?,
        };
        config.trust_forwarded_host = match std::env::var(ENV_WEB_TRUST_FORWARDED_HOST) {
            Ok(v) => match v.trim().to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" | "on" => true,
                "0" | "false" | "no" | "off" => false,
                _ => {
                    return Err(Error::InvalidOption {
                        option: ENV_WEB_TRUST_FORWARDED_HOST,
                        value: v,
                        reason: "expected true or false".into(),
                    });
                }
            },
            Err(_) => section.trust_forwarded_host.unwrap_or(false),
        };
        Ok(config)
    }

    /// Whether any credential is configured.
    pub fn has_credentials(&self) -> bool {
        self.admin_token.is_some() || self.read_token.is_some() || self.basic.is_some()
    }
}

/// What every handler shares.
pub(crate) struct App {
    pub queue: Queue,
    pub config: WebConfig,
    /// The CSRF token of this server: random, made at start.
    pub csrf: String,
    /// The `Host` names it answers.
    pub hosts: hosts::HostRules,
    /// The credentials it refused: counts for /metrics, the log's budget.
    pub auth_failures: refusals::AuthFailures,
}

pub(crate) type Shared = Arc<App>;

/// The dashboard, the API and `/metrics` as one router. Mount it with
/// `Router::nest("/jobs", router(queue, config)?)`: its links follow the
/// prefix it is mounted under.
pub fn router(queue: Queue, config: WebConfig) -> Result<Router> {
    let mut secret = [0u8; 24];
    getrandom::fill(&mut secret).map_err(|e| Error::InvalidOption {
        option: "web",
        value: String::new(),
        reason: format!("no randomness for the CSRF token: {e}"),
    })?;
    let csrf = secret.iter().map(|b| format!("{b:02x}")).collect();
    let hosts = hosts::HostRules::new(&config);
    let app: Shared = Arc::new(App {
        queue,
        config,
        csrf,
        hosts,
        auth_failures: refusals::AuthFailures::default(),
    });
    let routes = Router::new()
        .route("/", get(pages::root))
        .route("/queues", get(pages::queues::page))
        .route("/queues/live", get(pages::queues::live))
        .route("/queues/{name}/{action}", post(pages::queues::set_paused))
        .route("/jobs", get(pages::jobs::page))
        .route("/jobs/live", get(pages::jobs::live))
        .route("/jobs/action/{action}", post(pages::jobs::bulk_action))
        .route("/jobs/{id}", get(pages::job::page))
        .route("/jobs/{id}/{action}", post(pages::job::action))
        .route("/processes", get(pages::processes::page))
        .route("/recurring", get(pages::recurring::page))
        .route("/recurring/{key}", get(pages::recurring::ledger))
        .route("/recurring/{key}/run", post(pages::recurring::run))
        .route("/concurrency", get(pages::concurrency::page))
        .route("/audit", get(pages::audit::page))
        .route("/database", get(pages::database::page))
        .route("/charts", get(pages::charts::page))
        .route("/charts/data", get(pages::charts::data))
        .route("/assets/{file}", get(assets::file))
        .route(
            "/favicon.ico",
            get(|| async { axum::http::StatusCode::NO_CONTENT }),
        )
        .route("/metrics", get(metrics::metrics))
        .merge(api::routes())
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            pages::error_pages,
        ))
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            access::check,
        ))
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            hosts::check,
        ))
        .with_state(app);
    Ok(headers::apply(routes))
}

/// Serves [`router`] on `bind` until SIGTERM or SIGINT, then finishes the
/// requests in flight. Blocks; starts its own tokio runtime. Without
/// credentials it serves a loopback address only (anonymously, and says
/// so in the log) and refuses any other. It sets [`WebConfig::listen`] to
/// the address it listens on, so that address (and on loopback
/// `localhost`) is an allowed `Host`.
pub fn serve(queue: Queue, mut config: WebConfig, bind: SocketAddr) -> Result<()> {
    if let Err(error @ Error::SchemaBehind { .. }) = queue.check_schema() {
        return Err(error);
    }
    if !config.has_credentials() {
        if !bind.ip().is_loopback() {
            return Err(Error::InvalidOption {
                option: "--bind",
                value: bind.to_string(),
                reason: "no credential is configured ([web] admin_token, read_token or \
                         username and password, or SOLIDQ_WEB_ADMIN_TOKEN…): only a loopback \
                         address may be served without one"
                    .into(),
            });
        }
        log::warn!(
            "solidq web: no credential configured: anyone on this machine may use \
             http://{bind}/ (loopback only)"
        );
        config.anonymous = true;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("solidq-web")
        .enable_all()
        .build()
        .map_err(|e| io_error("start the web runtime", e))?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(bind)
            .await
            .map_err(|e| io_error(&format!("listen on {bind}"), e))?;
        let local = listener
            .local_addr()
            .map_err(|e| io_error("read the listening address", e))?;
        config.listen = Some(local);
        let names = hosts::HostRules::new(&config).describe();
        let app = router(queue, config)?;
        log::info!("solidq web: listening on http://{local}/ for the Host names {names}");
        // The remote address, for the log of refused credentials.
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .with_graceful_shutdown(stop_signal())
        .await
        .map_err(|e| io_error("serve", e))
    })
}

async fn stop_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => {
                    let _ = interrupt.await;
                    return;
                }
            };
        tokio::select! {
            _ = interrupt => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
    log::info!("solidq web: stopping");
}

fn io_error(what: &str, e: std::io::Error) -> Error {
    Error::Io {
        context: what.to_string(),
        source: e,
    }
}
