//! Which `Host` names the server answers: the defence against DNS
//! rebinding.
//!
//! A page the operator opens can point its own name at 127.0.0.1. For the
//! browser the dashboard then *is* that page's origin: its requests carry
//! `Host: evil.example:8080`, an `Origin` that agrees with it and
//! `Sec-Fetch-Site: same-origin`, so only the name gives it away. Every
//! request is therefore checked here first, before credentials, for every
//! path (pages, API, metrics, assets), and one naming a host that is not
//! allowed is answered 421 Misdirected Request and nothing else.
//!
//! Allowed: the address the server listens on, when it is known
//! ([`WebConfig::listen`](super::WebConfig::listen), which
//! [`serve`](super::serve) sets) — with its port; on a loopback address
//! also `localhost`, `127.0.0.1` and `[::1]`; on an unspecified address
//! (`0.0.0.0`, `[::]`) any IP address and those names. A router mounted in
//! an application of yours does not know its address: it allows the
//! three loopback names on any port. Then the names of
//! [`WebConfig::allowed_hosts`](super::WebConfig::allowed_hosts).
//!
//! An IP address is safe to allow: no one can make a browser send
//! `Host: 10.0.0.5` but to 10.0.0.5 itself. A request naming no host at
//! all (HTTP/1.0, a call in process) comes from no browser and is
//! answered. `X-Forwarded-Host` is read only when
//! [`WebConfig::trust_forwarded_host`](super::WebConfig::trust_forwarded_host)
//! is set, and then each of its names must be allowed too.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::Response;

use super::Shared;
use super::access::refuse;
use solidq::{Error, Result};

/// The header a proxy names the browser's `Host` in, read only when
/// trusted.
pub const FORWARDED_HOST: &str = "x-forwarded-host";

/// The ports a `Host` without one stands for: HTTP's, and HTTPS's (behind
/// a proxy that ends TLS the browser spoke HTTPS).
const DEFAULT_PORTS: [u16; 2] = [80, 443];

/// The longest `Host` value repeated in a refusal.
const MAX_SHOWN: usize = 100;

/// One allowed `Host` name, with or without a port: an entry of `[web]
/// allowed_hosts`.
///
/// - `jobs.example.com`: that name, on any port;
/// - `jobs.example.com:8443`: that name on that port only;
/// - `.example.com`: `example.com` and every name under it;
/// - `*.example.com`: every name under `example.com`, not itself;
/// - `10.0.0.5`, `[fd00::5]:8080`: an IP address (IPv6 in brackets).
///
/// Names are compared without regard to case and to a trailing dot. A
/// `Host` without a port stands for port 80 or 443. `*` alone is refused:
/// answering any name is what DNS rebinding needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedHost {
    name: NameRule,
    /// `None`: any port.
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum NameRule {
    /// This name or address (addresses in their canonical form, IPv6 in
    /// brackets).
    Exact(String),
    /// This domain and every name under it.
    Domain(String),
    /// Every name under this domain.
    Subdomains(String),
    /// Any IP address.
    AnyAddress,
}

impl AllowedHost {
    /// Parses one entry (see the type's docs); the error names `value`.
    pub fn parse(value: &str) -> Result<AllowedHost> {
        let invalid = |reason: &str| Error::InvalidOption {
            option: "web.allowed_hosts",
            value: value.to_string(),
            reason: reason.to_string(),
        };
        let trimmed = value.trim();
        if trimmed == "*" || trimmed.starts_with("*:") {
            return Err(invalid(
                "would answer any Host name, which is what DNS rebinding needs: list the \
                 names (a leading `.` or `*.` allows a domain's subdomains)",
            ));
        }
        if trimmed.contains("://") || trimmed.contains('/') {
            return Err(invalid(
                "expected a host name with an optional port, without scheme or path \
                 (jobs.example.com, jobs.example.com:8443)",
            ));
        }
        let (rule, rest) = if let Some(rest) = trimmed.strip_prefix("*.") {
            (Some(true), rest)
        } else if let Some(rest) = trimmed.strip_prefix('.') {
            (Some(false), rest)
        } else {
            (None, trimmed)
        };
        let (name, port) = split(rest).ok_or_else(|| {
            invalid(
                "expected a host name or IP address with an optional :port \
                 (jobs.example.com, 10.0.0.5:8080, [fd00::5]); IPv6 addresses go in brackets",
            )
        })?;
        if port == Some(0) {
            return Err(invalid("port 0 is no port a browser connects to"));
        }
        let name = match rule {
            None => NameRule::Exact(name.canonical()),
            Some(subdomains_only) => {
                let Host::Name(domain) = name else {
                    return Err(invalid(
                        "a leading `.` or `*.` takes a domain name, not an IP address",
                    ));
                };
                if subdomains_only {
                    NameRule::Subdomains(domain)
                } else {
                    NameRule::Domain(domain)
                }
            }
        };
        Ok(AllowedHost { name, port })
    }

    /// Parses a list, each entry as [`AllowedHost::parse`]; an error names
    /// `option` (the setting, variable or flag it came from).
    pub fn parse_list<'a>(
        values: impl IntoIterator<Item = &'a str>,
        option: &'static str,
    ) -> Result<Vec<AllowedHost>> {
        values
            .into_iter()
            .map(|v| {
                AllowedHost::parse(v).map_err(|e| match e {
                    Error::InvalidOption { value, reason, .. } => Error::InvalidOption {
                        option,
                        value,
                        reason,
                    },
                    other => other,
                })
            })
            .collect()
    }

    /// `name` on any port.
    fn any_port(name: &str) -> AllowedHost {
        AllowedHost {
            name: NameRule::Exact(name.to_string()),
            port: None,
        }
    }

    fn allows(&self, host: &Host, port: Option<u16>) -> bool {
        let port_ok = match (self.port, port) {
            (None, _) => true,
            (Some(wanted), Some(given)) => wanted == given,
            (Some(wanted), None) => DEFAULT_PORTS.contains(&wanted),
        };
        port_ok
            && match (&self.name, host) {
                (NameRule::AnyAddress, host) => !matches!(host, Host::Name(_)),
                (NameRule::Exact(name), host) => *name == host.canonical(),
                (NameRule::Domain(domain), Host::Name(name)) => {
                    name == domain || under(name, domain)
                }
                (NameRule::Subdomains(domain), Host::Name(name)) => under(name, domain),
                _ => false,
            }
    }
}

impl FromStr for AllowedHost {
    type Err = Error;

    fn from_str(s: &str) -> Result<AllowedHost> {
        AllowedHost::parse(s)
    }
}

impl fmt::Display for AllowedHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.name {
            NameRule::Exact(name) => write!(f, "{name}")?,
            NameRule::Domain(domain) => write!(f, ".{domain}")?,
            NameRule::Subdomains(domain) => write!(f, "*.{domain}")?,
            NameRule::AnyAddress => write!(f, "any IP address")?,
        }
        match self.port {
            Some(port) => write!(f, ":{port}"),
            None => Ok(()),
        }
    }
}

/// Whether `name` is under `domain` (`a.example.com` under
/// `example.com`).
fn under(name: &str, domain: &str) -> bool {
    name.len() > domain.len() + 1
        && name.ends_with(domain)
        && name.as_bytes()[name.len() - domain.len() - 1] == b'.'
}

/// The host part of a `Host` value or an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Host {
    /// A DNS name, lower case, without a trailing dot.
    Name(String),
    V4(Ipv4Addr),
    V6(Ipv6Addr),
}

impl Host {
    /// As a `Host` header writes it: IPv6 in brackets.
    fn canonical(&self) -> String {
        match self {
            Host::Name(name) => name.clone(),
            Host::V4(ip) => ip.to_string(),
            Host::V6(ip) => format!("[{ip}]"),
        }
    }

    fn of(ip: IpAddr) -> Host {
        match ip {
            IpAddr::V4(ip) => Host::V4(ip),
            IpAddr::V6(ip) => Host::V6(ip),
        }
    }
}

/// `host[:port]` split and checked, or `None` when it is not one.
fn split(value: &str) -> Option<(Host, Option<u16>)> {
    let (host, port) = if let Some(rest) = value.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        let ip = Ipv6Addr::from_str(inside).ok()?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':')?),
        };
        (Host::V6(ip), port)
    } else {
        let (name, port) = match value.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (value, None),
        };
        let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
        let valid = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
            && !name.starts_with('.')
            && !name.contains("..");
        if !valid {
            return None;
        }
        let host = match Ipv4Addr::from_str(&name) {
            Ok(ip) => Host::V4(ip),
            Err(_) => Host::Name(name),
        };
        (host, port)
    };
    let port = match port {
        None => None,
        Some(p) if !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()) => {
            Some(p.parse::<u16>().ok()?)
        }
        Some(_) => return None,
    };
    Some((host, port))
}

/// The names a router answers: the defaults for where it listens, then
/// the configured ones.
#[derive(Debug, Clone)]
pub(crate) struct HostRules {
    allowed: Vec<AllowedHost>,
    trust_forwarded: bool,
}

impl HostRules {
    /// The rules of `config` (see the module docs for the defaults).
    pub fn new(config: &super::WebConfig) -> HostRules {
        let mut allowed = Vec::new();
        let loopback_names = ["localhost", "127.0.0.1", "[::1]"];
        match config.listen {
            None => allowed.extend(loopback_names.map(AllowedHost::any_port)),
            Some(address) => {
                let port = Some(address.port());
                let ip = address.ip();
                if ip.is_unspecified() {
                    allowed.push(AllowedHost {
                        name: NameRule::AnyAddress,
                        port,
                    });
                } else {
                    allowed.push(AllowedHost {
                        name: NameRule::Exact(Host::of(ip).canonical()),
                        port,
                    });
                }
                if ip.is_loopback() || ip.is_unspecified() {
                    for name in loopback_names {
                        let rule = AllowedHost {
                            name: NameRule::Exact(name.to_string()),
                            port,
                        };
                        if !allowed.contains(&rule) {
                            allowed.push(rule);
                        }
                    }
                }
            }
        }
        allowed.extend(config.allowed_hosts.iter().cloned());
        HostRules {
            allowed,
            trust_forwarded: config.trust_forwarded_host,
        }
    }

    /// Whether one `Host` value is allowed.
    pub fn allows(&self, value: &str) -> bool {
        match split(value.trim()) {
            Some((host, port)) => self.allowed.iter().any(|rule| rule.allows(&host, port)),
            None => false,
        }
    }

    /// The allowed names, for the log.
    pub fn describe(&self) -> String {
        let names: Vec<String> = self.allowed.iter().map(|a| a.to_string()).collect();
        names.join(", ")
    }

    /// The first name a request gives that is not allowed (as sent,
    /// shortened), if any: every `Host` header, the request target's
    /// authority (absolute-form requests), and when trusted each name of
    /// `X-Forwarded-Host`.
    fn refused(&self, headers: &HeaderMap, uri: &Uri) -> Option<String> {
        let mut given: Vec<String> = Vec::new();
        let mut unreadable = false;
        let mut read = |name: &str| {
            for value in headers.get_all(name) {
                match value.to_str() {
                    Ok(v) => given.extend(v.split(',').map(|s| s.trim().to_string())),
                    Err(_) => unreadable = true,
                }
            }
        };
        read(header::HOST.as_str());
        if self.trust_forwarded {
            read(FORWARDED_HOST);
        }
        if unreadable {
            return Some("(not text)".into());
        }
        if let Some(authority) = uri.authority() {
            given.push(authority.as_str().to_string());
        }
        given
            .into_iter()
            .find(|host| !self.allows(host))
            .map(|host| host.chars().take(MAX_SHOWN).collect())
    }

    /// The host the browser asked for, for the `Origin` check: the first
    /// name of `X-Forwarded-Host` when trusted, else `Host`.
    pub fn public_host<'a>(&self, headers: &'a HeaderMap) -> &'a str {
        let forwarded = self
            .trust_forwarded
            .then(|| headers.get(FORWARDED_HOST))
            .flatten()
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(',').next())
            .map(str::trim);
        forwarded
            .or_else(|| headers.get(header::HOST).and_then(|v| v.to_str().ok()))
            .unwrap_or("")
    }
}

/// The middleware in front of everything: a request naming a host that
/// is not allowed is answered 421 at once.
pub(super) async fn check(State(app): State<Shared>, request: Request, next: Next) -> Response {
    let Some(host) = app.hosts.refused(request.headers(), request.uri()) else {
        return next.run(request).await;
    };
    let api = super::access::is_api(request.uri().path());
    let message = format!(
        "Host {host:?} is not served here: add it to [web] allowed_hosts \
         (SOLIDQ_WEB_ALLOWED_HOSTS, solidq web --allowed-host)"
    );
    refuse(StatusCode::MISDIRECTED_REQUEST, &message, &app, api)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    fn rules_on(listen: Option<SocketAddr>, extra: &[&str], trust: bool) -> HostRules {
        let mut config = super::super::WebConfig::new();
        config.listen = listen;
        config.allowed_hosts = AllowedHost::parse_list(extra.iter().copied(), "test").unwrap();
        config.trust_forwarded_host = trust;
        HostRules::new(&config)
    }

    #[test]
    fn loopback_defaults_take_the_port() {
        let rules = rules_on(Some("127.0.0.1:8080".parse().unwrap()), &[], false);
        for ok in [
            "127.0.0.1:8080",
            "localhost:8080",
            "LOCALHOST:8080",
            "localhost.:8080",
            "[::1]:8080",
            "[0:0:0:0:0:0:0:1]:8080",
        ] {
            assert!(rules.allows(ok), "{ok}");
        }
        for refused in [
            "evil.example:8080",
            "localhost:8081",
            "localhost",
            "127.0.0.2:8080",
            "localhost.evil.example:8080",
            "",
            "localhost:",
            "localhost:80a",
            "local host:8080",
            "[::1",
            "::1",
        ] {
            assert!(!rules.allows(refused), "{refused}");
        }
        // Without a port a Host means port 80 (or 443 behind TLS).
        let on_80 = rules_on(Some("127.0.0.1:80".parse().unwrap()), &[], false);
        assert!(on_80.allows("localhost") && on_80.allows("127.0.0.1:80"));
        assert!(!on_80.allows("localhost:8080"));
    }

    #[test]
    fn unspecified_addresses_allow_any_ip_but_no_name() {
        let rules = rules_on(Some("0.0.0.0:8080".parse().unwrap()), &[], false);
        assert!(rules.allows("10.1.2.3:8080") && rules.allows("[fd00::1]:8080"));
        assert!(rules.allows("localhost:8080"));
        assert!(!rules.allows("10.1.2.3:9090") && !rules.allows("jobs.internal:8080"));
        let specific = rules_on(Some("10.1.2.3:8080".parse().unwrap()), &[], false);
        assert!(specific.allows("10.1.2.3:8080"));
        assert!(!specific.allows("10.1.2.4:8080") && !specific.allows("localhost:8080"));
    }

    #[test]
    fn configured_names_domains_and_subdomains() {
        let rules = rules_on(
            Some("127.0.0.1:8080".parse().unwrap()),
            &[
                "jobs.example.com",
                "ops.example.net:8443",
                ".example.org",
                "*.example.io",
            ],
            false,
        );
        for ok in [
            "jobs.example.com",
            "jobs.example.com:443",
            "Jobs.Example.Com:9999",
            "ops.example.net:8443",
            "example.org",
            "a.b.example.org:8080",
            "x.example.io",
        ] {
            assert!(rules.allows(ok), "{ok}");
        }
        for refused in [
            "ops.example.net",
            "ops.example.net:8444",
            "evil-example.org",
            "example.io",
            "xexample.io",
            "jobs.example.com.evil.example",
        ] {
            assert!(!rules.allows(refused), "{refused}");
        }
        // A mounted router without an address: the loopback names on any
        // port.
        let mounted = rules_on(None, &[], false);
        assert!(mounted.allows("localhost:3000") && mounted.allows("localhost"));
        assert!(!mounted.allows("10.0.0.1:3000"));
    }

    #[test]
    fn bad_entries_name_the_value() {
        for bad in [
            "*",
            "*:8080",
            "https://jobs.example.com",
            "jobs.example.com/x",
            "::1",
            "jobs.example.com:0",
            "jobs.example.com:99999",
            ".10.0.0.1",
            "",
            "a b",
        ] {
            let e = AllowedHost::parse(bad).unwrap_err();
            assert!(e.to_string().contains("web.allowed_hosts"), "{bad}: {e}");
            assert!(
                e.to_string().contains(&format!("{bad:?}")) || bad.is_empty(),
                "{bad}: {e}"
            );
        }
        let e = AllowedHost::parse_list(["ok.example", "no way"], "SOLIDQ_WEB_ALLOWED_HOSTS")
            .unwrap_err();
        assert!(e.to_string().contains("SOLIDQ_WEB_ALLOWED_HOSTS"), "{e}");
        assert_eq!(
            AllowedHost::parse("*.Example.COM:8443")
                .unwrap()
                .to_string(),
            "*.example.com:8443"
        );
    }

    #[test]
    fn forwarded_hosts_count_only_when_trusted() {
        let uri = Uri::from_static("/queues");
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, "127.0.0.1:8080".parse().unwrap());
        headers.insert(FORWARDED_HOST, "evil.example".parse().unwrap());
        let listen = Some("127.0.0.1:8080".parse().unwrap());
        let untrusted = rules_on(listen, &["jobs.example.com"], false);
        assert_eq!(untrusted.refused(&headers, &uri), None);
        assert_eq!(untrusted.public_host(&headers), "127.0.0.1:8080");
        let trusted = rules_on(listen, &["jobs.example.com"], true);
        assert_eq!(
            trusted.refused(&headers, &uri).as_deref(),
            Some("evil.example")
        );
        headers.insert(FORWARDED_HOST, "jobs.example.com".parse().unwrap());
        assert_eq!(trusted.refused(&headers, &uri), None);
        assert_eq!(trusted.public_host(&headers), "jobs.example.com");
        // The proxy's own Host must be allowed too.
        headers.insert(header::HOST, "evil.example".parse().unwrap());
        assert!(trusted.refused(&headers, &uri).is_some());
        // No Host at all: no browser sent it.
        assert_eq!(untrusted.refused(&HeaderMap::new(), &uri), None);
        // An absolute-form target names its host too.
        let absolute = Uri::from_static("http://evil.example:8080/queues");
        let mut host_only = HeaderMap::new();
        host_only.insert(header::HOST, "127.0.0.1:8080".parse().unwrap());
        assert!(untrusted.refused(&host_only, &absolute).is_some());
    }
}
