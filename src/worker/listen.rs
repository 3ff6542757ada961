//! The listener thread: wakes the poller when jobs become ready on one of
//! the worker's queues (PostgreSQL notifications) or the database changed
//! (SQLite's change counter); see `store/listener.rs`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::cancel;
use super::poller::backoff;
use super::state::Shared;
use crate::store::{CANCEL_CHANNEL_QUEUE, Heard, Listener};
use crate::types::{Backend, Error, Result};

/// How long a listener waits before checking whether the worker stops.
const LISTEN_SLICE: Duration = Duration::from_millis(200);

/// The listener thread: wakes the poller when jobs become ready on one of
/// its queues (PostgreSQL) or the database changed (SQLite). Reopens a
/// broken listener with a backoff; meanwhile the poller polls at the normal
/// interval. After (re)opening, it wakes the poller once, for anything
/// enqueued while nobody listened.
pub(super) fn spawn(shared: &Arc<Shared>) -> Result<JoinHandle<()>> {
    let shared = Arc::clone(shared);
    std::thread::Builder::new()
        .name("solidq-listener".into())
        .spawn(move || {
            let mut listener: Option<Box<dyn Listener>> = None;
            let mut failures = 0u32;
            let mut opened_at = 0;
            while !shared.stopping.load(Ordering::SeqCst) {
                cancel::tick(&shared);
                if !shared.store.url().listens() {
                    // `listen=false` in the URL: the poller polls.
                    sleep_unless_stopping(&shared, LISTEN_SLICE);
                    continue;
                }
                if listener.is_some() && shared.store.read_only_seen() != opened_at {
                    // A failover: the server this listens on refuses
                    // writes now, and notifications come from elsewhere.
                    log::warn!("a server refused writes as read-only; listening again through the URL's hosts");
                    shared.reach.listening.store(false, Ordering::SeqCst);
                    listener = None;
                }
                let Some(active) = listener.as_mut() else {
                    let seen = shared.store.read_only_seen();
                    let config = &shared.config;
                    let interval = match shared.store.backend() {
                        Backend::Mysql => config.mysql_watch_interval,
                        _ => config.sqlite_watch_interval,
                    };
                    match shared.store.listener(interval) {
                        Ok(opened) => {
                            listener = Some(opened);
                            opened_at = seen;
                            failures = 0;
                            shared.reach.listening.store(true, Ordering::SeqCst);
                            // Nobody listened until now: every queue may
                            // have jobs.
                            shared.heard_from.store(0, Ordering::SeqCst);
                            let _ = shared.wake.try_send(());
                        }
                        Err(error) => {
                            failures += 1;
                            let pause = backoff(Duration::from_millis(500), failures);
                            log::warn!("cannot listen for new jobs ({error}); polling meanwhile, retrying in {pause:?}");
                            sleep_unless_stopping(&shared, pause);
                        }
                    }
                    continue;
                };
                match active.wait(LISTEN_SLICE) {
                    Ok(Heard::Nothing) => {}
                    Ok(Heard::Changes) => {
                        shared.cancels.wanted();
                        let _ = shared.wake.try_send(());
                    }
                    Ok(Heard::Queues(mut queues)) => {
                        log::trace!("heard of jobs on {queues:?}");
                        if queues.iter().any(|q| q == CANCEL_CHANNEL_QUEUE) {
                            queues.retain(|q| q != CANCEL_CHANNEL_QUEUE);
                            shared.cancels.wanted();
                            cancel::tick(&shared);
                        }
                        let first = queues
                            .iter()
                            .filter_map(|q| shared.patterns.iter().position(|p| p.matches(q)))
                            .min();
                        if let Some(first) = first {
                            // Where its next claim starts, whoever claims
                            // now: a worker working down a backlog claims
                            // as its threads free up, from there.
                            shared.heard_from.fetch_min(first, Ordering::SeqCst);
                            // Another worker of the same queues claims on
                            // it unless this one holds the duty (`duty.rs`).
                            if shared.reach.acting.load(Ordering::SeqCst) {
                                let _ = shared.wake.try_send(());
                            }
                        }
                    }
                    Err(error) => {
                        log::warn!("the listener broke ({error}); polling until it is back");
                        shared.reach.listening.store(false, Ordering::SeqCst);
                        listener = None;
                    }
                }
            }
            shared.reach.listening.store(false, Ordering::SeqCst);
        })
        .map_err(|source| Error::Thread {
            name: "solidq-listener".into(),
            source,
        })
}

fn sleep_unless_stopping(shared: &Shared, pause: Duration) {
    let until = Instant::now() + pause;
    while !shared.stopping.load(Ordering::SeqCst) && Instant::now() < until {
        std::thread::sleep(LISTEN_SLICE.min(until - Instant::now()));
    }
}
