//! The options stored with each job: resolved at enqueue, read by workers
//! and by the store's release rules.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::{DEFAULT_BACKOFF, DEFAULT_KEEP_RESULT};
use crate::types::{Backoff, StoredLimit};

/// The options stored with each job (its `options` column), resolved at
/// enqueue so a worker needs nothing but the job's row. A value equal to
/// solidq's default is left out (most jobs store `{}`) and read back as
/// that default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct StoredOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    #[serde(default = "default_keep_ms", skip_serializing_if = "is_default_keep")]
    pub keep_result_ms: u64,
    #[serde(
        default = "default_backoff",
        skip_serializing_if = "is_default_backoff"
    )]
    pub backoff: Backoff,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<StoredLimit>,
    /// `None`: [`crate::config::DEFAULT_MAX_SNOOZES`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_snoozes: Option<u32>,
    /// The rate limit its starts count against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<crate::types::StoredRate>,
}

fn default_keep_ms() -> u64 {
    millis(DEFAULT_KEEP_RESULT)
}

fn is_default_keep(ms: &u64) -> bool {
    *ms == default_keep_ms()
}

fn default_backoff() -> Backoff {
    DEFAULT_BACKOFF
}

fn is_default_backoff(backoff: &Backoff) -> bool {
    *backoff == DEFAULT_BACKOFF
}

impl Default for StoredOptions {
    fn default() -> Self {
        StoredOptions {
            timeout_ms: None,
            keep_result_ms: default_keep_ms(),
            backoff: default_backoff(),
            concurrency: None,
            max_snoozes: None,
            rate: None,
        }
    }
}

impl StoredOptions {
    /// Reads a row's options; a row written by hand with junk gets the
    /// defaults rather than failing the job for a bookkeeping field.
    pub(crate) fn parse(json: &str) -> StoredOptions {
        if json == "{}" {
            return StoredOptions::default();
        }
        serde_json::from_str(json).unwrap_or_else(|error| {
            log::warn!("unreadable job options {json:?} ({error}); using defaults");
            StoredOptions::default()
        })
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_options_are_stored_as_an_empty_object() {
        let stored = StoredOptions::default();
        assert_eq!(serde_json::to_string(&stored).unwrap(), "{}");
        assert_eq!(StoredOptions::parse("{}"), stored);
        let custom = StoredOptions {
            timeout_ms: Some(5),
            keep_result_ms: 0,
            backoff: Backoff::fixed(Duration::from_secs(1)),
            concurrency: None,
            max_snoozes: Some(3),
            rate: Some(crate::types::StoredRate {
                key: "api/7".into(),
                limit: 10,
                period_ms: 1_000,
            }),
        };
        let json = serde_json::to_string(&custom).unwrap();
        assert_eq!(StoredOptions::parse(&json), custom);
    }
}
