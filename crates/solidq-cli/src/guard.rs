//! Typos do not pass silently: the names a command acts on are checked by
//! the library's one rule ([`Queue::check_names`]) before anything is
//! changed, refused (exit 1) with what the database knows, unless
//! `--force`; when the database knows nothing to compare against, the
//! command goes ahead with a warning. Warnings are printed only once the
//! command did what it was asked, so none precedes an unrelated refusal.

use solidq::{Error, Result};
use solidq::{JobStatus, Name, Queue};

/// What `--force` does, for messages.
const FORCE: &str = "--force to go ahead anyway";

/// Prints a warning on stderr, on one line.
pub(super) fn warn(text: &str) {
    eprintln!("solidq: warning: {}", super::one_line(text));
}

/// Checks `names` (see [`Name`]); returns the warnings to print once the
/// command succeeded. A refusal of a name `--force` could let through
/// says so.
pub(super) fn names(queue: &Queue, names: &[Name<'_>], force: bool) -> Result<Vec<String>> {
    queue
        .check_names(names, force)
        .map_err(|error| match error {
            Error::Unknown {
                what,
                value,
                reason,
            } if names.iter().any(|n| n.value() == value && n.overridable()) => Error::Unknown {
                what,
                value,
                reason: format!("{reason}; {FORCE}"),
            },
            other => other,
        })
}

/// Prints `warnings`, each on its own line.
pub(super) fn warn_all(warnings: &[String]) {
    for warning in warnings {
        warn(warning);
    }
}

/// The names a filter of existing jobs gives (`--kind`, `--queue`).
pub(super) fn filter<'a>(kind: Option<&'a str>, queue: Option<&'a str>) -> Vec<Name<'a>> {
    kind.map(Name::FilterKind)
        .into_iter()
        .chain(queue.map(Name::FilterQueue))
        .collect()
}

/// Every id given to `failed retry|discard` must be a failed job: a job
/// that does not exist is "not found", one in another state is named with
/// its state. Checked before anything is changed.
pub(super) fn failed_ids(queue: &Queue, ids: &[i64]) -> Result<()> {
    for &id in ids {
        let info = queue.job(id)?;
        if info.status != JobStatus::Failed {
            return Err(Error::Unknown {
                what: "failed job",
                value: id.to_string(),
                reason: format!("job {id} is {}, not failed", info.status),
            });
        }
    }
    Ok(())
}
