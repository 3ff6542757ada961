//! Notifications for jobs enqueued through a queue's own connections
//! (PostgreSQL). PostgreSQL serializes the commits of every transaction
//! that sent a NOTIFY (one database-wide lock, held through the commit's WAL
//! flush), so a NOTIFY inside each enqueue capped enqueue throughput at one
//! commit at a time, however many threads enqueued. Instead the enqueue
//! commits without one, and this thread sends one NOTIFY per round trip for
//! every queue that got jobs meanwhile, from its own connection: enqueues
//! never wait for it, and under load one notification covers many jobs.
//! Enqueues on the caller's own connection (`enqueue_on`) still notify in
//! their transaction, the only way to fire at the caller's commit.

use std::collections::BTreeSet;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, unbounded};

use super::{AnyConnection, DEFAULT_SQLITE_BUSY_TIMEOUT, DatabaseUrl, driver};

/// A running notifier thread; it ends when the last sender is dropped.
pub(crate) struct Notifier {
    tx: Sender<Vec<String>>,
}

impl Notifier {
    pub(crate) fn start(url: DatabaseUrl) -> Notifier {
        let (tx, rx) = unbounded();
        let spawned = std::thread::Builder::new()
            .name("solidq-notifier".into())
            .spawn(move || run(&url, &rx));
        if let Err(error) = spawned {
            log::warn!(
                "cannot start the notifier thread ({error}); workers will find new jobs by polling"
            );
        }
        Notifier { tx }
    }

    /// Asks for listeners of `queues` to be told, soon.
    pub(crate) fn ready(&self, queues: Vec<String>) {
        let _ = self.tx.send(queues);
    }
}

fn run(url: &DatabaseUrl, rx: &Receiver<Vec<String>>) {
    let mut conn: Option<AnyConnection> = None;
    while let Ok(first) = rx.recv() {
        let mut queues: BTreeSet<String> = first.into_iter().collect();
        while let Ok(more) = rx.try_recv() {
            queues.extend(more);
        }
        let queues: Vec<String> = queues.into_iter().collect();
        // Two tries: the first on a connection that may have died.
        for attempt in 0..2 {
            if conn.is_none() {
                match url.establish(DEFAULT_SQLITE_BUSY_TIMEOUT) {
                    Ok(c) => conn = Some(c),
                    Err(error) => {
                        log::warn!(
                            "notifier cannot connect ({error}); workers will find the jobs by polling"
                        );
                        std::thread::sleep(Duration::from_millis(100));
                        break;
                    }
                }
            }
            let Some(c) = conn.as_mut() else { break };
            match driver(c).notify_ready(&queues) {
                Ok(()) => break,
                Err(error) => {
                    conn = None;
                    if attempt == 1 {
                        log::warn!(
                            "cannot notify workers of {queues:?} ({error}); they will find the jobs by polling"
                        );
                    }
                }
            }
        }
    }
}
