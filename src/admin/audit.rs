//! The audit log: who changed what, through which door, and how many rows
//! it touched; see [`AuditEntry`].

use std::fmt;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::client::Queue;
use crate::process;
use crate::store::{AuditRow, NewAudit};
use crate::types::{Error, Result};

impl NewAuditEntry {
    /// The longest actor accepted, in bytes.
    pub const MAX_ACTOR_LEN: usize = 256;
}
impl NewAuditEntry {
    /// The longest action accepted, in bytes.
    pub const MAX_ACTION_LEN: usize = 64;
}
impl NewAuditEntry {
    /// The longest target accepted, in bytes (a JSON filter naming a thousand
    /// job ids fits).
    pub const MAX_TARGET_LEN: usize = 65_536;
}

/// Through what an operator acted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditSource {
    /// A web dashboard.
    Web,
    /// An HTTP or RPC API.
    Api,
    /// The `solidq` command line.
    Cli,
    /// The application's own code calling [`Queue`].
    Library,
}

impl AuditSource {
    /// Every source, in declaration order.
    pub const ALL: [AuditSource; 4] = [
        AuditSource::Web,
        AuditSource::Api,
        AuditSource::Cli,
        AuditSource::Library,
    ];

    /// As stored: `web`, `api`, `cli` or `library`.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditSource::Web => "web",
            AuditSource::Api => "api",
            AuditSource::Cli => "cli",
            AuditSource::Library => "library",
        }
    }
}

impl fmt::Display for AuditSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for AuditSource {
    type Err = Error;

    /// Parses `web`, `api`, `cli` or `library`.
    fn from_str(s: &str) -> Result<AuditSource> {
        AuditSource::ALL
            .into_iter()
            .find(|source| source.as_str() == s)
            .ok_or_else(|| Error::InvalidOption {
                option: "audit source",
                value: shown(s),
                reason: "must be web, api, cli or library".into(),
            })
    }
}

/// An action to record with [`Queue::record_audit`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAuditEntry {
    /// Who acted: a user name, an email, `alice@host`. Not empty, no
    /// control characters, at most [`NewAuditEntry::MAX_ACTOR_LEN`] bytes.
    pub actor: String,
    /// Through what.
    pub source: AuditSource,
    /// What was done, in lowercase snake case (`retry`, `pause`…; see
    /// [`AuditEntry`]): ASCII letters, digits and `_ . : -`, not empty, at
    /// most [`NewAuditEntry::MAX_ACTION_LEN`] bytes.
    pub action: String,
    /// What it was done to: a job id, a queue name, or a JSON description
    /// of a filter. No NUL, at most [`NewAuditEntry::MAX_TARGET_LEN`] bytes; may be
    /// empty.
    pub target: String,
    /// How many rows (jobs, queues) it changed.
    pub rows: u64,
}

impl NewAuditEntry {
    /// An entry for `actor`.
    pub fn new(
        source: AuditSource,
        actor: impl Into<String>,
        action: impl Into<String>,
        target: impl Into<String>,
        rows: u64,
    ) -> NewAuditEntry {
        NewAuditEntry {
            actor: actor.into(),
            source,
            action: action.into(),
            target: target.into(),
            rows,
        }
    }

    /// An entry whose actor is whoever runs this process:
    /// `$USER@hostname` (`$LOGNAME` when `USER` is unset).
    pub fn by_local_user(
        source: AuditSource,
        action: impl Into<String>,
        target: impl Into<String>,
        rows: u64,
    ) -> NewAuditEntry {
        NewAuditEntry::new(source, process::operator(), action, target, rows)
    }

    /// Checks every field; the error names the field and the value.
    fn validate(&self) -> Result<i64> {
        let invalid = |option, value: &str, reason: &str| Error::InvalidOption {
            option,
            value: shown(value),
            reason: reason.into(),
        };
        let actor = &self.actor;
        if actor.trim().is_empty() {
            return Err(invalid("audit actor", actor, "must not be empty"));
        }
        if actor.chars().any(char::is_control) {
            return Err(invalid(
                "audit actor",
                actor,
                "must not contain NUL or other control characters",
            ));
        }
        if actor.len() > NewAuditEntry::MAX_ACTOR_LEN {
            return Err(invalid(
                "audit actor",
                actor,
                &format!(
                    "{} bytes, more than {}",
                    actor.len(),
                    NewAuditEntry::MAX_ACTOR_LEN
                ),
            ));
        }
        let action = &self.action;
        if action.is_empty() {
            return Err(invalid("audit action", action, "must not be empty"));
        }
        if action.len() > NewAuditEntry::MAX_ACTION_LEN {
            return Err(invalid(
                "audit action",
                action,
                &format!(
                    "{} bytes, more than {}",
                    action.len(),
                    NewAuditEntry::MAX_ACTION_LEN
                ),
            ));
        }
        if let Some(bad) = action
            .chars()
            .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || "_.:-".contains(*c)))
        {
            return Err(invalid(
                "audit action",
                action,
                &format!(
                    "{:?} is not allowed: lowercase ASCII letters, digits and _ . : - only",
                    bad
                ),
            ));
        }
        let target = &self.target;
        if target.contains('\0') {
            return Err(invalid("audit target", target, "must not contain NUL"));
        }
        if target.len() > NewAuditEntry::MAX_TARGET_LEN {
            return Err(invalid(
                "audit target",
                target,
                &format!(
                    "{} bytes, more than {}",
                    target.len(),
                    NewAuditEntry::MAX_TARGET_LEN
                ),
            ));
        }
        i64::try_from(self.rows).map_err(|_| Error::InvalidOption {
            option: "audit rows",
            value: self.rows.to_string(),
            reason: format!("more than {}", i64::MAX),
        })
    }
}

/// One recorded action, as [`Queue::audit_log`] lists it.
///
/// The audit log records who changed what, through which door, and how
/// many rows it touched. The `solidq` CLI records every command that changes state
/// (source `cli`, actor `$USER@hostname`); a dashboard or API records its
/// own with [`Queue::record_audit`] after each action succeeds.
///
/// [`Queue`]'s operator methods ([`Queue::pause`],
/// [`Queue::retry_failed`]…) record nothing themselves: only the caller
/// knows who asked, and a dashboard calling them would otherwise be logged
/// twice. Recording is a separate statement after the action, so an action
/// whose entry cannot be written still happened; callers log that instead
/// of failing the action (the CLI warns and exits 0). Nothing prunes the
/// log: operator actions are few.
///
/// Conventional actions, as the CLI writes them (with the target it
/// gives): `retry`, `discard` (failed jobs), `cancel`, `run_now` (jobs),
/// `pause`, `resume` (a queue name), `enqueue` (the new job's id),
/// `run_recurring` (the task's key), `clear_finished` (a JSON filter). A
/// target naming one job is its id; several jobs or a filter are a JSON
/// object with the conditions given, keys sorted (`{"ids":[1,2]}`,
/// `{"all":true}`, `{"kind":"mail","queue":"default"}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditEntry {
    /// Ascending in the order entries were recorded.
    pub id: i64,
    /// When it was recorded (the database's clock on PostgreSQL).
    pub created_at: DateTime<Utc>,
    /// Who acted.
    pub actor: String,
    /// Through what.
    pub source: AuditSource,
    /// What was done.
    pub action: String,
    /// What it was done to.
    pub target: String,
    /// How many rows it changed.
    pub rows: u64,
}

impl AuditEntry {
    fn from_row(row: AuditRow) -> Result<AuditEntry> {
        Ok(AuditEntry {
            source: row.source.parse()?,
            id: row.id,
            created_at: row.created_at.and_utc(),
            actor: row.actor,
            action: row.action,
            target: row.target,
            rows: u64::try_from(row.rows).unwrap_or(0),
        })
    }
}

impl Queue {
    /// Records an operator action in the audit log, after the action
    /// succeeded; returns the entry as stored. Bad input (an empty action,
    /// NUL anywhere, an over-long field) is an [`Error::InvalidOption`]
    /// naming the field and its value, and writes nothing.
    ///
    /// ```no_run
    /// use solidq::{AuditSource, NewAuditEntry};
    /// let queue = solidq::Queue::connect("sqlite://jobs.sqlite3")?;
    /// let paused = queue.pause("mail")?;
    /// queue.record_audit(&NewAuditEntry::new(
    ///     AuditSource::Web, "alice@example.com", "pause", "mail", u64::from(paused),
    /// ))?;
    /// # Ok::<(), solidq::Error>(())
    /// ```
    pub fn record_audit(&self, entry: &NewAuditEntry) -> Result<AuditEntry> {
        let rows = entry.validate()?;
        let row = self.store().audit_insert(&NewAudit {
            actor: &entry.actor,
            source: entry.source.as_str(),
            action: &entry.action,
            target: &entry.target,
            rows,
        })?;
        AuditEntry::from_row(row)
    }

    /// Up to `limit` audit entries, newest first; with `before_id`, only
    /// those recorded before that entry (the next page after a page ending
    /// with entry `n` is `audit_log(limit, Some(n))`).
    pub fn audit_log(&self, limit: usize, before_id: Option<i64>) -> Result<Vec<AuditEntry>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        self.store()
            .audit_list(limit, before_id)?
            .into_iter()
            .map(AuditEntry::from_row)
            .collect()
    }
}

/// A value for an error message (which escapes it): cut after 80
/// characters, as a megabyte of target does not belong in a log line.
fn shown(value: &str) -> String {
    const SHOWN: usize = 80;
    match value.char_indices().nth(SHOWN) {
        Some((cut, _)) => format!("{}… ({} bytes)", &value[..cut], value.len()),
        None => value.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(actor: &str, action: &str, target: &str) -> NewAuditEntry {
        NewAuditEntry::new(AuditSource::Web, actor, action, target, 1)
    }

    #[test]
    fn bad_fields_are_refused_naming_the_field_and_the_value() {
        let cases = [
            (entry("alice", "", "x"), "audit action", "must not be empty"),
            (
                entry("alice", "re\0try", "x"),
                "audit action",
                "is not allowed",
            ),
            (
                entry("alice", "Retry", "x"),
                "audit action",
                "is not allowed",
            ),
            (entry("", "retry", "x"), "audit actor", "must not be empty"),
            (entry("al\0ice", "retry", "x"), "audit actor", "control"),
            (entry("alice", "retry", "7\0 8"), "audit target", "NUL"),
        ];
        for (entry, field, why) in cases {
            let error = entry.validate().unwrap_err();
            let text = error.to_string();
            assert!(
                text.contains(field) && text.contains(why),
                "{entry:?}: {text}"
            );
        }
        let text = entry("alice", "retry", "7\0 8")
            .validate()
            .unwrap_err()
            .to_string();
        assert!(text.contains(r"7\0 8"), "the value, escaped: {text}");
        let long = "x".repeat(NewAuditEntry::MAX_TARGET_LEN + 1);
        let text = entry("alice", "retry", &long)
            .validate()
            .unwrap_err()
            .to_string();
        assert!(text.len() < 300, "a long value is cut: {text}");
        assert!(text.contains("65537 bytes"), "{text}");
        assert!(
            entry("alice", "run_now", "{\"ids\":[1]}")
                .validate()
                .is_ok()
        );
    }

    #[test]
    fn sources_round_trip_through_their_names() {
        for source in AuditSource::ALL {
            assert_eq!(source.as_str().parse::<AuditSource>().unwrap(), source);
        }
        assert!("dashboard".parse::<AuditSource>().is_err());
    }
}
