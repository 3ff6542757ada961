//! The statements of rate limits the backends agree on (the starts
//! recorded, the jobs sent back), written once for every
//! [`Portable`] connection; each backend locks and times the keys
//! itself (`LimitsDriver::rate_keys_lock`, `rate_clock`). The grants
//! themselves, which decide, are in `lifecycle/rates.rs`.

use chrono::NaiveDateTime;
use diesel::QueryResult;
use diesel::prelude::*;

use super::RatesDriver;
use super::portable::Portable;
use super::schema::{
    solidq_jobs as j, solidq_rate_limits as r, solidq_rate_starts as s,
    solidq_scheduled_executions as x,
};

impl<C: Portable> RatesDriver for C {
    fn rate_key_set_next(&mut self, key: &str, at: NaiveDateTime) -> QueryResult<()> {
        self.run(diesel::update(r::table.find(key)).set(r::next_at.eq(at)))
            .map(drop)
    }

    fn rate_starts_counts(
        &mut self,
        keys: &[String],
        since: NaiveDateTime,
    ) -> QueryResult<Vec<(String, i64)>> {
        self.fetch(
            s::table
                .filter(s::key.eq_any(keys))
                .filter(s::started_at.gt(since))
                .group_by(s::key)
                .select((s::key, diesel::dsl::count(s::id))),
        )
    }

    fn rate_start_nth(
        &mut self,
        key: &str,
        since: NaiveDateTime,
        offset: i64,
    ) -> QueryResult<NaiveDateTime> {
        self.fetch_first(
            s::table
                .filter(s::key.eq(key))
                .filter(s::started_at.gt(since))
                .order(s::started_at)
                .select(s::started_at)
                .limit(1)
                .offset(offset),
        )?
        .ok_or(diesel::result::Error::NotFound)
    }

    fn rate_starts_prune(&mut self, keys: &[String], since: NaiveDateTime) -> QueryResult<()> {
        self.run(diesel::delete(
            s::table
                .filter(s::key.eq_any(keys))
                .filter(s::started_at.le(since)),
        ))
        .map(drop)
    }

    fn rate_starts_forget(&mut self, job_ids: &[i64]) -> QueryResult<()> {
        self.run(diesel::delete(s::table.filter(s::job_id.eq_any(job_ids))))
            .map(drop)
    }

    fn rate_starts_insert(
        &mut self,
        starts: &[(String, i64)],
        at: NaiveDateTime,
    ) -> QueryResult<()> {
        let rows: Vec<_> = starts
            .iter()
            .map(|(key, id)| {
                (
                    s::key.eq(key.as_str()),
                    s::job_id.eq(*id),
                    s::started_at.eq(at),
                )
            })
            .collect();
        for chunk in rows.chunks(500) {
            self.run(diesel::insert_into(s::table).values(chunk))?;
        }
        Ok(())
    }

    fn jobs_defer(&mut self, job_id: i64, at: NaiveDateTime) -> QueryResult<Option<String>> {
        let (queue, priority, key): (String, i32, Option<String>) = self
            .fetch_first(
                j::table
                    .find(job_id)
                    .select((j::queue_name, j::priority, j::concurrency_key))
                    .limit(1),
            )?
            .ok_or(diesel::result::Error::NotFound)?;
        self.run(diesel::update(j::table.find(job_id)).set(j::scheduled_at.eq(at)))?;
        self.run(diesel::insert_into(x::table).values((
            x::job_id.eq(job_id),
            x::queue_name.eq(queue),
            x::priority.eq(priority),
            x::scheduled_at.eq(at),
            x::created_at.eq(chrono::Utc::now().naive_utc()),
            x::concurrency_key.eq(key.as_deref()),
        )))?;
        Ok(key)
    }
}

/// A key's row in `solidq_rate_limits`, as inserted.
pub(crate) type RateKeyRow<'a> = (
    diesel::dsl::Eq<r::key, &'a str>,
    diesel::dsl::Eq<r::next_at, NaiveDateTime>,
    diesel::dsl::Eq<r::created_at, NaiveDateTime>,
);

/// The rows of `keys` in `solidq_rate_limits`, each created at `now` with
/// the epoch as its last time handed out: what every backend inserts
/// (ignoring the keys that exist) before locking them.
pub(crate) fn rate_key_rows(keys: &[String]) -> Vec<RateKeyRow<'_>> {
    let epoch = chrono::DateTime::UNIX_EPOCH.naive_utc();
    let now = chrono::Utc::now().naive_utc();
    keys.iter()
        .map(|key| {
            (
                r::key.eq(key.as_str()),
                r::next_at.eq(epoch),
                r::created_at.eq(now),
            )
        })
        .collect()
}

/// The keys' rows of `keys`, for each backend to lock.
type KeysOf<'a> = diesel::dsl::Filter<r::table, diesel::dsl::EqAny<r::key, &'a [String]>>;

/// The query that reads `keys`' rows in key order, for each backend to lock.
pub(crate) fn rate_keys_query(
    keys: &[String],
) -> diesel::dsl::Select<diesel::dsl::Order<KeysOf<'_>, r::key>, (r::key, r::next_at)> {
    r::table
        .filter(r::key.eq_any(keys))
        .order(r::key)
        .select((r::key, r::next_at))
}
