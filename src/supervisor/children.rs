//! The worker processes a supervisor spawns: one slot per configured
//! process, each restarted when its process exits: at once after a run of
//! at least `restart_backoff_window`, else (a crash loop: a bad deploy, a
//! broken environment) after a wait that doubles with each quick exit, up
//! to `restart_backoff_max`. The supervisor says so once per step of that
//! back-off, not at every restart; a run long enough resets it.

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use crate::config::{RESTART_BACKOFF_BASE, SupervisorConfig, WorkerGroup};
use crate::maintenance::Spare;
use crate::store::ProcessRow;

struct Slot {
    group: usize,
    index: usize,
    child: Option<Child>,
    started: Instant,
    young_deaths: u32,
    restart_at: Option<Instant>,
    /// The restart delay last announced: a restart with the same delay
    /// (at the cap) is logged at debug level only.
    announced: Option<Duration>,
}

/// A child that exited (its exit was logged).
pub(crate) struct Exited {
    pub pid: u32,
    /// How it ended: "was killed by signal 6 (SIGABRT) after 10.2s".
    pub how: String,
}

/// Every worker process of a supervisor.
#[derive(Default)]
pub(crate) struct Children {
    groups: Vec<WorkerGroup>,
    env: Vec<Vec<(String, String)>>,
    slots: Vec<Slot>,
    /// The supervisor row id the children were given.
    supervisor_id: i64,
    /// Pids of the running children, shared with the maintenance thread.
    live: Arc<Mutex<HashSet<u32>>>,
    /// A run shorter than this is a quick exit (`restart_backoff_window`).
    window: Duration,
    /// The longest restart delay (`restart_backoff_max`).
    max_delay: Duration,
}

impl Children {
    pub(crate) fn new(config: &SupervisorConfig, supervisor_id: i64) -> Children {
        let mut slots = Vec::new();
        for (group, g) in config.workers.iter().enumerate() {
            for index in 0..g.processes {
                slots.push(Slot {
                    group,
                    index,
                    child: None,
                    started: Instant::now(),
                    young_deaths: 0,
                    restart_at: Some(Instant::now()),
                    announced: None,
                });
            }
        }
        Children {
            groups: config.workers.clone(),
            env: config
                .workers
                .iter()
                .map(|g| config.child_env(g, supervisor_id))
                .collect(),
            slots,
            supervisor_id,
            live: Arc::default(),
            window: config.restart_backoff_window,
            max_delay: config.restart_backoff_max,
        }
    }

    /// The supervisor row id its children carry.
    pub(crate) fn supervisor_id(&self) -> i64 {
        self.supervisor_id
    }

    /// For maintenance: spares the rows of running children on `hostname`
    /// from pruning by heartbeat age (their pids are known alive), and
    /// SIGKILLs such a child whose heartbeat is stale (it is frozen or
    /// stuck): its exit is then reaped and its row pruned by pid.
    pub(crate) fn spare(&self, hostname: String) -> Spare {
        let live = Arc::clone(&self.live);
        let supervisor_id = self.supervisor_id;
        Arc::new(move |row: &ProcessRow| {
            let ours = row.hostname == hostname
                && row.supervisor_id == Some(supervisor_id)
                && u32::try_from(row.pid).is_ok_and(|pid| lock(&live).contains(&pid));
            if ours {
                log::warn!(
                    "worker process {} (pid {}) has not heartbeated since {} (database clock): killing it so its jobs are released and it is restarted",
                    row.id,
                    row.pid,
                    row.last_heartbeat_at
                );
                // SAFETY: plain kill(2) of our own running child.
                unsafe {
                    libc::kill(row.pid, libc::SIGKILL);
                }
            }
            ours
        })
    }

    fn label(&self, slot: &Slot) -> String {
        format!("workers[{}] #{}", slot.group, slot.index)
    }

    /// Starts every slot whose restart time has come.
    pub(crate) fn start_due(&mut self) {
        let now = Instant::now();
        for i in 0..self.slots.len() {
            if self.slots[i].child.is_none() && self.slots[i].restart_at.is_some_and(|t| t <= now) {
                self.spawn(i);
            }
        }
    }

    fn spawn(&mut self, i: usize) {
        let group = &self.groups[self.slots[i].group];
        let label = self.label(&self.slots[i]);
        let mut command = Command::new(&group.command[0]);
        command
            .args(&group.command[1..])
            .envs(self.env[self.slots[i].group].iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null());
        // Linux: if this thread (the supervisor's main loop) dies, even by
        // SIGKILL, the child gets SIGTERM and shuts down gracefully.
        #[cfg(target_os = "linux")]
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        let slot = &mut self.slots[i];
        slot.restart_at = None;
        match command.spawn() {
            Ok(child) => {
                log::info!("started {label} (pid {}): {:?}", child.id(), group.command);
                lock(&self.live).insert(child.id());
                slot.child = Some(child);
                slot.started = Instant::now();
            }
            Err(error) => {
                slot.young_deaths += 1;
                let delay = backoff(slot.young_deaths, self.max_delay);
                log::error!(
                    "cannot start {label} {:?}: {error}; retrying in {delay:?}",
                    group.command
                );
                slot.restart_at = Some(Instant::now() + delay);
            }
        }
    }

    /// Collects the children that exited and schedules their restart
    /// (unless `restart` is false, while stopping).
    pub(crate) fn reap(&mut self, restart: bool) -> Vec<Exited> {
        let mut exited = Vec::new();
        for i in 0..self.slots.len() {
            let label = self.label(&self.slots[i]);
            let slot = &mut self.slots[i];
            let Some(child) = slot.child.as_mut() else {
                continue;
            };
            let status = match child.try_wait() {
                Ok(Some(status)) => status,
                Ok(None) => continue,
                Err(error) => {
                    log::warn!("cannot check {label} (pid {}): {error}", child.id());
                    continue;
                }
            };
            let pid = child.id();
            slot.child = None;
            lock(&self.live).remove(&pid);
            let lifetime = slot.started.elapsed();
            if lifetime < self.window {
                slot.young_deaths += 1;
            } else {
                slot.young_deaths = 0;
                slot.announced = None;
            }
            if restart {
                let delay = if slot.young_deaths == 0 {
                    Duration::ZERO
                } else {
                    backoff(slot.young_deaths, self.max_delay)
                };
                slot.restart_at = Some(Instant::now() + delay);
                let how = describe(status);
                if slot.young_deaths == 0 {
                    log::warn!("{label} (pid {pid}) {how} after {lifetime:.1?}; restarting");
                } else if slot.announced != Some(delay) {
                    slot.announced = Some(delay);
                    let then = if delay == self.max_delay {
                        format!(
                            "; it is restarted every {delay:?} from now on (said once) until a run lasts {:?}",
                            self.window
                        )
                    } else {
                        String::new()
                    };
                    log::warn!(
                        "{label} (pid {pid}) {how} after {lifetime:.1?}: {} quick exits in a row (runs under {:?}, restart_backoff_window), a crash loop; restarting in {delay:?}{then}",
                        slot.young_deaths,
                        self.window
                    );
                } else {
                    log::debug!(
                        "{label} (pid {pid}) {how} after {lifetime:.1?}; restarting in {delay:?}"
                    );
                }
            } else {
                log::info!("{label} (pid {pid}) {}", describe(status));
            }
            exited.push(Exited {
                pid,
                how: format!("{} after {lifetime:.1?}", describe(status)),
            });
        }
        exited
    }

    /// Sends `signal` to every running child.
    pub(crate) fn signal_all(&self, signal: i32) {
        for child in self.slots.iter().filter_map(|s| s.child.as_ref()) {
            unsafe {
                libc::kill(child.id() as i32, signal);
            }
        }
    }

    /// The pids of the running children.
    pub(crate) fn running(&self) -> Vec<u32> {
        self.slots
            .iter()
            .filter_map(|s| s.child.as_ref().map(Child::id))
            .collect()
    }

    /// SIGKILLs every running child and waits for it; returns their pids.
    pub(crate) fn kill_all(&mut self) -> Vec<u32> {
        let mut killed = Vec::new();
        for slot in &mut self.slots {
            if let Some(mut child) = slot.child.take() {
                let _ = child.kill();
                let _ = child.wait();
                lock(&self.live).remove(&child.id());
                killed.push(child.id());
            }
        }
        killed
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The restart delay after `young_deaths` quick exits in a row.
fn backoff(young_deaths: u32, max: Duration) -> Duration {
    (RESTART_BACKOFF_BASE * 2u32.saturating_pow(young_deaths.saturating_sub(1).min(16))).min(max)
}

/// "exited with status 1", "was killed by signal 9 (SIGKILL)".
pub(crate) fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal} ({})", signal_name(signal)),
        (None, None) => format!("ended ({status})"),
    }
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGHUP => "SIGHUP",
        _ => "signal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_the_base_and_caps() {
        let max = crate::config::DEFAULT_RESTART_BACKOFF_MAX;
        let delays: Vec<_> = (1..=9).map(|n| backoff(n, max)).collect();
        assert_eq!(delays[0], Duration::from_millis(100));
        assert_eq!(delays[1], Duration::from_millis(200));
        assert_eq!(delays[4], Duration::from_millis(1600));
        assert_eq!(delays[8], max);
        assert_eq!(backoff(9, Duration::from_secs(1)), Duration::from_secs(1));
    }
}
