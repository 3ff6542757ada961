//! Which OS process this is, for every log line: the kind and name of the
//! first process row registered in it (a worker, a supervisor, or a
//! dispatcher or scheduler run on its own), and its pid. The services a
//! process embeds (a worker's dispatcher, a supervisor's scheduler) have
//! no row of their own and speak under the process's identity; their log
//! lines name themselves by their target (module) and thread.

use std::fmt;
use std::sync::RwLock;

/// The process row this OS process registered first; see
/// [`process_identity`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProcessIdentity {
    /// `worker`, `dispatcher`, `scheduler` or `supervisor`.
    pub kind: String,
    /// The row's name (`worker-1f2e3d…` unless one was given).
    pub name: String,
    /// This OS process's id.
    pub pid: u32,
}

impl fmt::Display for ProcessIdentity {
    /// `worker worker-1f2e3d4c5b6a (pid 4242)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} (pid {})", self.kind, self.name, self.pid)
    }
}

static IDENTITY: RwLock<Option<(String, String)>> = RwLock::new(None);

/// The kind and name of the first process row this OS process registered
/// (kept when that row is registered again), with the pid; `None` before
/// any registration. `solidq::logging` prints it on every line;
/// a logger of your own can too.
pub fn process_identity() -> Option<ProcessIdentity> {
    let identity = IDENTITY.read().unwrap_or_else(|p| p.into_inner());
    identity.as_ref().map(|(kind, name)| ProcessIdentity {
        kind: kind.clone(),
        name: name.clone(),
        pid: std::process::id(),
    })
}

/// The identity as words for a log message: `worker worker-… (pid 42)`,
/// or `pid 42` before any registration.
pub(crate) fn describe_self() -> String {
    match process_identity() {
        Some(identity) => identity.to_string(),
        None => format!("pid {}", std::process::id()),
    }
}

/// A row of `kind` named `name` was registered: it becomes the identity
/// unless one is set already. `renamed_from`: the name it was registered
/// under before a name clash renamed it, which the identity follows.
pub(crate) fn adopt(kind: &str, name: &str, renamed_from: Option<&str>) {
    let mut identity = IDENTITY.write().unwrap_or_else(|p| p.into_inner());
    match identity.as_mut() {
        None => *identity = Some((kind.to_string(), name.to_string())),
        Some((k, n)) if k == kind && Some(n.as_str()) == renamed_from => *n = name.to_string(),
        Some(_) => {}
    }
}

/// Who runs this OS process, as the audit log names an operator acting
/// from this host: `$USER@hostname` (`$LOGNAME` when `USER` is unset or
/// empty, else `uid <n>`).
pub(crate) fn operator() -> String {
    let user = ["USER", "LOGNAME"]
        .iter()
        .filter_map(|var| std::env::var(var).ok())
        .map(|name| name.trim().to_string())
        .find(|name| !name.is_empty())
        // SAFETY: getuid has no preconditions and cannot fail.
        .unwrap_or_else(|| format!("uid {}", unsafe { libc::getuid() }));
    let host = gethostname::gethostname().to_string_lossy().into_owned();
    format!("{user}@{host}")
}
