//! Background threads that run until told to stop: [`StoppableThread`]
//! (heartbeat, maintenance) and [`Service`], a stoppable thread with a
//! process row (dispatcher, scheduler running standalone). Start returns at
//! once; stop tells the loop, waits for it, then deregisters; stopping
//! twice, or dropping, is the same as stopping once. A service never stops
//! itself because the database is away: its loop backs off and carries on.

use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, bounded};

use super::{Registration, RegistrationSpec};
use crate::types::{Error, Result};

/// A thread whose body returns when its receiver gets a message or is
/// disconnected; stopping sends that message and joins the thread.
pub(crate) struct StoppableThread {
    stop: Sender<()>,
    thread: Option<JoinHandle<()>>,
}

impl StoppableThread {
    /// Runs `body` on a thread named `name`.
    pub(crate) fn spawn(
        name: &str,
        body: impl FnOnce(Receiver<()>) + Send + 'static,
    ) -> Result<StoppableThread> {
        let (stop, stopped) = bounded::<()>(1);
        StoppableThread::spawn_on(name, stop, stopped, body)
    }

    /// Runs `body` on a thread named `name`, stopped through `stop`.
    fn spawn_on(
        name: &str,
        stop: Sender<()>,
        stopped: Receiver<()>,
        body: impl FnOnce(Receiver<()>) + Send + 'static,
    ) -> Result<StoppableThread> {
        let thread = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || body(stopped))
            .map_err(|source| Error::Thread {
                name: name.to_string(),
                source,
            })?;
        Ok(StoppableThread {
            stop,
            thread: Some(thread),
        })
    }

    /// Tells the body to return and waits for it. Idempotent.
    pub(crate) fn stop(&mut self) {
        let _ = self.stop.try_send(());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for StoppableThread {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A running service.
pub(crate) struct Service {
    thread: StoppableThread,
    registration: Option<Registration>,
    /// Disconnected when the loop has returned.
    done: Receiver<()>,
}

impl Service {
    /// Registers `registration` (if any), then runs `body` on a thread
    /// named `name`, as [`StoppableThread::spawn`].
    pub(crate) fn spawn(
        name: &str,
        registration: Option<RegistrationSpec>,
        body: impl FnOnce(Receiver<()>) + Send + 'static,
    ) -> Result<Service> {
        let (stop, stopped) = bounded::<()>(1);
        let registration = registration.map(Registration::start).transpose()?;
        let (done_tx, done) = bounded::<()>(0);
        let thread = StoppableThread::spawn_on(name, stop, stopped, move |stopped| {
            body(stopped);
            drop(done_tx);
        })?;
        Ok(Service {
            thread,
            registration,
            done,
        })
    }

    /// Its registration, when it has a row of its own.
    pub(crate) fn registration(&self) -> Option<&Registration> {
        self.registration.as_ref()
    }

    /// Disconnected once the loop has returned (told to stop, or stopped
    /// itself).
    pub(crate) fn done(&self) -> &Receiver<()> {
        &self.done
    }

    /// Stops the loop, waits for it, and deregisters. Idempotent.
    pub(crate) fn stop(&mut self) -> Result<()> {
        self.thread.stop();
        if let Some(mut registration) = self.registration.take() {
            registration.stop();
        }
        Ok(())
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}
