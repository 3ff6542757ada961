//! The scheduler loop: sleeps until the earliest next tick of its tasks,
//! fires it, and computes that task's following tick from the one it just
//! fired (not from the clock), so a late loop catches up instead of
//! skipping, and never fires a tick twice. It never fires a tick more than
//! [`RECURRING_MAX_LATENESS`] late, so a tick whose guard was aged out
//! ([`crate::config::RECURRING_GUARD_RETENTION`]) cannot fire again.
//!
//! It waits by this host's clock corrected to the database's, but a tick
//! is decided by the database: the fire transaction commits only when the
//! database's clock has reached the tick ("not yet" otherwise: the loop
//! follows the database's clock more closely and tries again), so a tick's
//! job is never created before its tick.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use crossbeam_channel::{Receiver, RecvTimeoutError};

use super::RecurringTask;
use super::clock::Clock;
use super::task::{Build, build};
use crate::client::Queue;
use crate::config::{
    DEFAULT_HEARTBEAT_INTERVAL, DEFAULT_PROCESS_ALIVE_THRESHOLD,
    RECURRING_MAX_CATCH_UP as MAX_CATCH_UP, RECURRING_MAX_LATENESS,
};
use crate::events::{
    Events, JobDiscarded, JobEnqueued, RecurringFired, RecurringSkipped, SkipReason,
};
use crate::job::Job;
use crate::process::{self, ProcessKind, RegistrationSpec, Service, wakeups};
use crate::store::{Fire, NewJob, Store, TickFire};
use crate::types::{Error, Result};

/// The longest the loop sleeps before looking at the clock again.
const MAX_SLEEP: Duration = Duration::from_secs(60);
/// The shortest wait before firing again a tick the database's clock had
/// not reached.
const MIN_NOT_YET_PAUSE: Duration = Duration::from_millis(1);

/// Enqueues recurring tasks at their ticks, each tick once however many
/// schedulers run, on any hosts: a tick's job and its `(task, run_at)` row
/// are inserted in one transaction, and the row's primary key makes every
/// other scheduler's insert of the same tick roll back (reported as
/// [`Events::recurring_skipped`], not an error).
///
/// Ticks come from the database's clock: a tick's job is created when the
/// database's clock has reached the tick, never before. A scheduler starts
/// from the first tick after it starts: ticks missed while no scheduler ran
/// are not fired later. While it runs, a tick it is late for (a slow
/// database, a paused host) is still fired, up to
/// [`crate::config::RECURRING_MAX_CATCH_UP`] in a row per task, and never
/// more than [`RECURRING_MAX_LATENESS`] late (older ticks are skipped and
/// reported as [`SkipReason::TooLate`]). A tick's guard row outlives its
/// job and is kept for [`crate::config::RECURRING_GUARD_RETENTION`], well
/// past that lateness, so a tick is fired once even when its job was
/// deleted as it finished.
///
/// On start it makes the `recurring_tasks` table mirror its tasks (adding,
/// updating and deleting rows), so every scheduler of a deployment should be
/// given the same tasks. `solidq supervisor` runs one from `[recurring.*]` in
/// `solidq.toml`; [`Scheduler::start`] runs one in your own binary.
pub struct Scheduler {
    queue: Queue,
    tasks: Vec<RecurringTask>,
    kinds: HashMap<String, Build>,
    register: bool,
    heartbeat_interval: Duration,
    process_alive_threshold: Duration,
    events: Arc<dyn Events>,
}

impl Scheduler {
    /// A standalone scheduler on `queue`'s database: it registers a
    /// process row of its own and heartbeats it. It reports to the queue's
    /// hooks unless given its own ([`Scheduler::events`]).
    pub fn new(queue: Queue) -> Scheduler {
        Scheduler {
            events: Arc::clone(queue.events()),
            queue,
            tasks: Vec::new(),
            kinds: HashMap::new(),
            register: true,
            heartbeat_interval: DEFAULT_HEARTBEAT_INTERVAL,
            process_alive_threshold: DEFAULT_PROCESS_ALIVE_THRESHOLD,
        }
    }

    /// A scheduler inside a process that has a row already (a supervisor).
    pub(crate) fn embedded(queue: Queue) -> Scheduler {
        Scheduler {
            register: false,
            ..Scheduler::new(queue)
        }
    }

    /// Adds a task.
    pub fn task(mut self, task: RecurringTask) -> Scheduler {
        self.tasks.push(task);
        self
    }

    /// Adds tasks.
    pub fn tasks(mut self, tasks: impl IntoIterator<Item = RecurringTask>) -> Scheduler {
        self.tasks.extend(tasks);
        self
    }

    /// Teaches it job type `J`, so untyped tasks of that kind (from
    /// `solidq.toml`) get the type's options and concurrency key, and their
    /// arguments are checked against the type when it starts.
    pub fn register<J: Job>(mut self) -> Scheduler {
        self.kinds.insert(J::KIND.to_string(), build::<J>);
        self
    }

    /// Reports fired and skipped ticks, the jobs it enqueues and its
    /// registration to `events` instead of the queue's hooks.
    pub fn events(mut self, events: impl Events) -> Scheduler {
        self.events = crate::events::guarded(events);
        self
    }

    /// Its heartbeat interval, when standalone. Defaults to
    /// [`DEFAULT_HEARTBEAT_INTERVAL`].
    pub fn heartbeat_interval(mut self, interval: Duration) -> Scheduler {
        self.heartbeat_interval = interval;
        self
    }

    /// When standalone, how long its heartbeats may fail before it stops
    /// itself (peers consider it dead by then). Defaults to
    /// [`DEFAULT_PROCESS_ALIVE_THRESHOLD`].
    pub fn process_alive_threshold(mut self, threshold: Duration) -> Scheduler {
        self.process_alive_threshold = threshold;
        self
    }

    /// Checks every task without starting anything: unique keys, the
    /// arguments of kinds it knows, queue names and options.
    pub fn check(&self) -> Result<()> {
        self.prepare().map(drop)
    }

    fn prepare(&self) -> Result<Vec<Prepared>> {
        let mut keys = HashSet::new();
        self.tasks
            .iter()
            .map(|task| {
                if !keys.insert(task.key()) {
                    return Err(Error::InvalidOption {
                        option: "recurring task key",
                        value: task.key().to_string(),
                        reason: "given twice".into(),
                    });
                }
                task.validate()?;
                let request = task.request(self.kinds.get(task.kind()).copied())?;
                let job = self.queue.build(&request)?;
                Ok(Prepared {
                    task: task.clone(),
                    job,
                })
            })
            .collect()
    }

    /// Enqueues task `key` now, through the same exactly-once path as its
    /// ticks (its run time is the current second of the database's clock):
    /// for `solidq recurring run`. Returns the job's id, or `None` when this
    /// second's run of the task exists already (also when that run's job
    /// is gone: the run's guard outlives it).
    pub fn fire_now(&self, key: &str) -> Result<Option<i64>> {
        let prepared = self.prepare()?;
        let Some(p) = prepared.iter().find(|p| p.task.key() == key) else {
            return Err(Error::InvalidOption {
                option: "recurring task key",
                value: key.to_string(),
                reason: "no such task".into(),
            });
        };
        let store = self.queue.store();
        let now = store.db_now()?.and_utc();
        let second = DateTime::from_timestamp(now.timestamp(), 0).unwrap_or(now);
        // The fire transaction starts after this reading, so the database's
        // clock has reached `second` unless it was set back meanwhile.
        for _ in 0..3 {
            match fire(store, p, second, self.events.as_ref())? {
                Fire::Enqueued { job_id, .. } => return Ok(Some(job_id)),
                Fire::Elsewhere => return Ok(None),
                Fire::NotYet { now } => {
                    let wait = (second - now.and_utc()).to_std().unwrap_or_default();
                    std::thread::sleep(wait.min(Duration::from_secs(1)));
                }
                Fire::TooLate { .. } => break,
            }
        }
        Err(Error::InvalidOption {
            option: "recurring task key",
            value: key.to_string(),
            reason: format!(
                "its run for {second} could not be fired: the database's clock moved back"
            ),
        })
    }

    /// Syncs the `recurring_tasks` table, then starts the loop on its own
    /// thread and returns at once.
    pub fn start(self) -> Result<SchedulerHandle> {
        let prepared = self.prepare()?;
        if let Err(error @ crate::Error::SchemaBehind { .. }) = self.queue.check_schema() {
            return Err(error);
        }
        let store = self.queue.store().clone();
        store.recurring_tasks_sync(&prepared.iter().map(|p| p.task.row()).collect::<Vec<_>>())?;
        let registration = self.register.then(|| RegistrationSpec {
            store: store.clone(),
            row: process::describe(
                ProcessKind::Scheduler,
                None,
                None,
                serde_json::json!({
                    "tasks": prepared.iter().map(|p| p.task.key()).collect::<Vec<_>>(),
                    "alive_threshold_ms": self.process_alive_threshold.as_millis() as u64,
                    "heartbeat_interval_ms": self.heartbeat_interval.as_millis() as u64,
                }),
            ),
            interval: self.heartbeat_interval,
            threshold: self.process_alive_threshold,
            events: Arc::clone(&self.events),
        });
        log::info!(
            "scheduler started with {} recurring tasks: {}",
            prepared.len(),
            prepared
                .iter()
                .map(|p| format!("{} ({})", p.task.key(), p.task.schedule().expression()))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let events = self.events;
        let service = Service::spawn("solidq-scheduler", registration, move |stopped| {
            Loop::new(store, prepared, events).run(&stopped);
        })?;
        Ok(SchedulerHandle { service })
    }

    /// Installs SIGTERM/SIGINT handlers, starts, and runs until a signal
    /// arrives (never stopping for the database being away).
    pub fn run(self) -> Result<()> {
        process::install_signal_handlers()?;
        let signals = process::subscribe_signals();
        let handle = self.start()?;
        crossbeam_channel::select! {
            recv(signals) -> _ => {},
            recv(handle.service.done()) -> _ => {},
        }
        handle.stop()
    }
}

/// A running scheduler.
pub struct SchedulerHandle {
    service: Service,
}

impl SchedulerHandle {
    /// Stops the loop, waits for it, and deregisters. Idempotent.
    pub fn stop(mut self) -> Result<()> {
        self.service.stop()
    }
}

/// A task with its job resolved once, at start.
struct Prepared {
    task: RecurringTask,
    job: NewJob,
}

/// Tries to fire the tick `at` of a task ([`Store::recurring_fire`]), and
/// tells `events` what became of it once the transaction is over: fired
/// (with the times the database stored), or fired elsewhere. A tick not
/// yet due or too late by the database's clock is left to the caller.
fn fire(store: &Store, p: &Prepared, at: DateTime<Utc>, events: &dyn Events) -> Result<Fire> {
    let key = p.task.key();
    let fired = store.recurring_fire(&TickFire {
        task_key: key,
        run_at: at.naive_utc(),
        job: &p.job,
        max_lateness: RECURRING_MAX_LATENESS,
    })?;
    match &fired {
        Fire::Enqueued {
            job_id,
            created_at,
            discarded,
        } => {
            let created_at = created_at.and_utc();
            wakeups::wake(store.url().expose());
            events.job_enqueued(&JobEnqueued::of(&p.job, *job_id, created_at));
            if let Some(job) = discarded {
                events.job_discarded(&JobDiscarded::of(job));
            }
            events.recurring_fired(&RecurringFired {
                task_key: key.to_string(),
                run_at: at,
                job_id: *job_id,
                kind: p.job.kind.clone(),
                queue: p.job.queue_name.clone(),
                late_by: (created_at - at).to_std().unwrap_or_default(),
            });
        }
        Fire::Elsewhere => events.recurring_skipped(&RecurringSkipped {
            task_key: key.to_string(),
            reason: SkipReason::FiredElsewhere,
            run_at: at,
            through: at,
            ticks: 1,
        }),
        Fire::NotYet { .. } | Fire::TooLate { .. } => {}
    }
    Ok(fired)
}

struct Loop {
    store: Store,
    tasks: Vec<Prepared>,
    next: Vec<Option<DateTime<Utc>>>,
    /// Overdue ticks fired in a row, per task.
    behind: Vec<u32>,
    clock: Clock,
    events: Arc<dyn Events>,
}

impl Loop {
    fn new(store: Store, tasks: Vec<Prepared>, events: Arc<dyn Events>) -> Loop {
        let mut clock = Clock::new(store.clone());
        let now = clock.now();
        let next = tasks
            .iter()
            .map(|p| p.task.schedule().next_after(now))
            .collect();
        Loop {
            behind: vec![0; tasks.len()],
            store,
            tasks,
            next,
            clock,
            events,
        }
    }

    fn run(mut self, stopped: &Receiver<()>) {
        let mut failures = 0u32;
        loop {
            let earliest = self
                .next
                .iter()
                .enumerate()
                .filter_map(|(i, at)| at.map(|at| (i, at)))
                .min_by_key(|&(_, at)| at);
            let Some((i, at)) = earliest else {
                // No task has a tick left.
                let _ = stopped.recv();
                return;
            };
            let now = self.clock.now();
            if at > now {
                let wait = (at - now).to_std().unwrap_or_default().min(MAX_SLEEP);
                if !matches!(stopped.recv_timeout(wait), Err(RecvTimeoutError::Timeout)) {
                    return;
                }
                continue;
            }
            if let Some(skip) = too_late(self.tasks[i].task.schedule(), at, now) {
                self.skip_late(i, at, skip);
                continue;
            }
            match fire(&self.store, &self.tasks[i], at, self.events.as_ref()) {
                Ok(Fire::NotYet { now: db }) => {
                    // This host's clock runs ahead of the database's: wait
                    // for the database's, and follow it from now on.
                    log::debug!(
                        "recurring task {}: the database's clock ({db}) has not reached the {at} tick yet",
                        self.tasks[i].task.key()
                    );
                    let db = db.and_utc();
                    self.clock.observed(db);
                    let wait = (at - db)
                        .to_std()
                        .unwrap_or_default()
                        .clamp(MIN_NOT_YET_PAUSE, MAX_SLEEP);
                    if !matches!(stopped.recv_timeout(wait), Err(RecvTimeoutError::Timeout)) {
                        return;
                    }
                }
                Ok(Fire::TooLate { now: db }) => {
                    let schedule = self.tasks[i].task.schedule();
                    let skip = too_late(schedule, at, db.and_utc()).unwrap_or(Skip {
                        ticks: 1,
                        through: at,
                        next: schedule.next_after(at),
                    });
                    failures = 0;
                    self.skip_late(i, at, skip);
                }
                Ok(Fire::Enqueued { .. } | Fire::Elsewhere) => {
                    failures = 0;
                    self.advance(i, at, now);
                }
                Err(error) => {
                    failures += 1;
                    let pause =
                        Duration::from_millis(100 * 2u64.pow(failures.min(8))).min(MAX_SLEEP);
                    log::warn!(
                        "recurring task {} cannot fire its {at} tick ({error}); retrying in {pause:?}",
                        self.tasks[i].task.key()
                    );
                    if !matches!(stopped.recv_timeout(pause), Err(RecvTimeoutError::Timeout)) {
                        return;
                    }
                }
            }
        }
    }

    /// The tick after `fired`, unless the task is too far behind.
    fn advance(&mut self, i: usize, fired: DateTime<Utc>, now: DateTime<Utc>) {
        let schedule = self.tasks[i].task.schedule();
        let mut next = schedule.next_after(fired);
        if next.is_some_and(|n| n <= now) {
            self.behind[i] += 1;
            if self.behind[i] >= MAX_CATCH_UP
                && let Some(first) = next
            {
                let (ticks, through) = skipped(schedule, first, now);
                self.events.recurring_skipped(&RecurringSkipped {
                    task_key: self.tasks[i].task.key().to_string(),
                    reason: SkipReason::TooFarBehind,
                    run_at: first,
                    through,
                    ticks,
                });
                next = schedule.next_after(now);
                self.behind[i] = 0;
            }
        } else {
            self.behind[i] = 0;
        }
        self.next[i] = next;
    }
}

impl Loop {
    /// Skips the ticks of task `i` from `first` that are too late to fire,
    /// reporting them, and goes on from the first that is not.
    fn skip_late(&mut self, i: usize, first: DateTime<Utc>, skip: Skip) {
        self.events.recurring_skipped(&RecurringSkipped {
            task_key: self.tasks[i].task.key().to_string(),
            reason: SkipReason::TooLate,
            run_at: first,
            through: skip.through,
            ticks: skip.ticks,
        });
        self.behind[i] = 0;
        self.next[i] = skip.next;
    }
}

/// Ticks skipped for being too late.
#[derive(Debug, PartialEq, Eq)]
struct Skip {
    /// How many (counting stops at [`MAX_SKIPPED_COUNTED`]).
    ticks: u64,
    /// The last of them.
    through: DateTime<Utc>,
    /// The first tick after them, not too late at `now`.
    next: Option<DateTime<Utc>>,
}

/// When tick `at` is more than [`RECURRING_MAX_LATENESS`] before `now`:
/// the ticks of `schedule` from `at` that are, and the first that is not.
fn too_late(
    schedule: &crate::types::Schedule,
    at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Option<Skip> {
    let cutoff = now - chrono::Duration::from_std(RECURRING_MAX_LATENESS).ok()?;
    if at >= cutoff {
        return None;
    }
    let (ticks, through) = skipped(schedule, at, cutoff);
    Some(Skip {
        ticks,
        through,
        next: schedule.next_after(through.max(cutoff)),
    })
}

/// Most ticks counted one by one when a scheduler skips ahead; past it the
/// count stops (a per-second task paused for days).
const MAX_SKIPPED_COUNTED: u64 = 100_000;

/// How many ticks of `schedule` from `first` up to `now` are skipped, and
/// the last of them (counting stops at [`MAX_SKIPPED_COUNTED`]).
fn skipped(
    schedule: &crate::types::Schedule,
    first: DateTime<Utc>,
    now: DateTime<Utc>,
) -> (u64, DateTime<Utc>) {
    let (mut ticks, mut last) = (1, first);
    while ticks < MAX_SKIPPED_COUNTED {
        match schedule.next_after(last) {
            Some(tick) if tick <= now => {
                ticks += 1;
                last = tick;
            }
            _ => break,
        }
    }
    (ticks, last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skipping_ahead_counts_every_tick_up_to_now() {
        let every_second = crate::types::Schedule::parse("* * * * * ?", "UTC").unwrap();
        let first = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        let now = first + chrono::Duration::milliseconds(5_500);
        assert_eq!(
            skipped(&every_second, first, now),
            (6, first + chrono::Duration::seconds(5))
        );
        assert_eq!(skipped(&every_second, first, first), (1, first));
    }

    fn utc(day: u32, hour: u32, minute: u32) -> DateTime<Utc> {
        chrono::NaiveDate::from_ymd_opt(2026, 3, day)
            .and_then(|d| d.and_hms_opt(hour, minute, 0))
            .unwrap()
            .and_utc()
    }

    #[test]
    fn ticks_older_than_the_max_lateness_are_skipped_up_to_the_first_that_is_not() {
        assert_eq!(RECURRING_MAX_LATENESS, Duration::from_secs(24 * 3600));
        let hourly = crate::types::Schedule::parse("0 0 * * * ?", "UTC").unwrap();
        let now = utc(14, 22, 13);
        // Two days late: the ticks up to one day before now are skipped
        // (24 on the 12th, 23 on the 13th), then it goes on from 23:00.
        assert_eq!(
            too_late(&hourly, utc(12, 0, 0), now),
            Some(Skip {
                ticks: 47,
                through: utc(13, 22, 0),
                next: Some(utc(13, 23, 0)),
            })
        );
        // Within the lateness: fired.
        assert_eq!(too_late(&hourly, utc(13, 23, 0), now), None);
        assert_eq!(too_late(&hourly, utc(14, 22, 0), now), None);
        // A weekly task a week late: its one tick is skipped, and it goes
        // on from the next, due now.
        let weekly = crate::types::Schedule::parse("0 0 0 ? * MON", "UTC").unwrap();
        let skip = too_late(&weekly, utc(2, 0, 0), utc(9, 0, 1)).unwrap();
        assert_eq!(
            (skip.ticks, skip.through, skip.next),
            (1, utc(2, 0, 0), Some(utc(9, 0, 0)))
        );
    }
}
