//! What proves the promises to an operator: each recurring task's ticks
//! with their jobs and the ticks no scheduler fired (the cron ledger),
//! and each concurrency key's holders and waiting jobs.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::client::Queue;
use crate::config::RECURRING_GUARD_RETENTION;
use crate::types::{Error, JobStatus, Result, Schedule};

impl Tick {
    /// How long after a tick's time its job may appear before the ledger
    /// calls the tick missed: schedulers fire within their polling interval,
    /// and a short pause (a deploy) should not look like a lost tick.
    pub const MISSED_GRACE: Duration = Duration::from_secs(60);
}

/// One tick of a recurring task, as [`Queue::recurring_ledger`] lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tick {
    /// The tick's time (for a manual run, the second it was asked for).
    pub run_at: DateTime<Utc>,
    /// Its job, if the tick fired.
    pub job_id: Option<i64>,
    /// When it was fired (database clock).
    pub fired_at: Option<DateTime<Utc>>,
    /// Its job's status; `None` if it did not fire, or its job was
    /// cleaned away since.
    pub status: Option<JobStatus>,
    /// The schedule says it should have fired and no scheduler did.
    pub missed: bool,
    /// Fired by "run now", not by the schedule.
    pub manual: bool,
}

/// One concurrency key, as [`Queue::concurrency_keys`] lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConcurrencyKey {
    /// The key (`group/key`).
    pub key: String,
    /// Slots left on its semaphore, if it has one now.
    pub slots_left: Option<i32>,
    /// When the semaphore expires (a holder that died gives its slot back
    /// then at the latest).
    pub expires_at: Option<DateTime<Utc>>,
    /// Jobs holding a slot (ready or claimed), at most
    /// [`ConcurrencyKey::HOLDERS_SHOWN`].
    pub holders: Vec<i64>,
    /// Jobs waiting for a slot.
    pub blocked: u64,
}

impl ConcurrencyKey {
    /// The most holders [`Queue::concurrency_keys`] lists per key.
    pub const HOLDERS_SHOWN: usize = 50;
}

impl Queue {
    /// The latest `limit` ticks of recurring task `key`, newest first:
    /// those that fired with their jobs, and those the schedule named but
    /// no scheduler fired (`missed`: no scheduler was running, or none
    /// could reach the database), within the time its guards are kept
    /// ([`RECURRING_GUARD_RETENTION`]) and since the task was declared.
    /// Ticks of the last [`Tick::MISSED_GRACE`] are not called missed.
    pub fn recurring_ledger(&self, key: &str, limit: usize) -> Result<Vec<Tick>> {
        let task = self
            .recurring_tasks()?
            .into_iter()
            .find(|t| t.key == key)
            .ok_or_else(|| Error::Unknown {
                what: "recurring task",
                value: key.to_string(),
                reason: "schedulers declare their tasks when they start".into(),
            })?;
        let schedule =
            Schedule::parse(&task.schedule, &task.timezone).map_err(|source| Error::Schedule {
                task: key.to_string(),
                source,
            })?;
        let now = self.store().db_now()?.and_utc();
        let retention = chrono::Duration::from_std(RECURRING_GUARD_RETENTION).unwrap_or_default();
        let (declared, rows) =
            self.store()
                .recurring_ticks(key, (now - retention).naive_utc(), limit)?;
        let mut ticks: Vec<Tick> = rows
            .into_iter()
            .map(|(run_at, job_id, fired_at)| Tick {
                run_at: run_at.and_utc(),
                job_id: Some(job_id),
                fired_at: Some(fired_at.and_utc()),
                status: None,
                missed: false,
                manual: false,
            })
            .collect();
        for tick in &mut ticks {
            if let Some(id) = tick.job_id {
                tick.status = match self.job(id) {
                    Ok(info) => Some(info.status),
                    Err(Error::JobNotFound(_)) => None,
                    Err(e) => return Err(e),
                };
            }
        }
        // The schedule's ticks over the window the rows cover: since the
        // task was declared, within the guards' retention, and no further
        // back than `limit` ticks.
        let mut start = declared
            .map(|d| d.and_utc())
            .unwrap_or(now)
            .max(now - retention);
        if ticks.len() >= limit
            && let Some(oldest) = ticks.last()
        {
            start = start.max(oldest.run_at);
        }
        if let Some(first) = schedule.next_after(now)
            && let Some(second) = schedule.next_after(first)
        {
            let step = second - first;
            let span = step * i32::try_from(limit).unwrap_or(i32::MAX);
            start = start.max(now - span);
        }
        let grace = chrono::Duration::from_std(Tick::MISSED_GRACE).unwrap_or_default();
        let mut expected = Vec::new();
        // Ticks after `start` only: a scheduler declared at 12:00:00.4 does
        // not fire the tick of 12:00:00.
        let mut at = start;
        while let Some(next) = schedule.next_after(at) {
            if next > now - grace || expected.len() > limit.saturating_mul(2) {
                break;
            }
            expected.push(next);
            at = next;
        }
        for tick in &mut ticks {
            let on_schedule = schedule.next_after(tick.run_at - chrono::Duration::seconds(1))
                == Some(tick.run_at);
            tick.manual = !on_schedule;
        }
        for due in expected {
            if !ticks.iter().any(|t| t.run_at == due) {
                ticks.push(Tick {
                    run_at: due,
                    job_id: None,
                    fired_at: None,
                    status: None,
                    missed: true,
                    manual: false,
                });
            }
        }
        ticks.sort_by_key(|t| std::cmp::Reverse(t.run_at));
        ticks.truncate(limit);
        Ok(ticks)
    }

    /// Every concurrency key with a semaphore or a waiting job, by key,
    /// with its holders and waiting jobs.
    pub fn concurrency_keys(&self) -> Result<Vec<ConcurrencyKey>> {
        Ok(self
            .store()
            .concurrency_overview(ConcurrencyKey::HOLDERS_SHOWN)?
            .into_iter()
            .map(|(key, row)| ConcurrencyKey {
                key,
                slots_left: row.semaphore.map(|(v, _)| v),
                expires_at: row.semaphore.map(|(_, at)| at.and_utc()),
                holders: row.holders,
                blocked: row.blocked.max(0) as u64,
            })
            .collect())
    }
}
