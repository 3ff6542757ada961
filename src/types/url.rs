//! Database URLs: which backend a URL names, decided by its scheme, and
//! how it is shown without its password.
//!
//! diesel's own `MultiConnection::establish` tries every backend in turn, so
//! a mistyped `postgres://` URL would silently open an SQLite file of that
//! name. [`DatabaseUrl`] decides the backend from the scheme instead.

use std::fmt;
use std::path::{Path, PathBuf};

use super::{Error, Result};

/// The backend a [`DatabaseUrl`] names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    /// PostgreSQL, the fleet backend.
    Postgres,
    /// SQLite, the embedded default.
    Sqlite,
    /// MySQL 8 or MariaDB 10.6+ (the `mysql` Cargo feature).
    Mysql,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Postgres => "postgres",
            Backend::Sqlite => "sqlite",
            Backend::Mysql => "mysql",
        })
    }
}

/// A parsed database URL.
///
/// * `postgres://…` or `postgresql://…`: PostgreSQL; passed to libpq, so
///   every libpq parameter works (`?options=-csearch_path%3Dmyschema` puts the
///   tables in another schema), and so does libpq's list of hosts
///   (`postgres://db1:5432,db2:5432/app`). solidq's own parameters for
///   connection poolers (`prepared_statements=false`, `listen=false`,
///   `listen_host`, `listen_port`; see the README's PgBouncer section) are
///   taken out first. solidq adds the parameters of [`LIBPQ_DEFAULTS`]
///   that the URL leaves out, so that a dead or unreachable server is
///   noticed in seconds, not minutes (see [`DatabaseUrl::conninfo`]).
/// * `sqlite://path`, `sqlite:path`, or a plain file path: SQLite. The file
///   is created if missing. `sqlite:///abs/path` is an absolute path.
/// * `mysql://user:password@host:port/database` (or `mariadb://…`): MySQL 8
///   or MariaDB 10.6+, with the `mysql` Cargo feature; passed to the MySQL
///   client library as diesel reads it (`?unix_socket=…`,
///   `?ssl_mode=…`).
///
/// `Display` and `Debug` never show the password.
#[derive(Clone, PartialEq, Eq)]
pub struct DatabaseUrl {
    raw: String,
    target: Target,
    /// `raw` without solidq's own parameters (see `pooler.rs`): what libpq
    /// gets.
    pub(super) libpq: String,
    /// solidq's own parameters of a PostgreSQL URL.
    pub(super) pooler: super::pooler::PoolerParams,
}

#[derive(Clone, PartialEq, Eq)]
enum Target {
    Postgres,
    Sqlite(PathBuf),
    Mysql,
}

impl DatabaseUrl {
    /// Parses `url`, deciding its backend from the scheme.
    pub fn parse(url: &str) -> Result<DatabaseUrl> {
        let trimmed = url.trim();
        let invalid = |reason: &str| Error::InvalidDatabaseUrl {
            url: redact(trimmed),
            reason: reason.to_string(),
        };
        if trimmed.is_empty() {
            return Err(invalid("empty"));
        }
        let target = if let Some(rest) = trimmed
            .strip_prefix("postgres://")
            .or_else(|| trimmed.strip_prefix("postgresql://"))
        {
            if rest.is_empty() {
                return Err(invalid("no host or database after the scheme"));
            }
            Target::Postgres
        } else if let Some(rest) = trimmed
            .strip_prefix("mysql://")
            .or_else(|| trimmed.strip_prefix("mariadb://"))
        {
            if rest.is_empty() {
                return Err(invalid("no host or database after the scheme"));
            }
            Target::Mysql
        } else if let Some(path) = trimmed
            .strip_prefix("sqlite://")
            .or_else(|| trimmed.strip_prefix("sqlite:"))
        {
            sqlite_target(path).map_err(|reason| invalid(&reason))?
        } else if let Some((scheme, _)) = trimmed.split_once("://") {
            return Err(invalid(&format!(
                "unsupported scheme {scheme:?}; use postgres://…, mysql://…, sqlite://path or a file path"
            )));
        } else {
            sqlite_target(trimmed).map_err(|reason| invalid(&reason))?
        };
        check_compiled(
            trimmed,
            &target,
            cfg!(feature = "postgres"),
            cfg!(feature = "sqlite"),
            cfg!(feature = "mysql"),
        )?;
        let (libpq, pooler) = match &target {
            Target::Postgres => super::pooler::split(trimmed).map_err(|reason| invalid(&reason))?,
            Target::Sqlite(_) => (trimmed.to_string(), Default::default()),
            // The client library (through diesel) reads `mysql://` only.
            Target::Mysql => (
                trimmed.replacen("mariadb://", "mysql://", 1),
                Default::default(),
            ),
        };
        Ok(DatabaseUrl {
            raw: trimmed.to_string(),
            target,
            libpq,
            pooler,
        })
    }

    /// The backend this URL names.
    pub fn backend(&self) -> Backend {
        match self.target {
            Target::Postgres => Backend::Postgres,
            Target::Sqlite(_) => Backend::Sqlite,
            Target::Mysql => Backend::Mysql,
        }
    }

    /// The URL exactly as given, password included: pass it to child
    /// processes, never to logs.
    pub fn expose(&self) -> &str {
        &self.raw
    }

    /// What solidq hands libpq: the URL without solidq's own parameters
    /// (see `pooler.rs`), plus every parameter of
    /// [`LIBPQ_DEFAULTS`] it does not set itself (nor through the
    /// parameter's environment variable, such as `PGCONNECT_TIMEOUT`), plus
    /// `target_session_attrs=read-write` when it names several hosts, so a
    /// connection skips servers that cannot take writes (a standby not yet
    /// promoted, an old primary come back as a standby). SQLite URLs are
    /// returned as given, MySQL URLs with a `mariadb://` scheme as
    /// `mysql://` (what the client library reads).
    pub fn conninfo(&self) -> String {
        match self.target {
            Target::Sqlite(_) => self.raw.clone(),
            Target::Mysql => self.libpq.clone(),
            Target::Postgres => with_libpq_defaults(&self.libpq, |name| std::env::var_os(name)),
        }
    }

    /// The URL with any password replaced by `***`.
    pub fn redacted(&self) -> String {
        redact(&self.raw)
    }

    /// The SQLite file, for an SQLite URL.
    pub fn sqlite_path(&self) -> Option<&Path> {
        match &self.target {
            Target::Sqlite(path) => Some(path),
            Target::Postgres | Target::Mysql => None,
        }
    }
}

/// Refuses a URL whose backend this build leaves out (its Cargo feature
/// off), naming the scheme and the feature: otherwise it would fail later,
/// and less clearly.
fn check_compiled(
    url: &str,
    target: &Target,
    postgres: bool,
    sqlite: bool,
    mysql: bool,
) -> Result<()> {
    let feature = match target {
        Target::Postgres if !postgres => "postgres",
        Target::Sqlite(_) if !sqlite => "sqlite",
        Target::Mysql if !mysql => "mysql",
        _ => return Ok(()),
    };
    let scheme = [
        "postgres://",
        "postgresql://",
        "sqlite://",
        "sqlite:",
        "mysql://",
        "mariadb://",
    ]
    .into_iter()
    .find(|scheme| url.starts_with(scheme))
    .unwrap_or("a file path");
    Err(Error::BackendNotCompiled {
        url: redact(url),
        scheme: scheme.to_string(),
        feature,
    })
}

/// The libpq parameters solidq sets on its PostgreSQL connections unless
/// the URL sets them, as `(parameter, value, environment variable)`.
/// libpq's own defaults suit an interactive client: no connect timeout
/// (a host whose packets are dropped holds a connection attempt for the
/// kernel's SYN retries, about two minutes) and no keepalives (a
/// connection whose server vanished without a reset, as behind a cut link,
/// waits for its reply until TCP gives up, 15 minutes or more). A worker
/// must notice well within the process alive threshold (60 s by default)
/// and move on to the next host of the URL:
///
/// * `connect_timeout=5`: seconds per host to connect;
/// * `keepalives_idle=5`, `keepalives_interval=2`, `keepalives_count=3`:
///   an idle connection (the LISTEN connection, a pooled one) whose server
///   went silent fails after about 11 s;
/// * `tcp_user_timeout=10000`: a connection whose sent data goes
///   unacknowledged for 10 s fails (a query sent into a cut link). A slow
///   query is not affected: its request was acknowledged;
/// * `application_name=solidq`: solidq's sessions are told apart in
///   `pg_stat_activity`.
pub const LIBPQ_DEFAULTS: &[(&str, &str, &str)] = &[
    ("connect_timeout", "5", "PGCONNECT_TIMEOUT"),
    ("keepalives_idle", "5", ""),
    ("keepalives_interval", "2", ""),
    ("keepalives_count", "3", ""),
    ("tcp_user_timeout", "10000", ""),
    ("application_name", "solidq", "PGAPPNAME"),
];

/// `url` with the [`LIBPQ_DEFAULTS`] it lacks (unless `env` has their
/// variable), and `target_session_attrs=read-write` for several hosts.
fn with_libpq_defaults(url: &str, env: impl Fn(&str) -> Option<std::ffi::OsString>) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let given: Vec<&str> = query
        .unwrap_or("")
        .split('&')
        .filter_map(|pair| pair.split('=').next())
        .filter(|name| !name.is_empty())
        .collect();
    let absent = |name: &str, variable: &str| {
        !given.contains(&name) && (variable.is_empty() || env(variable).is_none())
    };
    let mut added: Vec<String> = LIBPQ_DEFAULTS
        .iter()
        .filter(|(name, _, variable)| absent(name, variable))
        .map(|(name, value, _)| format!("{name}={value}"))
        .collect();
    let authority = base
        .split_once("://")
        .map_or("", |(_, rest)| rest.split('/').next().unwrap_or(""));
    let hosts = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if hosts.contains(',') && absent("target_session_attrs", "PGTARGETSESSIONATTRS") {
        added.push("target_session_attrs=read-write".into());
    }
    if added.is_empty() {
        return url.to_string();
    }
    let added = added.join("&");
    match query {
        Some("") => format!("{url}{added}"),
        Some(_) => format!("{url}&{added}"),
        None => format!("{url}?{added}"),
    }
}

fn sqlite_target(path: &str) -> std::result::Result<Target, String> {
    if path.is_empty() {
        return Err("no file path".into());
    }
    if path == ":memory:" || path.contains("mode=memory") {
        return Err(
            "in-memory SQLite cannot be shared by a pool or by several processes; use a file"
                .into(),
        );
    }
    Ok(Target::Sqlite(PathBuf::from(path)))
}

/// Replaces the password of a `scheme://user:password@host` URL (and any
/// `password=` query parameter) with `***`.
pub(crate) fn redact(url: &str) -> String {
    let mut out = match url.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, tail) = match rest.find(['/', '?']) {
                Some(i) => rest.split_at(i),
                None => (rest, ""),
            };
            match authority.rsplit_once('@') {
                Some((userinfo, host)) => match userinfo.split_once(':') {
                    Some((user, _password)) => format!("{scheme}://{user}:***@{host}{tail}"),
                    None => url.to_string(),
                },
                None => url.to_string(),
            }
        }
        None => url.to_string(),
    };
    if let Some(start) = out.find("password=") {
        let value_start = start + "password=".len();
        let value_end = out[value_start..]
            .find(['&', ' '])
            .map_or(out.len(), |i| value_start + i);
        out.replace_range(value_start..value_end, "***");
    }
    out
}

impl fmt::Display for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DatabaseUrl({:?})", self.redacted())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(all(feature = "postgres", feature = "sqlite"))]
    fn scheme_decides_the_backend() {
        let pg = DatabaseUrl::parse("postgres://u:secret@localhost/db").unwrap();
        assert_eq!(pg.backend(), Backend::Postgres);
        assert_eq!(pg.to_string(), "postgres://u:***@localhost/db");
        assert!(!format!("{pg:?}").contains("secret"));
        for url in [
            "sqlite://jobs.sqlite3",
            "sqlite:jobs.sqlite3",
            "jobs.sqlite3",
        ] {
            assert_eq!(
                DatabaseUrl::parse(url).unwrap().backend(),
                Backend::Sqlite,
                "{url}"
            );
        }
        match DatabaseUrl::parse("sqlite:///tmp/x.db").unwrap().target {
            Target::Sqlite(p) => assert_eq!(p, PathBuf::from("/tmp/x.db")),
            Target::Postgres | Target::Mysql => panic!("wrong backend"),
        }
        #[cfg(feature = "mysql")]
        {
            let mysql = DatabaseUrl::parse("mariadb://u:pw@h:3306/db").unwrap();
            assert_eq!(mysql.backend(), Backend::Mysql);
            assert_eq!(mysql.conninfo(), "mysql://u:pw@h:3306/db");
            assert_eq!(mysql.to_string(), "mariadb://u:***@h:3306/db");
        }
    }

    #[test]
    fn libpq_defaults_fill_only_what_the_url_and_the_environment_leave_out() {
        let none = |_: &str| None;
        let all = "connect_timeout=5&keepalives_idle=5&keepalives_interval=2\
                   &keepalives_count=3&tcp_user_timeout=10000&application_name=solidq";
        assert_eq!(
            with_libpq_defaults("postgres://u:pw@h/db", none),
            format!("postgres://u:pw@h/db?{all}")
        );
        assert_eq!(
            with_libpq_defaults("postgres://h/db?", none),
            format!("postgres://h/db?{all}")
        );
        let own = with_libpq_defaults(
            "postgres://h/db?connect_timeout=1&application_name=app&sslmode=disable",
            none,
        );
        assert!(own.starts_with("postgres://h/db?connect_timeout=1&application_name=app&sslmode=disable&keepalives_idle=5"), "{own}");
        assert_eq!(own.matches("connect_timeout").count(), 1, "{own}");
        assert!(!own.contains("application_name=solidq"), "{own}");
        let from_env = with_libpq_defaults("postgres://h/db", |name| {
            (name == "PGCONNECT_TIMEOUT").then(|| "3".into())
        });
        assert!(!from_env.contains("connect_timeout"), "{from_env}");
        // Several hosts: connect to the one that takes writes.
        let multi = with_libpq_defaults("postgres://u:p,w@a:1,b:2/db?sslmode=disable", none);
        assert!(
            multi.ends_with("&target_session_attrs=read-write"),
            "{multi}"
        );
        let chosen = with_libpq_defaults("postgres://a,b/db?target_session_attrs=any", none);
        assert!(!chosen.contains("read-write"), "{chosen}");
        let single = with_libpq_defaults("postgres://a:1/db", none);
        assert!(!single.contains("target_session_attrs"), "{single}");
    }

    #[test]
    fn bad_urls_are_rejected_with_the_url_redacted() {
        for url in [
            "",
            "redis://u:pw@h/db",
            "mysql://",
            "sqlite://",
            ":memory:",
            "postgres://",
        ] {
            let err = DatabaseUrl::parse(url).unwrap_err();
            assert!(
                matches!(err, Error::InvalidDatabaseUrl { .. }),
                "{url}: {err}"
            );
            assert!(!err.to_string().contains(":pw@"), "{err}");
        }
    }

    #[test]
    fn a_backend_left_out_of_the_build_is_a_clear_error_naming_scheme_and_feature() {
        let cases = [
            (
                "postgres://u:pw@h/db",
                Target::Postgres,
                "postgres://",
                "postgres",
            ),
            (
                "postgresql://h/db",
                Target::Postgres,
                "postgresql://",
                "postgres",
            ),
            (
                "sqlite://j.db",
                Target::Sqlite("j.db".into()),
                "sqlite://",
                "sqlite",
            ),
            (
                "j.db",
                Target::Sqlite("j.db".into()),
                "a file path",
                "sqlite",
            ),
            ("mysql://u:pw@h/db", Target::Mysql, "mysql://", "mysql"),
            ("mariadb://h/db", Target::Mysql, "mariadb://", "mysql"),
        ];
        for (url, target, want_scheme, want_feature) in cases {
            let on = |feature: &str| feature != want_feature;
            let err = check_compiled(url, &target, on("postgres"), on("sqlite"), on("mysql"))
                .unwrap_err();
            let Error::BackendNotCompiled {
                url: shown,
                scheme,
                feature,
            } = &err
            else {
                panic!("{url}: {err}");
            };
            assert_eq!((scheme.as_str(), *feature), (want_scheme, want_feature));
            assert!(!shown.contains(":pw@"), "{err}");
            let message = err.to_string();
            assert!(
                message.contains(want_scheme) && message.contains(&format!("`{want_feature}`")),
                "{message}"
            );
            assert!(check_compiled(url, &target, true, true, true).is_ok());
        }
        // This build: whatever it leaves out is refused by `parse` itself.
        for (url, on) in [
            ("postgres://h/db", cfg!(feature = "postgres")),
            ("sqlite://j.db", cfg!(feature = "sqlite")),
            ("mysql://h/db", cfg!(feature = "mysql")),
        ] {
            match DatabaseUrl::parse(url) {
                Ok(_) => assert!(on, "{url}"),
                Err(Error::BackendNotCompiled { .. }) => assert!(!on, "{url}"),
                Err(other) => panic!("{url}: {other}"),
            }
        }
    }

    #[test]
    fn redact_handles_query_passwords_and_urls_without_userinfo() {
        assert_eq!(
            redact("postgres://h/db?password=x&a=b"),
            "postgres://h/db?password=***&a=b"
        );
        assert_eq!(redact("postgres://user@h/db"), "postgres://user@h/db");
        assert_eq!(redact("jobs.sqlite3"), "jobs.sqlite3");
    }
}
