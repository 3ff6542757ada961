//! Workflows: members of a batch that wait for other members (a DAG built
//! in code: fan-out, fan-in), as Oban Pro's and River Pro's workflows.
//!
//! ```no_run
//! # use solidq::{BatchOptions, EnqueueOptions, JobRequest, Queue};
//! # #[derive(serde::Serialize, serde::Deserialize)] struct Step { name: String }
//! # impl solidq::Job for Step { const KIND: &'static str = "step";
//! #   fn perform(&self, _: &solidq::JobContext) -> solidq::JobResult { Ok(serde_json::Value::Null) } }
//! # fn main() -> solidq::Result<()> {
//! let queue = Queue::connect("sqlite://jobs.sqlite3")?;
//! let step = |name: &str| JobRequest::new(&Step { name: name.into() }, EnqueueOptions::new());
//! // fetch → (resize, tag) → publish: a diamond.
//! let jobs = vec![
//!     step("fetch")?.named("fetch"),
//!     step("resize")?.named("resize").after("fetch"),
//!     step("tag")?.named("tag").after("fetch"),
//!     step("publish")?.after("resize").after("tag"),
//! ];
//! let workflow = queue.batch(BatchOptions::new().description("import"), &jobs)?;
//! println!("{:?}", queue.batch_dependencies(workflow.id)?);
//! # Ok(()) }
//! ```
//!
//! # What is promised
//!
//! * **Within a batch.** A job waits for members of its own batch: named jobs
//!   of the same call ([`JobRequest::named`](crate::JobRequest::named),
//!   [`JobRequest::after`](crate::JobRequest::after)), or members already
//!   stored, by id ([`JobRequest::after_job`](crate::JobRequest::after_job),
//!   with [`Queue::add_to_batch`](crate::Queue::add_to_batch), so a running
//!   member may add a job that waits for itself or others). The batch is the
//!   workflow: its counts, callbacks and progress cover every member.
//! * **Checked before anything is written.** A name no job of the call
//!   has, two jobs of one name, a cycle, a parent id that is not a member
//!   of the batch, or dependencies given to an enqueue outside a batch:
//!   [`Error::Dependency`], and nothing is
//!   written.
//! * **Ready when the parents succeeded.** A waiting job is
//!   [`JobStatus::Waiting`](crate::JobStatus::Waiting): never claimed, run
//!   at once by nobody. The transaction that records its last parent's
//!   success (batched with every outcome) makes it ready, or scheduled for
//!   its own run time (counted from its enqueue), or places it under its
//!   concurrency limit; nothing polls the parents.
//! * **Cancelled by a failed parent.** When a parent fails for good, is
//!   discarded or cancelled, the job is ended as discarded with `cancelled by
//!   dependency: job N failed` in its error, in that same transaction, and its
//!   own dependants after it. With
//!   [`JobRequest::even_if_parents_fail`](crate::JobRequest::even_if_parents_fail)
//!   it runs instead once every parent ended, however.
//! * **Once.** Each edge resolves once (a parent's second ending, after an
//!   operator's retry of a failed parent, finds it resolved): a dependant is
//!   released or cancelled once. A retried parent does not bring back the
//!   dependants it cancelled.
//!
//! The edges stay stored with their outcome:
//! [`Queue::batch_dependencies`](crate::Queue::batch_dependencies) reads them,
//! and `solidq batch ID` draws the members as a tree. Like batch rows, edges
//! are not deleted with their jobs.

use std::collections::{HashMap, VecDeque};

use crate::client::JobRequest;
use crate::store::dependencies::{FAILED, ParentRef, SUCCEEDED, Wait};
use crate::types::{Error, Result};

/// An edge between two members of a batch, from
/// [`Queue::batch_dependencies`](crate::Queue::batch_dependencies).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct Dependency {
    /// The job that waits (or waited).
    pub job_id: i64,
    /// The job it waits for.
    pub parent_id: i64,
    /// How the parent ended: `None` while it has not.
    pub outcome: Option<DependencyOutcome>,
}

/// How a parent ended, for its dependants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DependencyOutcome {
    /// It succeeded.
    Succeeded,
    /// It failed for good, was discarded or cancelled.
    Failed,
}

impl crate::Queue {
    /// The dependencies between members of `batch`, by job id then parent
    /// id.
    pub fn batch_dependencies(&self, batch: i64) -> Result<Vec<Dependency>> {
        let edges = self.store().with_conn("batch_dependencies", |conn| {
            crate::store::driver(conn).dependencies_in_batch(batch)
        })?;
        Ok(edges
            .into_iter()
            .map(|e| Dependency {
                job_id: e.job_id,
                parent_id: e.parent_id,
                outcome: match e.outcome.as_deref() {
                    Some(SUCCEEDED) => Some(DependencyOutcome::Succeeded),
                    Some(FAILED) => Some(DependencyOutcome::Failed),
                    _ => None,
                },
            })
            .collect())
    }
}

/// A member's label in errors: its name, else its place and kind.
fn label(requests: &[JobRequest], i: usize) -> String {
    match &requests[i].name {
        Some(name) => format!("{name:?}"),
        None => format!("job #{i} ({})", requests[i].kind()),
    }
}

/// The waits of `requests` (one call's members): their parents resolved
/// to indices (names) or ids, checked for unknown names, duplicate names
/// and cycles before anything is written.
pub(crate) fn waits(requests: &[JobRequest]) -> Result<Vec<Wait>> {
    if requests
        .iter()
        .all(|r| r.after.is_empty() && r.after_jobs.is_empty())
    {
        return Ok(Vec::new());
    }
    let mut names: HashMap<&str, usize> = HashMap::new();
    for (i, request) in requests.iter().enumerate() {
        if let Some(name) = &request.name
            && names.insert(name.as_str(), i).is_some()
        {
            return Err(Error::Dependency {
                job: format!("{name:?}"),
                reason: "two jobs of the call have this name".into(),
            });
        }
    }
    let mut waits = Vec::new();
    for (i, request) in requests.iter().enumerate() {
        let mut parents = Vec::new();
        for name in &request.after {
            let Some(&parent) = names.get(name.as_str()) else {
                return Err(Error::Dependency {
                    job: label(requests, i),
                    reason: format!("no job of the call is named {name:?}"),
                });
            };
            parents.push(ParentRef::Index(parent));
        }
        parents.extend(request.after_jobs.iter().map(|id| ParentRef::Id(*id)));
        parents.sort_by_key(|p| match p {
            ParentRef::Index(i) => (0, *i as i64),
            ParentRef::Id(id) => (1, *id),
        });
        parents.dedup();
        if !parents.is_empty() {
            waits.push(Wait {
                index: i,
                parents,
                run_anyway: request.run_anyway,
            });
        }
    }
    if let Some(stuck) = cycle(requests.len(), &waits) {
        return Err(Error::Dependency {
            job: label(requests, stuck),
            reason: "its dependencies form a cycle".into(),
        });
    }
    Ok(waits)
}

/// A job on or behind a cycle of the edges within the call, if any
/// (Kahn's algorithm: what is never freed of its parents).
fn cycle(jobs: usize, waits: &[Wait]) -> Option<usize> {
    let mut waiting_for = vec![0usize; jobs];
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); jobs];
    for wait in waits {
        for parent in &wait.parents {
            if let ParentRef::Index(p) = parent {
                waiting_for[wait.index] += 1;
                children[*p].push(wait.index);
            }
        }
    }
    let mut free: VecDeque<usize> = (0..jobs).filter(|&j| waiting_for[j] == 0).collect();
    let mut freed = 0;
    while let Some(job) = free.pop_front() {
        freed += 1;
        for &child in &children[job] {
            waiting_for[child] -= 1;
            if waiting_for[child] == 0 {
                free.push_back(child);
            }
        }
    }
    (freed < jobs).then(|| (0..jobs).find(|&j| waiting_for[j] > 0))?
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EnqueueOptions;

    #[derive(serde::Serialize, serde::Deserialize)]
    struct Noop;
    impl crate::Job for Noop {
        const KIND: &'static str = "noop";
        fn perform(&self, _: &crate::JobContext) -> crate::JobResult {
            Ok(serde_json::Value::Null)
        }
    }

    fn job(name: &str) -> JobRequest {
        JobRequest::new(&Noop, EnqueueOptions::new())
            .unwrap()
            .named(name)
    }

    fn reason(result: Result<Vec<Wait>>) -> String {
        match result {
            Err(Error::Dependency { job, reason }) => format!("{job}: {reason}"),
            other => panic!("expected a dependency error, got {other:?}"),
        }
    }

    #[test]
    fn a_diamond_resolves_to_indices() {
        let waits = waits(&[
            job("a"),
            job("b").after("a"),
            job("c").after("a"),
            job("d").after("b").after("c").after("b"),
        ])
        .unwrap();
        assert_eq!(
            waits
                .iter()
                .map(|w| (w.index, w.parents.clone()))
                .collect::<Vec<_>>(),
            vec![
                (1, vec![ParentRef::Index(0)]),
                (2, vec![ParentRef::Index(0)]),
                (3, vec![ParentRef::Index(1), ParentRef::Index(2)]),
            ]
        );
    }

    #[test]
    fn cycles_unknown_names_and_duplicate_names_are_refused() {
        assert_eq!(
            reason(waits(&[
                job("a").after("c"),
                job("b").after("a"),
                job("c").after("b")
            ])),
            "\"a\": its dependencies form a cycle"
        );
        assert_eq!(
            reason(waits(&[job("a").after("a")])),
            "\"a\": its dependencies form a cycle"
        );
        assert_eq!(
            reason(waits(&[job("a"), job("b").after("nope")])),
            "\"b\": no job of the call is named \"nope\""
        );
        assert_eq!(
            reason(waits(&[job("a"), job("a"), job("b").after("a")])),
            "\"a\": two jobs of the call have this name"
        );
    }
}
