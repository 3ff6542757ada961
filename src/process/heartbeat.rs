//! The heartbeat thread every registered process runs, and the [`Lease`]
//! its heartbeats earn.
//!
//! Every interval it writes the database's "now" into the process row and
//! reports what it found: written, the row gone (this process was pruned
//! while alive), or no row yet (a process that could not register while
//! the database was away registers then). It waits at most one interval
//! for a pooled connection, so a database that is away shows as failing
//! heartbeats, not as a heartbeat stuck behind the pool's 30 s checkout
//! timeout.
//!
//! **Never an exit.** Heartbeats that keep failing, for however long, do
//! not stop the process: while its lease is invalid it starts nothing and
//! its running jobs see [`JobContext::is_cancelled`](crate::JobContext::is_cancelled)
//! (through [`Standing`]); when the database answers again it carries on,
//! or registers again if a peer pruned its row meanwhile. The thread logs
//! the first failure, the lapse of the lease, a reminder every
//! [`STILL_FAILING_EVERY`], and the recovery: a few lines per outage, not
//! one per beat.
//!
//! **The lease.** A peer prunes a row only once its heartbeat is older
//! than the alive threshold, by the database's clock. A heartbeat sent at
//! `t` (this host's monotonic clock) that succeeded was written at or after
//! `t`, so the row is certain to exist until `t + threshold`. Work that
//! must not happen on a pruned registration (starting a claimed job) checks
//! [`Lease::is_valid`], which holds until that instant less one heartbeat
//! interval of margin: a process frozen (SIGSTOP, a host asleep) or cut off
//! past it starts nothing until a heartbeat succeeds again or finds its row
//! gone. Registering counts as a heartbeat.
//!
//! **Health.** [`Lease::healthy_for`] is how long heartbeats have succeeded
//! without a failure. A process judges others dead by heartbeat age only
//! once it has been healthy for a whole threshold itself: after a database
//! outage everybody's heartbeat is old, and the first process back must
//! give the others the same chance to write before pruning them. A
//! heartbeat that takes longer than the margin (it waited behind a lock
//! or a slow server, as everybody else's did) also starts health over,
//! from the moment it returns, and while one is in flight for longer than
//! that, the process is not healthy at all: a pruner whose own transaction
//! waited behind the same lock must not judge the others as it gets in.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::StoppableThread;
use crate::job::Standing;
use crate::store::Store;
use crate::types::Result;

/// How often a process whose heartbeats keep failing says so again.
pub const STILL_FAILING_EVERY: Duration = Duration::from_secs(30);

/// What one heartbeat tick found.
pub(crate) enum Beat {
    /// Written; `recovered` after a run of failures (the database
    /// answers again: work that waited for it may go on at once).
    Alive { recovered: bool },
    /// The row `id` no longer exists.
    RowGone(i64),
    /// There is no row (registering failed, or the owner is between two
    /// registrations): the owner registers when it can.
    Unregistered,
}

/// A running heartbeat thread; stopping it joins it.
pub(crate) type Heartbeat = StoppableThread;

/// What this process's heartbeats prove (see the module docs).
#[derive(Debug)]
pub(crate) struct Lease {
    epoch: Instant,
    threshold: Duration,
    margin: Duration,
    /// Nanoseconds after `epoch` until which the row surely exists; 0: no
    /// lease.
    valid_until: AtomicU64,
    /// Nanoseconds after `epoch`, plus one, of the first success after the
    /// last failure; 0 while failing.
    healthy_since: AtomicU64,
    /// Whether a heartbeat has ever failed (an outage seen).
    ever_failed: std::sync::atomic::AtomicBool,
    /// Nanoseconds after `epoch`, plus one, at which the heartbeat in
    /// flight was sent; 0 when none is.
    beat_sent: AtomicU64,
    changed: Condvar,
    lock: Mutex<()>,
}

impl Lease {
    /// A lease earned by a registration (or heartbeat) sent at `sent`.
    pub(crate) fn new(sent: Instant, threshold: Duration, interval: Duration) -> Lease {
        let lease = Lease {
            epoch: sent,
            threshold,
            margin: interval.min(threshold / 2),
            valid_until: AtomicU64::new(0),
            healthy_since: AtomicU64::new(0),
            ever_failed: std::sync::atomic::AtomicBool::new(false),
            beat_sent: AtomicU64::new(0),
            changed: Condvar::new(),
            lock: Mutex::new(()),
        };
        lease.renew(sent);
        lease
    }

    fn nanos(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }

    /// A heartbeat (or registration) sent at `sent` succeeded. One that
    /// took longer than the margin starts health over from now.
    pub(crate) fn renew(&self, sent: Instant) {
        let until = self.nanos(sent + self.threshold.saturating_sub(self.margin));
        self.valid_until.fetch_max(until, Ordering::SeqCst);
        let now = Instant::now();
        if now.saturating_duration_since(sent) > self.margin {
            self.healthy_since
                .store(self.nanos(now) + 1, Ordering::SeqCst);
        } else {
            let _ = self.healthy_since.compare_exchange(
                0,
                self.nanos(sent) + 1,
                Ordering::SeqCst,
                Ordering::SeqCst,
            );
        }
        self.notify();
    }

    /// A heartbeat is being sent now; [`Lease::beat_done`] when it returns.
    pub(crate) fn beat_sending(&self, sent: Instant) {
        self.beat_sent.store(self.nanos(sent) + 1, Ordering::SeqCst);
    }

    /// The heartbeat in flight returned (whatever it found).
    pub(crate) fn beat_done(&self) {
        self.beat_sent.store(0, Ordering::SeqCst);
    }

    /// A heartbeat failed: health starts over at the next success.
    pub(crate) fn failed(&self) {
        self.ever_failed.store(true, Ordering::SeqCst);
        self.healthy_since.store(0, Ordering::SeqCst);
    }

    /// Whether a heartbeat of this process has ever failed.
    pub(crate) fn ever_failed(&self) -> bool {
        self.ever_failed.load(Ordering::SeqCst)
    }

    /// The row is gone (or was replaced): no lease until the next one.
    pub(crate) fn revoke(&self) {
        self.valid_until.store(0, Ordering::SeqCst);
        self.healthy_since.store(0, Ordering::SeqCst);
        self.notify();
    }

    /// Whether the row is certain to exist now.
    pub(crate) fn is_valid(&self) -> bool {
        self.nanos(Instant::now()) < self.valid_until.load(Ordering::SeqCst)
    }

    /// How long heartbeats have succeeded without a failure or a delay
    /// (zero while one has been in flight for longer than the margin).
    pub(crate) fn healthy_for(&self) -> Duration {
        let now = self.nanos(Instant::now());
        let in_flight = self.beat_sent.load(Ordering::SeqCst);
        if in_flight != 0 && Duration::from_nanos(now.saturating_sub(in_flight - 1)) > self.margin {
            return Duration::ZERO;
        }
        match self.healthy_since.load(Ordering::SeqCst) {
            0 => Duration::ZERO,
            since => Duration::from_nanos(now.saturating_sub(since - 1)),
        }
    }

    /// The alive threshold it was earned against.
    pub(crate) fn threshold(&self) -> Duration {
        self.threshold
    }

    /// Waits up to `timeout` for the lease to be valid, or for
    /// [`Lease::notify`]; returns whether it is valid.
    pub(crate) fn wait_valid(&self, timeout: Duration) -> bool {
        if self.is_valid() {
            return true;
        }
        let guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let _ = self
            .changed
            .wait_timeout(guard, timeout)
            .unwrap_or_else(|p| p.into_inner());
        self.is_valid()
    }

    /// Wakes the threads waiting in [`Lease::wait_valid`] (the lease or
    /// the registration changed).
    pub(crate) fn notify(&self) {
        let _guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        self.changed.notify_all();
    }
}

impl Standing for Lease {
    fn holds(&self) -> bool {
        self.is_valid()
    }
}

/// Beats for the process whose id `id` holds (0 means "not registered":
/// skip) every `interval`, renewing `lease` and calling `on_beat` after
/// each attempt.
pub(crate) fn spawn(
    name: &str,
    store: Store,
    interval: Duration,
    lease: Arc<Lease>,
    id: Arc<AtomicI64>,
    on_beat: impl Fn(Beat) + Send + 'static,
) -> Result<Heartbeat> {
    // Several processes may share a stderr, and several registered
    // services one OS process: the lines name the thread's owner.
    let owner = name
        .strip_prefix("solidq-")
        .and_then(|n| n.strip_suffix("-heartbeat"))
        .unwrap_or(name)
        .to_string();
    StoppableThread::spawn(name, move |stopped| {
        let mut outage = Outage::default();
        while let Err(crossbeam_channel::RecvTimeoutError::Timeout) = stopped.recv_timeout(interval)
        {
            let current = id.load(Ordering::SeqCst);
            if current == 0 {
                on_beat(Beat::Unregistered);
                continue;
            }
            let sent = Instant::now();
            lease.beat_sending(sent);
            let beat = store.process_heartbeat(current, interval);
            lease.beat_done();
            match beat {
                Ok(true) => {
                    lease.renew(sent);
                    let recovered = outage.over(&owner);
                    on_beat(Beat::Alive { recovered });
                }
                Ok(false) => {
                    lease.revoke();
                    outage.over(&owner);
                    on_beat(Beat::RowGone(current));
                }
                Err(error) => {
                    lease.failed();
                    outage.failed(&owner, current, &lease, &error);
                }
            }
        }
    })
}

/// What the heartbeat thread remembers of failing heartbeats, to log an
/// outage in a few lines.
#[derive(Default)]
struct Outage {
    /// When the first heartbeat of the current run of failures was sent.
    since: Option<Instant>,
    /// Whether the lapse of the lease was reported.
    lapsed: bool,
    /// When the outage was last reported.
    said: Option<Instant>,
}

impl Outage {
    fn failed(&mut self, owner: &str, process: i64, lease: &Lease, error: &crate::Error) {
        let now = Instant::now();
        let since = *self.since.get_or_insert(now);
        let elapsed = now - since;
        if self.said.is_none() {
            self.said = Some(now);
            log::warn!(
                "{owner}: heartbeat of process {process} failed ({error}); retrying every beat"
            );
        } else if !lease.is_valid() && !self.lapsed {
            self.lapsed = true;
            self.said = Some(now);
            log::warn!(
                "{owner}: heartbeats have failed for {elapsed:.1?} (alive threshold {:?}): starting nothing and asking running jobs to stop until the database answers; the process carries on ({error})",
                lease.threshold()
            );
        } else if self.said.is_some_and(|at| now - at >= STILL_FAILING_EVERY) {
            self.said = Some(now);
            log::warn!("{owner}: heartbeats still failing after {elapsed:.0?} ({error})");
        }
    }

    /// Heartbeats work again; returns whether they had failed.
    fn over(&mut self, owner: &str) -> bool {
        let failed = self.since.take().inspect(|since| {
            log::info!(
                "{owner}: heartbeats work again after {:.1?} of failures",
                since.elapsed()
            );
        });
        *self = Outage::default();
        failed.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_lasts_the_threshold_less_a_margin_and_health_restarts_after_a_failure() {
        let start = Instant::now();
        let lease = Lease::new(
            start,
            Duration::from_millis(300),
            Duration::from_millis(100),
        );
        assert!(lease.is_valid());
        std::thread::sleep(Duration::from_millis(250));
        assert!(!lease.is_valid(), "valid only until 300 - 100 ms");
        assert!(lease.healthy_for() >= Duration::from_millis(250));
        lease.failed();
        assert_eq!(lease.healthy_for(), Duration::ZERO);
        lease.renew(Instant::now());
        assert!(lease.is_valid());
        assert!(lease.healthy_for() < Duration::from_millis(100));
        lease.revoke();
        assert!(!lease.is_valid());
        assert!(!lease.wait_valid(Duration::from_millis(10)));
    }

    #[test]
    fn a_slow_heartbeat_starts_health_over_and_one_in_flight_too_long_voids_it() {
        let margin = Duration::from_millis(50);
        let lease = Lease::new(Instant::now(), Duration::from_secs(10), margin);
        std::thread::sleep(margin * 3);
        assert!(lease.healthy_for() >= margin * 3);
        let sent = Instant::now();
        lease.beat_sending(sent);
        assert!(lease.healthy_for() >= margin * 3, "a fresh beat in flight");
        std::thread::sleep(margin * 2);
        assert_eq!(lease.healthy_for(), Duration::ZERO, "in flight too long");
        lease.beat_done();
        lease.renew(sent);
        assert!(
            lease.healthy_for() < margin,
            "health starts when it returned"
        );
        assert!(lease.is_valid());
    }
}
