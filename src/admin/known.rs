//! The names a database knows of, so an operator's typo (`pause mial`,
//! `enqueue send_emial`) is caught instead of acted on: the queues and
//! kinds of its jobs (the job statistics keep every one ever counted; the
//! execution tables hold the rest), its pauses and recurring tasks, and
//! what its workers registered (each worker records its queues and kinds
//! in its process row's metadata). The rule that checks a name against
//! them is in `names.rs`.

use serde::Serialize;

use crate::client::Queue;
use crate::store::{NameScope, NamesSeen};
use crate::types::{QueuePattern, Result};

/// What [`Queue::known_names`] found. Lists are sorted and deduplicated.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct KnownNames {
    /// Queues that hold a job in any state (or did: the job statistics
    /// keep every queue ever counted), are paused, are named by a
    /// recurring task, or are named exactly in a registered worker's queue
    /// list: what [`Queue::queues`] lists, and the recurring tasks' queues.
    pub queues: Vec<String>,
    /// The queue lists of registered workers, patterns included (`mail*`,
    /// `*`).
    pub worker_queues: Vec<String>,
    /// Job kinds registered workers run, from their process rows (live
    /// ones, and dead ones not pruned yet). Empty when no worker is
    /// registered: then nothing can be said about a kind.
    pub kinds: Vec<String>,
    /// Kinds of jobs in any state (or that were: the job statistics keep
    /// every kind ever counted) and of recurring tasks.
    pub job_kinds: Vec<String>,
    /// Whether any worker process is registered.
    pub workers: bool,
}

impl KnownNames {
    /// Whether `queue` is one of [`KnownNames::queues`] or falls under a
    /// registered worker's `prefix*` pattern (a bare `*` says nothing
    /// about a name).
    pub fn has_queue(&self, queue: &str) -> bool {
        self.queues.iter().any(|q| q == queue)
            || self
                .patterns()
                .any(|p| matches!(p, QueuePattern::Prefix(_)) && p.matches(queue))
    }

    /// Whether some registered worker claims from `queue` (its queue list
    /// matches it, `*` included); `None` when no worker is registered.
    pub fn served(&self, queue: &str) -> Option<bool> {
        self.workers
            .then(|| self.patterns().any(|p| p.matches(queue)))
    }

    /// Whether some registered worker runs jobs of `kind`; `None` when no
    /// worker recorded its kinds.
    pub fn kind_registered(&self, kind: &str) -> Option<bool> {
        (!self.kinds.is_empty()).then(|| self.kinds.iter().any(|k| k == kind))
    }

    /// Whether `kind` is registered by a worker, is the kind of a job in
    /// any state (or was), or of a recurring task.
    pub fn has_kind(&self, kind: &str) -> bool {
        self.kinds.iter().chain(&self.job_kinds).any(|k| k == kind)
    }

    /// Every kind known, sorted: [`KnownNames::kinds`] and
    /// [`KnownNames::job_kinds`].
    pub fn all_kinds(&self) -> Vec<String> {
        let mut kinds: Vec<String> = self.kinds.iter().chain(&self.job_kinds).cloned().collect();
        kinds.sort();
        kinds.dedup();
        kinds
    }

    fn patterns(&self) -> impl Iterator<Item = QueuePattern> + '_ {
        self.worker_queues
            .iter()
            .filter_map(|q| QueuePattern::parse(q).ok())
    }
}

/// A worker process row's queue list (patterns as given) and job kinds,
/// from its metadata (JSON text); empty lists when it is not readable.
pub(crate) fn worker_lists(metadata: &str) -> (Vec<String>, Vec<String>) {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(metadata) else {
        log::debug!("a worker's metadata is not JSON: {metadata:?}");
        return (Vec::new(), Vec::new());
    };
    let strings = |key: &str| -> Vec<String> {
        value[key]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    (strings("queues"), strings("kinds"))
}

/// The exact queue names among `patterns` (not `prefix*` or `*`).
pub(crate) fn exact_names(patterns: &[String]) -> impl Iterator<Item = String> + '_ {
    patterns
        .iter()
        .filter_map(|p| match QueuePattern::parse(p) {
            Ok(QueuePattern::Exact(name)) => Some(name),
            _ => None,
        })
}

/// `names` as one line for a message: `a, b, c`, or `none`.
pub(crate) fn listed(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}

impl KnownNames {
    /// The names `seen` holds; a recurring task without a queue is on
    /// `default_queue`.
    pub(crate) fn from_seen(seen: NamesSeen, default_queue: &str) -> KnownNames {
        let mut known = KnownNames {
            workers: !seen.worker_metadata.is_empty(),
            job_kinds: seen.job_kinds,
            ..KnownNames::default()
        };
        known.job_kinds.extend(seen.recurring_kinds);
        let mut queues = seen.job_queues;
        queues.extend(seen.paused);
        queues.extend(
            seen.recurring_queues
                .into_iter()
                .map(|q| q.unwrap_or_else(|| default_queue.to_string())),
        );
        for metadata in &seen.worker_metadata {
            let (patterns, kinds) = worker_lists(metadata);
            queues.extend(exact_names(&patterns));
            known.worker_queues.extend(patterns);
            known.kinds.extend(kinds);
        }
        for list in [
            &mut queues,
            &mut known.worker_queues,
            &mut known.kinds,
            &mut known.job_kinds,
        ] {
            list.sort();
            list.dedup();
        }
        known.queues = queues;
        known
    }
}

impl Queue {
    /// The queues and job kinds this database knows of (see
    /// [`KnownNames`]), in one snapshot. Reads the job statistics, the
    /// execution tables, the pauses, the recurring tasks and the process
    /// rows, never every job: meant for operator commands, not for hot
    /// paths ([`Queue::check_names`] asks less when it can).
    pub fn known_names(&self) -> Result<KnownNames> {
        self.known_names_in(NameScope::All)
    }

    pub(crate) fn known_names_in(&self, scope: NameScope<'_>) -> Result<KnownNames> {
        let seen = self.store().names_seen(scope)?;
        Ok(KnownNames::from_seen(seen, &self.config().default_queue))
    }
}
