//! Refused credentials, made visible: each 401 is counted by what the
//! request presented (`solidq_web_auth_failures_total{scheme}` in
//! /metrics), and each refused credential is logged at warn level with the
//! remote address, the method and path, and the scheme — never the
//! credential, nor the user name (people type passwords into it).
//!
//! The log is rate-limited so a flood of guesses cannot fill the disk: at
//! most [`AUTH_LOG_PER_MINUTE`] lines a minute; the last of them says so,
//! and the first line of a later minute says how many were left out (the
//! counter has them all). A request without any credential is counted
//! (`scheme="none"`) but not logged: a browser's first visit to a
//! basic-auth server carries none, and is answered with the prompt.

use std::net::SocketAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, Method, header};

/// The most refused credentials logged in a minute; more are counted
/// only.
pub const AUTH_LOG_PER_MINUTE: u32 = 10;

/// The window of [`AUTH_LOG_PER_MINUTE`].
const WINDOW: Duration = Duration::from_secs(60);

/// The longest path (and forwarded address) a log line repeats.
const MAX_SHOWN: usize = 200;

/// What a refused request presented, as the metric's `scheme` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scheme {
    /// `Authorization: Bearer …` matching no configured token.
    Bearer,
    /// `Authorization: Basic …` with a wrong user or password, or
    /// malformed.
    Basic,
    /// Another `Authorization` scheme.
    Other,
    /// No `Authorization` at all.
    None,
}

impl Scheme {
    const ALL: [Scheme; 4] = [Scheme::Bearer, Scheme::Basic, Scheme::Other, Scheme::None];

    /// What `headers` present.
    pub fn of(headers: &HeaderMap) -> Scheme {
        let Some(value) = headers.get(header::AUTHORIZATION) else {
            return Scheme::None;
        };
        let scheme = value
            .as_bytes()
            .split(|b| *b == b' ')
            .next()
            .unwrap_or_default();
        if scheme.eq_ignore_ascii_case(b"bearer") {
            Scheme::Bearer
        } else if scheme.eq_ignore_ascii_case(b"basic") {
            Scheme::Basic
        } else {
            Scheme::Other
        }
    }

    /// The metric's label.
    pub fn label(self) -> &'static str {
        match self {
            Scheme::Bearer => "bearer",
            Scheme::Basic => "basic",
            Scheme::Other => "other",
            Scheme::None => "none",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Scheme::Bearer => "a bearer token that matches no configured token",
            Scheme::Basic => "basic auth with a wrong user name or password",
            Scheme::Other => "an Authorization scheme other than Bearer and Basic",
            Scheme::None => "no credential",
        }
    }
}

/// One refused request, as the log names it.
pub(crate) struct Refused<'a> {
    pub scheme: Scheme,
    pub peer: Option<SocketAddr>,
    pub method: &'a Method,
    pub path: &'a str,
    pub headers: &'a HeaderMap,
}

/// This server's refused credentials: counts since it started, and the
/// log's budget.
#[derive(Debug, Default)]
pub(crate) struct AuthFailures {
    counts: [AtomicU64; 4],
    budget: Mutex<LogBudget>,
}

impl AuthFailures {
    /// Counts `refused` and logs it within the budget.
    pub fn record(&self, refused: &Refused<'_>, now: Instant) {
        let index = Scheme::ALL
            .iter()
            .position(|s| *s == refused.scheme)
            .unwrap_or(0);
        self.counts[index].fetch_add(1, Ordering::Relaxed);
        if refused.scheme == Scheme::None {
            return;
        }
        let verdict = match self.budget.lock() {
            Ok(mut budget) => budget.admit(now),
            Err(poisoned) => poisoned.into_inner().admit(now),
        };
        let Verdict::Log { left_out, last } = verdict else {
            return;
        };
        if left_out > 0 {
            log::warn!(
                "solidq web: {left_out} more refused credentials were not logged in the minute \
                 before (solidq_web_auth_failures_total counts them)"
            );
        }
        let peer = refused
            .peer
            .map_or_else(|| "an unknown address".to_string(), |p| p.to_string());
        let forwarded = refused
            .headers
            .get("x-forwarded-for")
            .and_then(|v| v.to_str().ok())
            .map(|v| {
                let v: String = v.chars().take(MAX_SHOWN).collect();
                format!(" (X-Forwarded-For {v:?}, unverified)")
            })
            .unwrap_or_default();
        let path: String = refused.path.chars().take(MAX_SHOWN).collect();
        let more = if last {
            "; more this minute are counted in solidq_web_auth_failures_total, not logged"
        } else {
            ""
        };
        log::warn!(
            "solidq web: refused {} from {peer}{forwarded} for {} {path:?} (401){more}",
            refused.scheme.describe(),
            refused.method,
        );
    }

    /// Each scheme's label and count.
    pub fn counts(&self) -> Vec<(&'static str, u64)> {
        Scheme::ALL
            .iter()
            .zip(&self.counts)
            .map(|(scheme, n)| (scheme.label(), n.load(Ordering::Relaxed)))
            .collect()
    }
}

/// At most [`AUTH_LOG_PER_MINUTE`] lines in any window of a minute that
/// starts with a logged line; `now` is passed in so tests move time.
#[derive(Debug, Default)]
struct LogBudget {
    started: Option<Instant>,
    logged: u32,
    left_out: u64,
}

#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// Log this one; first say that `left_out` were left out before; it
    /// is the `last` of its window.
    Log { left_out: u64, last: bool },
    /// Count it only.
    Quiet,
}

impl LogBudget {
    fn admit(&mut self, now: Instant) -> Verdict {
        let expired = self
            .started
            .is_none_or(|start| now.saturating_duration_since(start) >= WINDOW);
        let mut left_out = 0;
        if expired {
            left_out = std::mem::take(&mut self.left_out);
            self.started = Some(now);
            self.logged = 0;
        }
        if self.logged < AUTH_LOG_PER_MINUTE {
            self.logged += 1;
            Verdict::Log {
                left_out,
                last: self.logged == AUTH_LOG_PER_MINUTE,
            }
        } else {
            self.left_out += 1;
            Verdict::Quiet
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_logs_a_minute_s_share_then_says_how_many_it_left_out() {
        let mut budget = LogBudget::default();
        let t0 = Instant::now();
        let n = AUTH_LOG_PER_MINUTE as usize;
        let verdicts: Vec<Verdict> = (0..n + 5)
            .map(|i| budget.admit(t0 + Duration::from_millis(i as u64)))
            .collect();
        for v in &verdicts[..n - 1] {
            assert_eq!(
                *v,
                Verdict::Log {
                    left_out: 0,
                    last: false
                }
            );
        }
        assert_eq!(
            verdicts[n - 1],
            Verdict::Log {
                left_out: 0,
                last: true
            }
        );
        assert!(verdicts[n..].iter().all(|v| *v == Verdict::Quiet));
        // Still within the minute: quiet.
        assert_eq!(budget.admit(t0 + Duration::from_secs(59)), Verdict::Quiet);
        // A minute on: logged again, saying six were left out.
        assert_eq!(
            budget.admit(t0 + WINDOW),
            Verdict::Log {
                left_out: 6,
                last: false
            }
        );
        assert_eq!(
            budget.admit(t0 + WINDOW + Duration::from_secs(1)),
            Verdict::Log {
                left_out: 0,
                last: false
            }
        );
    }

    #[test]
    fn schemes_by_authorization() {
        let mut headers = HeaderMap::new();
        assert_eq!(Scheme::of(&headers), Scheme::None);
        for (value, scheme) in [
            ("Bearer x", Scheme::Bearer),
            ("bearer x", Scheme::Bearer),
            ("Basic eA==", Scheme::Basic),
            ("Digest x", Scheme::Other),
            ("", Scheme::Other),
        ] {
            headers.insert(header::AUTHORIZATION, value.parse().unwrap());
            assert_eq!(Scheme::of(&headers), scheme, "{value}");
        }
    }
}
