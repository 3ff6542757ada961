//! The process row of a supervisor, or of a dispatcher or scheduler run on
//! its own: registered when it starts, registered again if a peer prunes
//! it while it is alive, heartbeated (earning its [`Lease`]), and
//! deregistered when it stops. Heartbeats failing past the alive threshold
//! call the owner's `on_lost`: the process must stop.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use super::heartbeat::{self, Beat, Heartbeat, Lease};
use super::register;
use crate::events::Events;
use crate::store::{NewProcess, ReleaseReason, Store};
use crate::types::{Error, Result};

/// What to register and how to heartbeat it.
pub(crate) struct RegistrationSpec {
    pub store: Store,
    pub row: NewProcess,
    pub interval: Duration,
    pub threshold: Duration,
    pub events: Arc<dyn Events>,
}

/// A registered process row.
pub(crate) struct Registration {
    store: Store,
    id: Arc<AtomicI64>,
    lease: Arc<Lease>,
    heartbeat: Option<Heartbeat>,
    kind: String,
}

impl Registration {
    /// Registers `spec.row` and heartbeats it every interval; each
    /// registration is reported to the events. `on_lost` is called (from
    /// the heartbeat thread) when heartbeats have failed past the alive
    /// threshold.
    pub(crate) fn start(
        spec: RegistrationSpec,
        on_lost: impl Fn(Error) + Send + 'static,
    ) -> Result<Registration> {
        let RegistrationSpec {
            store,
            row,
            interval,
            threshold,
            events,
        } = spec;
        let sent = Instant::now();
        let id = Arc::new(AtomicI64::new(register(&store, &row, events.as_ref())?));
        let lease = Arc::new(Lease::new(sent, threshold, interval));
        let kind = row.kind.clone();
        let again = store.clone();
        let current = Arc::clone(&id);
        let renewed = Arc::clone(&lease);
        let heartbeat = heartbeat::spawn(
            &format!("solidq-{kind}-heartbeat"),
            store.clone(),
            interval,
            Arc::clone(&lease),
            Arc::clone(&id),
            move |beat| match beat {
                Beat::Alive => {}
                Beat::RowGone(old) => {
                    log::warn!(
                        "{} {}: process row {old} was pruned while alive; registering again",
                        row.kind,
                        row.name
                    );
                    // The heartbeat and the deregistration follow the new
                    // row; otherwise every beat would find the old one gone
                    // and register yet another.
                    let sent = Instant::now();
                    match register(&again, &row, events.as_ref()) {
                        Ok(new) => {
                            current.store(new, Ordering::SeqCst);
                            renewed.renew(sent);
                        }
                        Err(e) => log::warn!("{} cannot register again: {e}", row.kind),
                    }
                }
                Beat::Lost(error) => on_lost(error),
            },
        )?;
        Ok(Registration {
            store,
            id,
            lease,
            heartbeat: Some(heartbeat),
            kind,
        })
    }

    /// The current row id (it changes when the row is registered again).
    pub(crate) fn id(&self) -> &Arc<AtomicI64> {
        &self.id
    }

    /// What its heartbeats prove.
    pub(crate) fn lease(&self) -> &Arc<Lease> {
        &self.lease
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
            log::warn!("{} cannot deregister process {id}: {e}", self.kind);
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.stop();
    }
}
