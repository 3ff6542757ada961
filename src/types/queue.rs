//! Queue names and the patterns of a worker's queue list.

use super::{Error, Result};

/// The longest a queue name may be, in bytes.
pub const MAX_QUEUE_NAME_LEN: usize = 128;

/// One entry of a worker's queue list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueuePattern {
    /// `mail`: exactly this queue.
    Exact(String),
    /// `mail*`: every queue whose name starts with `mail`, merged and taken
    /// in priority then id order.
    Prefix(String),
    /// `*`: every queue.
    All,
}

impl QueuePattern {
    /// Whether jobs of `queue` are claimed by this pattern.
    pub fn matches(&self, queue: &str) -> bool {
        match self {
            QueuePattern::Exact(name) => name == queue,
            QueuePattern::Prefix(prefix) => queue.starts_with(prefix.as_str()),
            QueuePattern::All => true,
        }
    }

    /// Checks a queue name (not a pattern): letters, digits, `_ - . :`, at
    /// most 128 bytes; the rule every surface applies.
    pub fn check_name(name: &str) -> Result<()> {
        validate_queue_name(name)
    }

    /// Parses `name`, `prefix*` or `*`.
    pub fn parse(pattern: &str) -> Result<QueuePattern> {
        if pattern == "*" {
            return Ok(QueuePattern::All);
        }
        if let Some(prefix) = pattern.strip_suffix('*') {
            validate_queue_name(prefix).map_err(|_| Error::InvalidOption {
                option: "queues",
                value: pattern.to_string(),
                reason:
                    "a wildcard is `*` or `prefix*` with a plain prefix (letters, digits, _ - . :)"
                        .into(),
            })?;
            return Ok(QueuePattern::Prefix(prefix.to_string()));
        }
        validate_queue_name(pattern)?;
        Ok(QueuePattern::Exact(pattern.to_string()))
    }
}

/// Queue names are short and plain so they can be inlined in prepared SQL
/// and typed in a shell: letters, digits, `_ - . :`.
pub(crate) fn validate_queue_name(name: &str) -> Result<()> {
    let bad = |reason: &str| Error::InvalidOption {
        option: "queue name",
        value: name.to_string(),
        reason: reason.to_string(),
    };
    if name.is_empty() {
        return Err(bad("empty"));
    }
    if name.len() > MAX_QUEUE_NAME_LEN {
        return Err(bad(&format!("longer than {MAX_QUEUE_NAME_LEN} bytes")));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"_-.:".contains(&b))
    {
        return Err(bad("only letters, digits and _ - . : are allowed"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_parse_and_reject_junk() {
        assert_eq!(QueuePattern::parse("*").unwrap(), QueuePattern::All);
        assert_eq!(
            QueuePattern::parse("mail*").unwrap(),
            QueuePattern::Prefix("mail".into())
        );
        assert_eq!(
            QueuePattern::parse("mail").unwrap(),
            QueuePattern::Exact("mail".into())
        );
        for bad in ["", "**", "a*b", "x'y", "m a*"] {
            assert!(QueuePattern::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn queue_names_are_plain() {
        for ok in ["default", "mail", "critical-1", "a.b:c_d"] {
            validate_queue_name(ok).unwrap();
        }
        for bad in ["", "has space", "quote'", "star*", &"x".repeat(200)] {
            assert!(validate_queue_name(bad).is_err(), "{bad:?}");
        }
    }
}
