//! Resumable steps: [`JobContext::step`] runs a named step once across a
//! job's attempts, and [`Step::checkpoint`] records a cursor inside it, so
//! the attempt after an interruption (a shutdown, a crash and its release,
//! a snooze, an error and its retry) skips the steps that finished and
//! resumes the one that did not from its last cursor.
//!
//! The state is one small JSON value per job (`solidq_jobs.checkpoint`):
//! the names of the finished steps and the current step's cursor. It is
//! written like progress ([`JobContext::set_progress`]): the worker keeps
//! the latest value in memory and writes it with the next batch of
//! outcomes, at most a second apart, and always
//! before the job's own outcome; each write is fenced by the job's claim,
//! so a worker that lost its claim writes nothing. A checkpoint is never a
//! statement per item.
//!
//! What that promises: a finished step whose completion was written never
//! runs again; work after the last written checkpoint runs again after a
//! crash (at most a second of it, plus whatever the job did since its last
//! `checkpoint` call). Inside a step, delivery is at least once from the
//! last stored cursor: make the work per item idempotent, or record it in
//! the same transaction as its own effect.

use std::fmt;
use std::sync::{Arc, Mutex};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{JobContext, JobError, ProgressCell};

/// A job's resumable steps as stored: the finished steps, in order, and the
/// step in progress with its last cursor.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Checkpoint {
    #[serde(default)]
    pub done: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<serde_json::Value>,
}

/// The running attempt's checkpoint, shared by the job's context and its
/// clones.
#[derive(Default)]
pub(crate) struct StepBook {
    state: Mutex<Checkpoint>,
}

impl StepBook {
    /// The book of an attempt, from the stored checkpoint. A value that
    /// does not parse (written by something else) starts afresh, loudly.
    pub(crate) fn load(job_id: i64, stored: Option<&str>) -> Arc<StepBook> {
        let state = match stored.map(serde_json::from_str::<Checkpoint>) {
            None => Checkpoint::default(),
            Some(Ok(checkpoint)) => checkpoint,
            Some(Err(error)) => {
                log::warn!(
                    "job {job_id}: its stored checkpoint does not parse ({error}); its steps start afresh"
                );
                Checkpoint::default()
            }
        };
        Arc::new(StepBook {
            state: Mutex::new(state),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Checkpoint> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The state as stored, for the worker to write.
    fn stored(&self) -> String {
        serde_json::to_string(&*self.lock()).expect("a checkpoint of strings and JSON serializes")
    }
}

impl fmt::Debug for StepBook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("StepBook").field(&*self.lock()).finish()
    }
}

/// The step running now: its name, the cursor it resumes from, and how it
/// records the next one. Given to the closure of [`JobContext::step`].
///
/// Checkpoints are written like progress: the worker keeps the latest in
/// memory and writes it with its next batch of outcomes or within a second
/// (one statement for all its running jobs, fenced by the claim), and
/// always before the job's own outcome, never a statement per item. So a
/// finished step whose completion was written never runs again, and inside
/// a step delivery is at least once from the last stored cursor: after a
/// crash, the items since then (at most about a second of them) run again.
/// A graceful stop, a snooze, an error or a panic store the last cursor set
/// before the outcome.
pub struct Step<'a> {
    name: &'a str,
    resumed: Option<serde_json::Value>,
    book: &'a StepBook,
    cell: Option<&'a Arc<ProgressCell>>,
    job_id: i64,
}

impl Step<'_> {
    /// The step's name.
    pub fn name(&self) -> &str {
        self.name
    }

    /// The cursor an earlier attempt last recorded in this step, when this
    /// attempt resumes it; `None` when the step starts from the beginning.
    /// A stored cursor that does not deserialize into `T` (the job's code
    /// changed) is logged and the step starts from the beginning.
    pub fn cursor<T: DeserializeOwned>(&self) -> Option<T> {
        let value = self.resumed.clone()?;
        match serde_json::from_value(value) {
            Ok(cursor) => Some(cursor),
            Err(error) => {
                log::warn!(
                    "job {}: the cursor of step {:?} does not deserialize ({error}); the step starts from the beginning",
                    self.job_id,
                    self.name
                );
                None
            }
        }
    }

    /// Records how far the step got: an attempt that resumes this step
    /// reads it back with [`Step::cursor`]. Cheap to call per item: it
    /// replaces the last cursor in memory, and the worker writes the latest
    /// one at most once a second and before the job's outcome (see
    /// [`Step`]). A cursor that does not serialize is logged and ignored.
    pub fn checkpoint(&mut self, cursor: impl Serialize) {
        let value = match serde_json::to_value(&cursor) {
            Ok(value) => value,
            Err(error) => {
                log::warn!(
                    "job {}: the cursor of step {:?} does not serialize ({error}); ignored",
                    self.job_id,
                    self.name
                );
                return;
            }
        };
        {
            let mut state = self.book.lock();
            state.step = Some(self.name.to_string());
            state.cursor = Some(value);
        }
        queue(self.book, self.cell);
    }
}

impl fmt::Debug for Step<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Step")
            .field("name", &self.name)
            .field("resumed", &self.resumed)
            .finish_non_exhaustive()
    }
}

/// Hands the book's state to the worker's writer (nothing without one).
fn queue(book: &StepBook, cell: Option<&Arc<ProgressCell>>) {
    if let Some(cell) = cell {
        cell.set_checkpoint(book.stored());
    }
}

impl JobContext {
    /// Runs a named step of a resumable job, once across its attempts.
    ///
    /// A step that finished in an earlier attempt is skipped (`Ok(())`
    /// without calling `run`); a step that an earlier attempt was inside
    /// is resumed: [`Step::cursor`] returns its last
    /// [`checkpoint`](Step::checkpoint). When `run` returns `Ok`, the step
    /// is recorded as finished; when it returns an error (or panics) the
    /// job's outcome follows as for any error, and the step's last cursor
    /// is kept for the next attempt. Names identify steps: give each step
    /// of a job its own, and keep them when the code changes.
    ///
    /// ```
    /// # use serde::{Deserialize, Serialize};
    /// use solidq::{Job, JobContext, JobResult};
    ///
    /// #[derive(Serialize, Deserialize)]
    /// struct Import { rows: u64 }
    ///
    /// impl Job for Import {
    ///     const KIND: &'static str = "import";
    ///     fn perform(&self, ctx: &JobContext) -> JobResult {
    ///         ctx.step("download", |_| Ok(()))?;
    ///         ctx.step("insert", |s| {
    ///             let from: u64 = s.cursor().unwrap_or(0);
    ///             for row in from..self.rows {
    ///                 // insert row ...
    ///                 s.checkpoint(row + 1);
    ///             }
    ///             Ok(())
    ///         })?;
    ///         ctx.step("notify", |_| Ok(()))?;
    ///         Ok(serde_json::Value::Null)
    ///     }
    /// }
    /// ```
    ///
    /// See [`Step`] for when checkpoints are written and what is at least
    /// once.
    pub fn step<F>(&self, name: &str, run: F) -> Result<(), JobError>
    where
        F: FnOnce(&mut Step<'_>) -> Result<(), JobError>,
    {
        let resumed = {
            let mut state = self.steps.lock();
            if state.done.iter().any(|done| done == name) {
                log::debug!(
                    "job {} ({}): step {name:?} finished in an earlier attempt; skipped",
                    self.id,
                    self.kind
                );
                return Ok(());
            }
            if state.step.as_deref() == Some(name) {
                state.cursor.clone()
            } else {
                state.step = Some(name.to_string());
                state.cursor = None;
                None
            }
        };
        if resumed.is_some() {
            log::info!(
                "job {} ({}): resuming step {name:?} from its last checkpoint",
                self.id,
                self.kind
            );
        }
        let mut step = Step {
            name,
            resumed,
            book: &self.steps,
            cell: self.progress.as_ref(),
            job_id: self.id,
        };
        run(&mut step)?;
        {
            let mut state = self.steps.lock();
            state.done.push(name.to_string());
            state.step = None;
            state.cursor = None;
        }
        queue(&self.steps, self.progress.as_ref());
        Ok(())
    }

    /// The steps this job finished, in any attempt so far, in order.
    pub fn finished_steps(&self) -> Vec<String> {
        self.steps.lock().done.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_round_trips_and_bad_stored_text_starts_afresh() {
        let book = StepBook::load(1, Some(r#"{"done":["a"],"step":"b","cursor":7}"#));
        assert_eq!(
            *book.lock(),
            Checkpoint {
                done: vec!["a".into()],
                step: Some("b".into()),
                cursor: Some(serde_json::json!(7)),
            }
        );
        assert_eq!(book.stored(), r#"{"done":["a"],"step":"b","cursor":7}"#);
        let fresh = StepBook::load(1, Some("not json\u{0}"));
        assert_eq!(*fresh.lock(), Checkpoint::default());
        assert_eq!(StepBook::load(1, None).stored(), r#"{"done":[]}"#);
    }
}
