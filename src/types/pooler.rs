//! solidq's own parameters in a PostgreSQL URL, for running behind a
//! connection pooler (PgBouncer) in transaction mode. They sit in the URL,
//! next to libpq's, so that every process and command given the URL (the
//! pool, the listener, the notifier, a supervisor's children, the CLI, the
//! dashboard) connects the same way with nothing else to pass on; solidq
//! takes them out before the URL reaches libpq, which refuses parameters it
//! does not know.
//!
//! * `prepared_statements=false`: no named server-side prepared statements.
//!   diesel then sends each statement with its parameters in one message
//!   batch (Parse, Bind, Execute, Sync: libpq's `PQsendQueryParams`), which a
//!   pooler in transaction mode hands to one server connection, instead of
//!   preparing it once per connection under a name that the next
//!   transaction's server connection does not know. Defaults to true.
//! * `listen=false`: no `LISTEN` connection; idle workers poll every
//!   `polling_interval` and see cancellations at their fallback check.
//!   `LISTEN` needs a session: through a transaction-mode pooler it lands on
//!   whichever server connection ran it, and notifications are lost.
//! * `listen_host=H` (and `listen_port=P`, default 5432): the `LISTEN`
//!   connection goes to `H:P` (typically the PostgreSQL server behind the
//!   pooler), with the URL's database, user, password and other parameters;
//!   libpq's syntax, so `H` may list several hosts (`P` then as many
//!   ports). Everything else still goes through the pooler.

use super::DatabaseUrl;

/// Whether and where a worker listens for notifications.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Listen {
    /// On a connection made with the URL itself.
    Same,
    /// Not at all (`listen=false`).
    Off,
    /// On a connection to other hosts (`listen_host`, `listen_port`).
    At {
        /// libpq's `host`.
        host: String,
        /// libpq's `port`.
        port: String,
    },
}

/// solidq's parameters of a PostgreSQL URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PoolerParams {
    /// Whether connections cache named prepared statements.
    pub(crate) prepared_statements: bool,
    /// Where the worker's listener connects.
    pub(crate) listen: Listen,
}

impl Default for PoolerParams {
    fn default() -> Self {
        PoolerParams {
            prepared_statements: true,
            listen: Listen::Same,
        }
    }
}

/// Takes solidq's parameters out of a PostgreSQL `url`: returns the URL for
/// libpq and the parameters, or why they are wrong.
pub(crate) fn split(url: &str) -> std::result::Result<(String, PoolerParams), String> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_string(), PoolerParams::default()));
    };
    let mut params = PoolerParams::default();
    let mut listen_on = true;
    let (mut host, mut port) = (None, None);
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "prepared_statements" => params.prepared_statements = boolean(key, value)?,
            "listen" => listen_on = boolean(key, value)?,
            "listen_host" if !value.is_empty() => host = Some(value.to_string()),
            "listen_port" if !value.is_empty() => port = Some(value.to_string()),
            "listen_host" | "listen_port" => return Err(format!("{key} is empty")),
            _ => kept.push(pair),
        }
    }
    params.listen = match (listen_on, host) {
        (false, Some(_)) => return Err("listen=false and listen_host contradict".into()),
        (false, None) => Listen::Off,
        (true, Some(host)) => Listen::At {
            host,
            port: port.unwrap_or_else(|| "5432".into()),
        },
        (true, None) if port.is_some() => return Err("listen_port needs listen_host".into()),
        (true, None) => Listen::Same,
    };
    let libpq = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((libpq, params))
}

fn boolean(key: &str, value: &str) -> std::result::Result<bool, String> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "on" | "yes" | "1" => Ok(true),
        "false" | "off" | "no" | "0" => Ok(false),
        _ => Err(format!("{key}={value:?} is not true or false")),
    }
}

impl DatabaseUrl {
    /// Whether connections keep diesel's cache of named prepared statements
    /// (`prepared_statements`, true unless the URL says false).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn prepared_statements(&self) -> bool {
        self.pooler.prepared_statements
    }

    /// Whether workers listen for notifications (not with `listen=false`).
    pub(crate) fn listens(&self) -> bool {
        self.pooler.listen != Listen::Off
    }

    /// The libpq URL of the `LISTEN` connection (with solidq's libpq
    /// defaults, see [`DatabaseUrl::conninfo`]); `None` with `listen=false`.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn listen_conninfo(&self) -> Option<String> {
        let conninfo = self.conninfo();
        match &self.pooler.listen {
            Listen::Same => Some(conninfo),
            Listen::Off => None,
            // libpq takes query parameters over the URL's authority.
            Listen::At { host, port } => {
                let sep = if conninfo.contains('?') { '&' } else { '?' };
                Some(format!("{conninfo}{sep}host={host}&port={port}"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn solidq_parameters_are_taken_out_and_the_rest_kept_in_order() {
        let (libpq, params) = split(
            "postgres://u@bouncer:6432/app?sslmode=disable&prepared_statements=false&listen_host=db&application_name=x",
        )
        .unwrap();
        assert_eq!(
            libpq,
            "postgres://u@bouncer:6432/app?sslmode=disable&application_name=x"
        );
        assert!(!params.prepared_statements);
        assert_eq!(
            params.listen,
            Listen::At {
                host: "db".into(),
                port: "5432".into()
            }
        );
        let (libpq, params) = split("postgres://h/db?listen=off").unwrap();
        assert_eq!(
            (libpq.as_str(), params.listen),
            ("postgres://h/db", Listen::Off)
        );
        let (libpq, params) = split("postgres://h/db").unwrap();
        assert_eq!(
            (libpq.as_str(), params),
            ("postgres://h/db", PoolerParams::default())
        );
    }

    #[test]
    fn wrong_values_and_contradictions_are_refused() {
        for url in [
            "postgres://h/db?prepared_statements=maybe",
            "postgres://h/db?listen=false&listen_host=db",
            "postgres://h/db?listen_port=5432",
            "postgres://h/db?listen_host=",
        ] {
            assert!(split(url).is_err(), "{url}");
        }
    }
}
