//! SQLite's claims area: claiming ready jobs, dispatching due ones, the fence
//! that keeps a claim its process's, and releasing claims. Its statements
//! are in `claims.sql`, but the claim's: its candidates are composed from
//! the worker's queue list (`ClaimQuery`), and its other statements are
//! `mod.rs`'s, which `explain.rs` reads too.

// The backend's statements, row types and helpers, which its areas share.
use super::*;
use crate::store::named::named;

const SQL: &str = include_str!("claims.sql");
const MARK_STARTED: &str = named(SQL, "claimed_mark_started");
const MARK_UNSTARTED: &str = named(SQL, "claimed_mark_unstarted");
pub(super) const FIND_DUE: &str = named(SQL, "scheduled_dispatch/find_due");
const MOVE_DUE: &str = named(SQL, "scheduled_dispatch/ready");
const DELETE_SCHEDULED: &str = named(SQL, "scheduled_dispatch/delete");
const CLAIMS_HELD: &str = named(SQL, "claimed_held");
pub(super) const DELETE_CLAIMS_FENCED: &str = named(SQL, "claimed_delete_fenced");
const CLAIMS_OF_PROCESS: &str = named(SQL, "claimed_delete_by_process/jobs");
const DELETE_CLAIMS_OF_PROCESS: &str = named(SQL, "claimed_delete_by_process/delete");
const ORPHANED_CLAIMS: &str = named(SQL, "claimed_delete_orphans/jobs");
const DELETE_ORPHANED_CLAIMS: &str = named(SQL, "claimed_delete_orphans/delete");
pub(super) const SUCCEED_GROUP: &str = named(SQL, "jobs_succeed_fenced/group");
const SUCCEED_WITH_RESULT: &str = named(SQL, "jobs_succeed_fenced/with_result");

impl ClaimsDriver for SqliteConnection {
    fn ready_claim(
        &mut self,
        claim: &ClaimQuery,
        process_id: i64,
        limits: &ClaimLimits,
    ) -> QueryResult<Vec<ClaimedJob>> {
        // Look without the write lock first: an idle poll stays a read.
        if claim_candidates(self, claim, 1)?.is_empty() {
            return Ok(Vec::new());
        }
        claim_after(self, claim, process_id, limits, &mut |_| Ok(()))
    }

    fn ready_claim_after(
        &mut self,
        claim: &ClaimQuery,
        process_id: i64,
        limits: &ClaimLimits,
        before: &mut dyn FnMut(&mut dyn Driver) -> QueryResult<()>,
    ) -> QueryResult<Vec<ClaimedJob>> {
        claim_after(self, claim, process_id, limits, before)
    }
    fn claimed_mark_started(&mut self, process_id: i64, job_ids: &[i64]) -> QueryResult<()> {
        write_tx(self, |c| {
            Cached(
                prepared(MARK_STARTED)
                    .bind::<BigInt, _>(process_id)
                    .bind::<Text, _>(json_ids(job_ids))
                    .bind::<Timestamp, _>(utc_now()),
            )
            .execute(c)
            .map(drop)
        })
    }

    fn claimed_mark_unstarted(&mut self, process_id: i64, job_ids: &[i64]) -> QueryResult<()> {
        write_tx(self, |c| {
            Cached(
                prepared(MARK_UNSTARTED)
                    .bind::<BigInt, _>(process_id)
                    .bind::<Text, _>(json_ids(job_ids)),
            )
            .execute(c)
            .map(drop)
        })
    }

    fn scheduled_dispatch(&mut self, batch: usize) -> QueryResult<Vec<String>> {
        let find = |c: &mut SqliteConnection, limit: i64| -> QueryResult<Vec<DueRow>> {
            Cached(
                prepared(FIND_DUE)
                    .bind::<Timestamp, _>(utc_now())
                    .bind::<BigInt, _>(limit),
            )
            .load(c)
        };
        if find(self, 1)?.is_empty() {
            return Ok(Vec::new());
        }
        self.immediate_transaction(|c| {
            let due = find(c, batch as i64)?;
            if due.is_empty() {
                return Ok(Vec::new());
            }
            let ids = json_ids(&due.iter().map(|d| d.job_id).collect::<Vec<_>>());
            Cached(
                prepared(MOVE_DUE)
                    .bind::<Text, _>(&ids)
                    .bind::<Timestamp, _>(utc_now()),
            )
            .execute(c)?;
            Cached(prepared(DELETE_SCHEDULED).bind::<Text, _>(&ids)).execute(c)?;
            Ok(due.into_iter().map(|d| d.queue_name).collect())
        })
    }

    /// SQLite's claims keep to the head (`store::floor`), but the look
    /// answers the same.
    fn ready_below_floor(&mut self, claim: &ClaimQuery, floor: i64) -> QueryResult<bool> {
        let sql = claim.candidates_where_sql(
            "1",
            " AND (r.priority < 0 OR (r.priority = 0 AND r.position < ?))",
            "",
        );
        let rows: Vec<crate::store::ReadyJobId> =
            Cached(sql_query(sql).bind::<BigInt, _>(floor)).load(self)?;
        Ok(!rows.is_empty())
    }

    fn claimed_held(&mut self, process_id: i64, job_ids: &[i64]) -> QueryResult<Vec<i64>> {
        let rows: Vec<IdRow> = Cached(
            prepared(CLAIMS_HELD)
                .bind::<BigInt, _>(process_id)
                .bind::<Text, _>(json_ids(job_ids)),
        )
        .load(self)?;
        Ok(rows.into_iter().map(|r| r.id).collect())
    }

    fn claimed_delete_fenced(&mut self, process_id: i64, job_ids: &[i64]) -> QueryResult<Vec<i64>> {
        let rows: Vec<IdRow> = Cached(
            prepared(DELETE_CLAIMS_FENCED)
                .bind::<BigInt, _>(process_id)
                .bind::<Text, _>(json_ids(job_ids)),
        )
        .load(self)?;
        Ok(rows.into_iter().map(|r| r.id).collect())
    }

    fn claimed_delete_by_process(&mut self, process_id: i64) -> QueryResult<Vec<ReleasedJob>> {
        let jobs: Vec<ReleasedJob> =
            Cached(prepared(CLAIMS_OF_PROCESS).bind::<BigInt, _>(process_id)).load(self)?;
        Cached(prepared(DELETE_CLAIMS_OF_PROCESS).bind::<BigInt, _>(process_id)).execute(self)?;
        Ok(jobs)
    }

    fn claimed_delete_orphans(&mut self, limit: usize) -> QueryResult<Vec<ReleasedJob>> {
        let jobs: Vec<ReleasedJob> =
            Cached(prepared(ORPHANED_CLAIMS).bind::<BigInt, _>(limit as i64)).load(self)?;
        if !jobs.is_empty() {
            let ids = json_ids(&jobs.iter().map(|j| j.id).collect::<Vec<_>>());
            Cached(prepared(DELETE_ORPHANED_CLAIMS).bind::<Text, _>(ids)).execute(self)?;
        }
        Ok(jobs)
    }

    fn jobs_succeed_fenced(
        &mut self,
        process_id: i64,
        rows: &[Succeeded],
        starts: &[i64],
    ) -> QueryResult<Vec<i64>> {
        // Outcomes without a result and with the same keep_result (nearly
        // all) are written by one UPDATE per group; a result is written row
        // by row.
        let mut groups: HashMap<std::time::Duration, Vec<&Succeeded>> = HashMap::new();
        let mut with_result = Vec::new();
        for row in rows {
            match &row.result {
                None => groups.entry(row.keep).or_default().push(row),
                Some(_) => with_result.push(row),
            }
        }
        let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
        write_tx(self, |c| {
            if !starts.is_empty() {
                ClaimsDriver::claimed_mark_started(c, process_id, starts)?;
            }
            let fenced: Vec<i64> = ClaimsDriver::claimed_delete_fenced(c, process_id, &ids)?;
            if fenced.is_empty() {
                return Ok(fenced);
            }
            let held: std::collections::HashSet<i64> = fenced.iter().copied().collect();
            let now = utc_now();
            for (keep, group) in &groups {
                let group: Vec<(i64, NaiveDateTime)> = group
                    .iter()
                    .filter(|r| held.contains(&r.id))
                    .map(|r| (r.id, minus(now, r.started_ago)))
                    .collect();
                if group.is_empty() {
                    continue;
                }
                Cached(
                    prepared(SUCCEED_GROUP)
                        .bind::<Text, _>(attempt_starts(&group))
                        .bind::<Timestamp, _>(now)
                        .bind::<Timestamp, _>(plus(now, *keep)),
                )
                .execute(c)?;
            }
            for row in with_result.iter().filter(|r| held.contains(&r.id)) {
                Cached(
                    prepared(SUCCEED_WITH_RESULT)
                        .bind::<Timestamp, _>(now)
                        .bind::<Timestamp, _>(plus(now, row.keep))
                        .bind::<Nullable<Text>, _>(row.result.as_deref())
                        .bind::<BigInt, _>(row.id)
                        .bind::<Timestamp, _>(minus(now, row.started_ago)),
                )
                .execute(c)?;
            }
            Ok(fenced)
        })
    }
}

/// A claim under the write lock (`BEGIN IMMEDIATE`), after `before` in the
/// same transaction (the worker's outcomes waiting to be written, or
/// nothing: one `COMMIT` for both); the claimed rows are read after the
/// commit, outside the lock.
fn claim_after(
    conn: &mut SqliteConnection,
    claim: &ClaimQuery,
    process_id: i64,
    limits: &ClaimLimits,
    before: &mut dyn FnMut(&mut dyn Driver) -> QueryResult<()>,
) -> QueryResult<Vec<ClaimedJob>> {
    let claimed_at = utc_now();
    let (picked, started, positions) =
        conn.immediate_transaction::<_, diesel::result::Error, _>(|c| {
            before(c)?;
            if limits.total() == 0 {
                return Ok((Vec::new(), Vec::new(), HashMap::new()));
            }
            // No claims for a process whose row is gone (it was pruned):
            // they would be orphans.
            let alive: Scalar =
                Cached(prepared(PROCESS_ALIVE).bind::<BigInt, _>(process_id)).get_result(c)?;
            if alive.v == 0 {
                return Ok((Vec::new(), Vec::new(), HashMap::new()));
            }
            // Beyond the idle threads: only jobs of fast kinds, and never
            // at-most-once ones.
            let candidates = if limits.ahead > 0 && !limits.fast_kinds.is_empty() {
                claim_candidates_ahead(c, claim, limits.total(), &limits.fast_kinds)?
            } else {
                claim_candidates(c, claim, limits.immediate)?
            };
            let picked: Vec<&Candidate> = candidates
                .iter()
                .enumerate()
                .filter(|(n, candidate)| *n < limits.immediate || candidate.eligible)
                .map(|(_, candidate)| candidate)
                .collect();
            let positions: HashMap<i64, i64> =
                picked.iter().map(|c| (c.job_id, c.position)).collect();
            let picked: Vec<i64> = picked.iter().map(|c| c.job_id).collect();
            let started: Vec<i64> = picked.iter().copied().take(limits.immediate).collect();
            if picked.is_empty() {
                return Ok((picked, started, positions));
            }
            let ids_json = json_ids(&picked);
            Cached(prepared(DELETE_READY_CLAIMED).bind::<Text, _>(&ids_json)).execute(c)?;
            Cached(
                prepared(INSERT_CLAIMED)
                    .bind::<Text, _>(&ids_json)
                    .bind::<BigInt, _>(process_id)
                    .bind::<Timestamp, _>(claimed_at)
                    .bind::<Text, _>(json_ids(&started)),
            )
            .execute(c)?;
            Ok((picked, started, positions))
        })?;
    if picked.is_empty() {
        return Ok(Vec::new());
    }
    // The rows are read after the commit, outside the write lock: a
    // claimed job's row changes only through its claim's holder.
    let mut jobs: Vec<ClaimedJob> = Cached(
        prepared(SELECT_CLAIMED_JOBS)
            .bind::<Text, _>(json_ids(&picked))
            .bind::<Timestamp, _>(claimed_at)
            .bind::<Text, _>(json_ids(&started)),
    )
    .load(conn)?;
    for job in &mut jobs {
        job.position = positions.get(&job.id).copied().unwrap_or(job.id);
    }
    claim.sort(&mut jobs);
    Ok(jobs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::fair::{READY_COLUMNS, ready_rows_sql};

    fn words(sql: &str) -> String {
        sql.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    /// claims.sql holds the text store::fair makes for these arguments:
    /// a change there must be made here too.
    #[test]
    fn the_ready_rows_of_dispatched_jobs_are_placed_as_store_fair_places_them() {
        let fair = format!(
            "INSERT INTO solidq_ready_executions ({READY_COLUMNS}) {}",
            ready_rows_sql(
                "j",
                "?2",
                "FROM solidq_jobs j WHERE j.id IN (SELECT value FROM json_each(?1))"
            )
        );
        assert_eq!(words(MOVE_DUE), words(&fair));
    }

    fn succeeded(job_id: i64, process_id: i64, result: &str) -> crate::store::Completion {
        crate::store::Completion {
            job_id,
            process_id,
            outcome: crate::store::Outcome::Succeeded {
                result: Some(result.into()),
                keep: std::time::Duration::from_secs(3600),
            },
            slot: None,
            batch_id: None,
            started: Some(std::time::Instant::now()),
            recorded: false,
        }
    }

    /// On SQLite a worker's outcomes and its next claim are written in one
    /// transaction (`completer::ClaimRequest`): each outcome fenced by its
    /// claim as in a write of its own, the claim taken after them, and an
    /// outcome the database refuses takes the claim back with it.
    #[test]
    fn outcomes_and_a_claim_in_one_transaction_commit_or_roll_back_together() {
        use crate::types::JobStatus;
        use diesel::Connection;
        use diesel::connection::SimpleConnection;
        let (dir, store, ids, process, claim) =
            crate::store::Store::four_jobs_and_a_worker("joint");
        let status = |id: i64| {
            store
                .job_info(crate::store::JobLookup::Id(id))
                .unwrap()
                .status
        };
        let sorted = |mut ids: Vec<i64>| {
            ids.sort_unstable();
            ids
        };
        let first = store
            .ready_claim(&claim, process, &ClaimLimits::idle(2))
            .unwrap();
        assert_eq!(first.len(), 2);
        // The two claimed, and one whose claim this process does not hold.
        let mut done: Vec<_> = first
            .iter()
            .map(|j| succeeded(j.id, process, "\"ok\""))
            .collect();
        done.push(succeeded(ids[0] + 1_000, process, "\"ok\""));
        let (report, next) = store
            .claimed_finish_then_claim(&done, &[], &[], &claim, process, &ClaimLimits::idle(4))
            .unwrap();
        assert_eq!(
            sorted(report.written.clone()),
            sorted(first.iter().map(|j| j.id).collect())
        );
        assert_eq!(report.lost, vec![ids[0] + 1_000], "fenced by its claim");
        let rest: Vec<i64> = ids
            .iter()
            .copied()
            .filter(|id| first.iter().all(|j| j.id != *id))
            .collect();
        assert_eq!(sorted(next.iter().map(|j| j.id).collect()), rest);
        for job in &first {
            assert_eq!(status(job.id), JobStatus::Succeeded);
        }
        for id in &rest {
            assert_eq!(status(*id), JobStatus::Running);
        }

        // An outcome the database refuses: neither it nor the claim after
        // it is written.
        let path = dir.path().join("q.sqlite3").display().to_string();
        let mut sql = diesel::sqlite::SqliteConnection::establish(&path).unwrap();
        sql.batch_execute(
            "CREATE TRIGGER no_poison BEFORE UPDATE OF result ON solidq_jobs
                 WHEN NEW.result LIKE '%poison%'
                 BEGIN SELECT RAISE(ABORT, 'poisoned result refused'); END;",
        )
        .unwrap();
        let more: Vec<i64> = store
            .jobs_enqueue(&vec![NewJob::plain("default", "noop"); 2])
            .unwrap()
            .outcome
            .into_iter()
            .map(|o| o.unwrap())
            .collect();
        let refused = [
            succeeded(rest[0], process, "\"fine\""),
            succeeded(rest[1], process, "\"poison\""),
        ];
        store
            .claimed_finish_then_claim(&refused, &[], &[], &claim, process, &ClaimLimits::idle(2))
            .unwrap_err();
        for id in &rest {
            assert_eq!(status(*id), JobStatus::Running, "the outcomes rolled back");
        }
        for id in &more {
            assert_eq!(status(*id), JobStatus::Ready, "and the claim with them");
        }

        // A claim the database refuses after outcomes it took: the
        // outcomes roll back with it (they are written again by the
        // completer, on their own).
        sql.batch_execute(
            "CREATE TRIGGER no_claims BEFORE INSERT ON solidq_claimed_executions
             BEGIN SELECT RAISE(ABORT, 'claims refused'); END;",
        )
        .unwrap();
        store
            .claimed_finish_then_claim(
                &refused[..1],
                &[],
                &[],
                &claim,
                process,
                &ClaimLimits::idle(2),
            )
            .unwrap_err();
        assert_eq!(
            status(rest[0]),
            JobStatus::Running,
            "the outcome rolled back"
        );
        for id in &more {
            assert_eq!(status(*id), JobStatus::Ready);
        }
    }
}
