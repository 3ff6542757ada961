//! SIGTERM and SIGINT, installed once per process and broadcast to every
//! loop that subscribed. Installing is the first thing a `run()` does, and
//! a signal that arrived before a loop subscribed is not lost: subscribing
//! after it reports it at once (SolidQueue #755, a TERM during boot).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use crossbeam_channel::{Receiver, Sender, bounded};

use crate::types::Result;

static RECEIVED: AtomicBool = AtomicBool::new(false);
static SUBSCRIBERS: Mutex<Vec<Sender<()>>> = Mutex::new(Vec::new());
static INSTALLED: OnceLock<std::result::Result<(), String>> = OnceLock::new();

/// Installs solidq's SIGTERM/SIGINT handler (idempotent). `Worker::run` calls
/// it first thing; call it yourself at the top of `main` to cover the time
/// before (connecting, migrating). A signal then starts a graceful shutdown
/// of every solidq loop in the process instead of killing it.
pub fn install_signal_handlers() -> Result<()> {
    let outcome = INSTALLED.get_or_init(|| {
        ctrlc::set_handler(|| {
            let first = !RECEIVED.swap(true, Ordering::SeqCst);
            // One handler per OS process: it speaks for the process, and
            // says which, so the lines of several processes sharing one
            // stderr (a supervisor's children) can be told apart.
            let me = super::describe_self();
            if first {
                log::info!("{me} received SIGTERM/SIGINT: shutting down gracefully");
            } else {
                log::info!("{me} received another SIGTERM/SIGINT: already shutting down");
            }
            let subscribers = SUBSCRIBERS.lock().unwrap_or_else(|p| p.into_inner());
            for s in subscribers.iter() {
                let _ = s.try_send(());
            }
        })
        .map_err(|e| e.to_string())
    });
    match outcome {
        Ok(()) => Ok(()),
        Err(message) => Err(crate::Error::Signals(message.clone().into())),
    }
}

/// Whether SIGTERM or SIGINT has arrived since the handler was installed.
pub fn signal_received() -> bool {
    RECEIVED.load(Ordering::SeqCst)
}

/// A channel that receives one message when a signal arrives (at once if
/// one already has).
pub(crate) fn subscribe() -> Receiver<()> {
    let (tx, rx) = bounded(1);
    if signal_received() {
        let _ = tx.try_send(());
    }
    let mut subscribers = SUBSCRIBERS.lock().unwrap_or_else(|p| p.into_inner());
    subscribers.push(tx);
    rx
}
