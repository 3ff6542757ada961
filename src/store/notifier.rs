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
//! **Flushed before the process ends.** A program that enqueues and returns
//! from `main` at once must neither lose the notification (its job would
//! wait for a worker's fallback poll) nor tear libpq down while this thread
//! is inside it (a crash at exit, status 139, after the job committed). So
//! the thread is flushed and joined when the last clone of its queue is
//! dropped, and, for queues that are never dropped (kept in a `static`, or
//! a `std::process::exit` before their drop), from an `atexit` handler that
//! runs before the C libraries' own destructors. A flush waits up to
//! [`FLUSH_TIMEOUT`] (a notification that cannot be sent by then is only
//! late: workers poll as a fallback).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, unbounded};

use super::{AnyConnection, SqliteSettings, driver};
use crate::types::DatabaseUrl;

/// The longest a flush waits for pending notifications to be sent.
pub(crate) const FLUSH_TIMEOUT: Duration = Duration::from_secs(2);

/// A running notifier thread, flushed and joined on drop.
pub(crate) struct Notifier {
    inner: Arc<Inner>,
}

/// What a flush needs: the sender to close and the thread to wait for.
struct Inner {
    tx: Mutex<Option<Sender<Vec<String>>>>,
    done: Receiver<()>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// Every live notifier, for the `atexit` flush.
static LIVE: Mutex<Vec<Weak<Inner>>> = Mutex::new(Vec::new());

impl Notifier {
    /// Starts the thread; it reconnects whenever `read_only_seen` (see
    /// `Store::read_only_seen`) changes.
    pub(crate) fn start(url: DatabaseUrl, read_only_seen: Arc<AtomicU64>) -> Notifier {
        let (tx, rx) = unbounded();
        let (done_tx, done) = crossbeam_channel::bounded::<()>(1);
        let spawned = std::thread::Builder::new()
            .name("solidq-notifier".into())
            .spawn(move || {
                run(&url, &rx, &read_only_seen);
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
        let inner = Arc::new(Inner {
            tx: Mutex::new(thread.is_some().then_some(tx)),
            done,
            thread: Mutex::new(thread),
        });
        register_at_exit(&inner);
        Notifier { inner }
    }

    /// Asks for listeners of `queues` to be told, soon.
    pub(crate) fn ready(&self, queues: Vec<String>) {
        if let Some(tx) = lock(&self.inner.tx).as_ref() {
            let _ = tx.send(queues);
        }
    }
}

impl Drop for Notifier {
    fn drop(&mut self) {
        self.inner.flush();
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

/// Adds `inner` to the notifiers flushed at exit, installing the handler
/// once per process.
fn register_at_exit(inner: &Arc<Inner>) {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    let mut live = lock(&LIVE);
    live.retain(|n| n.strong_count() > 0);
    live.push(Arc::downgrade(inner));
    drop(live);
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
    let live: Vec<Arc<Inner>> = lock(&LIVE).iter().filter_map(Weak::upgrade).collect();
    for inner in live {
        inner.flush();
    }
}

fn run(url: &DatabaseUrl, rx: &Receiver<Vec<String>>, read_only_seen: &AtomicU64) {
    let mut conn: Option<AnyConnection> = None;
    let mut opened_at = read_only_seen.load(Ordering::SeqCst);
    while let Ok(first) = rx.recv() {
        // A failover: NOTIFY on the old primary would reach nobody.
        let seen = read_only_seen.load(Ordering::SeqCst);
        if seen != opened_at {
            conn = None;
            opened_at = seen;
        }
        let mut queues: BTreeSet<String> = first.into_iter().collect();
        while let Ok(more) = rx.try_recv() {
            queues.extend(more);
        }
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
