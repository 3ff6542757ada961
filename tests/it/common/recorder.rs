//! A hook that records every event it hears, for the tests to read, and
//! wakes a test waiting for one ([`Recorder::wait_until`]): the signals
//! the worker, the dispatcher and the scheduler emit (as River's
//! `testsignal`), so a test that waits for their internal state wakes on
//! the event instead of polling for it.

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use solidq::events::{
    Events, JobClaimed, JobDiscarded, JobEnqueued, JobFailed, JobReleased, JobRetried, JobStalled,
    JobSucceeded, ProcessPruned, ProcessRegistered, RecurringFired, RecurringSkipped,
};

/// One recorded event.
#[derive(Debug, Clone)]
pub enum Event {
    Enqueued(JobEnqueued),
    Claimed(JobClaimed),
    Succeeded(JobSucceeded),
    Retried(JobRetried),
    Failed(JobFailed),
    Stalled(JobStalled),
    Released(JobReleased),
    Discarded(JobDiscarded),
    Registered(ProcessRegistered),
    Pruned(ProcessPruned),
    Fired(RecurringFired),
    Skipped(RecurringSkipped),
}

impl Event {
    pub fn name(&self) -> &'static str {
        match self {
            Event::Enqueued(_) => "enqueued",
            Event::Claimed(_) => "claimed",
            Event::Succeeded(_) => "succeeded",
            Event::Retried(_) => "retried",
            Event::Failed(_) => "failed",
            Event::Stalled(_) => "stalled",
            Event::Released(_) => "released",
            Event::Discarded(_) => "discarded",
            Event::Registered(_) => "registered",
            Event::Pruned(_) => "pruned",
            Event::Fired(_) => "fired",
            Event::Skipped(_) => "skipped",
        }
    }

    /// The job the event is about, for job events.
    pub fn job_id(&self) -> Option<i64> {
        match self {
            Event::Enqueued(e) => Some(e.job_id),
            Event::Claimed(e) => Some(e.job_id),
            Event::Succeeded(e) => Some(e.job_id),
            Event::Retried(e) => Some(e.job_id),
            Event::Failed(e) => Some(e.job_id),
            Event::Stalled(e) => Some(e.job_id),
            Event::Released(e) => Some(e.job_id),
            Event::Discarded(e) => Some(e.job_id),
            _ => None,
        }
    }
}

/// Hooks that record every event, in order, with when it arrived.
#[derive(Clone, Default)]
pub struct Recorder(Arc<Heard>);

#[derive(Default)]
struct Heard {
    events: Mutex<Vec<(Instant, Event)>>,
    pushed: Condvar,
}

impl Recorder {
    fn push(&self, event: Event) {
        self.0.events.lock().unwrap().push((Instant::now(), event));
        self.0.pushed.notify_all();
    }

    /// Returns once `condition` holds, checking it again at each event
    /// heard; panics after `timeout`, naming `what`.
    pub fn wait_until(&self, what: &str, timeout: Duration, condition: impl Fn(&Recorder) -> bool) {
        let deadline = Instant::now() + timeout;
        loop {
            let heard = self.0.events.lock().unwrap().len();
            if condition(self) {
                return;
            }
            let events = self.0.events.lock().unwrap();
            let now = Instant::now();
            assert!(
                now < deadline,
                "timed out after {timeout:?} waiting for {what}"
            );
            if events.len() == heard {
                drop(self.0.pushed.wait_timeout(events, deadline - now).unwrap());
            }
        }
    }

    pub fn all(&self) -> Vec<Event> {
        self.0
            .events
            .lock()
            .unwrap()
            .iter()
            .map(|(_, e)| e.clone())
            .collect()
    }

    /// The events about job `id`.
    pub fn of_job(&self, id: i64) -> Vec<Event> {
        self.all()
            .into_iter()
            .filter(|e| e.job_id() == Some(id))
            .collect()
    }

    /// When the events about job `id` arrived.
    pub fn times_of_job(&self, id: i64) -> Vec<Instant> {
        self.0
            .events
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, e)| e.job_id() == Some(id))
            .map(|(at, _)| *at)
            .collect()
    }

    pub fn names_of_job(&self, id: i64) -> Vec<&'static str> {
        self.of_job(id).iter().map(Event::name).collect()
    }

    pub fn has(&self, id: i64, name: &str) -> bool {
        self.of_job(id).iter().any(|e| e.name() == name)
    }

    pub fn registered(&self) -> Vec<ProcessRegistered> {
        self.all()
            .into_iter()
            .filter_map(|e| match e {
                Event::Registered(r) => Some(r),
                _ => None,
            })
            .collect()
    }
}

impl Events for Recorder {
    fn job_enqueued(&self, e: &JobEnqueued) {
        self.push(Event::Enqueued(e.clone()));
    }
    fn job_claimed(&self, e: &JobClaimed) {
        self.push(Event::Claimed(e.clone()));
    }
    fn job_succeeded(&self, e: &JobSucceeded) {
        self.push(Event::Succeeded(e.clone()));
    }
    fn job_retried(&self, e: &JobRetried) {
        self.push(Event::Retried(e.clone()));
    }
    fn job_failed(&self, e: &JobFailed) {
        self.push(Event::Failed(e.clone()));
    }
    fn job_stalled(&self, e: &JobStalled) {
        self.push(Event::Stalled(e.clone()));
    }
    fn job_released(&self, e: &JobReleased) {
        self.push(Event::Released(e.clone()));
    }
    fn job_discarded(&self, e: &JobDiscarded) {
        self.push(Event::Discarded(e.clone()));
    }
    fn process_registered(&self, e: &ProcessRegistered) {
        self.push(Event::Registered(e.clone()));
    }
    fn process_pruned(&self, e: &ProcessPruned) {
        self.push(Event::Pruned(e.clone()));
    }
    fn recurring_fired(&self, e: &RecurringFired) {
        self.push(Event::Fired(e.clone()));
    }
    fn recurring_skipped(&self, e: &RecurringSkipped) {
        self.push(Event::Skipped(e.clone()));
    }
}
