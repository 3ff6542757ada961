//! A long-running service (dispatcher, scheduler): its loop thread and,
//! when it runs standalone, its process row. Start returns at once; stop
//! tells the loop, waits for it, then deregisters; stopping twice, or
//! dropping, is the same as stopping once.

use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, bounded};

use super::Registration;
use crate::error::{Error, Result};

/// A running service.
pub(crate) struct Service {
    stop: Sender<()>,
    thread: Option<JoinHandle<()>>,
    registration: Option<Registration>,
}

impl Service {
    /// Runs `body` on a thread named `name`; `body` returns when its
    /// receiver gets a message or is disconnected.
    pub(crate) fn spawn(
        name: &str,
        registration: Option<Registration>,
        body: impl FnOnce(Receiver<()>) + Send + 'static,
    ) -> Result<Service> {
        let (stop, stopped) = bounded::<()>(1);
        let thread = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || body(stopped))
            .map_err(|source| Error::Thread {
                name: name.to_string(),
                source,
            })?;
        Ok(Service {
            stop,
            thread: Some(thread),
            registration,
        })
    }

    /// Stops the loop, waits for it, and deregisters. Idempotent.
    pub(crate) fn stop(&mut self) {
        let _ = self.stop.try_send(());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        if let Some(mut registration) = self.registration.take() {
            registration.stop();
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.stop();
    }
}
