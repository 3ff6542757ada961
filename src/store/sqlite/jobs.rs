//! SQLite's jobs area: a job's rows and outcomes, and an operator's actions on jobs
//! that wait (the statements of `control.rs`).

// The backend's statements, row types and helpers, which its areas share.
use super::*;

impl JobsDriver for SqliteConnection {
    fn jobs_insert(&mut self, jobs: &[NewJob], _notify: bool) -> QueryResult<Vec<Option<i64>>> {
        write_tx(self, |conn| insert_jobs(conn, jobs))
    }

    fn notify_ready(&mut self, _queues: &[String]) -> QueryResult<()> {
        // Nothing to send: workers watch the change counter.
        Ok(())
    }

    fn jobs_find_by_unique_keys(&mut self, keys: &[String]) -> QueryResult<Vec<(String, i64)>> {
        let keys = serde_json::to_string(keys).expect("strings serialize");
        let rows: Vec<KeyRow> =
            Cached(sql_query(FIND_BY_UNIQUE_KEYS).bind::<Text, _>(keys)).load(self)?;
        Ok(rows.into_iter().map(|r| (r.unique_key, r.id)).collect())
    }

    fn jobs_attempt_started(&mut self, rows: &[AttemptStarted]) -> QueryResult<()> {
        let now = utc_now();
        for row in rows {
            Cached(
                sql_query(
                    "UPDATE solidq_jobs SET started_at = ?1, attempts = attempts + ?2 WHERE id = ?3",
                )
                .bind::<Timestamp, _>(minus(now, row.ago))
                .bind::<Integer, _>(i32::from(row.count))
                .bind::<BigInt, _>(row.id),
            )
            .execute(self)?;
        }
        Ok(())
    }

    fn jobs_delete(&mut self, ids: &[i64]) -> QueryResult<()> {
        Cached(
            sql_query("DELETE FROM solidq_jobs WHERE id IN (SELECT value FROM json_each(?1))")
                .bind::<Text, _>(json_ids(ids)),
        )
        .execute(self)
        .map(drop)
    }

    fn jobs_retry(&mut self, rows: &[Retried]) -> QueryResult<()> {
        let now = utc_now();
        for row in rows {
            let retry_at = plus(now, row.delay);
            Cached(
                sql_query(format!(
                    "UPDATE solidq_jobs SET attempts = attempts + 1, errors = {APPEND_ERROR},
                            scheduled_at = ?2, updated_at = ?3 WHERE id = ?4"
                ))
                .bind::<Text, _>(&row.error)
                .bind::<Timestamp, _>(retry_at)
                .bind::<Timestamp, _>(now)
                .bind::<BigInt, _>(row.id),
            )
            .execute(self)?;
            Cached(
                sql_query(
                    "INSERT INTO solidq_scheduled_executions
                         (job_id, queue_name, priority, scheduled_at, created_at, concurrency_key)
                     SELECT id, queue_name, priority, scheduled_at, ?2, concurrency_key
                     FROM solidq_jobs WHERE id = ?1",
                )
                .bind::<BigInt, _>(row.id)
                .bind::<Timestamp, _>(now),
            )
            .execute(self)?;
        }
        Ok(())
    }

    fn jobs_fail(&mut self, rows: &[Failed]) -> QueryResult<()> {
        let now = utc_now();
        for row in rows {
            let updated = Cached(
                sql_query(format!(
                    "UPDATE solidq_jobs SET attempts = attempts + ?2, stalled_count = stalled_count + ?3,
                            errors = {APPEND_ERROR}, updated_at = ?4 WHERE id = ?5"
                ))
                .bind::<Text, _>(&row.error)
                .bind::<Integer, _>(i32::from(row.ends_attempt))
                .bind::<Integer, _>(i32::from(row.stalled))
                .bind::<Timestamp, _>(now)
                .bind::<BigInt, _>(row.id),
            )
            .execute(self)?;
            if updated == 0 {
                continue;
            }
            Cached(
                sql_query(
                    "INSERT INTO solidq_failed_executions (job_id, error, created_at) VALUES (?1, ?2, ?3)",
                )
                .bind::<BigInt, _>(row.id)
                .bind::<Text, _>(&row.error)
                .bind::<Timestamp, _>(now),
            )
            .execute(self)?;
        }
        Ok(())
    }

    fn jobs_set_progress(&mut self, rows: &[Progress]) -> QueryResult<()> {
        for row in rows {
            Cached(
                sql_query(
                    "UPDATE solidq_jobs SET progress = coalesce(?1, progress),
                                            checkpoint = coalesce(?4, checkpoint)
                     WHERE id = ?2 AND EXISTS (
                         SELECT 1 FROM solidq_claimed_executions
                         WHERE job_id = ?2 AND process_id = ?3)",
                )
                .bind::<Nullable<Text>, _>(&row.json)
                .bind::<BigInt, _>(row.job_id)
                .bind::<BigInt, _>(row.process_id)
                .bind::<Nullable<Text>, _>(&row.checkpoint),
            )
            .execute(self)?;
        }
        Ok(())
    }

    fn jobs_snooze(&mut self, rows: &[Snoozed]) -> QueryResult<()> {
        let now = utc_now();
        for row in rows {
            Cached(
                sql_query(
                    "UPDATE solidq_jobs SET snoozes = snoozes + 1, scheduled_at = ?1, updated_at = ?2
                     WHERE id = ?3",
                )
                .bind::<Timestamp, _>(plus(now, row.delay))
                .bind::<Timestamp, _>(now)
                .bind::<BigInt, _>(row.id),
            )
            .execute(self)?;
            // Due now and free of a concurrency slot: ready at once.
            static READY: LazyLock<String> = LazyLock::new(|| {
                format!(
                    "INSERT INTO solidq_ready_executions ({READY_COLUMNS})
                     SELECT {} FROM solidq_jobs WHERE id = ?1 AND ?3 AND concurrency_key IS NULL",
                    ready_values_of("solidq_jobs", "?2")
                )
            });
            Cached(
                sql_query(READY.as_str())
                    .bind::<BigInt, _>(row.id)
                    .bind::<Timestamp, _>(now)
                    .bind::<diesel::sql_types::Bool, _>(row.delay.is_zero()),
            )
            .execute(self)?;
            Cached(
                sql_query(
                    "INSERT INTO solidq_scheduled_executions
                         (job_id, queue_name, priority, scheduled_at, created_at, concurrency_key)
                     SELECT id, queue_name, priority, scheduled_at, ?2, concurrency_key
                     FROM solidq_jobs WHERE id = ?1 AND NOT (?3 AND concurrency_key IS NULL)",
                )
                .bind::<BigInt, _>(row.id)
                .bind::<Timestamp, _>(now)
                .bind::<diesel::sql_types::Bool, _>(row.delay.is_zero()),
            )
            .execute(self)?;
        }
        Ok(())
    }

    fn jobs_release(&mut self, rows: &[Released]) -> QueryResult<()> {
        let now = utc_now();
        for row in rows {
            Cached(
                sql_query(
                    "UPDATE solidq_jobs SET stalled_count = stalled_count + ?1, updated_at = ?2 WHERE id = ?3",
                )
                .bind::<Integer, _>(i32::from(row.stalled))
                .bind::<Timestamp, _>(now)
                .bind::<BigInt, _>(row.id),
            )
            .execute(self)?;
            if let Some(error) = &row.error {
                Cached(
                    sql_query(format!(
                        "UPDATE solidq_jobs SET errors = {APPEND_ERROR} WHERE id = ?2"
                    ))
                    .bind::<Text, _>(error)
                    .bind::<BigInt, _>(row.id),
                )
                .execute(self)?;
            }
            static READY: LazyLock<String> = LazyLock::new(|| {
                format!(
                    "INSERT INTO solidq_ready_executions ({READY_COLUMNS})
                     SELECT {} FROM solidq_jobs WHERE id = ?1",
                    ready_values_of("solidq_jobs", "?2")
                )
            });
            Cached(
                sql_query(READY.as_str())
                    .bind::<BigInt, _>(row.id)
                    .bind::<Timestamp, _>(now),
            )
            .execute(self)?;
        }
        Ok(())
    }

    fn failed_retry(&mut self, ids: &[i64]) -> QueryResult<usize> {
        let ids = json_ids(ids);
        write_tx(self, |c| {
            let now = utc_now();
            let gone: Vec<IdRow> = Cached(
                sql_query(
                    "DELETE FROM solidq_failed_executions WHERE job_id IN (SELECT value FROM json_each(?1))
                     RETURNING job_id AS id",
                )
                .bind::<Text, _>(&ids),
            )
            .load(c)?;
            if gone.is_empty() {
                return Ok(0);
            }
            let gone = json_ids(&gone.iter().map(|r| r.id).collect::<Vec<_>>());
            Cached(
                sql_query(
                    "UPDATE solidq_jobs SET max_attempts = max(max_attempts, attempts + 1), stalled_count = 0,
                            scheduled_at = ?2, updated_at = ?2
                     WHERE id IN (SELECT value FROM json_each(?1))",
                )
                .bind::<Text, _>(&gone)
                .bind::<Timestamp, _>(now),
            )
            .execute(c)?;
            static READY: LazyLock<String> = LazyLock::new(|| {
                format!(
                    "INSERT INTO solidq_ready_executions ({READY_COLUMNS}) {}",
                    ready_rows_sql(
                        "j",
                        "?2",
                        "FROM solidq_jobs j
                         WHERE j.id IN (SELECT value FROM json_each(?1)) AND j.concurrency_key IS NULL"
                    )
                )
            });
            let ready = Cached(
                sql_query(READY.as_str())
                    .bind::<Text, _>(&gone)
                    .bind::<Timestamp, _>(now),
            )
            .execute(c)?;
            // Jobs under a concurrency limit go through the dispatcher,
            // which takes their slot.
            let limited = Cached(
                sql_query(
                    "INSERT INTO solidq_scheduled_executions
                         (job_id, queue_name, priority, scheduled_at, created_at, concurrency_key)
                     SELECT id, queue_name, priority, ?2, ?2, concurrency_key FROM solidq_jobs
                     WHERE id IN (SELECT value FROM json_each(?1)) AND concurrency_key IS NOT NULL",
                )
                .bind::<Text, _>(&gone)
                .bind::<Timestamp, _>(now),
            )
            .execute(c)?;
            Ok(ready + limited)
        })
    }

    fn failed_discard(&mut self, ids: &[i64]) -> QueryResult<usize> {
        Cached(
            sql_query(
                "DELETE FROM solidq_jobs WHERE id IN (SELECT job_id FROM solidq_failed_executions
                 WHERE job_id IN (SELECT value FROM json_each(?1)))",
            )
            .bind::<Text, _>(json_ids(ids)),
        )
        .execute(self)
    }

    fn jobs_delete_finished(
        &mut self,
        older_than: Option<Duration>,
        limit: usize,
    ) -> QueryResult<usize> {
        let now = utc_now();
        match older_than {
            None => Cached(
                sql_query(CLEAN_EXPIRED)
                    .bind::<Timestamp, _>(now)
                    .bind::<BigInt, _>(limit as i64),
            )
            .execute(self),
            Some(age) => Cached(
                sql_query(
                    "DELETE FROM solidq_jobs WHERE id IN (SELECT id FROM solidq_jobs
                     WHERE finished_at < ?1 LIMIT ?2)",
                )
                .bind::<Timestamp, _>(minus(now, age))
                .bind::<BigInt, _>(limit as i64),
            )
            .execute(self),
        }
    }

    fn pending_remove(&mut self, ids: &[i64]) -> QueryResult<Vec<crate::store::RemovedPending>> {
        control::pending_remove(self, ids)
    }

    fn scheduled_make_due(&mut self, ids: &[i64]) -> QueryResult<usize> {
        control::scheduled_make_due(self, ids)
    }

    fn blocked_run_now(&mut self, ids: &[i64]) -> QueryResult<Vec<String>> {
        control::blocked_run_now(self, ids)
    }

    fn jobs_request_cancel(&mut self, ids: &[i64]) -> QueryResult<Vec<i64>> {
        control::jobs_request_cancel(self, ids)
    }
}
