//! The completer thread: every outcome from every executor thread of the
//! process goes through it and is written in batches, one transaction per
//! batch. A batch holds whatever queued up while the previous one was being
//! written, after lingering up to `flush_interval` for more, capped at
//! `batch_size`: under load batches grow, when idle a lone completion is
//! written at once.
//!
//! Fencing is per row: a completion whose claim is gone is skipped and
//! logged; the others in its batch are written, and reported to the event
//! hooks once their transaction committed. A failed write is retried
//! with backoff, forever, while the jobs stay claimed: a completion is never
//! dropped unless the worker is stopping past its deadline, and then the
//! jobs are still claimed, so the supervisor releases them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use super::stats::Stats;
use crate::events::{Events, JobFailed, JobRetried, JobSucceeded};
use crate::store::{Completion, Outcome, Store};
use crate::types::{Error, Result};

/// A message to the completer.
// `Stop` is sent once per worker; boxing `Done` to shrink it would cost an
// allocation per job.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Message {
    /// Record this outcome.
    Done(Completion, Ran),
    /// Write what is pending, then exit.
    Stop,
}

/// What the events of a finished attempt say beyond its [`Completion`].
pub(crate) struct Ran {
    pub kind: String,
    pub queue: String,
    /// From 1.
    pub attempt: u32,
    pub run_time: Duration,
    pub enqueued_at: DateTime<Utc>,
    /// The error's kind and message, when the attempt failed.
    pub error: Option<(String, String)>,
}

/// A running completer thread.
pub(crate) struct Completer {
    pub(crate) tx: Sender<Message>,
    exited: Receiver<()>,
    abandon: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Completer {
    pub(crate) fn spawn(
        store: Store,
        batch_size: usize,
        linger: Duration,
        stats: Arc<Stats>,
        events: Arc<dyn Events>,
    ) -> Result<Completer> {
        let (tx, rx) = crossbeam_channel::unbounded();
        let (exited_tx, exited) = crossbeam_channel::bounded(1);
        let abandon = Arc::new(AtomicBool::new(false));
        let thread = {
            let abandon = Arc::clone(&abandon);
            std::thread::Builder::new()
                .name("solidq-completer".into())
                .spawn(move || {
                    let settings = Settings {
                        batch_size: batch_size.max(1),
                        linger,
                    };
                    run(&store, &rx, &settings, &abandon, &stats, events.as_ref());
                    let _ = exited_tx.send(());
                })
                .map_err(|source| Error::Thread {
                    name: "solidq-completer".into(),
                    source,
                })?
        };
        Ok(Completer {
            tx,
            exited,
            abandon,
            thread: Some(thread),
        })
    }

    /// Asks the completer to write what it has and exit; waits until
    /// `deadline`, then tells it to give up on writes still failing.
    pub(crate) fn stop(&mut self, deadline: Instant) {
        let _ = self.tx.send(Message::Stop);
        if self.exited.recv_deadline(deadline).is_err() {
            self.abandon.store(true, Ordering::SeqCst);
            let _ = self.exited.recv_timeout(Duration::from_secs(1));
        }
        if let Some(thread) = self.thread.take()
            && thread.is_finished()
        {
            let _ = thread.join();
        }
    }
}

/// How the completer batches.
struct Settings {
    batch_size: usize,
    linger: Duration,
}

fn run(
    store: &Store,
    rx: &Receiver<Message>,
    settings: &Settings,
    abandon: &AtomicBool,
    stats: &Stats,
    events: &dyn Events,
) {
    let batch_size = settings.batch_size;
    // Completions and their facts, in the same order.
    let mut pending: Vec<Completion> = Vec::new();
    let mut facts: Vec<Ran> = Vec::new();
    let mut stopping = false;
    let mut failures = 0u32;
    loop {
        if pending.is_empty() {
            if stopping {
                return;
            }
            match rx.recv() {
                Ok(Message::Done(c, r)) => {
                    pending.push(c);
                    facts.push(r);
                }
                Ok(Message::Stop) | Err(_) => {
                    stopping = true;
                    continue;
                }
            }
            let until = Instant::now() + settings.linger;
            while pending.len() < batch_size && !stopping {
                match rx.recv_deadline(until) {
                    Ok(Message::Done(c, r)) => {
                        pending.push(c);
                        facts.push(r);
                    }
                    Ok(Message::Stop) => stopping = true,
                    Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => break,
                }
            }
        }
        while pending.len() < batch_size && !stopping {
            match rx.try_recv() {
                Ok(Message::Done(c, r)) => {
                    pending.push(c);
                    facts.push(r);
                }
                Ok(Message::Stop) => stopping = true,
                Err(_) => break,
            }
        }
        let take = pending.len().min(batch_size);
        let started = Instant::now();
        match store.claimed_finish(&pending[..take]) {
            Ok(report) => {
                stats.write(take, started.elapsed());
                failures = 0;
                for id in &report.lost {
                    log::warn!(
                        "claim on job {id} was lost (this process was pruned meanwhile): its outcome was not recorded over the new claim"
                    );
                }
                log::debug!("recorded {} completions", report.written.len());
                let lost: std::collections::HashSet<i64> = report.lost.into_iter().collect();
                for (completion, ran) in pending.drain(..take).zip(facts.drain(..take)) {
                    if !lost.contains(&completion.job_id) {
                        report_outcome(events, &completion, ran);
                    }
                }
            }
            Err(error) => {
                failures += 1;
                if abandon.load(Ordering::SeqCst) {
                    log::error!(
                        "giving up on {} completions at shutdown ({error}); those jobs stay claimed until this process's row is pruned and they are released",
                        pending.len()
                    );
                    return;
                }
                let pause = Duration::from_millis(50 * 2u64.pow(failures.min(7)))
                    .min(Duration::from_secs(5));
                log::warn!(
                    "cannot record {} completions ({error}); retrying in {pause:?}, the jobs stay claimed meanwhile",
                    pending.len()
                );
                let until = Instant::now() + pause;
                while Instant::now() < until && !abandon.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(20).min(pause));
                }
            }
        }
    }
}

/// Tells `events` of a recorded outcome.
fn report_outcome(events: &dyn Events, completion: &Completion, ran: Ran) {
    let (error_kind, error) = ran.error.unwrap_or_default();
    match &completion.outcome {
        Outcome::Succeeded { .. } => events.job_succeeded(&JobSucceeded {
            job_id: completion.job_id,
            kind: ran.kind,
            queue: ran.queue,
            attempt: ran.attempt,
            process_id: completion.process_id,
            run_time: ran.run_time,
            enqueued_at: ran.enqueued_at,
        }),
        Outcome::Retry { delay, .. } => events.job_retried(&JobRetried {
            job_id: completion.job_id,
            kind: ran.kind,
            queue: ran.queue,
            attempt: ran.attempt,
            process_id: completion.process_id,
            run_time: ran.run_time,
            delay: *delay,
            error_kind,
            error,
        }),
        Outcome::Failed { .. } => events.job_failed(&JobFailed {
            job_id: completion.job_id,
            kind: ran.kind,
            queue: ran.queue,
            attempt: ran.attempt,
            process_id: completion.process_id,
            run_time: ran.run_time,
            error_kind,
            error,
        }),
    }
}
