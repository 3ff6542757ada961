//! MySQL's jobs area: a job's rows and outcomes, and an operator's actions on jobs
//! that wait (the statements of `control.rs`).

// The backend's statements, row types and helpers, which its areas share.
use super::*;

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
            Cached(sql_query(FIND_BY_UNIQUE_KEYS).bind::<Text, _>(json_strings(keys)))
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
        Cached(sql_query(ATTEMPT_STARTED).bind::<Text, _>(triples.to_string()))
            .execute(self)
            .map(drop)
    }

    fn jobs_delete(&mut self, ids: &[i64]) -> QueryResult<()> {
        Cached(
            sql_query(format!(
                "DELETE j FROM {IDS} STRAIGHT_JOIN solidq_jobs j ON j.id = ids.value"
            ))
            .bind::<Text, _>(json_ids(ids)),
        )
        .execute(self)
        .map(drop)
    }

    fn jobs_retry(&mut self, rows: &[Retried]) -> QueryResult<()> {
        for row in rows {
            Cached(
                sql_query(format!(
                    "UPDATE solidq_jobs SET attempts = attempts + 1, errors = {APPEND_ERROR},
                            scheduled_at = {NOW_PLUS}, updated_at = UTC_TIMESTAMP(6) WHERE id = ?"
                ))
                .bind::<Text, _>(&row.error)
                .bind::<Text, _>(&row.error)
                .bind::<BigInt, _>(micros(row.delay))
                .bind::<BigInt, _>(row.id),
            )
            .execute(self)?;
            Cached(
                sql_query(
                    "INSERT INTO solidq_scheduled_executions
                         (job_id, queue_name, priority, scheduled_at, created_at, concurrency_key)
                     SELECT id, queue_name, priority, scheduled_at, UTC_TIMESTAMP(6), concurrency_key
                     FROM solidq_jobs WHERE id = ?",
                )
                .bind::<BigInt, _>(row.id),
            )
            .execute(self)?;
        }
        Ok(())
    }

    fn jobs_fail(&mut self, rows: &[Failed]) -> QueryResult<()> {
        for row in rows {
            let updated = Cached(
                sql_query(format!(
                    "UPDATE solidq_jobs SET attempts = attempts + ?, stalled_count = stalled_count + ?,
                            errors = {APPEND_ERROR}, updated_at = UTC_TIMESTAMP(6) WHERE id = ?"
                ))
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
                sql_query(
                    "INSERT INTO solidq_failed_executions (job_id, error, created_at)
                     VALUES (?, ?, UTC_TIMESTAMP(6))",
                )
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
                sql_query(
                    "UPDATE solidq_jobs SET progress = coalesce(?, progress),
                                            checkpoint = coalesce(?, checkpoint)
                     WHERE id = ? AND EXISTS (
                         SELECT 1 FROM solidq_claimed_executions
                         WHERE job_id = ? AND process_id = ?)",
                )
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
        for row in rows {
            Cached(
                sql_query(format!(
                    "UPDATE solidq_jobs SET snoozes = snoozes + 1, scheduled_at = {NOW_PLUS},
                            updated_at = UTC_TIMESTAMP(6) WHERE id = ?"
                ))
                .bind::<BigInt, _>(micros(row.delay))
                .bind::<BigInt, _>(row.id),
            )
            .execute(self)?;
            // Due now and free of a concurrency slot: ready at once.
            static READY: LazyLock<String> = LazyLock::new(|| {
                format!(
                    "INSERT INTO solidq_ready_executions ({READY_COLUMNS})
                     SELECT {} FROM solidq_jobs WHERE id = ? AND ? AND concurrency_key IS NULL",
                    ready_values_of("solidq_jobs", "UTC_TIMESTAMP(6)")
                )
            });
            Cached(
                sql_query(READY.as_str())
                    .bind::<BigInt, _>(row.id)
                    .bind::<diesel::sql_types::Bool, _>(row.delay.is_zero()),
            )
            .execute(self)?;
            Cached(
                sql_query(
                    "INSERT INTO solidq_scheduled_executions
                         (job_id, queue_name, priority, scheduled_at, created_at, concurrency_key)
                     SELECT id, queue_name, priority, scheduled_at, UTC_TIMESTAMP(6), concurrency_key
                     FROM solidq_jobs WHERE id = ? AND NOT (? AND concurrency_key IS NULL)",
                )
                .bind::<BigInt, _>(row.id)
                .bind::<diesel::sql_types::Bool, _>(row.delay.is_zero()),
            )
            .execute(self)?;
        }
        Ok(())
    }

    fn jobs_release(&mut self, rows: &[Released]) -> QueryResult<()> {
        for row in rows {
            match &row.error {
                Some(error) => Cached(
                    sql_query(format!(
                        "UPDATE solidq_jobs SET stalled_count = stalled_count + ?,
                                errors = {APPEND_ERROR}, updated_at = UTC_TIMESTAMP(6) WHERE id = ?"
                    ))
                    .bind::<Integer, _>(i32::from(row.stalled))
                    .bind::<Text, _>(error)
                    .bind::<Text, _>(error)
                    .bind::<BigInt, _>(row.id),
                )
                .execute(self)?,
                None => Cached(
                    sql_query(
                        "UPDATE solidq_jobs SET stalled_count = stalled_count + ?,
                                updated_at = UTC_TIMESTAMP(6) WHERE id = ?",
                    )
                    .bind::<Integer, _>(i32::from(row.stalled))
                    .bind::<BigInt, _>(row.id),
                )
                .execute(self)?,
            };
            static READY: LazyLock<String> = LazyLock::new(|| {
                format!(
                    "INSERT INTO solidq_ready_executions ({READY_COLUMNS})
                     SELECT {} FROM solidq_jobs WHERE id = ?",
                    ready_values_of("solidq_jobs", "UTC_TIMESTAMP(6)")
                )
            });
            Cached(sql_query(READY.as_str()).bind::<BigInt, _>(row.id)).execute(self)?;
        }
        Ok(())
    }

    fn failed_retry(&mut self, ids: &[i64]) -> QueryResult<usize> {
        let ids = json_ids(ids);
        write_tx(self, |c| {
            let gone: Vec<IdRow> = Cached(
                sql_query(format!(
                    "SELECT f.job_id AS id FROM {IDS}
                     STRAIGHT_JOIN solidq_failed_executions f ON f.job_id = ids.value
                     ORDER BY f.job_id FOR UPDATE"
                ))
                .bind::<Text, _>(&ids),
            )
            .load(c)?;
            if gone.is_empty() {
                return Ok(0);
            }
            let gone = json_ids(&gone.iter().map(|r| r.id).collect::<Vec<_>>());
            Cached(
                sql_query(format!(
                    "DELETE f FROM {IDS} STRAIGHT_JOIN solidq_failed_executions f ON f.job_id = ids.value"
                ))
                .bind::<Text, _>(&gone),
            )
            .execute(c)?;
            Cached(
                sql_query(format!(
                    "UPDATE {IDS} STRAIGHT_JOIN solidq_jobs j ON j.id = ids.value
                     SET j.max_attempts = GREATEST(j.max_attempts, j.attempts + 1),
                         j.stalled_count = 0, j.scheduled_at = UTC_TIMESTAMP(6),
                         j.updated_at = UTC_TIMESTAMP(6)"
                ))
                .bind::<Text, _>(&gone),
            )
            .execute(c)?;
            let ready = Cached(
                sql_query(format!(
                    "INSERT INTO solidq_ready_executions ({READY_COLUMNS}) {}",
                    ready_rows_sql(
                        "j",
                        "UTC_TIMESTAMP(6)",
                        &format!(
                            "FROM {IDS} STRAIGHT_JOIN solidq_jobs j ON j.id = ids.value
                             WHERE j.concurrency_key IS NULL"
                        )
                    )
                ))
                .bind::<Text, _>(&gone),
            )
            .execute(c)?;
            // Jobs under a concurrency limit go through the dispatcher,
            // which takes their slot.
            let limited = Cached(
                sql_query(format!(
                    "INSERT INTO solidq_scheduled_executions
                         (job_id, queue_name, priority, scheduled_at, created_at, concurrency_key)
                     SELECT j.id, j.queue_name, j.priority, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6),
                            j.concurrency_key
                     FROM {IDS} STRAIGHT_JOIN solidq_jobs j ON j.id = ids.value
                     WHERE j.concurrency_key IS NOT NULL"
                ))
                .bind::<Text, _>(&gone),
            )
            .execute(c)?;
            Ok(ready + limited)
        })
    }

    fn failed_discard(&mut self, ids: &[i64]) -> QueryResult<usize> {
        Cached(
            sql_query(format!(
                "DELETE j FROM {IDS}
                 STRAIGHT_JOIN solidq_failed_executions f ON f.job_id = ids.value
                 STRAIGHT_JOIN solidq_jobs j ON j.id = f.job_id"
            ))
            .bind::<Text, _>(json_ids(ids)),
        )
        .execute(self)
    }

    fn jobs_delete_finished(
        &mut self,
        older_than: Option<Duration>,
        limit: usize,
    ) -> QueryResult<usize> {
        // The ids first (MySQL deletes with no LIMIT in a subquery), then
        // the rows; several cleaners skip each other's batches.
        write_tx(self, |c| {
            let ids: Vec<IdRow> = match older_than {
                None => Cached(
                    sql_query(
                        "SELECT id FROM solidq_jobs WHERE expires_at < UTC_TIMESTAMP(6)
                         ORDER BY expires_at LIMIT ? FOR UPDATE SKIP LOCKED",
                    )
                    .bind::<BigInt, _>(limit as i64),
                )
                .load(c)?,
                Some(age) => Cached(
                    sql_query(format!(
                        "SELECT id FROM solidq_jobs WHERE finished_at < {NOW_MINUS}
                         LIMIT ? FOR UPDATE SKIP LOCKED"
                    ))
                    .bind::<BigInt, _>(micros(age))
                    .bind::<BigInt, _>(limit as i64),
                )
                .load(c)?,
            };
            if ids.is_empty() {
                return Ok(0);
            }
            let ids = json_ids(&ids.iter().map(|r| r.id).collect::<Vec<_>>());
            Cached(
                sql_query(format!(
                    "DELETE j FROM {IDS} STRAIGHT_JOIN solidq_jobs j ON j.id = ids.value"
                ))
                .bind::<Text, _>(ids),
            )
            .execute(c)
        })
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
