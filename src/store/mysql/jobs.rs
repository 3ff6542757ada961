//! MySQL's jobs area: a job's rows and outcomes, and an operator's actions on jobs
//! that wait (the statements of `control.rs`).

// The backend's statements, row types and helpers, which its areas share.
use super::*;
use crate::store::named::named;

const SQL: &str = include_str!("jobs.sql");
/// The discarded tab's count, for explain.rs and info.rs's test.
pub(in crate::store) const JOBS_COUNT_DISCARDED: &str = named(SQL, "jobs_count_discarded");
const JOBS_FIND_BY_UNIQUE_KEYS: &str = named(SQL, "jobs_find_by_unique_keys");
const JOBS_ATTEMPT_STARTED: &str = named(SQL, "jobs_attempt_started");
const JOBS_DELETE: &str = named(SQL, "jobs_delete");
const JOBS_RETRY_UPDATE: &str = named(SQL, "jobs_retry/update");
const JOBS_RETRY_SCHEDULE: &str = named(SQL, "jobs_retry/schedule");
const JOBS_FAIL_UPDATE: &str = named(SQL, "jobs_fail/update");
const JOBS_FAIL_RECORD: &str = named(SQL, "jobs_fail/record");
const JOBS_SET_PROGRESS: &str = named(SQL, "jobs_set_progress");
const JOBS_SNOOZE_UPDATE: &str = named(SQL, "jobs_snooze/update");
const JOBS_SNOOZE_READY: &str = named(SQL, "jobs_snooze/ready");
const JOBS_SNOOZE_SCHEDULE: &str = named(SQL, "jobs_snooze/schedule");
const JOBS_RELEASE_UPDATE_WITH_ERROR: &str = named(SQL, "jobs_release/update_with_error");
const JOBS_RELEASE_UPDATE: &str = named(SQL, "jobs_release/update");
const JOBS_RELEASE_READY: &str = named(SQL, "jobs_release/ready");
const FAILED_RETRY_LOCK: &str = named(SQL, "failed_retry/lock");
const FAILED_RETRY_DELETE: &str = named(SQL, "failed_retry/delete");
const FAILED_RETRY_UPDATE: &str = named(SQL, "failed_retry/update");
const FAILED_RETRY_READY: &str = named(SQL, "failed_retry/ready");
const FAILED_RETRY_SCHEDULE_LIMITED: &str = named(SQL, "failed_retry/schedule_limited");
const FAILED_DISCARD: &str = named(SQL, "failed_discard");
/// The cleaner's batch, for explain.rs too.
pub(super) const JOBS_DELETE_EXPIRED: &str = named(SQL, "jobs_delete_expired");
const JOBS_DELETE_FINISHED_BEFORE_LOCK: &str = named(SQL, "jobs_delete_finished_before/lock");

impl JobsDriver for MysqlConnection {
    fn jobs_insert(&mut self, jobs: &[NewJob], _notify: bool) -> QueryResult<Vec<Option<i64>>> {
        write_tx(self, |conn| insert_jobs(conn, jobs))
    }

    fn notify_ready(&mut self, _queues: &[String]) -> QueryResult<()> {
        // Nothing to send: workers run a change check (`listener.rs`).
        Ok(())
    }

    fn jobs_find_by_unique_keys(&mut self, keys: &[String]) -> QueryResult<Vec<(String, i64)>> {
        let rows: Vec<KeyRow> =
            Cached(prepared(JOBS_FIND_BY_UNIQUE_KEYS).bind::<Text, _>(json_strings(keys)))
                .load(self)?;
        Ok(rows.into_iter().map(|r| (r.unique_key, r.id)).collect())
    }

    fn jobs_attempt_started(&mut self, rows: &[AttemptStarted]) -> QueryResult<()> {
        // In id order, as every write of job rows (no lock-order deadlock).
        let mut rows = rows.to_vec();
        rows.sort_unstable_by_key(|r| r.id);
        let triples = serde_json::Value::Array(
            rows.iter()
                .map(|r| serde_json::json!([r.id, micros(r.ago), i32::from(r.count)]))
                .collect(),
        );
        Cached(prepared(JOBS_ATTEMPT_STARTED).bind::<Text, _>(triples.to_string()))
            .execute(self)
            .map(drop)
    }

    fn jobs_delete(&mut self, ids: &[i64]) -> QueryResult<()> {
        Cached(prepared(JOBS_DELETE).bind::<Text, _>(json_ids(ids)))
            .execute(self)
            .map(drop)
    }

    fn jobs_retry(&mut self, rows: &[Retried]) -> QueryResult<()> {
        for row in rows {
            Cached(
                prepared(JOBS_RETRY_UPDATE)
                    .bind::<Text, _>(&row.error)
                    .bind::<Text, _>(&row.error)
                    .bind::<BigInt, _>(micros(row.delay))
                    .bind::<BigInt, _>(row.id),
            )
            .execute(self)?;
            Cached(prepared(JOBS_RETRY_SCHEDULE).bind::<BigInt, _>(row.id)).execute(self)?;
        }
        Ok(())
    }

    fn jobs_fail(&mut self, rows: &[Failed]) -> QueryResult<()> {
        for row in rows {
            let updated = Cached(
                prepared(JOBS_FAIL_UPDATE)
                    .bind::<Integer, _>(i32::from(row.ends_attempt))
                    .bind::<Integer, _>(i32::from(row.stalled))
                    .bind::<Text, _>(&row.error)
                    .bind::<Text, _>(&row.error)
                    .bind::<BigInt, _>(row.id),
            )
            .execute(self)?;
            if updated == 0 {
                continue;
            }
            Cached(
                prepared(JOBS_FAIL_RECORD)
                    .bind::<BigInt, _>(row.id)
                    .bind::<Text, _>(&row.error),
            )
            .execute(self)?;
        }
        Ok(())
    }

    fn jobs_set_progress(&mut self, rows: &[Progress]) -> QueryResult<()> {
        for row in rows {
            Cached(
                prepared(JOBS_SET_PROGRESS)
                    .bind::<Nullable<Text>, _>(&row.json)
                    .bind::<Nullable<Text>, _>(&row.checkpoint)
                    .bind::<BigInt, _>(row.job_id)
                    .bind::<BigInt, _>(row.job_id)
                    .bind::<BigInt, _>(row.process_id),
            )
            .execute(self)?;
        }
        Ok(())
    }

    fn jobs_snooze(&mut self, rows: &[Snoozed]) -> QueryResult<()> {
        let mut ready = 0;
        for row in rows {
            Cached(
                prepared(JOBS_SNOOZE_UPDATE)
                    .bind::<BigInt, _>(micros(row.delay))
                    .bind::<BigInt, _>(row.id),
            )
            .execute(self)?;
            // Due now and free of a concurrency slot: ready at once.
            ready += Cached(
                prepared(JOBS_SNOOZE_READY)
                    .bind::<BigInt, _>(row.id)
                    .bind::<diesel::sql_types::Bool, _>(row.delay.is_zero()),
            )
            .execute(self)?;
            Cached(
                prepared(JOBS_SNOOZE_SCHEDULE)
                    .bind::<BigInt, _>(row.id)
                    .bind::<diesel::sql_types::Bool, _>(row.delay.is_zero()),
            )
            .execute(self)?;
        }
        super::floor::moved(self, ready)
    }

    fn jobs_release(&mut self, rows: &[Released]) -> QueryResult<()> {
        let mut ready = 0;
        for row in rows {
            match &row.error {
                Some(error) => Cached(
                    prepared(JOBS_RELEASE_UPDATE_WITH_ERROR)
                        .bind::<Integer, _>(i32::from(row.stalled))
                        .bind::<Integer, _>(i32::from(row.stalled))
                        .bind::<Text, _>(error)
                        .bind::<Text, _>(error)
                        .bind::<BigInt, _>(row.id),
                )
                .execute(self)?,
                None => Cached(
                    prepared(JOBS_RELEASE_UPDATE)
                        .bind::<Integer, _>(i32::from(row.stalled))
                        .bind::<Integer, _>(i32::from(row.stalled))
                        .bind::<BigInt, _>(row.id),
                )
                .execute(self)?,
            };
            ready +=
                Cached(prepared(JOBS_RELEASE_READY).bind::<BigInt, _>(row.id)).execute(self)?;
        }
        super::floor::moved(self, ready)
    }

    fn failed_retry(&mut self, ids: &[i64]) -> QueryResult<usize> {
        let ids = json_ids(ids);
        write_tx(self, |c| {
            let gone: Vec<IdRow> =
                Cached(prepared(FAILED_RETRY_LOCK).bind::<Text, _>(&ids)).load(c)?;
            if gone.is_empty() {
                return Ok(0);
            }
            let gone = json_ids(&gone.iter().map(|r| r.id).collect::<Vec<_>>());
            Cached(prepared(FAILED_RETRY_DELETE).bind::<Text, _>(&gone)).execute(c)?;
            Cached(prepared(FAILED_RETRY_UPDATE).bind::<Text, _>(&gone)).execute(c)?;
            let ready = Cached(prepared(FAILED_RETRY_READY).bind::<Text, _>(&gone)).execute(c)?;
            super::floor::moved(c, ready)?;
            // Jobs under a concurrency limit go through the dispatcher,
            // which takes their slot.
            let limited = Cached(prepared(FAILED_RETRY_SCHEDULE_LIMITED).bind::<Text, _>(&gone))
                .execute(c)?;
            Ok(ready + limited)
        })
    }

    fn failed_discard(&mut self, ids: &[i64]) -> QueryResult<usize> {
        Cached(prepared(FAILED_DISCARD).bind::<Text, _>(json_ids(ids))).execute(self)
    }

    fn jobs_delete_finished(
        &mut self,
        older_than: Option<Duration>,
        limit: usize,
    ) -> QueryResult<usize> {
        let Some(age) = older_than else {
            // The cleaner's batches: one statement (see jobs.sql).
            return Cached(prepared(JOBS_DELETE_EXPIRED).bind::<BigInt, _>(limit as i64))
                .execute(self);
        };
        // The ids first (MySQL deletes with no LIMIT in a subquery), then
        // the rows; several callers skip each other's batches.
        write_tx(self, |c| {
            let ids: Vec<IdRow> = Cached(
                prepared(JOBS_DELETE_FINISHED_BEFORE_LOCK)
                    .bind::<BigInt, _>(micros(age))
                    .bind::<BigInt, _>(limit as i64),
            )
            .load(c)?;
            if ids.is_empty() {
                return Ok(0);
            }
            let ids = json_ids(&ids.iter().map(|r| r.id).collect::<Vec<_>>());
            Cached(prepared(JOBS_DELETE).bind::<Text, _>(ids)).execute(c)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::fair::{READY_COLUMNS, ready_rows_sql, ready_values_of};

    fn words(sql: &str) -> String {
        sql.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    /// explain.rs's discarded-tab count states the condition the listing
    /// uses on MySQL (store::info's `discarded_sql`, `held_in` its table).
    #[test]
    fn the_explained_discarded_count_states_the_listings_condition() {
        let held = "solidq_jobs.id IN (SELECT job_id FROM solidq_discarded_jobs)";
        assert!(
            words(JOBS_COUNT_DISCARDED).contains(held),
            "{JOBS_COUNT_DISCARDED}"
        );
    }

    /// jobs.sql holds the text store::fair makes for these arguments: a
    /// change there must be made here too.
    #[test]
    fn the_ready_rows_of_snoozes_releases_and_retries_are_placed_as_store_fair_places_them() {
        let snoozed = format!(
            "INSERT INTO solidq_ready_executions ({READY_COLUMNS}) SELECT {} \
             FROM solidq_jobs WHERE id = ? AND ? AND concurrency_key IS NULL",
            ready_values_of("solidq_jobs", "UTC_TIMESTAMP(6)")
        );
        assert_eq!(words(JOBS_SNOOZE_READY), words(&snoozed));
        let released = format!(
            "INSERT INTO solidq_ready_executions ({READY_COLUMNS}) SELECT {} \
             FROM solidq_jobs WHERE id = ?",
            ready_values_of("solidq_jobs", "UTC_TIMESTAMP(6)")
        );
        assert_eq!(words(JOBS_RELEASE_READY), words(&released));
        let retried = format!(
            "INSERT INTO solidq_ready_executions ({READY_COLUMNS}) {}",
            ready_rows_sql(
                "j",
                "UTC_TIMESTAMP(6)",
                &format!(
                    "FROM {IDS} STRAIGHT_JOIN solidq_jobs j ON j.id = ids.value \
                     WHERE j.concurrency_key IS NULL"
                )
            )
        );
        assert_eq!(words(FAILED_RETRY_READY), words(&retried));
    }
}
