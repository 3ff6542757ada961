//! One wake-up per job: of the workers serving the same queue list, one at
//! a time acts on new-job notifications (PostgreSQL).
//!
//! Every listening worker hears every notification; if each claimed on
//! it, a job would cost one claim per idle worker process (about 20 per
//! job with 32 idle workers, docs/fleet.md). Instead a worker acts on what
//! it hears only while it holds the duty: a session advisory lock named
//! by its schema and queue list, on a connection of its own. A worker that
//! has idle threads and no backlog (its last claim came back short) gets
//! in line for the lock; the server grants it to one waiter at a time, in
//! the order they asked. The holder claims at once when it gets it (for
//! jobs heard of while nobody held it), then on every notification; when
//! it no longer has room (a claim filled its threads: it claims again by
//! itself as they free up), it lets the lock go to the next in line.
//!
//! Nothing is lost if the duty goes wrong: every worker still polls every
//! `fallback_polling_interval`, and a worker without a working duty
//! session (not PostgreSQL, `listen=false`, `wake_all`, PostgreSQL before
//! 14, the session broken) acts on every notification, as before. A holder
//! that freezes sends nothing: the server ends its session after
//! [`DUTY_LEASE`] of silence (`idle_session_timeout`) and the next in line
//! takes over; one that dies frees the lock with its session.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::poller::backoff;
use super::state::Shared;
use crate::store::{DUTY_LEASE, Duty};
use crate::types::{Error, Result};

/// How long the duty thread waits before looking again at whether the
/// worker stops (it is nudged when anything else changes).
const SLICE: Duration = Duration::from_millis(200);

/// How often a holder proves itself alive to the server: well inside
/// [`DUTY_LEASE`].
const PING: Duration = Duration::from_secs(1);

/// Starts the duty thread where the backend has a duty lock; elsewhere the
/// worker acts on every notification (`Shared::duty` starts that way).
pub(super) fn spawn(shared: &Arc<Shared>) -> Result<Option<JoinHandle<()>>> {
    if shared.config.wake_all || !shared.store.url().listens() {
        return Ok(None);
    }
    let queues = shared.config.queues.join(",");
    // A first session, to learn whether there is a duty at all; an error
    // here (the database away) is retried in the thread.
    let first = match shared.store.duty(&queues) {
        Ok(None) => return Ok(None),
        Ok(Some(duty)) => Some(duty),
        Err(_) => None,
    };
    let shared = Arc::clone(shared);
    std::thread::Builder::new()
        .name("solidq-duty".into())
        .spawn(move || run(&shared, &queues, first))
        .map(Some)
        .map_err(|source| Error::Thread {
            name: "solidq-duty".into(),
            source,
        })
}

fn run(shared: &Shared, queues: &str, mut session: Option<Box<dyn Duty>>) {
    let duty = &shared.duty;
    let mut failures = 0u32;
    let mut opened_at = shared.store.read_only_seen();
    // Whether the lock is held, asked for, or neither.
    let mut held = false;
    let mut asked = false;
    let mut last_sent = Instant::now();
    if session.is_some() {
        set_acting(shared, false);
    }
    while !shared.stopping.load(Ordering::SeqCst) {
        if session.is_some() && shared.store.read_only_seen() != opened_at {
            // A failover: take the duty on the server that writes now.
            session = None;
        }
        let Some(active) = session.as_mut() else {
            // No duty session: act on everything heard, as before.
            held = false;
            asked = false;
            set_acting(shared, true);
            let seen = shared.store.read_only_seen();
            match shared.store.duty(queues) {
                Ok(Some(opened)) => {
                    session = Some(opened);
                    opened_at = seen;
                    failures = 0;
                    set_acting(shared, false);
                }
                Ok(None) => return,
                Err(error) => {
                    failures += 1;
                    let pause = backoff(Duration::from_millis(500), failures);
                    if failures == 1 || failures.is_multiple_of(10) {
                        log::info!(
                            "cannot open the duty session ({error}); acting on every notification meanwhile, retrying in {pause:?}"
                        );
                    }
                    duty.wait(pause);
                }
            }
            continue;
        };
        let wanted = duty.wanted.load(Ordering::SeqCst);
        let step = if held && !wanted {
            // No room (or no claims) here: the next in line acts.
            active.release().map(|()| {
                held = false;
                set_acting(shared, false);
            })
        } else if held {
            duty.wait(PING.saturating_sub(last_sent.elapsed()));
            if last_sent.elapsed() >= PING {
                last_sent = Instant::now();
                active.ping()
            } else {
                Ok(())
            }
        } else if asked {
            active.granted(SLICE).map(|granted| {
                if granted {
                    asked = false;
                    held = true;
                    last_sent = Instant::now();
                    log::debug!("holding the duty: acting on new-job notifications");
                    set_acting(shared, true);
                }
            })
        } else if wanted {
            active.ask().map(|()| asked = true)
        } else {
            duty.wait(SLICE);
            Ok(())
        };
        if let Err(error) = step {
            log::info!(
                "the duty session broke ({error}); acting on every notification until it is back"
            );
            session = None;
        }
    }
    // Dropping the session (cancelling a wait) lets the lock go at once.
    drop(session);
    set_acting(shared, true);
}

/// Sets whether this worker acts on notifications; becoming a worker that
/// does, it claims at once from every queue, for jobs heard of while it
/// did not.
fn set_acting(shared: &Shared, acting: bool) {
    if !shared.reach.acting.swap(acting, Ordering::SeqCst) && acting {
        shared.heard_from.store(0, Ordering::SeqCst);
        let _ = shared.wake.try_send(());
    }
}

impl super::state::DutyState {
    /// Waits up to `pause` or until nudged.
    fn wait(&self, pause: Duration) {
        let _ = self.nudge_rx.recv_timeout(pause);
    }
}

// The holder's lease and the ping interval must leave room for a slow
// ping.
const _: () = assert!(PING.as_millis() * 2 < DUTY_LEASE.as_millis());
