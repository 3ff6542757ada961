//! The process row of a standalone service (a dispatcher or scheduler run
//! on its own): registered when it starts, registered again if a peer
//! prunes it while it is alive, heartbeated, and deregistered when it stops.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use super::heartbeat::{self, Beat, Heartbeat};
use super::{ProcessKind, describe, register};
use crate::config::DEFAULT_PROCESS_ALIVE_THRESHOLD;
use crate::events::Events;
use crate::store::{ReleaseReason, Store};
use crate::types::Result;

/// A registered standalone service.
pub(crate) struct Registration {
    store: Store,
    id: Arc<AtomicI64>,
    heartbeat: Option<Heartbeat>,
    kind: ProcessKind,
}

impl Registration {
    /// Registers a `kind` row with `metadata` and heartbeats it every
    /// `interval`; each registration is reported to `events`.
    pub(crate) fn start(
        store: &Store,
        kind: ProcessKind,
        metadata: serde_json::Value,
        interval: Duration,
        events: Arc<dyn Events>,
    ) -> Result<Registration> {
        let row = describe(kind, None, None, metadata);
        let id = Arc::new(AtomicI64::new(register(store, &row, events.as_ref())?));
        let again = store.clone();
        let current = Arc::clone(&id);
        let heartbeat = heartbeat::spawn(
            &format!("solidq-{}-heartbeat", kind.as_str()),
            store.clone(),
            interval,
            DEFAULT_PROCESS_ALIVE_THRESHOLD,
            Arc::clone(&id),
            move |beat| {
                if let Beat::RowGone(old) = beat {
                    log::warn!(
                        "{} {}: process row {old} was pruned; registering again",
                        kind.as_str(),
                        row.name
                    );
                    // The heartbeat and the deregistration follow the new
                    // row; otherwise every beat would find the old one gone
                    // and register yet another.
                    match register(&again, &row, events.as_ref()) {
                        Ok(new) => current.store(new, Ordering::SeqCst),
                        Err(e) => log::warn!("{} cannot register again: {e}", kind.as_str()),
                    }
                }
            },
        )?;
        Ok(Registration {
            store: store.clone(),
            id,
            heartbeat: Some(heartbeat),
            kind,
        })
    }

    /// Stops the heartbeat and deletes the row. Idempotent.
    pub(crate) fn stop(&mut self) {
        let Some(mut heartbeat) = self.heartbeat.take() else {
            return;
        };
        heartbeat.stop();
        let id = self.id.load(Ordering::SeqCst);
        let reason = ReleaseReason::Shutdown { started: vec![] };
        if let Err(e) = self.store.process_deregister(id, &reason) {
            log::warn!("{} cannot deregister process {id}: {e}", self.kind.as_str());
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.stop();
    }
}
