//! Notifications for jobs enqueued through a queue's own connections
//! (PostgreSQL). PostgreSQL serializes the commits of every transaction
//! that sent a NOTIFY (one database-wide lock, held through the commit's WAL
//! flush), so a NOTIFY inside each enqueue capped enqueue throughput at one
//! commit at a time, however many threads enqueued. Instead the enqueue
//! commits without one, and this thread sends one NOTIFY per round trip for
//! every queue that got jobs meanwhile, from its own connection: enqueues
//! never wait for it, and under load one notification covers many jobs.
//! Enqueues on the caller's own connection (`enqueue_on`) still notify in
//! their transaction, the only way to fire at the caller's commit.
//!
//! **Paced under load** ([`Pace`]). Each `NOTIFY` is a transaction of its
//! own and wakes every listening worker process, which reads it off its
//! connection: 4 threads enqueueing single jobs beside 2 × 16 workers sent
//! about 1,600 a second, and a run that sent one per queue every 100 ms
//! instead enqueued and worked 60 % more jobs. While more than
//! [`Pace::BUSY`] enqueues reached this process's notifiers in the last
//! [`Pace::WINDOW`], each sends at most one `NOTIFY` per [`Pace::EVERY`]
//! (covering every queue that got jobs meanwhile), as Oban's producers
//! fetch at most once per 5 ms dispatch cooldown and River's clients send
//! at most one insert notification per queue per fetch cooldown: a job
//! waits at most that long for its notification, and claims already
//! running take it sooner. Below that rate (a trickle, a job now and
//! then) each notification goes at once, as before.
//!
//! **One per database in a process.** Every queue handle of a process on
//! the same database URL shares one notifier thread (and its connection),
//! so the pace holds for the process: a program with a handle per request
//! thread sends no more notifications than one with a single shared
//! handle: 4 threads enqueueing through a handle each could send 4 × 200
//! a second under load with a notifier each (each paced on its own), and
//! 200 with one (the mixed bench: a third of the `NOTIFY`s of before).
//!
//! **Flushed before the process ends.** A program that enqueues and returns
//! from `main` at once must neither lose the notification (its job would
//! wait for a worker's fallback poll) nor tear libpq down while this thread
//! is inside it (a crash at exit, status 139, after the job committed). So
//! the thread is flushed and joined when the last clone of the last queue
//! sharing it is dropped, and, for queues that are never dropped (kept in a
//! `static`, or a `std::process::exit` before their drop), from an `atexit`
//! handler that runs before the C libraries' own destructors. A flush waits
//! up to [`FLUSH_TIMEOUT`] (a notification that cannot be sent by then is
//! only late: workers poll as a fallback).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, unbounded};

use super::{AnyConnection, SqliteSettings, driver};
use crate::types::DatabaseUrl;

/// The longest a flush waits for pending notifications to be sent.
pub(crate) const FLUSH_TIMEOUT: Duration = Duration::from_secs(2);

/// When the notifier sends: at once, or, under load, at most once per
/// [`Pace::EVERY`].
#[derive(Debug)]
struct Pace {
    /// The window being counted: when it began, and [`ENQUEUES`] then.
    window: (Instant, u64),
    /// Whether the last whole window counted more than [`Pace::BUSY`]
    /// enqueues a window.
    busy: bool,
    /// When the last `NOTIFY` was sent.
    sent: Option<Instant>,
}

/// Enqueues handed to any notifier of this process: load is the process's
/// (a program enqueueing through several queue handles at once is as busy
/// as one enqueueing as much through one).
static ENQUEUES: AtomicU64 = AtomicU64::new(0);

impl Pace {
    /// The window over which enqueues are counted.
    const WINDOW: Duration = Duration::from_millis(100);
    /// More enqueues than this a window (400 a second) is load.
    const BUSY: u64 = 40;
    /// Under load, the shortest time between two notifications.
    const EVERY: Duration = Duration::from_millis(5);

    fn new(now: Instant, enqueues: u64) -> Pace {
        Pace {
            window: (now, enqueues),
            busy: false,
            sent: None,
        }
    }

    /// At `now`, `enqueues` (a count that only grows) have been made.
    fn observe(&mut self, enqueues: u64, now: Instant) {
        let (start, before) = self.window;
        let elapsed = now.duration_since(start);
        if elapsed >= Self::WINDOW {
            // The window closes at the first look after it: its rate is
            // over all of it, a quiet stretch included.
            let counted = u128::from(enqueues.saturating_sub(before));
            self.busy =
                counted * Self::WINDOW.as_micros() > u128::from(Self::BUSY) * elapsed.as_micros();
            self.window = (now, enqueues);
        }
    }

    /// How long to hold a notification that is due at `now`.
    fn hold(&self, now: Instant) -> Duration {
        match self.sent {
            Some(sent) if self.busy => (sent + Self::EVERY).saturating_duration_since(now),
            _ => Duration::ZERO,
        }
    }

    fn sent(&mut self, now: Instant) {
        self.sent = Some(now);
    }
}

/// A queue's handle on its process's notifier for its database URL; the
/// thread is flushed and joined when the last handle on it is dropped.
pub(crate) struct Notifier {
    inner: Arc<Inner>,
}

/// What a flush needs: the sender to close and the thread to wait for.
/// Dropped with the last [`Notifier`] on it, which flushes it.
struct Inner {
    tx: Mutex<Option<Sender<Vec<String>>>>,
    done: Receiver<()>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// The failover counters (`Store::read_only_seen`) of the stores
    /// sharing it: the thread reconnects when any of them changes.
    seen: Arc<Mutex<Vec<Weak<AtomicU64>>>>,
}

/// Every live notifier by its database URL: shared by the queue handles
/// on that URL, and flushed at exit.
static LIVE: Mutex<Vec<(String, Weak<Inner>)>> = Mutex::new(Vec::new());

impl Notifier {
    /// The process's notifier for `url`, started if there is none; it
    /// reconnects whenever `read_only_seen` (see `Store::read_only_seen`),
    /// or that of another store sharing it, changes.
    pub(crate) fn start(url: DatabaseUrl, read_only_seen: Arc<AtomicU64>) -> Notifier {
        let key = url.expose().to_string();
        let mut live = lock(&LIVE);
        live.retain(|(_, n)| n.strong_count() > 0);
        if let Some(inner) = live
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, n)| n.upgrade())
        {
            let mut seen = lock(&inner.seen);
            seen.retain(|c| c.strong_count() > 0);
            seen.push(Arc::downgrade(&read_only_seen));
            drop(seen);
            return Notifier { inner };
        }
        let inner = Arc::new(Self::spawn(url, read_only_seen));
        live.push((key, Arc::downgrade(&inner)));
        drop(live);
        install_exit_flush();
        Notifier { inner }
    }

    fn spawn(url: DatabaseUrl, read_only_seen: Arc<AtomicU64>) -> Inner {
        let (tx, rx) = unbounded();
        let (done_tx, done) = crossbeam_channel::bounded::<()>(1);
        let seen = Arc::new(Mutex::new(vec![Arc::downgrade(&read_only_seen)]));
        let counters = Arc::clone(&seen);
        let spawned = std::thread::Builder::new()
            .name("solidq-notifier".into())
            .spawn(move || {
                run(&url, &rx, &counters);
                drop(done_tx);
            });
        let thread = match spawned {
            Ok(thread) => Some(thread),
            Err(error) => {
                log::warn!(
                    "cannot start the notifier thread ({error}); workers will find new jobs by polling"
                );
                None
            }
        };
        Inner {
            tx: Mutex::new(thread.is_some().then_some(tx)),
            done,
            thread: Mutex::new(thread),
            seen,
        }
    }

    /// Asks for listeners of `queues` to be told, soon.
    pub(crate) fn ready(&self, queues: Vec<String>) {
        if let Some(tx) = lock(&self.inner.tx).as_ref() {
            ENQUEUES.fetch_add(1, Ordering::Relaxed);
            let _ = tx.send(queues);
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.flush();
    }
}

impl Inner {
    /// Closes the channel, so the thread sends what is pending and ends,
    /// and waits for that up to [`FLUSH_TIMEOUT`]. Idempotent.
    fn flush(&self) {
        let Some(tx) = lock(&self.tx).take() else {
            return;
        };
        drop(tx);
        match self.done.recv_timeout(FLUSH_TIMEOUT) {
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                if let Some(thread) = lock(&self.thread).take() {
                    let _ = thread.join();
                }
            }
            _ => log::warn!(
                "the notifier did not finish within {FLUSH_TIMEOUT:?}; workers will find the last jobs by polling"
            ),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Installs the handler that flushes the live notifiers at exit, once per
/// process.
fn install_exit_flush() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        // SAFETY: registers a plain `extern "C" fn` that takes no arguments.
        if unsafe { libc::atexit(flush_all_at_exit) } != 0 {
            log::debug!("cannot register the notifier's exit flush");
        }
    });
}

/// Runs at `exit()`, before the C libraries' destructors: flushes every
/// notifier still alive, so none is inside libpq when libpq is torn down.
extern "C" fn flush_all_at_exit() {
    let live: Vec<Arc<Inner>> = lock(&LIVE)
        .iter()
        .filter_map(|(_, n)| n.upgrade())
        .collect();
    for inner in live {
        inner.flush();
    }
}

/// The sum of the failover counters of the live stores sharing a
/// notifier: it changes when any of them does (each only grows; a store
/// gone with a count makes it change once more, a reconnect for nothing).
fn seen_sum(seen: &Mutex<Vec<Weak<AtomicU64>>>) -> u64 {
    lock(seen)
        .iter()
        .filter_map(Weak::upgrade)
        .map(|c| c.load(Ordering::SeqCst))
        .fold(0, u64::wrapping_add)
}

fn run(
    url: &DatabaseUrl,
    rx: &Receiver<Vec<String>>,
    read_only_seen: &Mutex<Vec<Weak<AtomicU64>>>,
) {
    let mut conn: Option<AnyConnection> = None;
    let mut opened_at = seen_sum(read_only_seen);
    let mut pace = Pace::new(Instant::now(), ENQUEUES.load(Ordering::Relaxed));
    while let Ok(first) = rx.recv() {
        let now = Instant::now();
        pace.observe(ENQUEUES.load(Ordering::Relaxed), now);
        let hold = pace.hold(now);
        if !hold.is_zero() {
            std::thread::sleep(hold);
        }
        // A failover: NOTIFY on the old primary would reach nobody.
        let seen = seen_sum(read_only_seen);
        if seen != opened_at {
            conn = None;
            opened_at = seen;
        }
        let mut queues: BTreeSet<String> = first.into_iter().collect();
        while let Ok(more) = rx.try_recv() {
            queues.extend(more);
        }
        pace.sent(Instant::now());
        let queues: Vec<String> = queues.into_iter().collect();
        // Two tries: the first on a connection that may have died.
        for attempt in 0..2 {
            if conn.is_none() {
                match url.establish(SqliteSettings::default()) {
                    Ok(c) => conn = Some(c),
                    Err(error) => {
                        log::warn!(
                            "notifier cannot connect ({error}); workers will find the jobs by polling"
                        );
                        std::thread::sleep(Duration::from_millis(100));
                        break;
                    }
                }
            }
            let Some(c) = conn.as_mut() else { break };
            match driver(c).notify_ready(&queues) {
                Ok(()) => break,
                Err(error) => {
                    conn = None;
                    if attempt == 1 {
                        log::warn!(
                            "cannot notify workers of {queues:?} ({error}); they will find the jobs by polling"
                        );
                    }
                }
            }
        }
    }
    // The connection is closed here, on this thread, before the flush
    // that waits for it returns.
    drop(conn);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Paces `arrivals` (offsets from a start, in µs, each one enqueue
    /// reaching the thread as it waits) as `run` does; returns when each
    /// `NOTIFY` was sent, in µs from the start.
    fn sends(arrivals: &[u64]) -> Vec<u64> {
        let start = Instant::now();
        let at = |us: u64| start + Duration::from_micros(us);
        let made = |us: u64| arrivals.iter().filter(|&&a| a <= us).count() as u64;
        let mut pace = Pace::new(start, 0);
        let mut sent: Vec<u64> = Vec::new();
        let mut i = 0;
        while i < arrivals.len() {
            // The first enqueue waiting wakes the thread (no earlier than
            // its last send), which holds, then takes all that came.
            let woken_us = arrivals[i].max(sent.last().copied().unwrap_or(0));
            pace.observe(made(woken_us), at(woken_us));
            let send_us = woken_us + pace.hold(at(woken_us)).as_micros() as u64;
            while i + 1 < arrivals.len() && arrivals[i + 1] <= send_us {
                i += 1;
            }
            pace.sent(at(send_us));
            sent.push(send_us);
            i += 1;
        }
        sent
    }

    /// Queue handles on one database URL share one notifier thread; one on
    /// another URL has its own. Dropping a handle leaves the thread to the
    /// others; dropping the last flushes it and ends the thread.
    #[cfg(feature = "postgres")]
    #[test]
    fn queue_handles_on_one_database_share_one_notifier() {
        // Never connected: nothing is handed to them.
        let url = |db: &str| DatabaseUrl::parse(&format!("postgres://u@127.0.0.1:1/{db}")).unwrap();
        let (seen_a, seen_b) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let a = Notifier::start(url("shared_one"), Arc::clone(&seen_a));
        let b = Notifier::start(url("shared_one"), Arc::clone(&seen_b));
        let c = Notifier::start(url("shared_two"), Arc::default());
        assert!(Arc::ptr_eq(&a.inner, &b.inner), "one thread for one URL");
        assert!(!Arc::ptr_eq(&a.inner, &c.inner), "another for another");

        // Either store's failover counter makes the thread reconnect.
        let before = seen_sum(&a.inner.seen);
        seen_b.fetch_add(1, Ordering::SeqCst);
        assert_ne!(seen_sum(&a.inner.seen), before);

        let done = a.inner.done.clone();
        let shared = Arc::downgrade(&a.inner);
        drop(a);
        assert!(
            lock(&b.inner.tx).is_some(),
            "still open for the other handle"
        );
        assert_eq!(
            done.try_recv(),
            Err(crossbeam_channel::TryRecvError::Empty),
            "the thread runs on"
        );
        drop(b);
        assert!(shared.upgrade().is_none(), "gone with the last handle");
        assert_eq!(
            done.try_recv(),
            Err(crossbeam_channel::TryRecvError::Disconnected),
            "the thread ended before the last handle's drop returned"
        );
        drop(c);
    }

    /// A trickle (200 enqueues a second, some 1 ms apart) is notified at
    /// once, each; 1,000 a second, after a window to count them, at most
    /// once per 5 ms; and once the load ends, at once again.
    #[test]
    fn notifications_are_paced_only_under_load() {
        let trickle: Vec<u64> = (0..200).map(|i| i * 5_000 + (i % 2) * 4_000).collect();
        assert_eq!(sends(&trickle), trickle, "a trickle goes at once");

        let load: Vec<u64> = (0..1_000).map(|i| i * 1_000).collect();
        let sent = sends(&load);
        let after_a_window = sent.iter().filter(|&&s| s >= 250_000).copied();
        let gaps: Vec<u64> = after_a_window
            .clone()
            .zip(after_a_window.skip(1))
            .map(|(a, b)| b - a)
            .collect();
        assert!(gaps.len() > 100, "{gaps:?}");
        assert!(gaps.iter().all(|&g| g >= 5_000), "{gaps:?}");
        assert!(
            sent.len() < 300,
            "{} notifications for 1,000 jobs",
            sent.len()
        );
        // Every job is covered by a notification sent within 5 ms of it.
        for a in &load {
            let covering = sent.iter().find(|&&s| s >= *a).expect("covered");
            assert!(
                covering - a <= 5_000,
                "job at {a} µs waited until {covering}"
            );
        }

        let then_quiet: Vec<u64> = load.iter().copied().chain([1_500_000, 1_505_000]).collect();
        assert_eq!(
            &sends(&then_quiet)[sent.len()..],
            &[1_500_000, 1_505_000],
            "after the load, at once again"
        );
    }
}
