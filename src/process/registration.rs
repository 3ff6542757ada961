//! The process row of a supervisor, or of a dispatcher or scheduler run on
//! its own: registered when it starts (or, if the database is away then,
//! as soon as it answers), registered again if a peer prunes it while it
//! is alive, heartbeated (earning its [`Lease`]), and deregistered when it
//! stops. Failing heartbeats never stop the process (see
//! [`heartbeat`](super::heartbeat)).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::heartbeat::{self, Beat, Heartbeat, Lease};
use super::register;
use crate::events::Events;
use crate::lifecycle::ReleaseReason;
use crate::store::{NewProcess, Store};
use crate::types::Result;

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
    /// registration is reported to the events. A database that is away
    /// (a transient error) does not fail the start: the row is registered
    /// by the heartbeat thread once it answers.
    pub(crate) fn start(spec: RegistrationSpec) -> Result<Registration> {
        let RegistrationSpec {
            store,
            row,
            interval,
            threshold,
            events,
        } = spec;
        let sent = Instant::now();
        let lease = Arc::new(Lease::new(sent, threshold, interval));
        let first = match register(&store, &row, events.as_ref()) {
            Ok(id) => id,
            Err(error) if error.is_transient() => {
                lease.revoke();
                log::warn!(
                    "{} {} cannot register yet ({error}); it registers when the database answers",
                    row.kind,
                    row.name
                );
                0
            }
            Err(error) => return Err(error),
        };
        let id = Arc::new(AtomicI64::new(first));
        let kind = row.kind.clone();
        let again = store.clone();
        let current = Arc::clone(&id);
        let renewed = Arc::clone(&lease);
        let tries = AtomicU32::new(0);
        let heartbeat = heartbeat::spawn(
            &format!("solidq-{kind}-heartbeat"),
            store.clone(),
            interval,
            Arc::clone(&lease),
            Arc::clone(&id),
            move |beat| {
                let old = match beat {
                    Beat::Alive { .. } => return,
                    Beat::RowGone(old) => {
                        log::warn!(
                            "{} {}: process row {old} was pruned while alive; registering again",
                            row.kind,
                            row.name
                        );
                        // The heartbeat and the deregistration follow the new
                        // row; otherwise every beat would find the old one
                        // gone and register yet another.
                        current.store(0, Ordering::SeqCst);
                        Some(old)
                    }
                    Beat::Unregistered => None,
                };
                let sent = Instant::now();
                match register(&again, &row, events.as_ref()) {
                    Ok(new) => {
                        current.store(new, Ordering::SeqCst);
                        renewed.renew(sent);
                        tries.store(0, Ordering::SeqCst);
                        if old.is_none() {
                            log::info!("{} {} registered as process {new}", row.kind, row.name);
                        }
                    }
                    Err(e) => {
                        if tries.fetch_add(1, Ordering::SeqCst).is_multiple_of(10) {
                            log::warn!(
                                "{} {} cannot register yet: {e}; retrying",
                                row.kind,
                                row.name
                            );
                        }
                    }
                }
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
        if id == 0 {
            return;
        }
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
