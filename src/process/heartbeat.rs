//! The heartbeat thread every registered process runs. It writes the
//! database's "now" into the process row every interval and reports what it
//! found: the row gone (this process was pruned while alive), or heartbeats
//! failing for longer than the alive threshold (peers now consider this
//! process dead, so it must stop and let a fresh one take over).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use super::StoppableThread;
use crate::store::Store;
use crate::types::{Error, Result};

/// What one heartbeat tick found.
pub(crate) enum Beat {
    /// Written.
    Alive,
    /// The row `id` no longer exists.
    RowGone(i64),
    /// Heartbeats have failed for longer than the alive threshold.
    Lost(Error),
}

/// A running heartbeat thread; stopping it joins it.
pub(crate) type Heartbeat = StoppableThread;

/// Beats for the process whose id `id` holds (0 means "not registered":
/// skip) every `interval`, calling `on_beat` after each attempt.
pub(crate) fn spawn(
    name: &str,
    store: Store,
    interval: Duration,
    alive_threshold: Duration,
    id: Arc<AtomicI64>,
    on_beat: impl Fn(Beat) + Send + 'static,
) -> Result<Heartbeat> {
    StoppableThread::spawn(name, move |stopped| {
        let mut last_ok = Instant::now();
        while let Err(crossbeam_channel::RecvTimeoutError::Timeout) = stopped.recv_timeout(interval)
        {
            let current = id.load(Ordering::SeqCst);
            if current == 0 {
                last_ok = Instant::now();
                continue;
            }
            match store.process_heartbeat(current) {
                Ok(true) => {
                    last_ok = Instant::now();
                    on_beat(Beat::Alive);
                }
                Ok(false) => {
                    last_ok = Instant::now();
                    on_beat(Beat::RowGone(current));
                }
                Err(error) => {
                    let elapsed = last_ok.elapsed();
                    log::warn!(
                        "heartbeat of process {current} failed ({elapsed:?} since the last good one): {error}"
                    );
                    if elapsed > alive_threshold {
                        on_beat(Beat::Lost(Error::HeartbeatLost {
                            elapsed,
                            threshold: alive_threshold,
                            source: Box::new(error),
                        }));
                    }
                }
            }
        }
    })
}
