//! PostgreSQL statements of job control: cancelling waiting jobs, running
//! scheduled or blocked ones now, asking running ones to stop (notified to
//! the workers on the `solidq` channel as the reserved queue name
//! `!cancel`, which no real queue can have).

use diesel::sql_types::{Array, BigInt, Text};
use diesel::{PgConnection, QueryResult, QueryableByName, RunQueryDsl, sql_query};

use crate::store::{CANCEL_CHANNEL_QUEUE, Cached, RemovedPending};

#[derive(QueryableByName)]
struct IdRow {
    #[diesel(sql_type = BigInt)]
    id: i64,
}

pub(super) fn pending_remove(
    conn: &mut PgConnection,
    ids: &[i64],
) -> QueryResult<Vec<RemovedPending>> {
    Cached(
        sql_query(
            "WITH r AS (DELETE FROM solidq_ready_executions WHERE job_id = ANY ($1)
                        RETURNING job_id, true AS was_ready),
                  s AS (DELETE FROM solidq_scheduled_executions WHERE job_id = ANY ($1)
                        RETURNING job_id, false AS was_ready),
                  b AS (DELETE FROM solidq_blocked_executions WHERE job_id = ANY ($1)
                        RETURNING job_id, false AS was_ready),
                  gone AS (SELECT * FROM r UNION ALL SELECT * FROM s UNION ALL SELECT * FROM b)
             SELECT j.id, j.concurrency_key, j.options, gone.was_ready
             FROM solidq_jobs j JOIN gone ON gone.job_id = j.id ORDER BY j.id",
        )
        .bind::<Array<BigInt>, _>(ids),
    )
    .load(conn)
}

pub(super) fn scheduled_make_due(conn: &mut PgConnection, ids: &[i64]) -> QueryResult<usize> {
    Cached(
        sql_query(
            "WITH due AS (UPDATE solidq_scheduled_executions SET scheduled_at = LOCALTIMESTAMP
                          WHERE job_id = ANY ($1) RETURNING job_id)
             UPDATE solidq_jobs SET scheduled_at = LOCALTIMESTAMP, updated_at = LOCALTIMESTAMP
             WHERE id IN (SELECT job_id FROM due)",
        )
        .bind::<Array<BigInt>, _>(ids),
    )
    .execute(conn)
}

pub(super) fn blocked_run_now(conn: &mut PgConnection, ids: &[i64]) -> QueryResult<Vec<String>> {
    #[derive(QueryableByName)]
    struct Queue {
        #[diesel(sql_type = Text)]
        queue_name: String,
    }
    let rows: Vec<Queue> = Cached(
        sql_query(format!(
            "WITH gone AS (DELETE FROM solidq_blocked_executions WHERE job_id = ANY ($1)
                           RETURNING job_id),
                  upd AS (UPDATE solidq_jobs SET concurrency_key = NULL,
                                 scheduled_at = LOCALTIMESTAMP, updated_at = LOCALTIMESTAMP
                          WHERE id IN (SELECT job_id FROM gone)
                          RETURNING id, queue_name, priority, fairness_key)
             INSERT INTO solidq_ready_executions ({}) {}
             RETURNING queue_name",
            crate::store::fair::READY_COLUMNS,
            crate::store::fair::ready_rows_sql("upd", "LOCALTIMESTAMP", "FROM upd")
        ))
        .bind::<Array<BigInt>, _>(ids),
    )
    .load(conn)?;
    Ok(rows.into_iter().map(|r| r.queue_name).collect())
}

pub(super) fn jobs_request_cancel(conn: &mut PgConnection, ids: &[i64]) -> QueryResult<Vec<i64>> {
    let rows: Vec<IdRow> = Cached(
        sql_query(format!(
            "WITH asked AS (
                 UPDATE solidq_jobs SET cancel_requested_at = LOCALTIMESTAMP,
                        updated_at = LOCALTIMESTAMP
                 WHERE id IN (SELECT job_id FROM solidq_claimed_executions WHERE job_id = ANY ($1))
                   AND cancel_requested_at IS NULL
                 RETURNING id),
             notified AS (
                 SELECT pg_notify('solidq', current_schema() || ':{CANCEL_CHANNEL_QUEUE}')
                 WHERE EXISTS (SELECT 1 FROM asked))
             SELECT id FROM asked, (SELECT count(*) FROM notified) n"
        ))
        .bind::<Array<BigInt>, _>(ids),
    )
    .load(conn)?;
    Ok(rows.into_iter().map(|r| r.id).collect())
}
