//! A started supervisor: the thread that watches its children and the
//! handle that stops it. Everything the loop needs was started by
//! [`Supervisor::start`](super::Supervisor::start) (registration,
//! heartbeat, dispatcher, scheduler, maintenance); the loop spawns and
//! reaps the children, and its shutdown sequence stops them and then
//! everything else, in reverse order.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, bounded};

use super::TICK;
use super::children::Children;
use crate::config::SHUTDOWN_MARGIN;
use crate::config::SupervisorConfig;
use crate::dispatcher::DispatcherHandle;
use crate::events::{Events, PruneReason};
use crate::lifecycle::{PruneTarget, ReleaseReason};
use crate::maintenance::{Maintenance, report_pruned};
use crate::process::Registration;
use crate::scheduler::SchedulerHandle;
use crate::store::Store;
use crate::types::{Error, Result};

/// What the supervising thread owns.
pub(super) struct Running {
    pub config: SupervisorConfig,
    pub events: Arc<dyn Events>,
    pub store: Store,
    pub name: String,
    pub hostname: String,
    pub registration: Registration,
    pub children: Children,
    pub dispatcher: DispatcherHandle,
    pub scheduler: Option<SchedulerHandle>,
    pub maintenance: Maintenance,
}

impl Running {
    /// Supervises on a new thread until told to stop (never because the
    /// database is away); then shuts down.
    pub(super) fn spawn(self) -> Result<SupervisorHandle> {
        let (stop, stopped) = bounded::<()>(1);
        let (finished_tx, finished) = bounded::<()>(1);
        let own_id = Arc::clone(self.registration.id());
        // The children are spawned by this thread: their parent-death
        // signal fires when it ends, which is after it stopped them.
        let thread = std::thread::Builder::new()
            .name("solidq-supervisor".into())
            .spawn(move || {
                let result = self.supervise(&stopped);
                let _ = finished_tx.send(());
                result
            })
            .map_err(|source| Error::Thread {
                name: "solidq-supervisor".into(),
                source,
            })?;
        Ok(SupervisorHandle {
            stop,
            thread: Some(thread),
            finished,
            own_id,
        })
    }

    fn supervise(mut self, stopped: &Receiver<()>) -> Result<()> {
        let mut children = std::mem::take(&mut self.children);
        loop {
            children.start_due();
            match stopped.recv_timeout(TICK) {
                // A message, or the handle gone: stop either way.
                Ok(()) | Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
            }
            for exited in children.reap(true) {
                self.recover(
                    &children,
                    exited.pid,
                    PruneReason::Exited,
                    Some(&exited.how),
                );
            }
        }
        self.shut_down(&mut children);
        Ok(())
    }

    /// SIGTERM to the children, wait for them within the grace period,
    /// SIGKILL the rest and release their claims; then stop the loops and
    /// deregister.
    fn shut_down(self, children: &mut Children) {
        let running = children.running();
        let patience = self.config.shutdown_timeout + SHUTDOWN_MARGIN;
        log::info!(
            "supervisor stopping: SIGTERM to {} workers, waiting up to {patience:?}",
            running.len()
        );
        children.signal_all(libc::SIGTERM);
        let deadline = Instant::now() + patience;
        while !children.running().is_empty() && Instant::now() < deadline {
            std::thread::sleep(TICK);
            for exited in children.reap(false) {
                self.recover(children, exited.pid, PruneReason::Exited, Some(&exited.how));
            }
        }
        for pid in children.kill_all() {
            log::warn!("worker pid {pid} was still running {patience:?} after SIGTERM: killed it");
            self.recover(children, pid, PruneReason::KilledAtShutdown, None);
        }
        let Running {
            name,
            mut registration,
            dispatcher,
            scheduler,
            mut maintenance,
            ..
        } = self;
        if let Some(scheduler) = scheduler {
            let _ = scheduler.stop();
        }
        let _ = dispatcher.stop();
        maintenance.stop();
        // Stops the heartbeat, then deregisters.
        registration.stop();
        log::info!("supervisor {name} stopped");
    }

    /// Prunes the rows of exited child `pid` at once, releasing its jobs;
    /// `how` it ended goes into the stall of each job it was running.
    fn recover(&self, children: &Children, pid: u32, reason: PruneReason, how: Option<&str>) {
        let release = match reason {
            PruneReason::KilledAtShutdown => ReleaseReason::Killed,
            _ => ReleaseReason::Died {
                default_max_stalled: self.config.max_stalled_count,
                cause: Some(match how {
                    Some(how) => format!("pid {pid} {how}"),
                    None => format!("pid {pid} ended"),
                }),
            },
        };
        let target = PruneTarget::Pid {
            hostname: &self.hostname,
            pid: pid as i32,
            supervisor_id: children.supervisor_id(),
        };
        match self.store.process_prune(target, &release) {
            Ok(pruned) => report_pruned(&pruned, reason, self.events.as_ref()),
            Err(error) => log::error!(
                "cannot release the jobs of exited worker pid {pid} ({error}); they will be released when its heartbeat expires"
            ),
        }
    }
}

/// A started [`Supervisor`](super::Supervisor). Dropping it stops it;
/// [`SupervisorHandle::stop`] does so and reports how it went.
pub struct SupervisorHandle {
    stop: Sender<()>,
    thread: Option<JoinHandle<Result<()>>>,
    finished: Receiver<()>,
    own_id: Arc<AtomicI64>,
}

impl SupervisorHandle {
    /// The id of the supervisor's process row.
    pub fn process_id(&self) -> i64 {
        self.own_id.load(Ordering::SeqCst)
    }

    /// Starts a graceful stop without waiting for it.
    pub fn request_stop(&self) {
        let _ = self.stop.try_send(());
    }

    /// Stops gracefully and waits until done: SIGTERM to the worker
    /// processes, wait for them (`shutdown_timeout` plus
    /// [`SHUTDOWN_MARGIN`](crate::config::SHUTDOWN_MARGIN)), SIGKILL the rest and
    /// release their jobs, stop the dispatcher and scheduler, deregister.
    /// Stopping a supervisor that stopped already does nothing more.
    pub fn stop(mut self) -> Result<()> {
        self.stop_and_wait()
    }

    fn stop_and_wait(&mut self) -> Result<()> {
        self.request_stop();
        match self.thread.take() {
            Some(thread) => thread.join().unwrap_or_else(|_| {
                Err(Error::Thread {
                    name: "solidq-supervisor".into(),
                    source: std::io::Error::other("the supervisor thread panicked"),
                })
            }),
            None => Ok(()),
        }
    }

    /// Receives a message when the supervisor has stopped on its own.
    pub(crate) fn finished(&self) -> &Receiver<()> {
        &self.finished
    }
}

impl Drop for SupervisorHandle {
    fn drop(&mut self) {
        if self.thread.is_some() {
            log::debug!("supervisor handle dropped while running; stopping it");
            let _ = self.stop_and_wait();
        }
    }
}
