//! `[web]`: the dashboard, HTTP API and metrics server of `solidq web`.

use serde::Deserialize;

/// Where `solidq web` listens unless `--bind` or `bind` says otherwise:
/// loopback only.
pub const DEFAULT_WEB_BIND: &str = "127.0.0.1:8080";
/// Argument keys (at any depth, in any case) the dashboard and the API
/// show as `[FILTERED]` unless `filtered_keys` replaces the list.
pub const DEFAULT_FILTERED_KEYS: &[&str] = &[
    "password",
    "passwd",
    "secret",
    "token",
    "api_key",
    "apikey",
    "authorization",
    "credit_card",
];
/// Above this many jobs the dashboard shows a count as "10,000+" instead
/// of counting on: a status tab or a filter costs at most this many index
/// entries read, however many finished jobs the table holds.
pub const DEFAULT_WEB_COUNT_CAP: u64 = 10_000;
/// The admin token (every page, action and enqueue); overrides
/// `admin_token`.
pub const ENV_WEB_ADMIN_TOKEN: &str = "SOLIDQ_WEB_ADMIN_TOKEN";
/// The read-only token (pages, task info, metrics); overrides
/// `read_token`.
pub const ENV_WEB_READ_TOKEN: &str = "SOLIDQ_WEB_READ_TOKEN";
/// The HTTP basic auth user name; overrides `username`.
pub const ENV_WEB_USERNAME: &str = "SOLIDQ_WEB_USERNAME";
/// The HTTP basic auth password; overrides `password`.
pub const ENV_WEB_PASSWORD: &str = "SOLIDQ_WEB_PASSWORD";
/// `Host` names to answer besides the defaults, separated by commas;
/// overrides `allowed_hosts`.
pub const ENV_WEB_ALLOWED_HOSTS: &str = "SOLIDQ_WEB_ALLOWED_HOSTS";
/// `true` or `false`: whether `X-Forwarded-Host` is read; overrides
/// `trust_forwarded_host`.
pub const ENV_WEB_TRUST_FORWARDED_HOST: &str = "SOLIDQ_WEB_TRUST_FORWARDED_HOST";

/// `[web]` of solidq.toml. With no credential at all the server binds
/// loopback only. Credentials are better given by environment
/// ([`ENV_WEB_ADMIN_TOKEN`] and the others), which win over the file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebSection {
    /// `host:port` to listen on. Defaults to [`DEFAULT_WEB_BIND`].
    #[serde(default)]
    pub bind: Option<String>,
    /// A bearer token allowed everything: pages, actions, enqueue.
    #[serde(default)]
    pub admin_token: Option<String>,
    /// A bearer token allowed to read only: pages, job and task info,
    /// metrics (what LeanCloud lets browser clients do).
    #[serde(default)]
    pub read_token: Option<String>,
    /// HTTP basic auth user (with `password`), allowed everything: what a
    /// browser prompts for.
    #[serde(default)]
    pub username: Option<String>,
    /// HTTP basic auth password.
    #[serde(default)]
    pub password: Option<String>,
    /// Argument keys shown as `[FILTERED]`; defaults to
    /// [`DEFAULT_FILTERED_KEYS`].
    #[serde(default)]
    pub filtered_keys: Option<Vec<String>>,
    /// `Host` names answered besides the server's own address (and, on
    /// loopback, `localhost`, `127.0.0.1` and `[::1]`): the name a
    /// reverse proxy forwards, such as `jobs.example.com`; `.example.com`
    /// allows a domain and its subdomains, `*.example.com` its subdomains
    /// only; a port (`jobs.example.com:8443`) restricts the entry to it.
    /// Any other `Host` is answered 421 (DNS rebinding). Defaults to none.
    #[serde(default)]
    pub allowed_hosts: Option<Vec<String>>,
    /// Read `X-Forwarded-Host` (set by a reverse proxy that rewrites
    /// `Host`): each of its names must be allowed as well, and a POST's
    /// `Origin` is compared with it. Defaults to `false`: the header is
    /// ignored, since anyone may send it.
    #[serde(default)]
    pub trust_forwarded_host: Option<bool>,
}
