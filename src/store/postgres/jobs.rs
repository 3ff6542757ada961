//! PostgreSQL's jobs area: a job's rows and outcomes, and an operator's actions on jobs
//! that wait (the statements of `control.rs`).

// The backend's statements, row types and helpers, which its areas share.
use super::*;

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
        Ok(align_inserted(jobs, rows))
    }

    fn notify_ready(&mut self, queues: &[String]) -> QueryResult<()> {
        Cached(
            sql_query(
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
            Cached(sql_query(FIND_BY_UNIQUE_KEYS).bind::<Array<Text>, _>(keys)).load(self)?;
        Ok(rows.into_iter().map(|r| (r.unique_key, r.id)).collect())
    }

    fn jobs_delete(&mut self, ids: &[i64]) -> QueryResult<()> {
        Cached(sql_query(DELETE_JOBS).bind::<Array<BigInt>, _>(ids))
            .execute(self)
            .map(drop)
    }

    fn jobs_retry(&mut self, rows: &[Retried]) -> QueryResult<()> {
        Cached(
            sql_query(retry_sql())
                .bind::<Array<BigInt>, _>(rows.iter().map(|r| r.id).collect::<Vec<_>>())
                .bind::<Array<Text>, _>(rows.iter().map(|r| r.error.as_str()).collect::<Vec<_>>())
                .bind::<Array<BigInt>, _>(rows.iter().map(|r| micros(r.delay)).collect::<Vec<_>>()),
        )
        .execute(self)
        .map(drop)
    }

    fn jobs_fail(&mut self, rows: &[Failed]) -> QueryResult<()> {
        Cached(
            sql_query(fail_sql())
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
            sql_query(ATTEMPT_STARTED)
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
            sql_query(
                "UPDATE solidq_jobs j SET progress = coalesce(u.progress, j.progress),
                                          checkpoint = coalesce(u.checkpoint, j.checkpoint)
                 FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[])
                      AS u(id, process_id, progress, checkpoint)
                 WHERE j.id = u.id AND EXISTS (
                     SELECT 1 FROM solidq_claimed_executions c
                     WHERE c.job_id = u.id AND c.process_id = u.process_id)",
            )
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
            sql_query(SNOOZE.as_str())
                .bind::<Array<BigInt>, _>(rows.iter().map(|r| r.id).collect::<Vec<_>>())
                .bind::<Array<BigInt>, _>(rows.iter().map(|r| micros(r.delay)).collect::<Vec<_>>()),
        )
        .execute(self)
        .map(drop)
    }

    fn jobs_release(&mut self, rows: &[Released]) -> QueryResult<()> {
        Cached(
            sql_query(release_sql())
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
        let row: MovedRow = Cached(sql_query(RETRY_FAILED.as_str()).bind::<Array<BigInt>, _>(ids))
            .get_result(self)?;
        Ok(row.moved as usize)
    }

    fn failed_discard(&mut self, ids: &[i64]) -> QueryResult<usize> {
        Cached(
            sql_query(
                "DELETE FROM solidq_jobs WHERE id IN
                 (SELECT job_id FROM solidq_failed_executions WHERE job_id = ANY($1))",
            )
            .bind::<Array<BigInt>, _>(ids),
        )
        .execute(self)
    }

    fn jobs_delete_finished(
        &mut self,
        older_than: Option<Duration>,
        limit: usize,
    ) -> QueryResult<usize> {
        match older_than {
            // The partial index on expires_at serves this one.
            None => Cached(sql_query(CLEAN_EXPIRED).bind::<BigInt, _>(limit as i64)).execute(self),
            Some(age) => Cached(
                sql_query(
                    "DELETE FROM solidq_jobs WHERE id IN (SELECT id FROM solidq_jobs
                     WHERE finished_at < LOCALTIMESTAMP - $1 * INTERVAL '1 microsecond' LIMIT $2)",
                )
                .bind::<BigInt, _>(micros(age))
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
