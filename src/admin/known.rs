//! The names a database knows of, so an operator's typo (`pause mial`,
//! `enqueue send_emial`) is caught instead of acted on: the queues its
//! jobs, pauses, recurring tasks and workers name, and the job kinds its
//! workers registered (each worker records them in its process row's
//! metadata).

use serde::Serialize;

use crate::client::Queue;
use crate::types::{QueuePattern, Result};

/// What [`Queue::known_names`] found. Lists are sorted and deduplicated.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct KnownNames {
    /// Queues that hold a job in any state (finished jobs still kept
    /// included), are paused, are named by a recurring task, or are named
    /// exactly in a registered worker's queue list.
    pub queues: Vec<String>,
    /// The queue lists of registered workers, patterns included (`mail*`,
    /// `*`).
    pub worker_queues: Vec<String>,
    /// Job kinds registered workers run, from their process rows (live
    /// ones, and dead ones not pruned yet). Empty when no worker is
    /// registered: then nothing can be said about a kind.
    pub kinds: Vec<String>,
    /// Kinds of the jobs in the database, in any state.
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

    /// Whether `kind` is registered by a worker or is the kind of a job in
    /// the database.
    pub fn has_kind(&self, kind: &str) -> bool {
        self.kinds.iter().chain(&self.job_kinds).any(|k| k == kind)
    }

    fn patterns(&self) -> impl Iterator<Item = QueuePattern> + '_ {
        self.worker_queues
            .iter()
            .filter_map(|q| QueuePattern::parse(q).ok())
    }
}

/// `names` as one line for a message: `a, b, c`, or `none`.
#[cfg(feature = "cli")]
pub(crate) fn listed(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}

impl Queue {
    /// The queues and job kinds this database knows of (see
    /// [`KnownNames`]), in one snapshot. Reads every job's queue and kind:
    /// meant for operator commands, not for hot paths.
    pub fn known_names(&self) -> Result<KnownNames> {
        let seen = self.store().names_seen()?;
        let mut known = KnownNames {
            workers: !seen.worker_metadata.is_empty(),
            job_kinds: seen.job_kinds,
            ..KnownNames::default()
        };
        let mut queues = seen.job_queues;
        queues.extend(seen.paused);
        queues.extend(seen.recurring_queues);
        for metadata in &seen.worker_metadata {
            let Ok(value) = serde_json::from_str::<serde_json::Value>(metadata) else {
                log::debug!("a worker's metadata is not JSON: {metadata:?}");
                continue;
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
            for pattern in strings("queues") {
                if let Ok(QueuePattern::Exact(name)) = QueuePattern::parse(&pattern) {
                    queues.push(name);
                }
                known.worker_queues.push(pattern);
            }
            known.kinds.extend(strings("kinds"));
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
        Ok(known)
    }
}
