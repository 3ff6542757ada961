//! Typos do not pass silently: a queue or kind the database has never
//! heard of is refused (exit 1) with what it does know, unless `--force`;
//! when there is nothing to compare against (no worker ever registered,
//! no job ever enqueued) the command goes ahead with a warning.

use crate::admin::listed;
use crate::types::{Error, Result};
use crate::{JobStatus, KnownNames, Queue};

/// What `--force` does, for messages.
const FORCE: &str = "--force to go ahead anyway";

/// Prints a warning on stderr, on one line.
pub(super) fn warn(text: &str) {
    eprintln!("solidq: warning: {}", super::one_line(text));
}

/// `error`, unless `force`: then it is only a warning.
fn refuse(error: Error, force: bool) -> Result<()> {
    if force {
        warn(&error.to_string());
        Ok(())
    } else {
        Err(error)
    }
}

/// A queue an operator names (pause, resume) must be one the database
/// knows of.
pub(super) fn queue_known(known: &KnownNames, queue: &str, force: bool) -> Result<()> {
    if known.has_queue(queue) {
        return Ok(());
    }
    if known.queues.is_empty() && !known.workers {
        warn(&format!(
            "cannot check queue {queue:?}: no job, pause, recurring task or worker names any queue yet"
        ));
        return Ok(());
    }
    refuse(
        Error::Unknown {
            what: "queue",
            value: queue.to_string(),
            reason: format!(
                "no job was ever on it and no worker or recurring task names it (known queues: {}); {FORCE}",
                listed(&known.queues)
            ),
        },
        force,
    )
}

/// A job enqueued by kind must be of a kind a registered worker runs, on a
/// queue a registered worker claims from.
pub(super) fn enqueue_target(
    known: &KnownNames,
    kind: &str,
    queue: &str,
    force: bool,
) -> Result<()> {
    match known.kind_registered(kind) {
        Some(true) => {}
        None => warn(&format!(
            "cannot check kind {kind:?}: no registered worker has recorded its kinds"
        )),
        Some(false) => refuse(
            Error::Unknown {
                what: "kind",
                value: kind.to_string(),
                reason: format!(
                    "no registered worker runs it (registered kinds: {}); {FORCE}",
                    listed(&known.kinds)
                ),
            },
            force,
        )?,
    }
    if known.served(queue) == Some(false) {
        refuse(
            Error::Unknown {
                what: "queue",
                value: queue.to_string(),
                reason: format!(
                    "no registered worker claims from it (their queues: {}); {FORCE}",
                    listed(&known.worker_queues)
                ),
            },
            force,
        )?;
    }
    Ok(())
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

/// A `--kind` or `--queue` filter of `failed retry|discard` must name a
/// kind or queue that exists (a typo would match nothing and say "0").
pub(super) fn failed_filter(
    known: &KnownNames,
    kind: Option<&str>,
    queue: Option<&str>,
) -> Result<()> {
    if let Some(kind) = kind
        && !known.has_kind(kind)
    {
        let mut kinds = known.kinds.clone();
        kinds.extend(known.job_kinds.iter().cloned());
        kinds.sort();
        kinds.dedup();
        return Err(Error::Unknown {
            what: "kind",
            value: kind.to_string(),
            reason: format!(
                "no job has it and no registered worker runs it (known kinds: {})",
                listed(&kinds)
            ),
        });
    }
    if let Some(queue) = queue
        && !known.has_queue(queue)
    {
        return Err(Error::Unknown {
            what: "queue",
            value: queue.to_string(),
            reason: format!(
                "no job was ever on it (known queues: {})",
                listed(&known.queues)
            ),
        });
    }
    Ok(())
}
