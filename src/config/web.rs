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
}
