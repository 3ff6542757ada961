//! Who a request is and what it may do: bearer tokens, HTTP basic auth,
//! anonymous loopback; and the CSRF check of state changes made with
//! browser credentials (see the [module docs](super)). A refused
//! credential is counted and logged by [`super::refusals`].

use std::net::SocketAddr;
use std::time::Instant;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;

use super::Shared;
use super::refusals::{Refused, Scheme};

/// The header the dashboard sends its CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// What a request was allowed, and by which credential: handlers read it
/// from the request's extensions (the audit log names the actor).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// Everything, by the admin token.
    AdminToken,
    /// Reads only, by the read token.
    ReadToken,
    /// Everything, by HTTP basic auth as this user.
    Basic(String),
    /// Everything, without credentials (none configured, loopback).
    Anonymous,
}

impl Access {
    /// Whether it may change state.
    pub fn may_write(&self) -> bool {
        !matches!(self, Access::ReadToken)
    }

    /// Whether the browser sends it by itself (so a state change must
    /// prove it comes from the dashboard).
    fn ambient(&self) -> bool {
        matches!(self, Access::Basic(_) | Access::Anonymous)
    }

    /// Who acted, for the audit log.
    pub fn actor(&self) -> String {
        match self {
            Access::AdminToken => "admin token".into(),
            Access::ReadToken => "read token".into(),
            Access::Basic(user) => user.clone(),
            Access::Anonymous => "anonymous (loopback)".into(),
        }
    }
}

/// Compares secrets without stopping at the first differing byte.
fn same(given: &str, expected: &str) -> bool {
    let (a, b) = (given.as_bytes(), expected.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn identify(app: &super::App, headers: &HeaderMap) -> Option<Access> {
    let config = &app.config;
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if let Some(token) = given.and_then(|v| v.strip_prefix("Bearer ")) {
        let token = token.trim();
        if config
            .admin_token
            .as_deref()
            .is_some_and(|t| same(token, t))
        {
            return Some(Access::AdminToken);
        }
        if config.read_token.as_deref().is_some_and(|t| same(token, t)) {
            return Some(Access::ReadToken);
        }
        return None;
    }
    if let Some(encoded) = given.and_then(|v| v.strip_prefix("Basic ")) {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .ok()?;
        let decoded = String::from_utf8(decoded).ok()?;
        let (user, password) = decoded.split_once(':')?;
        let (expected_user, expected_password) = config.basic.as_ref()?;
        // Both compared, whichever differs.
        let user_ok = same(user, expected_user);
        let password_ok = same(password, expected_password);
        return (user_ok && password_ok).then(|| Access::Basic(user.to_string()));
    }
    (config.anonymous && !config.has_credentials()).then_some(Access::Anonymous)
}

/// Whether a state change with browser credentials comes from this
/// dashboard: its CSRF token, and no other origin.
fn csrf_ok(app: &super::App, headers: &HeaderMap) -> Result<(), &'static str> {
    if headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|site| site == "cross-site" || site == "same-site")
    {
        return Err("cross-site request refused");
    }
    if let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
        // The host the browser asked for: behind a proxy that rewrites
        // Host, the forwarded one (when trusted).
        let host = app.hosts.public_host(headers);
        let origin_host = origin.split_once("://").map(|(_, rest)| rest).unwrap_or("");
        if !origin_host.eq_ignore_ascii_case(host) {
            return Err("request from another origin refused");
        }
    }
    match headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok()) {
        Some(token) if same(token, &app.csrf) => Ok(()),
        Some(_) => Err("stale CSRF token: reload the page"),
        None => Err("missing CSRF token (X-CSRF-Token)"),
    }
}

/// Whether `path` answers in JSON (the API and `/metrics`' errors).
pub(super) fn is_api(path: &str) -> bool {
    path.starts_with("/api/") || path == "/metrics"
}

/// A refusal: `{error, code}` in JSON for the API, one line of text
/// otherwise; a 401 carries the challenge of the configured scheme.
pub(super) fn refuse(status: StatusCode, message: &str, app: &super::App, api: bool) -> Response {
    let mut response = if api {
        (
            status,
            axum::Json(serde_json::json!({ "error": message, "code": status.as_u16() })),
        )
            .into_response()
    } else {
        (status, format!("{message}\n")).into_response()
    };
    if status == StatusCode::UNAUTHORIZED {
        let challenge = if app.config.basic.is_some() {
            "Basic realm=\"solidq\", charset=\"UTF-8\""
        } else {
            "Bearer realm=\"solidq\""
        };
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static(challenge),
        );
    }
    response
}

/// The middleware in front of every route.
pub(super) async fn check(State(app): State<Shared>, mut request: Request, next: Next) -> Response {
    let path = request.uri().path();
    let api = is_api(path);
    // The vendored scripts hold nothing secret, and a login prompt must
    // be able to load them. The API's OpenAPI document describes the
    // endpoints (as the README does) and holds no data: tools fetch it
    // without credentials.
    if path.starts_with("/assets/")
        || path == "/favicon.ico"
        || (path == "/api/openapi.json" && *request.method() == Method::GET)
    {
        return next.run(request).await;
    }
    let Some(access) = identify(&app, request.headers()) else {
        let peer = request
            .extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0);
        let refused = Refused {
            scheme: Scheme::of(request.headers()),
            peer,
            method: request.method(),
            path,
            headers: request.headers(),
        };
        app.auth_failures.record(&refused, Instant::now());
        let message = if app.config.has_credentials() || !app.config.anonymous {
            "authentication required"
        } else {
            "no credential configured"
        };
        return refuse(StatusCode::UNAUTHORIZED, message, &app, api);
    };
    let reads = matches!(*request.method(), Method::GET | Method::HEAD);
    if !reads {
        if !access.may_write() {
            return refuse(
                StatusCode::FORBIDDEN,
                "the read-only token may not change anything",
                &app,
                api,
            );
        }
        if access.ambient()
            && let Err(message) = csrf_ok(&app, request.headers())
        {
            return refuse(StatusCode::FORBIDDEN, message, &app, api);
        }
    }
    request.extensions_mut().insert(access);
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::same;

    #[test]
    fn secrets_compare_whole() {
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("ab", "abc"));
        assert!(!same("", "a"));
    }
}
