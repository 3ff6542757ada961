//! SQLite statements of job control: cancelling waiting jobs, running
//! scheduled or blocked ones now, asking running ones to stop. Callers hold
//! the write lock (a transaction opened with `BEGIN IMMEDIATE`).

use diesel::sql_types::{BigInt, Text, Timestamp};
use diesel::{QueryResult, QueryableByName, RunQueryDsl, SqliteConnection, sql_query};

use super::json_ids;
use crate::store::{Cached, RemovedPending, utc_now};

#[derive(QueryableByName)]
struct IdRow {
    #[diesel(sql_type = BigInt)]
    id: i64,
}

pub(super) fn pending_remove(
    conn: &mut SqliteConnection,
    ids: &[i64],
) -> QueryResult<Vec<RemovedPending>> {
    let ids = json_ids(ids);
    let ready: Vec<IdRow> = Cached(
        sql_query(
            "DELETE FROM solidq_ready_executions WHERE job_id IN (SELECT value FROM json_each(?1))
             RETURNING job_id AS id",
        )
        .bind::<Text, _>(&ids),
    )
    .load(conn)?;
    let mut removed = ready.iter().map(|r| r.id).collect::<Vec<_>>();
    for table in ["solidq_scheduled_executions", "solidq_blocked_executions"] {
        let rows: Vec<IdRow> = sql_query(format!(
            "DELETE FROM {table} WHERE job_id IN (SELECT value FROM json_each(?1))
             RETURNING job_id AS id"
        ))
        .bind::<Text, _>(&ids)
        .load(conn)?;
        removed.extend(rows.iter().map(|r| r.id));
    }
    let ready_json = json_ids(&ready.iter().map(|r| r.id).collect::<Vec<_>>());
    Cached(
        sql_query(
            "SELECT id, concurrency_key, options, id IN (SELECT value FROM json_each(?2)) AS was_ready
             FROM solidq_jobs WHERE id IN (SELECT value FROM json_each(?1)) ORDER BY id",
        )
        .bind::<Text, _>(json_ids(&removed))
        .bind::<Text, _>(ready_json),
    )
    .load(conn)
}

pub(super) fn scheduled_make_due(conn: &mut SqliteConnection, ids: &[i64]) -> QueryResult<usize> {
    let now = utc_now();
    let ids = json_ids(ids);
    let moved = Cached(
        sql_query(
            "UPDATE solidq_scheduled_executions SET scheduled_at = ?2
             WHERE job_id IN (SELECT value FROM json_each(?1))",
        )
        .bind::<Text, _>(&ids)
        .bind::<Timestamp, _>(now),
    )
    .execute(conn)?;
    Cached(
        sql_query(
            "UPDATE solidq_jobs SET scheduled_at = ?2, updated_at = ?2
             WHERE id IN (SELECT job_id FROM solidq_scheduled_executions
                          WHERE job_id IN (SELECT value FROM json_each(?1)))",
        )
        .bind::<Text, _>(&ids)
        .bind::<Timestamp, _>(now),
    )
    .execute(conn)?;
    Ok(moved)
}

pub(super) fn blocked_run_now(
    conn: &mut SqliteConnection,
    ids: &[i64],
) -> QueryResult<Vec<String>> {
    #[derive(QueryableByName)]
    struct Moved {
        #[diesel(sql_type = BigInt)]
        id: i64,
        #[diesel(sql_type = Text)]
        queue_name: String,
    }
    let now = utc_now();
    let moved: Vec<Moved> = Cached(
        sql_query(
            "DELETE FROM solidq_blocked_executions WHERE job_id IN (SELECT value FROM json_each(?1))
             RETURNING job_id AS id, queue_name",
        )
        .bind::<Text, _>(json_ids(ids)),
    )
    .load(conn)?;
    let moved_ids = json_ids(&moved.iter().map(|m| m.id).collect::<Vec<_>>());
    Cached(
        sql_query(
            "UPDATE solidq_jobs SET concurrency_key = NULL, scheduled_at = ?2, updated_at = ?2
             WHERE id IN (SELECT value FROM json_each(?1))",
        )
        .bind::<Text, _>(&moved_ids)
        .bind::<Timestamp, _>(now),
    )
    .execute(conn)?;
    static READY: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!(
            "INSERT INTO solidq_ready_executions ({}) {}",
            crate::store::fair::READY_COLUMNS,
            crate::store::fair::ready_rows_sql(
                "j",
                "?2",
                "FROM solidq_jobs j WHERE j.id IN (SELECT value FROM json_each(?1))"
            )
        )
    });
    Cached(
        sql_query(READY.as_str())
            .bind::<Text, _>(&moved_ids)
            .bind::<Timestamp, _>(now),
    )
    .execute(conn)?;
    Ok(moved.into_iter().map(|m| m.queue_name).collect())
}

pub(super) fn jobs_request_cancel(
    conn: &mut SqliteConnection,
    ids: &[i64],
) -> QueryResult<Vec<i64>> {
    let rows: Vec<IdRow> = Cached(
        sql_query(
            "UPDATE solidq_jobs SET cancel_requested_at = ?2, updated_at = ?2
             WHERE id IN (SELECT job_id FROM solidq_claimed_executions
                          WHERE job_id IN (SELECT value FROM json_each(?1)))
               AND cancel_requested_at IS NULL
             RETURNING id",
        )
        .bind::<Text, _>(json_ids(ids))
        .bind::<Timestamp, _>(utc_now()),
    )
    .load(conn)?;
    Ok(rows.into_iter().map(|r| r.id).collect())
}
