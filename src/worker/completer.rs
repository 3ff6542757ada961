//! The completer thread: every outcome from every executor thread of the
//! process goes through it and is written in batches, one transaction per
//! batch. A batch holds whatever queued up while the previous one was being
//! written, after lingering up to `flush_interval` for more, capped at
//! `batch_size`: under load batches grow, when idle a lone completion is
//! written at once. On SQLite, while outcomes wait here, the poller's
//! claim is made in the transaction that writes them ([`ClaimRequest`]).
//!
//! Fencing is per row: a completion whose claim is gone is skipped and
//! logged; the others in its batch are written, and reported to the event
//! hooks and counted for the job statistics (`tally.rs`) once their
//! transaction committed.
//!
//! **The environment is never a verdict.** A batch that fails for a reason
//! that is not its own (the database is unreachable or locked, the disk or
//! the server's memory is full, a table is missing) stays in memory, in
//! order, and is written again with back-off (at once when a heartbeat
//! shows the database answering), the jobs staying claimed; fencing still
//! applies when it lands. While outcomes wait so, the poller claims nothing
//! (see [`Backlog`]). Only a batch the database refused for a value of its
//! own is written again row by row, so one bad row cannot hold the others:
//! a row the database refuses for its content (a constraint, a value too
//! large, bytes it cannot store: any error but the environment's) is
//! recorded as a failure of its job
//! ("outcome_not_recorded", naming the database's error), and if even that
//! cannot be written its job stays claimed until its process stops or is
//! pruned. Progress and checkpoints follow the same rule: kept for the
//! next write while the database cannot take them, dropped only when it
//! refuses them for their content.
//!
//! After each heartbeat that worked, the heartbeat thread asks it to add
//! the outcomes counted since the last time to the job statistics (one
//! statement, `tally.rs`), so that write never delays a heartbeat.
//!
//! The poller claims nothing while more than [`Backlog`]'s limit of
//! outcomes wait here, or while writing them fails, so a completer that
//! cannot write does not let the worker run ever more jobs whose outcomes
//! it cannot record.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use chrono::{DateTime, NaiveDateTime, Utc};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use super::stats::Stats;
use super::tally::{Counting, Tally};
use crate::events::{Events, JobCancelled, JobFailed, JobRetried, JobSnoozed, JobSucceeded};
use crate::job::ProgressCell;
use crate::store::{
    ClaimLimits, ClaimQuery, ClaimedJob, Completion, Counted, FinishReport, Outcome, Progress,
    Start, Store,
};
use crate::types::{Error, ErrorInfo, ErrorKind, Result};

/// A message to the completer.
// `Stop` is sent once per worker; boxing `Done` to shrink it would cost an
// allocation per job.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Message {
    /// A job claimed ahead started: record it (skipped when its outcome is
    /// written in the same batch).
    Started { job_id: i64, process_id: i64 },
    /// Record this outcome.
    Done(Completion, Ran),
    /// A running job set its progress: write its latest value with the
    /// next batch, or within [`PROGRESS_INTERVAL`].
    Progress(Arc<ProgressCell>),
    /// Add the outcomes counted so far to the job statistics (sent after
    /// each heartbeat that worked: at most once per interval).
    FlushStats,
    /// Write what is pending, then exit.
    Stop,
    /// SQLite: claim in the transaction of the next write (see
    /// [`ClaimRequest`]).
    Claim(ClaimRequest),
}

/// A claim the poller hands the completer on SQLite while outcomes wait to
/// be written: the completer writes them and claims in one transaction,
/// at once (no lingering), so the worker takes the one write lock once,
/// with one `COMMIT`, instead of twice, and its claim never meets its own
/// finish holding the lock. The answer is the claimed jobs, or `None`
/// when the joint write failed (nothing of it was written): the poller
/// then claims on its own, and the outcomes are written as any batch is.
pub(crate) struct ClaimRequest {
    pub claim: Arc<ClaimQuery>,
    pub process_id: i64,
    pub limits: ClaimLimits,
    pub reply: Sender<Option<Vec<ClaimedJob>>>,
}

/// The most often a worker writes its running jobs' progress when no
/// outcome batch is written sooner: one statement for all of them.
pub(crate) const PROGRESS_INTERVAL: Duration = Duration::from_secs(1);

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
    /// From when the job became due to when this attempt started.
    pub wait: Duration,
    /// When the attempt ended, on the backend's clock (see `tally.rs`).
    pub ended_at: NaiveDateTime,
}

impl Ran {
    /// The attempt, as the job statistics count it.
    pub(crate) fn counting(&self, outcome: &Outcome) -> Counting<'_> {
        Counting {
            ended_at: self.ended_at,
            queue: &self.queue,
            kind: &self.kind,
            outcome: Counted::of(outcome),
            wait: self.wait,
            run: self.run_time,
        }
    }
}

/// Outcomes handed to the completer and not yet written (nor given up
/// on). Above `limit`, or while writing them fails, the poller stops
/// claiming; the completer wakes it when that passes.
pub(crate) struct Backlog {
    count: AtomicUsize,
    limit: usize,
    /// Set while the last write of outcomes failed.
    failing: AtomicBool,
    /// Set while the poller waits for every outcome to be written (a job
    /// that runs alone starts, and ends, only once they are).
    wake_when_empty: AtomicBool,
    wake: Sender<()>,
}

impl Backlog {
    pub(crate) fn new(limit: usize, wake: Sender<()>) -> Backlog {
        Backlog {
            count: AtomicUsize::new(0),
            limit: limit.max(1),
            failing: AtomicBool::new(false),
            wake_when_empty: AtomicBool::new(false),
            wake,
        }
    }

    /// One more outcome on its way to the completer.
    pub(crate) fn add(&self) {
        self.count.fetch_add(1, Ordering::SeqCst);
    }

    /// `n` outcomes written or given up on.
    fn remove(&self, n: usize) {
        let before = self.count.fetch_sub(n, Ordering::SeqCst);
        let emptied = before == n && self.wake_when_empty.load(Ordering::SeqCst);
        if emptied || (before > self.limit && before - n <= self.limit) {
            let _ = self.wake.try_send(());
        }
    }

    /// Whether every outcome handed to the completer is written (or given
    /// up on).
    pub(crate) fn is_empty(&self) -> bool {
        self.count.load(Ordering::SeqCst) == 0
    }

    /// Whether the poller hears of the last outcome written.
    pub(crate) fn wake_when_empty(&self, on: bool) {
        self.wake_when_empty.store(on, Ordering::SeqCst);
    }

    /// Whether so many outcomes wait that claiming more work must wait.
    pub(crate) fn is_full(&self) -> bool {
        self.count.load(Ordering::SeqCst) > self.limit
    }

    /// Whether outcomes wait because writing them fails: no job may start
    /// whose end could not be recorded either.
    pub(crate) fn is_failing(&self) -> bool {
        self.failing.load(Ordering::SeqCst)
    }

    fn set_failing(&self, failing: bool) {
        if self.failing.swap(failing, Ordering::SeqCst) && !failing {
            let _ = self.wake.try_send(());
        }
    }
}

/// A running completer thread.
pub(crate) struct Completer {
    pub(crate) tx: Sender<Message>,
    exited: Receiver<()>,
    abandon: Arc<AtomicBool>,
    /// Jobs whose outcome was never written (given up on): they ran.
    given_up: Arc<Mutex<Vec<i64>>>,
    /// The jobs of the write in flight: given up on too when it outlasts
    /// the deadline (if it lands after all, its fence finds the claim gone).
    writing: Arc<Mutex<Vec<i64>>>,
    thread: Option<JoinHandle<()>>,
}

impl Completer {
    pub(crate) fn spawn(
        store: Store,
        batch_size: usize,
        linger: Duration,
        stats: Arc<Stats>,
        tally: Arc<Tally>,
        events: Arc<dyn Events>,
        backlog: Arc<Backlog>,
    ) -> Result<Completer> {
        let (tx, rx) = crossbeam_channel::unbounded();
        let (exited_tx, exited) = crossbeam_channel::bounded(1);
        let abandon = Arc::new(AtomicBool::new(false));
        let given_up = Arc::new(Mutex::new(Vec::new()));
        let writing = Arc::new(Mutex::new(Vec::new()));
        let thread = {
            let abandon = Arc::clone(&abandon);
            let given_up = Arc::clone(&given_up);
            let writing = Arc::clone(&writing);
            std::thread::Builder::new()
                .name("solidq-completer".into())
                .spawn(move || {
                    let mut completer = Run {
                        store,
                        batch_size: batch_size.max(1),
                        linger,
                        abandon,
                        stats,
                        tally,
                        events,
                        backlog,
                        given_up,
                        writing,
                        pending: Vec::new(),
                        facts: Vec::new(),
                        starts: Vec::new(),
                        progress: Vec::new(),
                        progress_written: None,
                        ending: Vec::new(),
                        failures: 0,
                        failing_since: None,
                        failing_said: None,
                        claim: None,
                    };
                    completer.run(&rx);
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
            given_up,
            writing,
            thread: Some(thread),
        })
    }

    /// Asks the completer to write what it has and exit; waits until
    /// `deadline`, then tells it to give up on writes still failing.
    /// Returns the jobs whose outcome it never wrote, or is still writing
    /// (a write stuck past the deadline): they ran.
    pub(crate) fn stop(&mut self, deadline: Instant) -> Vec<i64> {
        let _ = self.tx.send(Message::Stop);
        let exited = self.exited.recv_deadline(deadline).is_ok() || {
            self.abandon.store(true, Ordering::SeqCst);
            self.exited.recv_timeout(Duration::from_secs(1)).is_ok()
        };
        let mut unwritten =
            std::mem::take(&mut *self.given_up.lock().unwrap_or_else(|p| p.into_inner()));
        match self.thread.take() {
            // Its loop has returned: joining waits only for the thread's end.
            Some(thread) if exited => {
                let _ = thread.join();
            }
            Some(_) => {
                let writing = self.writing.lock().unwrap_or_else(|p| p.into_inner());
                log::error!(
                    "a write of {} outcomes is still in flight at shutdown; those jobs are treated as not recorded (at-most-once ones fail; a late write finds their claims gone)",
                    writing.len()
                );
                unwritten.extend(writing.iter().copied());
            }
            None => {}
        }
        unwritten
    }
}

/// The completer thread's state.
struct Run {
    store: Store,
    batch_size: usize,
    linger: Duration,
    abandon: Arc<AtomicBool>,
    stats: Arc<Stats>,
    /// Recorded outcomes, counted for the job statistics.
    tally: Arc<Tally>,
    events: Arc<dyn Events>,
    backlog: Arc<Backlog>,
    given_up: Arc<Mutex<Vec<i64>>>,
    /// The ids of `pending` while a write is in flight.
    writing: Arc<Mutex<Vec<i64>>>,
    /// Completions and their facts, in the same order.
    pending: Vec<Completion>,
    facts: Vec<Ran>,
    /// Starts of jobs claimed ahead, not yet written.
    starts: Vec<Start>,
    /// Jobs with progress not yet written.
    progress: Vec<Arc<ProgressCell>>,
    /// When progress was last written.
    progress_written: Option<Instant>,
    /// The last progress and checkpoints of pending jobs: written in the
    /// transaction of their outcomes.
    ending: Vec<Progress>,
    /// Failed writes in a row.
    failures: u32,
    /// When the current run of failed writes began.
    failing_since: Option<Instant>,
    /// When it was last reported.
    failing_said: Option<Instant>,
    /// A claim to make in the next write's transaction.
    claim: Option<ClaimRequest>,
}

impl Run {
    fn run(&mut self, rx: &Receiver<Message>) {
        let mut stopping = false;
        loop {
            if self.pending.is_empty() && self.starts.is_empty() && self.claim.is_none() {
                if stopping {
                    self.write_progress();
                    return;
                }
                let next = if self.progress.is_empty() {
                    rx.recv().map_err(|_| RecvTimeoutError::Disconnected)
                } else {
                    let due = self
                        .progress_written
                        .map_or_else(Instant::now, |at| at + PROGRESS_INTERVAL);
                    rx.recv_deadline(due)
                };
                match next {
                    Ok(Message::Stop) | Err(RecvTimeoutError::Disconnected) => {
                        stopping = true;
                        continue;
                    }
                    Err(RecvTimeoutError::Timeout) => {
                        self.write_progress();
                        continue;
                    }
                    Ok(message) => self.take(message),
                }
                if self.pending.is_empty() && self.starts.is_empty() && self.claim.is_none() {
                    // Only progress: it waits for its interval.
                    continue;
                }
                let until = Instant::now() + self.linger;
                while self.pending.len() < self.batch_size && !stopping && self.claim.is_none() {
                    match rx.recv_deadline(until) {
                        Ok(Message::Stop) => stopping = true,
                        Ok(message) => self.take(message),
                        Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => {
                            break;
                        }
                    }
                }
            }
            while self.pending.len() < self.batch_size && !stopping {
                match rx.try_recv() {
                    Ok(Message::Stop) => stopping = true,
                    Ok(message) => self.take(message),
                    Err(_) => break,
                }
            }
            // Before the outcomes: their writes delete the claims that
            // fence the progress of their jobs. Other jobs' progress waits
            // for its interval.
            self.write_progress_before_outcomes();
            let take = self.pending.len().min(self.batch_size);
            *self.writing.lock().unwrap_or_else(|p| p.into_inner()) =
                self.pending.iter().map(|c| c.job_id).collect();
            let written = match self.claim.take() {
                Some(claim) => self.write_claiming(take, claim),
                None => self.write(take),
            };
            self.writing
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clear();
            if let Err(error) = written {
                if self.abandon.load(Ordering::SeqCst) {
                    log::error!(
                        "giving up on {} completions at shutdown ({error}); those jobs stay claimed until this process deregisters or is pruned (at-most-once ones then fail)",
                        self.pending.len()
                    );
                    let ids: Vec<i64> = self.pending.drain(..).map(|c| c.job_id).collect();
                    self.facts.clear();
                    self.starts.clear();
                    self.ending.clear();
                    self.give_up(ids);
                    return;
                }
                if self.back_off(&error, rx) {
                    stopping = true;
                }
            }
        }
    }

    fn take(&mut self, message: Message) {
        match message {
            Message::Done(completion, ran) => self.push(completion, ran),
            Message::Started { job_id, process_id } => {
                self.starts.push(Start { job_id, process_id })
            }
            Message::Progress(cell) => self.progress.push(cell),
            Message::FlushStats => self.flush_stats(),
            Message::Stop => {}
            Message::Claim(claim) => self.claim = Some(claim),
        }
    }

    /// One upsert of every count since the last flush, whatever the number
    /// of jobs; a failure keeps them for the next.
    fn flush_stats(&self) {
        if let Err(error) = self.tally.flush(&self.store) {
            log::warn!(
                "cannot add {} counted outcomes to the job statistics yet ({error}); they are kept for the next heartbeat",
                self.tally.pending()
            );
        }
    }

    /// Before a batch of outcomes: the progress of the jobs in it goes
    /// into the batch's transaction (their outcomes delete the claims that
    /// fence it); the other jobs' is written once the interval is up.
    fn write_progress_before_outcomes(&mut self) {
        if self.progress.is_empty() {
            return;
        }
        let ending: std::collections::HashSet<i64> =
            self.pending.iter().map(|c| c.job_id).collect();
        let (now, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.progress)
            .into_iter()
            .partition(|cell| ending.contains(&cell.job_id));
        self.progress = later;
        self.ending.extend(progress_rows(now));
        let due = self
            .progress_written
            .is_none_or(|at| at.elapsed() >= PROGRESS_INTERVAL);
        if due {
            self.write_progress();
        }
    }

    /// Writes the latest progress of every job that set some since the
    /// last write.
    fn write_progress(&mut self) {
        if self.progress.is_empty() {
            return;
        }
        let cells = std::mem::take(&mut self.progress);
        self.progress_written = Some(Instant::now());
        self.store_progress(cells);
    }

    /// Writes progress and checkpoints; what the database cannot take for
    /// now (it is away or full) is put back for the next write, what it
    /// refuses for its content is logged and dropped (the job's next
    /// `set_progress` is written again).
    fn store_progress(&mut self, cells: Vec<Arc<ProgressCell>>) {
        let (cells, rows): (Vec<_>, Vec<_>) = cells
            .into_iter()
            .filter_map(|cell| progress_row(&cell).map(|row| (cell, row)))
            .unzip();
        if rows.is_empty() {
            return;
        }
        if let Err(error) = self.store.jobs_progress(&rows) {
            let ids = rows.iter().map(|r| r.job_id).collect::<Vec<_>>();
            if !is_environment(&error) {
                log::warn!(
                    "the database refused the progress of jobs {ids:?} ({error}); it is written again when they report more"
                );
                return;
            }
            log::debug!("cannot record the progress of jobs {ids:?} yet ({error}); kept");
            for (cell, row) in cells.into_iter().zip(rows) {
                cell.restore(row.json, row.checkpoint);
            }
        }
    }

    /// The starts to write with the next batch: not those whose outcome is
    /// pending (writing it deletes the claim anyway).
    fn starts_to_write(&mut self) -> Vec<Start> {
        if self.starts.is_empty() {
            return Vec::new();
        }
        let done: std::collections::HashSet<i64> = self.pending.iter().map(|c| c.job_id).collect();
        self.starts.retain(|s| !done.contains(&s.job_id));
        self.starts.clone()
    }

    fn push(&mut self, completion: Completion, ran: Ran) {
        self.pending.push(completion);
        self.facts.push(ran);
    }

    /// Writes the first `take` pending completions, in one transaction or,
    /// after a non-transient error, row by row. Returns the transient
    /// error that stopped it, if one did (what is unwritten stays pending).
    fn write(&mut self, take: usize) -> std::result::Result<(), Error> {
        let started = Instant::now();
        let starts = self.starts_to_write();
        match self
            .store
            .claimed_finish(&self.pending[..take], &starts, &self.ending)
        {
            Ok(report) => {
                self.batch_written(take, started, &report);
                Ok(())
            }
            Err(error) if is_environment(&error) => Err(error),
            Err(error) => {
                log::warn!(
                    "a batch of {take} outcomes and {} starts could not be written ({error}); writing them one by one",
                    starts.len()
                );
                // Progress is advisory: written on its own, or dropped.
                let ending = std::mem::take(&mut self.ending);
                if let Err(error) = self.store.jobs_progress(&ending) {
                    log::warn!(
                        "cannot record the last progress of jobs {:?} ({error}); dropped",
                        ending.iter().map(|r| r.job_id).collect::<Vec<_>>()
                    );
                }
                match self.store.claimed_finish(&[], &starts, &[]) {
                    Ok(_) => {}
                    Err(error) if is_environment(&error) => return Err(error),
                    Err(error) => log::error!(
                        "cannot record that jobs {:?} started ({error}); if this process dies they go back to ready without counting a stall",
                        starts.iter().map(|s| s.job_id).collect::<Vec<_>>()
                    ),
                }
                self.starts.clear();
                for _ in 0..take {
                    self.write_alone()?;
                }
                Ok(())
            }
        }
    }

    /// [`Run::write`] with `claim` in the same transaction (SQLite; see
    /// [`ClaimRequest`]). When the joint write fails, the poller is told
    /// to claim on its own and the outcomes are written by `write`, which
    /// tells the environment's failures from a row's.
    fn write_claiming(
        &mut self,
        take: usize,
        claim: ClaimRequest,
    ) -> std::result::Result<(), Error> {
        let started = Instant::now();
        let starts = self.starts_to_write();
        match self.store.claimed_finish_then_claim(
            &self.pending[..take],
            &starts,
            &self.ending,
            &claim.claim,
            claim.process_id,
            &claim.limits,
        ) {
            Ok((report, jobs)) => {
                self.batch_written(take, started, &report);
                let _ = claim.reply.send(Some(jobs));
                Ok(())
            }
            Err(error) => {
                log::debug!("writing {take} outcomes with a claim failed ({error}); apart now");
                let _ = claim.reply.send(None);
                self.write(take)
            }
        }
    }

    /// After a batch of `take` outcomes, the starts and the last progress
    /// of its jobs, begun at `started`, committed.
    fn batch_written(&mut self, take: usize, started: Instant, report: &FinishReport) {
        if take > 0 {
            self.stats.write(take, started.elapsed());
        }
        self.failures = 0;
        self.backlog.set_failing(false);
        self.starts.clear();
        self.ending.clear();
        self.written(take, report);
    }

    /// Writes the first pending completion on its own; one the database
    /// refuses for its content is recorded as a failure of its job instead.
    /// Any other error is returned: the completion stays pending.
    fn write_alone(&mut self) -> std::result::Result<(), Error> {
        let error = match self.store.claimed_finish(&self.pending[..1], &[], &[]) {
            Ok(report) => {
                self.backlog.set_failing(false);
                self.written(1, &report);
                return Ok(());
            }
            Err(error) if is_environment(&error) => return Err(error),
            Err(error) => error,
        };
        let job_id = self.pending[0].job_id;
        log::error!(
            "the database refused the outcome of job {job_id} for its content ({error}); recording it as failed"
        );
        let info = ErrorInfo {
            kind: "outcome_not_recorded".into(),
            message: format!(
                "the database refused the job's outcome for its content (not for lack of space or connection), so it is recorded as failed: {error}"
            ),
            backtrace: None,
            attempt: Some(self.facts[0].attempt),
            at: Some(Utc::now()),
            retry_in_ms: None,
        };
        self.facts[0].error = Some((info.kind.clone(), info.message.clone()));
        self.pending[0].outcome = Outcome::Failed {
            error: info.to_stored_json(),
        };
        match self.store.claimed_finish(&self.pending[..1], &[], &[]) {
            Ok(report) => self.written(1, &report),
            Err(error) if is_environment(&error) => return Err(error),
            Err(error) => {
                log::error!(
                    "job {job_id}: not even its failure can be written ({error}); it stays claimed until this process stops or is pruned"
                );
                self.pending.remove(0);
                self.facts.remove(0);
                self.give_up(vec![job_id]);
            }
        }
        Ok(())
    }

    /// Reports the first `n` pending completions, written per `report`,
    /// and drops them.
    fn written(&mut self, n: usize, report: &FinishReport) {
        if let Some(since) = self.failing_since.take() {
            log::info!(
                "outcomes are recorded again after {:.1?} of failed writes",
                since.elapsed()
            );
            self.failing_said = None;
        }
        for id in &report.lost {
            log::warn!(
                "claim on job {id} was lost (this process was pruned meanwhile): its outcome was not recorded over the new claim"
            );
        }
        log::debug!("recorded {} completions", report.written.len());
        self.tally.add(
            self.pending[..n]
                .iter()
                .zip(&self.facts[..n])
                .filter(|(completion, _)| !report.lost.contains(&completion.job_id))
                .map(|(completion, ran)| ran.counting(&completion.outcome)),
        );
        for (completion, ran) in self.pending.drain(..n).zip(self.facts.drain(..n)) {
            if !report.lost.contains(&completion.job_id) {
                report_outcome(self.events.as_ref(), &completion, ran);
            }
        }
        self.backlog.remove(n);
    }

    fn give_up(&self, ids: Vec<i64>) {
        self.backlog.remove(ids.len());
        self.given_up
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(ids);
    }

    /// Waits before writing failed outcomes again, taking the messages
    /// that arrive meanwhile; a heartbeat that worked (`FlushStats`: the
    /// database answers) ends the wait at once. The first failure of a run
    /// is logged at warn, then one line per [`STILL_FAILING_EVERY`].
    /// Returns whether it was told to stop.
    fn back_off(&mut self, error: &Error, rx: &Receiver<Message>) -> bool {
        if self.failures == 0 {
            self.backlog.set_failing(true);
            self.failing_since = Some(Instant::now());
            log::warn!(
                "cannot record {} ({error}); kept and written when the database takes them, and this worker claims nothing meanwhile",
                outcomes(self.pending.len())
            );
        } else if self
            .failing_said
            .is_none_or(|at| at.elapsed() >= STILL_FAILING_EVERY)
        {
            self.failing_said = Some(Instant::now());
            log::warn!(
                "still cannot record {} after {:.0?} ({error}); retrying",
                outcomes(self.pending.len()),
                self.failing_since
                    .map(|at| at.elapsed())
                    .unwrap_or_default()
            );
        }
        self.failures += 1;
        let pause =
            Duration::from_millis(50 * 2u64.pow(self.failures.min(7))).min(Duration::from_secs(5));
        let until = Instant::now() + pause;
        let mut stop = false;
        while !self.abandon.load(Ordering::SeqCst) {
            let slice = until.min(Instant::now() + Duration::from_millis(20));
            match rx.recv_deadline(slice) {
                Ok(Message::FlushStats) => {
                    self.flush_stats();
                    break;
                }
                Ok(Message::Stop) => stop = true,
                // Not while writing fails: the poller claims on its own.
                Ok(Message::Claim(claim)) => {
                    let _ = claim.reply.send(None);
                }
                Ok(message) => self.take(message),
                Err(RecvTimeoutError::Disconnected) => stop = true,
                Err(RecvTimeoutError::Timeout) => {}
            }
            if Instant::now() >= until {
                break;
            }
            if stop {
                // Nothing more will arrive: sleep out the slice.
                std::thread::sleep(Duration::from_millis(20).min(until - Instant::now()));
            }
        }
        stop
    }
}

/// Whether a failed write says nothing about the rows written: the
/// database is away, locked, full, or lacks migrations. Such outcomes wait
/// and are written later; any other refusal (a constraint, a value too
/// large, bytes the backend cannot store) is the row's own, and its job is
/// recorded as failed.
fn is_environment(error: &Error) -> bool {
    error.is_transient() || error.kind() == ErrorKind::SchemaMismatch
}

/// How often a completer whose writes keep failing says so again.
const STILL_FAILING_EVERY: Duration = crate::process::heartbeat::STILL_FAILING_EVERY;

/// Tells `events` of a recorded outcome.
pub(super) fn report_outcome(events: &dyn Events, completion: &Completion, ran: Ran) {
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
        Outcome::Snoozed { delay } => events.job_snoozed(&JobSnoozed {
            job_id: completion.job_id,
            kind: ran.kind,
            queue: ran.queue,
            attempt: ran.attempt,
            process_id: completion.process_id,
            run_time: ran.run_time,
            delay: *delay,
        }),
        Outcome::Discarded { .. } => events.job_cancelled(&JobCancelled {
            job_id: completion.job_id,
            kind: ran.kind,
            queue: ran.queue,
            attempt: ran.attempt,
            process_id: completion.process_id,
            run_time: ran.run_time,
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

/// The values of `cells` not written yet, as rows to write.
fn progress_rows(cells: Vec<Arc<ProgressCell>>) -> Vec<Progress> {
    cells.iter().filter_map(|cell| progress_row(cell)).collect()
}

/// The values of `cell` not written yet, as a row to write.
fn progress_row(cell: &ProgressCell) -> Option<Progress> {
    match cell.take() {
        (None, None) => None,
        (json, checkpoint) => Some(Progress {
            job_id: cell.job_id,
            process_id: cell.process_id,
            json,
            checkpoint,
        }),
    }
}

/// "1 outcome", "2 outcomes".
fn outcomes(n: usize) -> String {
    if n == 1 {
        "1 outcome".to_string()
    } else {
        format!("{n} outcomes")
    }
}
