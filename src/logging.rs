//! Log lines that say which process wrote them, as text or as JSON.
//!
//! A supervisor's worker processes write to the supervisor's stderr, so
//! three workers stopping print three "received SIGTERM" lines into one
//! stream. Every line written through [`init`] names its process: the kind
//! and name of the process row this OS process registered first (see
//! [`process_identity`]), and its pid (alone
//! before the process registers), with the thread, which tells apart the
//! services one process runs (a worker's poller, its embedded dispatcher,
//! its heartbeat).
//!
//! ```text
//! 2026-11-23T10:15:02.123Z INFO  worker worker-3f9c2a1b7d4e pid=4242 [solidq-poller] solidq::worker::poller: …
//! ```
//!
//! With `SOLIDQ_LOG_FORMAT=json` ([`ENV_LOG_FORMAT`]) each line is one JSON
//! object instead, for log shippers:
//!
//! ```text
//! {"timestamp":"2026-11-23T10:15:02.123Z","level":"INFO","target":"solidq::worker::poller","pid":4242,"process_kind":"worker","process_name":"worker-3f9c2a1b7d4e","thread":"solidq-poller","message":"…"}
//! ```
//!
//! `process_kind` and `process_name` are `null` before the process
//! registers. `RUST_LOG` filters as for any `env_logger` setup. The
//! `solidq` binary logs this way; call [`init`] first thing in your own
//! `work` binary to do the same (a supervisor's children inherit its
//! environment, `SOLIDQ_LOG_FORMAT` included). Behind the `logging` feature
//! (off by default; the `solidq` binary turns it on), which brings
//! `env_logger`; with a logger of your own,
//! [`render`] formats a record the same way.

use std::io::Write;

use crate::process::process_identity;

/// The environment variable that chooses the format of log lines: `text`
/// (the default) or `json`.
pub const ENV_LOG_FORMAT: &str = "SOLIDQ_LOG_FORMAT";

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// One human-readable line per record (continuation lines of a
    /// multi-line message carry the same prefix). The default.
    #[default]
    Text,
    /// One JSON object per line: `timestamp` (RFC 3339, UTC), `level`,
    /// `target`, `pid`, `process_kind`, `process_name`, `thread`,
    /// `message`.
    Json,
}

impl LogFormat {
    /// `text` or `json`, in any case; `None` for anything else.
    pub fn parse(value: &str) -> Option<LogFormat> {
        match value.trim().to_ascii_lowercase().as_str() {
            "text" | "" => Some(LogFormat::Text),
            "json" => Some(LogFormat::Json),
            _ => None,
        }
    }
}

/// Installs the logger with `info` as the default level; see [`try_init`].
///
/// # Panics
/// When a logger is installed already.
pub fn init() {
    try_init("info").expect("solidq::logging::init: a logger is installed already");
}

/// Installs an `env_logger` logger on stderr that writes every record
/// with its process (see the module docs), in the format of
/// `SOLIDQ_LOG_FORMAT`, filtered by `RUST_LOG` or else by
/// `default_filter` (e.g. `"info"`, `"warn,solidq=info"`). An unknown
/// `SOLIDQ_LOG_FORMAT` is reported by a warning, and lines are text.
/// Fails when a logger is installed already.
pub fn try_init(default_filter: &str) -> Result<(), log::SetLoggerError> {
    let requested = std::env::var(ENV_LOG_FORMAT).unwrap_or_default();
    let format = LogFormat::parse(&requested);
    let chosen = format.unwrap_or_default();
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(default_filter))
        .format(move |buf, record| buf.write_all(render(chosen, record).as_bytes()))
        .try_init()?;
    if format.is_none() {
        log::warn!("{ENV_LOG_FORMAT}={requested:?} is neither \"text\" nor \"json\": writing text");
    }
    Ok(())
}

/// `record` as the line(s) [`init`]'s logger writes, newline included: its
/// time, level, process, thread, target and message.
pub fn render(format: LogFormat, record: &log::Record<'_>) -> String {
    let timestamp =
        chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, /* use_z */ true);
    let identity = process_identity();
    let pid = std::process::id();
    let current = std::thread::current();
    let thread = current.name().unwrap_or("unnamed");
    let message = record.args().to_string();
    match format {
        LogFormat::Json => {
            let line = serde_json::json!({
                "timestamp": timestamp,
                "level": record.level().as_str(),
                "target": record.target(),
                "pid": pid,
                "process_kind": identity.as_ref().map(|i| i.kind.as_str()),
                "process_name": identity.as_ref().map(|i| i.name.as_str()),
                "thread": thread,
                "message": message,
            });
            format!("{line}\n")
        }
        LogFormat::Text => {
            let process = match &identity {
                Some(i) => format!("{} {} pid={pid}", i.kind, i.name),
                None => format!("pid={pid}"),
            };
            let prefix = format!(
                "{timestamp} {:<5} {process} [{thread}] {}:",
                record.level(),
                record.target()
            );
            let mut text = String::new();
            for line in message.split('\n') {
                text.push_str(&prefix);
                if !line.is_empty() {
                    text.push(' ');
                    text.push_str(line.trim_end_matches('\r'));
                }
                text.push('\n');
            }
            text
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record_of(message: std::fmt::Arguments<'_>, f: impl FnOnce(&log::Record<'_>)) {
        f(&log::Record::builder()
            .args(message)
            .level(log::Level::Warn)
            .target("solidq::test")
            .build());
    }

    #[test]
    fn a_json_line_is_one_object_with_every_field_even_for_a_multi_line_message() {
        record_of(format_args!("two \"quoted\"\nlines"), |record| {
            let line = render(LogFormat::Json, record);
            assert!(line.ends_with('\n'));
            assert_eq!(line.matches('\n').count(), 1, "{line}");
            let value: serde_json::Value = serde_json::from_str(&line).unwrap();
            assert_eq!(value["message"], "two \"quoted\"\nlines");
            assert_eq!(value["level"], "WARN");
            assert_eq!(value["target"], "solidq::test");
            assert_eq!(value["pid"], std::process::id());
            for field in ["timestamp", "process_kind", "process_name", "thread"] {
                assert!(value.get(field).is_some(), "{field} in {line}");
            }
        });
    }

    #[test]
    fn every_text_line_carries_the_pid() {
        record_of(format_args!("first\nsecond"), |record| {
            let text = render(LogFormat::Text, record);
            let pid = format!("pid={} ", std::process::id());
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(lines.len(), 2, "{text}");
            for line in lines {
                assert!(line.contains(&pid), "{line}");
                assert!(line.contains("WARN  "), "{line}");
            }
        });
    }

    #[test]
    fn the_format_is_text_or_json() {
        assert_eq!(LogFormat::parse("JSON"), Some(LogFormat::Json));
        assert_eq!(LogFormat::parse("text"), Some(LogFormat::Text));
        assert_eq!(LogFormat::parse(""), Some(LogFormat::Text));
        assert_eq!(LogFormat::parse("yaml"), None);
    }
}
