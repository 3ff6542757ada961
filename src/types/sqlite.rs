//! SQLite's durability setting, as solidq's connections apply it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::Error;

/// How far an SQLite commit is pushed to disk before it returns: the
/// `synchronous` pragma of every connection solidq opens (they all run in
/// WAL mode). Written `normal` or `full` in code, in `solidq.toml`
/// (`sqlite_synchronous`) and in `SOLIDQ_SQLITE_SYNCHRONOUS`; case is
/// ignored.
///
/// Either way a crash of any *process* (a panic, SIGKILL, an OOM kill)
/// loses nothing that was committed: the commit is in the WAL file, which
/// the operating system keeps. The two differ when the *machine* stops
/// (power loss, a kernel panic, a VM killed by its host):
///
/// * [`Full`](SqliteSynchronous::Full): every commit waits for `fsync` of
///   the WAL, so once `enqueue` (or a worker's outcome) returns it survives
///   a power loss too.
/// * [`Normal`](SqliteSynchronous::Normal): commits are not synced; the WAL
///   is synced at checkpoints only. A power loss can take back the last
///   commits (those since the last checkpoint, typically well under a
///   second's worth), never corrupting the file: an enqueued job may be
///   gone, a finished job may run again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum SqliteSynchronous {
    /// `PRAGMA synchronous = NORMAL`: survives process crashes; a power
    /// loss or OS crash may lose the last commits.
    Normal,
    /// `PRAGMA synchronous = FULL`: every commit is on disk when it
    /// returns.
    Full,
}

impl SqliteSynchronous {
    /// Every value, weakest first.
    pub const ALL: [SqliteSynchronous; 2] = [SqliteSynchronous::Normal, SqliteSynchronous::Full];

    /// The value's name: `normal` or `full`.
    pub fn as_str(self) -> &'static str {
        match self {
            SqliteSynchronous::Normal => "normal",
            SqliteSynchronous::Full => "full",
        }
    }

    /// What `PRAGMA synchronous` reads back on a connection with this
    /// setting: 1 for `normal`, 2 for `full`.
    pub fn pragma_level(self) -> i32 {
        match self {
            SqliteSynchronous::Normal => 1,
            SqliteSynchronous::Full => 2,
        }
    }
}

impl fmt::Display for SqliteSynchronous {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SqliteSynchronous {
    type Err = Error;

    /// Parses `normal` or `full` (any case, surrounding spaces ignored);
    /// anything else is [`Error::InvalidOption`] naming the value.
    fn from_str(value: &str) -> Result<SqliteSynchronous, Error> {
        let wanted = value.trim();
        SqliteSynchronous::ALL
            .into_iter()
            .find(|s| s.as_str().eq_ignore_ascii_case(wanted))
            .ok_or_else(|| Error::InvalidOption {
                option: "sqlite_synchronous",
                value: value.to_string(),
                reason: "expected \"normal\" or \"full\"".into(),
            })
    }
}

impl TryFrom<String> for SqliteSynchronous {
    type Error = Error;

    fn try_from(value: String) -> Result<SqliteSynchronous, Error> {
        value.parse()
    }
}

impl From<SqliteSynchronous> for String {
    fn from(value: SqliteSynchronous) -> String {
        value.as_str().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_values_in_any_case_and_names_a_bad_one() {
        assert_eq!(
            "full".parse::<SqliteSynchronous>().unwrap(),
            SqliteSynchronous::Full
        );
        assert_eq!(
            " NORMAL ".parse::<SqliteSynchronous>().unwrap(),
            SqliteSynchronous::Normal
        );
        let error = "fsync".parse::<SqliteSynchronous>().unwrap_err();
        assert_eq!(
            error.to_string(),
            r#"invalid sqlite_synchronous "fsync": expected "normal" or "full""#
        );
        for value in SqliteSynchronous::ALL {
            assert_eq!(
                value.to_string().parse::<SqliteSynchronous>().unwrap(),
                value
            );
        }
    }
}
