//! `solidq check`: what `Supervisor::check` validates (settings, database,
//! programs), then the names in the file against what the database knows:
//! recurring tasks of kinds no worker runs, or on queues no worker claims
//! from, and worker queues no job was ever on.

use std::path::Path;

use super::guard::warn;
use super::require_existing;
use solidq::config::SupervisorConfig;
use solidq::{Error, QueuePattern, Result};
use solidq::{KnownNames, Queue, QueueConfig, Supervisor};

pub(super) fn check(path: &Path, force: bool) -> Result<()> {
    let config = SupervisorConfig::load(path)?;
    let url = config.database_url()?;
    require_existing(&url)?;
    let report = Supervisor::new(config.clone()).check()?;
    for warning in &report.warnings {
        println!("warning: {warning}");
    }
    let queue = Queue::connect_with(
        url.expose(),
        QueueConfig {
            pool_size: 2,
            sqlite_synchronous: config.sqlite_synchronous,
            max_payload_bytes: config.max_payload_bytes,
            ..QueueConfig::default()
        },
    )?;
    let (problems, notes) = names(
        &config,
        &queue.known_names()?,
        &queue.config().default_queue,
    );
    // Notes are for a file that passes: none precedes a refusal they have
    // nothing to do with.
    if problems.is_empty() || force {
        for note in &notes {
            warn(note);
        }
    }
    if !problems.is_empty() {
        for problem in &problems {
            if force {
                println!("warning: {problem}");
            } else {
                println!("error: {problem}");
            }
        }
        if !force {
            return Err(Error::Unknown {
                what: "names in",
                value: path.display().to_string(),
                reason: format!(
                    "{} listed above; --force to accept them",
                    if problems.len() == 1 {
                        "1 problem".to_string()
                    } else {
                        format!("{} problems", problems.len())
                    }
                ),
            });
        }
    }
    println!(
        "{}: ok ({} worker processes, database {})",
        path.display(),
        report.processes,
        report.database
    );
    Ok(())
}

/// The names of `config` that nothing in the database backs (problems),
/// and those that cannot be checked because there is nothing to compare
/// them against (notes).
fn names(
    config: &SupervisorConfig,
    known: &KnownNames,
    default_queue: &str,
) -> (Vec<String>, Vec<String>) {
    let mut problems = Vec::new();
    let mut notes = Vec::new();
    let groups: Vec<(usize, QueuePattern)> = config
        .workers
        .iter()
        .enumerate()
        .flat_map(|(i, g)| {
            g.queues
                .iter()
                .filter_map(move |q| QueuePattern::parse(q).ok().map(|p| (i, p)))
        })
        .collect();
    for (key, task) in &config.recurring {
        match known.kind_registered(&task.kind) {
            Some(true) => {}
            Some(false) => problems.push(format!(
                "recurring task {key:?} enqueues kind {:?}, which no registered worker runs (registered kinds: {})",
                task.kind,
                listed(&known.kinds)
            )),
            None => notes.push(format!(
                "cannot check the kind {:?} of recurring task {key:?}: no registered worker has recorded its kinds",
                task.kind
            )),
        }
        let queue = task.queue.as_deref().unwrap_or(default_queue);
        if !groups.is_empty() {
            if !groups.iter().any(|(_, p)| p.matches(queue)) {
                let all: Vec<String> = config
                    .workers
                    .iter()
                    .flat_map(|g| g.queues.clone())
                    .collect();
                problems.push(format!(
                    "recurring task {key:?} enqueues to queue {queue:?}, which no [[workers]] group claims from (their queues: {})",
                    listed(&all)
                ));
            }
        } else {
            match known.served(queue) {
                Some(true) => {}
                Some(false) => problems.push(format!(
                    "recurring task {key:?} enqueues to queue {queue:?}, which no registered worker claims from (their queues: {})",
                    listed(&known.worker_queues)
                )),
                None => notes.push(format!(
                    "cannot check who claims queue {queue:?} of recurring task {key:?}: the file has no [[workers]] and no worker is registered"
                )),
            }
        }
    }
    let targets: Vec<&str> = config
        .recurring
        .values()
        .map(|t| t.queue.as_deref().unwrap_or(default_queue))
        .collect();
    for (i, pattern) in &groups {
        let QueuePattern::Exact(name) = pattern else {
            continue;
        };
        if known.has_queue(name) || targets.contains(&name.as_str()) {
            continue;
        }
        if known.queues.is_empty() {
            notes.push(format!(
                "cannot check queue {name:?} of workers[{i}]: no job was ever enqueued"
            ));
        } else {
            problems.push(format!(
                "workers[{i}] claims from queue {name:?}, which no job was ever on (known queues: {})",
                listed(&known.queues)
            ));
        }
    }
    (problems, notes)
}

/// `names` as one line for a message: `a, b, c`, or `none`.
fn listed(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}
