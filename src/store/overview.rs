//! Reads for the dashboard that no other part needs: the concurrency
//! keys with their holders and blocked jobs.

use std::collections::BTreeMap;

use chrono::NaiveDateTime;
use diesel::prelude::*;

use super::Store;
use super::schema::{
    solidq_blocked_executions as blocked, solidq_claimed_executions as claimed,
    solidq_jobs as jobs, solidq_ready_executions as ready, solidq_semaphores as semaphores,
};
use crate::types::Result;

/// One concurrency key as the tables hold it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct KeyRow {
    /// Slots left and when the semaphore expires, if it has a row.
    pub semaphore: Option<(i32, NaiveDateTime)>,
    /// Jobs holding a slot (ready or claimed), ids ascending, at most
    /// `holders_limit`.
    pub holders: Vec<i64>,
    /// How many jobs wait for a slot.
    pub blocked: i64,
}

impl Store {
    /// Every concurrency key with a semaphore or a blocked job, by key.
    pub(crate) fn concurrency_overview(
        &self,
        holders_limit: usize,
    ) -> Result<BTreeMap<String, KeyRow>> {
        self.with_read("concurrency_overview", |conn| {
            let mut keys: BTreeMap<String, KeyRow> = BTreeMap::new();
            let rows: Vec<(String, i32, NaiveDateTime)> = semaphores::table
                .select((semaphores::key, semaphores::value, semaphores::expires_at))
                .load(conn)?;
            for (key, value, expires_at) in rows {
                keys.entry(key).or_default().semaphore = Some((value, expires_at));
            }
            let waiting: Vec<(String, i64)> = blocked::table
                .group_by(blocked::concurrency_key)
                .select((blocked::concurrency_key, diesel::dsl::count_star()))
                .load(conn)?;
            for (key, n) in waiting {
                keys.entry(key).or_default().blocked = n;
            }
            let names: Vec<String> = keys.keys().cloned().collect();
            let held_ready: Vec<(Option<String>, i64)> = jobs::table
                .inner_join(ready::table.on(ready::job_id.eq(jobs::id)))
                .filter(jobs::concurrency_key.eq_any(&names))
                .select((jobs::concurrency_key, jobs::id))
                .order(jobs::id)
                .load(conn)?;
            let held_claimed: Vec<(Option<String>, i64)> = jobs::table
                .inner_join(claimed::table.on(claimed::job_id.eq(jobs::id)))
                .filter(jobs::concurrency_key.eq_any(&names))
                .select((jobs::concurrency_key, jobs::id))
                .order(jobs::id)
                .load(conn)?;
            for (key, id) in held_ready.into_iter().chain(held_claimed) {
                if let Some(row) = key.and_then(|k| keys.get_mut(&k))
                    && row.holders.len() < holders_limit
                {
                    row.holders.push(id);
                }
            }
            for row in keys.values_mut() {
                row.holders.sort_unstable();
            }
            Ok(keys)
        })
    }
}
