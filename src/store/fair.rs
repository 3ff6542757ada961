//! Fair share across tenants: where a ready row goes in claim order.
//!
//! Claims take ready rows by priority, then `position` (the indexes
//! `solidq_ready_poll_all` and `solidq_ready_poll_by_queue`). A job without
//! a fairness key is placed at its id, the order claims always had. A job
//! with one (`Job::fairness_key`) is placed, within its queue and priority,
//! one after the last ready row of its key, or at the front (the lowest
//! ready position) when its key has none ready: start-time fair queueing,
//! with the ready rows' positions as the virtual clock. So a tenant's burst
//! of 50,000 jobs takes positions front, front + 1, …, and another tenant's
//! single job enqueued after it takes the front: it is claimed next, not
//! after the burst. Tenants with work ready take turns, one job each.
//!
//! The place is computed by the statement that inserts the ready row, from
//! the rows ready at that moment: every path into ready (enqueue, a due
//! run time, a retry, a release after a stall, a snooze, a freed
//! concurrency slot, a finished parent) uses [`ready_values_of`] or
//! [`ready_rows_sql`], or is a named statement (a backend's `.sql` file)
//! that holds their text for its arguments, written out, with a unit test
//! beside it that compares the two. Two
//! concurrent inserts for one key may take the same place; the tie is
//! broken by id. A keyed job's place is never after its own id, so a job
//! without a key enqueued after a tenant's burst still waits for that burst
//! (as it would without fairness): give every job a key for every job to
//! take turns.

use diesel::QueryResult;

use super::portable::Portable;

/// The columns every insert into `solidq_ready_executions` writes, in this
/// order: then the job's fairness key and its place, and last its kind and
/// delivery, which claims taking jobs ahead filter on (migration
/// `2026-12-08-000001`; NULL in rows an older release wrote, whose claims
/// then read the job instead).
pub(crate) const READY_COLUMNS: &str =
    "job_id, queue_name, priority, created_at, fairness_key, position, kind, delivery";

/// The SQL expression of the first place of a key's new ready rows in a
/// queue and priority, from the expressions of the first such job's id,
/// queue, priority and fairness key (qualified: they are used inside
/// subqueries of `solidq_ready_executions`): one after the key's last ready
/// row, else the front (the lowest ready place), else the job's id. Each
/// subquery is a bare `MIN` or `MAX`, which SQLite answers from one index
/// entry (an expression around the aggregate would make it read the key's
/// every row).
fn first_place_sql(id: &str, queue: &str, priority: &str, key: &str) -> String {
    format!(
        "COALESCE(\
         (SELECT MAX(f.position) FROM solidq_ready_executions f \
          WHERE f.queue_name = {queue} AND f.priority = {priority} AND f.fairness_key = {key}) + 1, \
         (SELECT MIN(f.position) FROM solidq_ready_executions f \
          WHERE f.queue_name = {queue} AND f.priority = {priority}), \
         {id})"
    )
}

/// `SELECT`'s list for one ready row of `table` (or an alias) with the
/// columns of `solidq_jobs` (`id`, `queue_name`, `priority`,
/// `fairness_key`, `kind`, `delivery`), created at `created_at`, in
/// [`READY_COLUMNS`] order:
/// for statements that insert at most one row.
pub(crate) fn ready_values_of(table: &str, created_at: &str) -> String {
    let first = first_place_sql(
        &format!("{table}.id"),
        &format!("{table}.queue_name"),
        &format!("{table}.priority"),
        &format!("{table}.fairness_key"),
    );
    format!(
        "{table}.id, {table}.queue_name, {table}.priority, {created_at}, {table}.fairness_key, \
         CASE WHEN {table}.fairness_key IS NULL THEN {table}.id ELSE {first} END, \
         {table}.kind, {table}.delivery"
    )
}

/// The `SELECT` of the ready rows of the rows of `table` (or an alias,
/// with the columns of `solidq_jobs`) that `from` yields (the query after
/// its select list: `FROM …`, `WHERE …`), created at `created_at`, in
/// [`READY_COLUMNS`] order: for statements that insert many rows. The rows
/// of one key, queue and priority take consecutive places in id order from
/// their key's first place, which is looked up once per key (on the first
/// row), and before any of them is inserted: the outer window reads its
/// whole partition first. (Looked up per row, the lookup would walk past
/// the rows the statement has inserted so far, invisible to it: quadratic
/// on PostgreSQL.)
pub(crate) fn ready_rows_sql(table: &str, created_at: &str, from: &str) -> String {
    let lane = |t: &str| format!("PARTITION BY {t}queue_name, {t}priority, {t}fairness_key");
    let (inner_lane, outer_lane) = (lane(&format!("{table}.")), lane(""));
    let first = first_place_sql("s.id", "s.queue_name", "s.priority", "s.fairness_key");
    format!(
        "SELECT id, queue_name, priority, created_at, fairness_key, \
                CASE WHEN fairness_key IS NULL THEN id ELSE MAX(first) OVER ({outer_lane}) + nth - 1 END, \
                kind, delivery \
         FROM (SELECT s.id, s.queue_name, s.priority, s.created_at, s.fairness_key, s.nth, \
                      CASE WHEN s.fairness_key IS NOT NULL AND s.nth = 1 THEN {first} END AS first, \
                      s.kind, s.delivery \
               FROM (SELECT {table}.id AS id, {table}.queue_name AS queue_name, \
                            {table}.priority AS priority, {created_at} AS created_at, \
                            {table}.fairness_key AS fairness_key, \
                            {table}.kind AS kind, {table}.delivery AS delivery, \
                            ROW_NUMBER() OVER ({inner_lane} ORDER BY {table}.id) AS nth \
                     {from}) s) b"
    )
}

/// Inserts the ready rows of the jobs `ids`, placed by [`ready_rows_sql`],
/// 500 ids per statement (inlined: they are integers). The job rows give
/// queue, priority and fairness key.
pub(crate) fn insert_ready_by_id<C: Portable>(conn: &mut C, ids: &[i64]) -> QueryResult<()> {
    let now = C::timestamp_literal(chrono::Utc::now().naive_utc());
    for chunk in ids.chunks(500) {
        let list = chunk
            .iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "INSERT INTO solidq_ready_executions ({READY_COLUMNS}) {}{}",
            ready_rows_sql(
                "j",
                &now,
                &format!("FROM solidq_jobs j WHERE j.id IN ({list})")
            ),
            C::READY_INSERTED
        );
        let rows = conn.run(diesel::sql_query(sql))?;
        conn.ready_inserted(rows)?;
    }
    Ok(())
}
