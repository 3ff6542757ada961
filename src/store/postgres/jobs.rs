//! PostgreSQL's jobs area: a job's rows and outcomes, and an operator's actions on jobs
//! that wait (the statements of `control.rs`).

// The backend's statements, row types and helpers, which its areas share.
use super::*;
use crate::store::named::named;

const SQL: &str = include_str!("jobs.sql");
/// The discarded tab's count, for explain.rs and info.rs's test.
pub(in crate::store) const JOBS_COUNT_DISCARDED: &str = named(SQL, "jobs_count_discarded");
pub(super) const JOBS_FIND_BY_UNIQUE_KEYS: &str = named(SQL, "jobs_find_by_unique_keys");
const JOBS_ATTEMPT_STARTED: &str = named(SQL, "jobs_attempt_started");
const JOBS_DELETE: &str = named(SQL, "jobs_delete");
const JOBS_RETRY: &str = named(SQL, "jobs_retry");
const JOBS_FAIL: &str = named(SQL, "jobs_fail");
const JOBS_SET_PROGRESS: &str = named(SQL, "jobs_set_progress");
const JOBS_SNOOZE: &str = named(SQL, "jobs_snooze");
const JOBS_RELEASE: &str = named(SQL, "jobs_release");
const FAILED_RETRY: &str = named(SQL, "failed_retry");
const FAILED_DISCARD: &str = named(SQL, "failed_discard");
pub(super) const JOBS_DELETE_EXPIRED: &str = named(SQL, "jobs_delete_expired");
const JOBS_DELETE_FINISHED_BEFORE: &str = named(SQL, "jobs_delete_finished_before");

impl JobsDriver for PgConnection {
    fn jobs_insert(&mut self, jobs: &[NewJob], notify: bool) -> QueryResult<Vec<Option<i64>>> {
        // No statement fits no jobs: the one-job shape would be sent
        // empty arrays (store::conformance).
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let shape = InsertShape::of(jobs, notify);
        let sql = shape.statement();
        let rows: Vec<InsertedRow> = if let [job] = jobs {
            let query = sql_query(sql)
                .bind::<Text, _>(&job.queue_name)
                .bind::<Text, _>(&job.kind)
                .bind::<Text, _>(&job.arguments)
                .bind::<Integer, _>(job.priority)
                .bind::<Nullable<Text>, _>(job.unique_key.as_deref())
                .bind::<Nullable<Text>, _>(job.concurrency_key.as_deref())
                .bind::<Text, _>(&job.options)
                .bind::<Text, _>(job.delivery.as_str())
                .bind::<Integer, _>(job.max_attempts)
                .bind::<Nullable<Integer>, _>(job.max_stalled_count)
                .bind::<Nullable<Text>, _>(job.fairness_key.as_deref());
            if shape.immediate {
                Cached(query).load(self)?
            } else {
                Cached(
                    query
                        .bind::<Nullable<Timestamp>, _>(job.run_at)
                        .bind::<BigInt, _>(micros(job.delay)),
                )
                .load(self)?
            }
        } else {
            let column = |f: fn(&NewJob) -> &str| jobs.iter().map(f).collect::<Vec<_>>();
            let query = sql_query(sql)
                .bind::<Array<Text>, _>(column(|j| &j.queue_name))
                .bind::<Array<Text>, _>(column(|j| &j.kind))
                .bind::<Array<Text>, _>(column(|j| &j.arguments))
                .bind::<Array<Integer>, _>(jobs.iter().map(|j| j.priority).collect::<Vec<_>>())
                .bind::<Array<Nullable<Text>>, _>(
                    jobs.iter()
                        .map(|j| j.unique_key.as_deref())
                        .collect::<Vec<_>>(),
                )
                .bind::<Array<Nullable<Text>>, _>(
                    jobs.iter()
                        .map(|j| j.concurrency_key.as_deref())
                        .collect::<Vec<_>>(),
                )
                .bind::<Array<Text>, _>(column(|j| &j.options))
                .bind::<Array<Text>, _>(column(|j| j.delivery.as_str()))
                .bind::<Array<Integer>, _>(jobs.iter().map(|j| j.max_attempts).collect::<Vec<_>>())
                .bind::<Array<Nullable<Integer>>, _>(
                    jobs.iter().map(|j| j.max_stalled_count).collect::<Vec<_>>(),
                )
                .bind::<Array<Nullable<Text>>, _>(
                    jobs.iter()
                        .map(|j| j.fairness_key.as_deref())
                        .collect::<Vec<_>>(),
                );
            if shape.immediate {
                Cached(query).load(self)?
            } else {
                Cached(
                    query
                        .bind::<Array<Nullable<Timestamp>>, _>(
                            jobs.iter()
                                .map(|j| j.run_at)
                                .collect::<Vec<Option<NaiveDateTime>>>(),
                        )
                        .bind::<Array<BigInt>, _>(
                            jobs.iter().map(|j| micros(j.delay)).collect::<Vec<_>>(),
                        ),
                )
                .load(self)?
            }
        };
        if crate::store::floor::moves_on(jobs) {
            Cached(prepared(super::floor::MOVE_ON)).execute(self)?;
        }
        Ok(align_inserted(jobs, rows))
    }

    fn notify_ready(&mut self, queues: &[String]) -> QueryResult<()> {
        // Left here, not in jobs.sql: the other backends have no statement
        // for it (their workers watch a change counter or run a change
        // check), and every backend's jobs.sql defines the same operations.
        Cached(
            prepared(
                "SELECT count(pg_notify('solidq', current_schema() || ':' || q)) AS moved
                 FROM (SELECT DISTINCT unnest($1::text[]) AS q) s",
            )
            .bind::<Array<Text>, _>(queues),
        )
        .execute(self)
        .map(drop)
    }

    fn jobs_find_by_unique_keys(&mut self, keys: &[String]) -> QueryResult<Vec<(String, i64)>> {
        let rows: Vec<KeyRow> =
            Cached(prepared(JOBS_FIND_BY_UNIQUE_KEYS).bind::<Array<Text>, _>(keys)).load(self)?;
        Ok(rows.into_iter().map(|r| (r.unique_key, r.id)).collect())
    }

    fn jobs_delete(&mut self, ids: &[i64]) -> QueryResult<()> {
        Cached(prepared(JOBS_DELETE).bind::<Array<BigInt>, _>(ids))
            .execute(self)
            .map(drop)
    }

    fn jobs_retry(&mut self, rows: &[Retried]) -> QueryResult<()> {
        Cached(
            prepared(JOBS_RETRY)
                .bind::<Array<BigInt>, _>(rows.iter().map(|r| r.id).collect::<Vec<_>>())
                .bind::<Array<Text>, _>(rows.iter().map(|r| r.error.as_str()).collect::<Vec<_>>())
                .bind::<Array<BigInt>, _>(rows.iter().map(|r| micros(r.delay)).collect::<Vec<_>>()),
        )
        .execute(self)
        .map(drop)
    }

    fn jobs_fail(&mut self, rows: &[Failed]) -> QueryResult<()> {
        Cached(
            prepared(JOBS_FAIL)
                .bind::<Array<BigInt>, _>(rows.iter().map(|r| r.id).collect::<Vec<_>>())
                .bind::<Array<Text>, _>(rows.iter().map(|r| r.error.as_str()).collect::<Vec<_>>())
                .bind::<Array<Integer>, _>(
                    rows.iter()
                        .map(|r| i32::from(r.ends_attempt))
                        .collect::<Vec<_>>(),
                )
                .bind::<Array<Integer>, _>(
                    rows.iter()
                        .map(|r| i32::from(r.stalled))
                        .collect::<Vec<_>>(),
                ),
        )
        .execute(self)
        .map(drop)
    }

    fn jobs_attempt_started(&mut self, rows: &[AttemptStarted]) -> QueryResult<()> {
        Cached(
            prepared(JOBS_ATTEMPT_STARTED)
                .bind::<Array<BigInt>, _>(rows.iter().map(|r| r.id).collect::<Vec<_>>())
                .bind::<Array<BigInt>, _>(rows.iter().map(|r| micros(r.ago)).collect::<Vec<_>>())
                .bind::<Array<Integer>, _>(
                    rows.iter().map(|r| i32::from(r.count)).collect::<Vec<_>>(),
                ),
        )
        .execute(self)
        .map(drop)
    }

    fn jobs_set_progress(&mut self, rows: &[Progress]) -> QueryResult<()> {
        Cached(
            prepared(JOBS_SET_PROGRESS)
                .bind::<Array<BigInt>, _>(rows.iter().map(|r| r.job_id).collect::<Vec<_>>())
                .bind::<Array<BigInt>, _>(rows.iter().map(|r| r.process_id).collect::<Vec<_>>())
                .bind::<Array<Nullable<Text>>, _>(
                    rows.iter().map(|r| r.json.as_deref()).collect::<Vec<_>>(),
                )
                .bind::<Array<Nullable<Text>>, _>(
                    rows.iter()
                        .map(|r| r.checkpoint.as_deref())
                        .collect::<Vec<_>>(),
                ),
        )
        .execute(self)
        .map(drop)
    }

    fn jobs_snooze(&mut self, rows: &[Snoozed]) -> QueryResult<()> {
        Cached(
            prepared(JOBS_SNOOZE)
                .bind::<Array<BigInt>, _>(rows.iter().map(|r| r.id).collect::<Vec<_>>())
                .bind::<Array<BigInt>, _>(rows.iter().map(|r| micros(r.delay)).collect::<Vec<_>>()),
        )
        .execute(self)
        .map(drop)
    }

    fn jobs_release(&mut self, rows: &[Released]) -> QueryResult<()> {
        Cached(
            prepared(JOBS_RELEASE)
                .bind::<Array<BigInt>, _>(rows.iter().map(|r| r.id).collect::<Vec<_>>())
                .bind::<Array<Integer>, _>(
                    rows.iter()
                        .map(|r| i32::from(r.stalled))
                        .collect::<Vec<_>>(),
                )
                .bind::<Array<Nullable<Text>>, _>(
                    rows.iter().map(|r| r.error.as_deref()).collect::<Vec<_>>(),
                ),
        )
        .execute(self)
        .map(drop)
    }

    fn failed_retry(&mut self, ids: &[i64]) -> QueryResult<usize> {
        let row: MovedRow =
            Cached(prepared(FAILED_RETRY).bind::<Array<BigInt>, _>(ids)).get_result(self)?;
        Ok(row.moved as usize)
    }

    fn failed_discard(&mut self, ids: &[i64]) -> QueryResult<usize> {
        Cached(prepared(FAILED_DISCARD).bind::<Array<BigInt>, _>(ids)).execute(self)
    }

    fn jobs_delete_finished(
        &mut self,
        older_than: Option<Duration>,
        limit: usize,
    ) -> QueryResult<usize> {
        // Not in a keyed transaction (`claims::keyed_transaction`): its
        // `LIMIT` keeps it on custom plans, made for the table as it is
        // (the guide's Big tables has what the setting cost it).
        match older_than {
            // The partial index on expires_at serves this one.
            None => {
                Cached(prepared(JOBS_DELETE_EXPIRED).bind::<BigInt, _>(limit as i64)).execute(self)
            }
            Some(age) => Cached(
                prepared(JOBS_DELETE_FINISHED_BEFORE)
                    .bind::<BigInt, _>(micros(age))
                    .bind::<BigInt, _>(limit as i64),
            )
            .execute(self),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::fair::{READY_COLUMNS, ready_rows_sql};

    fn words(sql: &str) -> String {
        sql.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    /// explain.rs's discarded-tab count states the condition the listing
    /// uses (store::info's `DISCARDED_SQL`, the partial index's).
    #[test]
    fn the_explained_discarded_count_states_the_listings_condition() {
        let condition = words(crate::store::info::DISCARDED_SQL);
        assert!(
            words(JOBS_COUNT_DISCARDED).contains(&condition),
            "{JOBS_COUNT_DISCARDED}"
        );
    }

    /// jobs.sql holds the text store::fair makes for these arguments: a
    /// change there must be made here too.
    #[test]
    fn the_ready_rows_of_snoozes_releases_and_retries_are_placed_as_store_fair_places_them() {
        let ready = |from: &str| {
            words(&format!(
                "INSERT INTO solidq_ready_executions ({READY_COLUMNS}) {} RETURNING queue_name, {}",
                ready_rows_sql("upd", "LOCALTIMESTAMP", from),
                crate::store::postgres::floor::READY_BELOW
            ))
        };
        assert!(words(JOBS_SNOOZE).contains(&ready("FROM upd WHERE now")));
        assert!(words(JOBS_RELEASE).contains(&ready("FROM upd")));
        assert!(words(FAILED_RETRY).contains(&ready("FROM upd WHERE concurrency_key IS NULL")));
    }
}
