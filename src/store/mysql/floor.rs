//! MySQL's side of the claim floor (`store::floor`, which says why and
//! when a claim starts at a floor): its counter and the claim's condition.
//!
//! InnoDB keeps a deleted row's index entries, delete-marked, until purge
//! removes them, and purge waits for the oldest open read view: under a
//! hold, a claim from the head of its queue walks every entry claimed
//! since (MariaDB at 500 jobs/s: the pickup's median rose by 5 ms every
//! 10 s of a hold, and a work-down under one ran at a quarter of its
//! rate).
//!
//! The counter is a table of one auto-increment column,
//! `solidq_ready_below`, not a sequence (MySQL 8 has none): every
//! statement that makes jobs ready below the tail inserts a row in its
//! transaction (`Portable::ready_inserted`, once per statement that
//! inserted any), and the claim reads the highest id first, before its
//! candidates. A row commits with the jobs it announces, so a claim that
//! sees the jobs sees the move, or sees it on its next claim; two moves
//! that commit out of order are covered by the settling after a move
//! (`store::floor::SETTLE`). The maintenance round deletes all rows but
//! the highest ([`TRIM`]); the claim's read starts from the other end of
//! the index, so the delete-marked rows a hold keeps are never walked.

use diesel::MysqlConnection;
use diesel::sql_types::BigInt;
use diesel::{QueryResult, QueryableByName, RunQueryDsl};

use crate::store::portable::Portable;
use crate::store::{Cached, prepared};

/// The claiming process's row share-locked (`super::PROCESS_ALIVE`: 1,
/// or 0 when it is gone) and the counter as it reads now, in one round
/// trip.
const ALIVE_AND_BELOW: &str = "SELECT COUNT(*) AS v, \
     (SELECT CAST(COALESCE(MAX(id), 0) AS SIGNED) FROM solidq_ready_below) AS below \
     FROM (SELECT id FROM solidq_processes WHERE id = ? LOCK IN SHARE MODE) AS p";

/// Deletes every row of the counter but the highest.
pub(super) const TRIM: &str = "DELETE FROM solidq_ready_below \
     WHERE id < (SELECT top FROM (SELECT MAX(id) AS top FROM solidq_ready_below) AS t)";

/// The candidates' condition from a floor (the position bound once): at
/// or after `(0, ?)` in claim order, two ranges of either claim index
/// (both end in priority, position). Not a row comparison, which
/// MariaDB's range optimizer does not read as a range.
pub(super) const CONDITION: &str = " AND (r.priority > 0 OR (r.priority = 0 AND r.position >= ?))";

/// The look below a floor (`store::floor`): the first ready row of the
/// claim's pattern before `(0, ?)` in claim order, without locks, through
/// the claim's index (two ranges of it, like [`CONDITION`]).
pub(super) fn below_sql(claim: &crate::store::ClaimQuery) -> String {
    claim.candidates_in_index_order_sql(
        "1",
        " AND (r.priority < 0 OR (r.priority = 0 AND r.position < ?))",
        "",
    )
}

#[derive(QueryableByName)]
struct AliveBelow {
    #[diesel(sql_type = BigInt)]
    v: i64,
    #[diesel(sql_type = BigInt)]
    below: i64,
}

/// Share-locks process `process_id`'s row for the claim, as
/// `super::PROCESS_ALIVE` does, and reads the counter: before the claim's
/// candidates, so that a move committed between the two is seen by the
/// next claim at the latest. `None` when the process's row is gone.
pub(super) fn read_if_alive(
    conn: &mut MysqlConnection,
    process_id: i64,
) -> QueryResult<Option<i64>> {
    let read: AliveBelow =
        Cached(prepared(ALIVE_AND_BELOW).bind::<BigInt, _>(process_id)).get_result(conn)?;
    Ok((read.v != 0).then_some(read.below))
}

/// After a statement that made `rows` jobs ready below the tail: moves
/// the counter on, in the statement's transaction (none: nothing to say).
pub(super) fn moved(conn: &mut MysqlConnection, rows: usize) -> QueryResult<()> {
    conn.ready_inserted(rows)
}

#[cfg(test)]
mod tests {
    use crate::store::NewJob;
    use crate::store::portable::MYSQL_MOVE_ON;

    /// An enqueue in the caller's transaction moves the counter exactly
    /// for a job that may be ready below the tail, and first, so that
    /// `LAST_INSERT_ID()` is the job's afterwards.
    #[test]
    fn an_enqueue_statement_moves_the_counter_first_for_a_job_below_the_tail() {
        let job = |priority, key: Option<&str>| NewJob {
            priority,
            fairness_key: key.map(Into::into),
            ..NewJob::plain("floor", "noop")
        };
        for moving in [job(-1, None), job(0, Some("tenant"))] {
            let statements = super::super::enqueue_statements(&moving);
            assert_eq!(statements.len(), 3);
            assert_eq!(statements[0].sql, MYSQL_MOVE_ON);
            assert!(statements[1].sql.contains("INSERT INTO solidq_jobs"));
        }
        let plain = super::super::enqueue_statements(&job(0, None));
        assert_eq!(plain.len(), 2);
        assert!(plain.iter().all(|s| s.sql != MYSQL_MOVE_ON));
    }
}
