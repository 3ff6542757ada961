//! In-process wake-ups: an enqueue (or a dispatch) in this process wakes the
//! workers of this process that use the same database at once, without a
//! round trip through the database. Cross-process wake-ups are the
//! backends' business (LISTEN/NOTIFY on PostgreSQL).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_channel::Sender;

/// What a worker hears of new jobs, which decides whether an in-process
/// wake-up reaches it.
#[derive(Debug)]
pub(crate) struct Reach {
    /// It acts on new jobs: it holds the duty, or has none (a worker that
    /// does not hold it leaves new jobs to the one that does:
    /// `worker/duty.rs`).
    pub acting: AtomicBool,
    /// A listener wakes it for new jobs (idle polling is then a safety
    /// net only).
    pub listening: AtomicBool,
    /// Its listener hears this process's enqueues as it hears anyone's
    /// (PostgreSQL's notifications): a wake-up here too would cost a second
    /// claim per job.
    hears_own: bool,
}

impl Reach {
    pub(crate) fn new(hears_own: bool) -> Reach {
        Reach {
            acting: AtomicBool::new(true),
            listening: AtomicBool::new(false),
            hears_own,
        }
    }

    fn reached(&self) -> bool {
        self.acting.load(Ordering::SeqCst)
            && !(self.hears_own && self.listening.load(Ordering::SeqCst))
    }
}

type Subscriber = (Sender<()>, Arc<Reach>);

static LOCAL: Mutex<Option<HashMap<String, Vec<Subscriber>>>> = Mutex::new(None);

/// Subscribes `wake` to jobs becoming ready on the database `url`, when
/// `reach` says so. A `bounded(1)` sender is expected: wake-ups coalesce.
pub(crate) fn subscribe(url: &str, wake: Sender<()>, reach: Arc<Reach>) {
    let mut map = LOCAL.lock().unwrap_or_else(|p| p.into_inner());
    let map = map.get_or_insert_with(HashMap::new);
    map.entry(url.to_string()).or_default().push((wake, reach));
}

/// Wakes every subscriber of `url` that this reaches, dropping those whose
/// worker is gone.
pub(crate) fn wake(url: &str) {
    let mut map = LOCAL.lock().unwrap_or_else(|p| p.into_inner());
    let Some(subscribers) = map.as_mut().and_then(|m| m.get_mut(url)) else {
        return;
    };
    subscribers.retain(|(wake, reach)| {
        // A stopped worker is reached again (its duty thread and its
        // listener end so), and is dropped at the next wake-up.
        if !reach.reached() {
            return true;
        }
        !matches!(
            wake.try_send(()),
            Err(crossbeam_channel::TrySendError::Disconnected(_))
        )
    });
}
