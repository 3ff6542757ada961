//! In-process wake-ups: an enqueue (or a dispatch) in this process wakes the
//! workers of this process that use the same database at once, without a
//! round trip through the database. Cross-process wake-ups are the
//! backends' business (LISTEN/NOTIFY on PostgreSQL).

use std::collections::HashMap;
use std::sync::Mutex;

use crossbeam_channel::Sender;

static LOCAL: Mutex<Option<HashMap<String, Vec<Sender<()>>>>> = Mutex::new(None);

/// Subscribes `wake` to jobs becoming ready on the database `url`.
/// A `bounded(1)` sender is expected: wake-ups coalesce.
pub(crate) fn subscribe(url: &str, wake: Sender<()>) {
    let mut map = LOCAL.lock().unwrap_or_else(|p| p.into_inner());
    let map = map.get_or_insert_with(HashMap::new);
    map.entry(url.to_string()).or_default().push(wake);
}

/// Wakes every subscriber of `url`, dropping those whose worker is gone.
pub(crate) fn wake(url: &str) {
    let mut map = LOCAL.lock().unwrap_or_else(|p| p.into_inner());
    let Some(subscribers) = map.as_mut().and_then(|m| m.get_mut(url)) else {
        return;
    };
    subscribers.retain(|s| {
        !matches!(
            s.try_send(()),
            Err(crossbeam_channel::TrySendError::Disconnected(_))
        )
    });
}
