//! The page shell (navigation, the stylesheet, scripts) and the small
//! renderings every page shares: times, ages, capped counts, filtered
//! arguments. Nothing inline: styles and scripts are files under
//! `/assets/`, as the pages' Content-Security-Policy requires.

use std::time::Duration;

use axum::extract::{FromRequestParts, OriginalUri};
use axum::http::request::Parts;
use chrono::{DateTime, Utc};
use maud::{DOCTYPE, Markup, html};

use super::access::Access;
use super::{LIVE_REFRESH, Shared};

/// What a page handler knows of its request: the prefix the router is
/// mounted under, the CSRF token, and who asks.
pub struct Ctx {
    /// The mount prefix, without a trailing slash ("" at the root).
    pub base: String,
    /// The server's CSRF token, for htmx's requests.
    pub csrf: String,
    /// The caller's access.
    pub access: Access,
    /// The message of the action that led here (`?done=`), shown once.
    pub done: Option<String>,
}

impl Ctx {
    /// A path of this router, under its mount prefix.
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }
}

impl FromRequestParts<Shared> for Ctx {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, app: &Shared) -> Result<Ctx, Self::Rejection> {
        Ok(Ctx::of(parts, app))
    }
}

impl Ctx {
    /// The context of the request whose head is `parts`.
    pub fn of(parts: &Parts, app: &super::App) -> Ctx {
        let inner = parts.uri.path().to_string();
        let outer = parts
            .extensions
            .get::<OriginalUri>()
            .map(|o| o.0.path().to_string())
            .unwrap_or_else(|| inner.clone());
        // Nested at "/x", axum hands "/" to the router for both "/x" and
        // "/x/".
        let base = outer
            .strip_suffix(inner.as_str())
            .or_else(|| (inner == "/").then_some(outer.as_str()))
            .unwrap_or("")
            .trim_end_matches('/')
            .to_string();
        let access = parts
            .extensions
            .get::<Access>()
            .cloned()
            .unwrap_or(Access::ReadToken);
        let done = parts.uri.query().and_then(|q| {
            form_urlencoded::parse(q.as_bytes())
                .find(|(k, _)| k == "done")
                .map(|(_, v)| v.chars().take(300).collect())
        });
        Ctx {
            done,
            base,
            csrf: app.csrf.clone(),
            access,
        }
    }
}

const NAV: &[(&str, &str)] = &[
    ("queues", "Queues"),
    ("jobs", "Jobs"),
    ("processes", "Processes"),
    ("recurring", "Recurring"),
    ("concurrency", "Concurrency"),
    ("charts", "Charts"),
    ("audit", "Audit log"),
    ("database", "Database"),
];

/// A whole page: the navigation with `active` marked, then `body`.
pub fn shell(ctx: &Ctx, title: &str, active: &str, body: Markup) -> Markup {
    let headers = serde_json::json!({ "X-CSRF-Token": ctx.csrf }).to_string();
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="htmx-config" content=r#"{"includeIndicatorStyles":false,"allowEval":false,"responseHandling":[{"code":"204","swap":false},{"code":"[23]..","swap":true},{"code":"[45]..","swap":true,"error":true}]}"#;
                title { (title) " · solidq" }
                link rel="stylesheet" href=(ctx.url("/assets/dashboard.css"));
                script src=(ctx.url("/assets/htmx.min.js")) {}
            }
            body hx-headers=(headers) {
                header {
                    b { "solidq" }
                    @for (path, label) in NAV {
                        a href=(ctx.url(&format!("/{path}"))) class=[(active == *path).then_some("on")] { (label) }
                    }
                    span class="who muted" {
                        (ctx.access.actor())
                        @if !ctx.access.may_write() { " · read only" }
                    }
                }
                main {
                    div id="flash" {
                        @if let Some(message) = &ctx.done { (flash(message, false)) }
                    }
                    (body)
                }
            }
        }
    }
}

/// The `hx-trigger` of a live part.
pub fn live_trigger() -> String {
    format!("every {}s", LIVE_REFRESH.as_secs())
}

/// A time, UTC, to the second.
pub fn time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S").to_string()
}

/// An optional time, or a dash.
pub fn maybe_time(t: Option<DateTime<Utc>>) -> String {
    t.map(time).unwrap_or_else(|| "—".into())
}

/// A duration for people: "850 ms", "42 s", "3 min 5 s", "2 h 10 min".
pub fn age(d: Duration) -> String {
    let ms = d.as_millis();
    let s = d.as_secs();
    if ms < 1_000 {
        format!("{ms} ms")
    } else if s < 60 {
        format!("{:.1} s", d.as_secs_f64())
    } else if s < 3_600 {
        format!("{} min {} s", s / 60, s % 60)
    } else if s < 86_400 {
        format!("{} h {} min", s / 3_600, (s % 3_600) / 60)
    } else {
        format!("{} d {} h", s / 86_400, (s % 86_400) / 3_600)
    }
}

/// A count, "N+" at the cap.
pub fn count(n: u64, cap: u64) -> String {
    if n > cap {
        format!("{}+", thousands(cap))
    } else {
        thousands(n)
    }
}

/// 1234567 as "1,234,567".
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `value` with every object key in `keys` (any case) replaced by
/// `"[FILTERED]"`, at any depth.
pub fn filtered(value: &serde_json::Value, keys: &[String]) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let hidden = keys.iter().any(|key| key.eq_ignore_ascii_case(k));
                    let v = if hidden {
                        Value::String("[FILTERED]".into())
                    } else {
                        filtered(v, keys)
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|v| filtered(v, keys)).collect()),
        other => other.clone(),
    }
}

/// A one-line flash message for an htmx swap into `#flash`.
pub fn flash(message: &str, bad: bool) -> Markup {
    html! { div class=(if bad { "flash bad" } else { "flash" }) role="status" { (message) } }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(count(10_001, 10_000), "10,000+");
    }

    #[test]
    fn filtered_hides_keys_at_any_depth_in_any_case() {
        let keys = vec!["password".to_string()];
        let v =
            serde_json::json!({"user": {"Password": "x", "name": "a"}, "list": [{"password": 1}]});
        let f = filtered(&v, &keys);
        assert_eq!(f["user"]["Password"], "[FILTERED]");
        assert_eq!(f["user"]["name"], "a");
        assert_eq!(f["list"][0]["password"], "[FILTERED]");
    }
}
