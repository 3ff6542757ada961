//! What every long-running process shares: a row in `solidq_processes`
//! (register, heartbeat, deregister), signal handling, and how it names
//! itself.

pub(crate) mod heartbeat;
mod identity;
mod registration;
mod service;
mod signals;
pub(crate) mod wakeups;

pub use identity::{ProcessIdentity, process_identity};
pub(crate) use identity::{describe_self, operator};
pub(crate) use registration::{Registration, RegistrationSpec};
pub(crate) use service::{Service, StoppableThread};
pub(crate) use signals::subscribe as subscribe_signals;
pub use signals::{install_signal_handlers, signal_received};

use crate::events::{Events, ProcessRegistered};
use crate::store::{NewProcess, Store};
use crate::types::Result;

/// The kinds of process rows solidq writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProcessKind {
    Worker,
    Dispatcher,
    Scheduler,
    Supervisor,
}

impl ProcessKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ProcessKind::Worker => "worker",
            ProcessKind::Dispatcher => "dispatcher",
            ProcessKind::Scheduler => "scheduler",
            ProcessKind::Supervisor => "supervisor",
        }
    }
}

/// The facts a process row records about this OS process.
pub(crate) fn describe(
    kind: ProcessKind,
    name: Option<&str>,
    supervisor_id: Option<i64>,
    metadata: serde_json::Value,
) -> NewProcess {
    NewProcess {
        kind: kind.as_str().to_string(),
        name: name.map_or_else(
            || format!("{}-{:012x}", kind.as_str(), fastrand::u64(..) >> 16),
            str::to_string,
        ),
        pid: std::process::id() as i32,
        hostname: gethostname::gethostname().to_string_lossy().into_owned(),
        supervisor_id,
        metadata: metadata.to_string(),
    }
}

/// Registers `process` and tells `events`; on a name clash (a restarted
/// process reusing an explicit name whose old row is still there) a random
/// suffix is added.
pub(crate) fn register(store: &Store, process: &NewProcess, events: &dyn Events) -> Result<i64> {
    let mut row = std::borrow::Cow::Borrowed(process);
    let id = match store.process_register(process) {
        Ok(id) => id,
        Err(e) if is_unique_violation(&e) => {
            let renamed = row.to_mut();
            renamed.name = format!("{}-{:06x}", process.name, fastrand::u32(..) >> 8);
            store.process_register(renamed)?
        }
        Err(e) => return Err(e),
    };
    let renamed_from = (row.name != process.name).then_some(process.name.as_str());
    identity::adopt(&row.kind, &row.name, renamed_from);
    events.process_registered(&ProcessRegistered {
        process_id: id,
        kind: row.kind.clone(),
        name: row.name.clone(),
        pid: row.pid,
        hostname: row.hostname.clone(),
        supervisor_id: row.supervisor_id,
    });
    Ok(id)
}

fn is_unique_violation(error: &crate::Error) -> bool {
    matches!(error, crate::Error::Database { .. })
        && error.kind() == crate::types::ErrorKind::UniqueViolation
}
