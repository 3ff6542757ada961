//! The one rule for a queue or kind an operator types (the CLI, the HTTP
//! API and the dashboard all check through [`Queue::check_names`]): a name
//! the database has never heard of is most likely a typo, so it is refused
//! with [`Error::Unknown`] naming the value and listing what exists, and
//! nothing is changed; the surfaces offer an explicit override (`--force`,
//! `"force": true`) for names that may be new.
//!
//! What the database knows is [`KnownNames`]: the queues and kinds of jobs
//! in any state (the job statistics keep every one ever counted), pauses,
//! recurring tasks, and what registered workers recorded. When it knows no
//! kind (or no queue) at all (a first deploy, before anything ran), nothing
//! can be said about a name: it is accepted with a warning, as SolidQueue
//! and Sidekiq accept any job class, so a new application's first jobs
//! are not refused by its own empty database. A filter naming an unknown
//! kind or queue is refused even then: it would match nothing.
//!
//! The library's own [`Queue::enqueue`] of a typed job is never checked:
//! the type's `KIND` is the truth, and a new application's first enqueue
//! must work.

use crate::KnownNames;
use crate::admin::known::listed;
use crate::client::{Queue, check_kind};
use crate::store::NameScope;
use crate::types::{Error, Result, validate_queue_name};

/// A name to check, by what it is used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Name<'a> {
    /// The kind of a job enqueued by name: known to a worker, a job (in any
    /// state, or once counted) or a recurring task.
    Kind(&'a str),
    /// The queue a job is enqueued to: while workers are registered, one
    /// of them must claim from it (a job there would never run otherwise);
    /// with none registered, a known queue or the configuration's default
    /// queue.
    Target(&'a str),
    /// A queue to pause or resume: a known queue, or one under a registered
    /// worker's `prefix*`.
    Queue(&'a str),
    /// A kind a filter of existing jobs names: a known kind, or the filter
    /// matches nothing. Not overridable.
    FilterKind(&'a str),
    /// A queue a filter of existing jobs names, as [`Name::FilterKind`].
    FilterQueue(&'a str),
}

impl Name<'_> {
    /// The name as given.
    pub fn value(&self) -> &str {
        match *self {
            Name::Kind(v)
            | Name::Target(v)
            | Name::Queue(v)
            | Name::FilterKind(v)
            | Name::FilterQueue(v) => v,
        }
    }

    /// A value that can be no kind or queue at all (empty, too long, a
    /// control character, a queue name with a space) is
    /// [`Error::InvalidOption`], whatever the database knows.
    fn check_shape(&self) -> Result<()> {
        match *self {
            Name::Kind(kind) | Name::FilterKind(kind) => check_kind(kind),
            Name::Target(queue) | Name::Queue(queue) | Name::FilterQueue(queue) => {
                validate_queue_name(queue)
            }
        }
    }

    /// Whether an override (`--force`) may let an unknown value through:
    /// not for filters, which would match nothing.
    pub fn overridable(&self) -> bool {
        !matches!(self, Name::FilterKind(_) | Name::FilterQueue(_))
    }
}

/// What the rule says of one name.
enum Verdict {
    Known,
    /// Nothing to compare against: accepted, with this warning.
    Unchecked(String),
    Unknown(Error),
}

fn unknown(what: &'static str, value: &str, reason: String) -> Verdict {
    Verdict::Unknown(Error::Unknown {
        what,
        value: value.to_string(),
        reason,
    })
}

/// The rule, on what the database knows.
fn verdict(known: &KnownNames, name: Name<'_>, default_queue: &str) -> Verdict {
    let kinds = || known.all_kinds();
    match name {
        Name::Kind(kind) | Name::FilterKind(kind) => {
            if known.has_kind(kind) {
                Verdict::Known
            } else if kinds().is_empty() && matches!(name, Name::Kind(_)) {
                Verdict::Unchecked(format!(
                    "cannot check kind {kind:?}: the database knows no kind yet (no job, worker or recurring task has one)"
                ))
            } else {
                unknown(
                    "kind",
                    kind,
                    format!(
                        "no job, worker or recurring task has it (known kinds: {})",
                        listed(&kinds())
                    ),
                )
            }
        }
        Name::Target(queue) => match known.served(queue) {
            Some(true) => Verdict::Known,
            Some(false) => unknown(
                "queue",
                queue,
                format!(
                    "no registered worker claims from it (their queues: {})",
                    listed(&known.worker_queues)
                ),
            ),
            None if queue == default_queue => Verdict::Known,
            None => verdict(known, Name::Queue(queue), default_queue),
        },
        Name::Queue(queue) | Name::FilterQueue(queue) => {
            if known.has_queue(queue) {
                Verdict::Known
            } else if known.queues.is_empty() && !known.workers && matches!(name, Name::Queue(_)) {
                Verdict::Unchecked(format!(
                    "cannot check queue {queue:?}: the database knows no queue yet (no job, pause, recurring task or worker names one)"
                ))
            } else {
                unknown(
                    "queue",
                    queue,
                    format!(
                        "no job, pause, recurring task or worker names it (known queues: {})",
                        listed(&known.queues)
                    ),
                )
            }
        }
    }
}

impl Queue {
    /// Checks names an operator typed (see [`Name`]) against what this
    /// database knows, before anything is changed. Returns the warnings
    /// to show (a name that could not be checked because the database
    /// knows nothing yet; with `force`, each unknown name let through);
    /// the first unknown name is [`Error::Unknown`] naming the value and
    /// listing the names that exist (filters are refused even with
    /// `force`). A value that can be no name at all is
    /// [`Error::InvalidOption`] first.
    ///
    /// Cheap when every name is known by a worker, a recurring task, a
    /// pause or the job statistics (one `EXISTS` per name): what an
    /// enqueue through the HTTP API pays. Only a name not found there
    /// reads everything [`Queue::known_names`] reads.
    pub fn check_names(&self, names: &[Name<'_>], force: bool) -> Result<Vec<String>> {
        let default_queue = &self.config().default_queue;
        for name in names {
            name.check_shape()?;
        }
        let (mut kinds, mut queues) = (Vec::new(), Vec::new());
        for name in names {
            match name {
                Name::Kind(k) | Name::FilterKind(k) => kinds.push(k.to_string()),
                Name::Target(q) | Name::Queue(q) | Name::FilterQueue(q) => {
                    queues.push(q.to_string())
                }
            }
        }
        let probed = self.known_names_in(NameScope::Probe {
            kinds: &kinds,
            queues: &queues,
        })?;
        if names
            .iter()
            .all(|n| matches!(verdict(&probed, *n, default_queue), Verdict::Known))
        {
            return Ok(Vec::new());
        }
        let known = self.known_names()?;
        let mut warnings = Vec::new();
        for name in names {
            match verdict(&known, *name, default_queue) {
                Verdict::Known => {}
                Verdict::Unchecked(warning) => warnings.push(warning),
                Verdict::Unknown(error) if force && name.overridable() => {
                    warnings.push(error.to_string())
                }
                Verdict::Unknown(error) => return Err(error),
            }
        }
        Ok(warnings)
    }
}
