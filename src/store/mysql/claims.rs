//! MySQL's claims area: claiming ready jobs, dispatching due ones, the fence
//! that keeps a claim its process's, and releasing claims. Its statements
//! are in `claims.sql`, but the claim's: its candidates are composed from
//! the worker's queue list (`ClaimQuery`), and its other statements are
//! `mod.rs`'s.

// The backend's statements, row types and helpers, which its areas share.
use std::collections::HashSet;

use super::*;
use crate::store::named::named;

const SQL: &str = include_str!("claims.sql");
const MARK_STARTED: &str = named(SQL, "claimed_mark_started");
const MARK_UNSTARTED: &str = named(SQL, "claimed_mark_unstarted");
const FIND_DUE: &str = named(SQL, "scheduled_dispatch/find_due");
const LOCK_DUE: &str = named(SQL, "scheduled_dispatch/lock_due");
const MOVE_DUE: &str = named(SQL, "scheduled_dispatch/ready");
const DELETE_SCHEDULED: &str = named(SQL, "scheduled_dispatch/delete");
const CLAIMS_HELD: &str = named(SQL, "claimed_held");
const CLAIMS_HELD_LOCKED: &str = named(SQL, "claimed_delete_fenced/lock");
const DELETE_CLAIMS_FENCED: &str = named(SQL, "claimed_delete_fenced/delete");
const CLAIMS_OF_PROCESS_LOCKED: &str = named(SQL, "claimed_delete_by_process/lock");
const DELETE_CLAIMS_OF_PROCESS: &str = named(SQL, "claimed_delete_by_process/delete");
const ORPHANS_LOCKED: &str = named(SQL, "claimed_delete_orphans/lock");
const ORPHANED_CLAIMS: &str = named(SQL, "claimed_delete_orphans/jobs");
const DELETE_ORPHANED_CLAIMS: &str = named(SQL, "claimed_delete_orphans/delete");
const DELETE_CLAIMS_HELD: &str = named(SQL, "jobs_succeed_fenced/claims");
const SUCCEED_GROUP: &str = named(SQL, "jobs_succeed_fenced/group");
const SUCCEED_WITH_RESULT: &str = named(SQL, "jobs_succeed_fenced/with_result");

impl ClaimsDriver for MysqlConnection {
    fn ready_claim(
        &mut self,
        claim: &ClaimQuery,
        process_id: i64,
        limits: &ClaimLimits,
    ) -> QueryResult<Vec<ClaimedJob>> {
        // In the caller's transaction (the lifecycle's, which reads a claim
        // back when its COMMIT's answer is lost): the claimed jobs are read
        // before the COMMIT, so they are known whenever it may have
        // committed.
        let c = self;
        // A single pattern's claim starts at the worker's floor while the
        // counter reads as the worker last saw it (`store::floor`), read
        // before the candidates, with the process's row.
        let mut floor_state = crate::store::floor::applies(claim).then(|| {
            claim
                .floor
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        });
        let at = std::time::Instant::now();
        let mut bound = None;
        let mut below = 0;
        if let Some(state) = floor_state.as_mut() {
            let Some(read) = super::floor::read_if_alive(c, process_id)? else {
                return Ok(Vec::new());
            };
            bound = Some(state.bound(at));
            below = read;
        } else {
            let alive: Scalar =
                Cached(prepared(PROCESS_ALIVE).bind::<BigInt, _>(process_id)).get_result(c)?;
            if alive.v == 0 {
                return Ok(Vec::new());
            }
        }
        let at_floor = bound.filter(|b| b.seen == below);
        let immediate_from = at_floor.filter(|b| !b.head).map(|b| b.floor);
        // The candidates come with their jobs, read and locked with them.
        let (mut jobs, last) = load_candidates(c, claim, limits.immediate, None, immediate_from)?;
        // Jobs ahead start at the floor, or at the last row the idle
        // threads' read took where that is further on (a single pattern:
        // one order). That read took all it asked for when this one runs,
        // so every row before its last one was taken by it, held by
        // another claim or on a paused queue; read again, those were the
        // rows claimed since purge last ran, walked twice a claim (as on
        // PostgreSQL: `postgres::floor::AHEAD_FROM`). The floor's range
        // is of priority 0, so only a last row of priority 0 moves it.
        let ahead_from = match last {
            Some((0, position)) if crate::store::floor::applies(claim) => {
                Some(at_floor.map_or(position, |b| b.floor.max(position)))
            }
            _ => at_floor.map(|b| b.floor),
        };
        let started: Vec<i64> = jobs.iter().map(|j| j.id).collect();
        // Beyond the idle threads: only jobs of fast kinds, and never
        // at-most-once ones; and not looked for when the idle threads'
        // read came back short: each of its patterns then read to the end
        // of what it may claim, and this read covers the same rows or
        // fewer (a job committed between the two reads changes the
        // listener's signature, and the next claim takes it).
        if !limits.fast_kinds.is_empty() && jobs.len() >= limits.immediate {
            let ahead = Some((limits.fast_kinds.as_slice(), started.as_slice()));
            jobs.extend(load_candidates(c, claim, limits.ahead, ahead, ahead_from)?.0);
        }
        if !jobs.is_empty() {
            let picked: Vec<i64> = jobs.iter().map(|j| j.id).collect();
            Cached(prepared(DELETE_READY_CLAIMED).bind::<Text, _>(json_ids(&picked))).execute(c)?;
            let now: HashSet<i64> = started.iter().copied().collect();
            let claims = serde_json::Value::Array(
                picked
                    .iter()
                    .map(|id| serde_json::json!([id, u8::from(now.contains(id))]))
                    .collect(),
            );
            Cached(
                prepared(INSERT_CLAIMED)
                    .bind::<BigInt, _>(process_id)
                    .bind::<Text, _>(claims.to_string()),
            )
            .execute(c)?;
            for job in &mut jobs {
                job.started = now.contains(&job.id);
            }
        }
        if let (Some(state), Some(bound)) = (floor_state.as_mut(), bound) {
            state.claimed(at, at.elapsed(), (bound, limits.immediate), below, &jobs);
        }
        claim.sort(&mut jobs);
        Ok(jobs)
    }

    fn ready_below_floor(&mut self, claim: &ClaimQuery, floor: i64) -> QueryResult<bool> {
        let rows: Vec<crate::store::ReadyJobId> =
            Cached(sql_query(super::floor::below_sql(claim)).bind::<BigInt, _>(floor))
                .load(self)?;
        Ok(!rows.is_empty())
    }

    fn claimed_mark_started(&mut self, process_id: i64, job_ids: &[i64]) -> QueryResult<()> {
        Cached(
            prepared(MARK_STARTED)
                .bind::<Text, _>(json_ids(job_ids))
                .bind::<BigInt, _>(process_id),
        )
        .execute(self)
        .map(drop)
    }

    fn claimed_mark_unstarted(&mut self, process_id: i64, job_ids: &[i64]) -> QueryResult<()> {
        Cached(
            prepared(MARK_UNSTARTED)
                .bind::<Text, _>(json_ids(job_ids))
                .bind::<BigInt, _>(process_id),
        )
        .execute(self)
        .map(drop)
    }

    fn scheduled_dispatch(&mut self, batch: usize) -> QueryResult<Vec<String>> {
        // Look without locks first: an idle dispatcher opens no transaction.
        let any: Vec<DueRow> = Cached(prepared(FIND_DUE).bind::<BigInt, _>(1)).load(self)?;
        if any.is_empty() {
            return Ok(Vec::new());
        }
        write_tx(self, |c| {
            // Several dispatchers take disjoint batches.
            let due: Vec<DueRow> =
                Cached(prepared(LOCK_DUE).bind::<BigInt, _>(batch as i64)).load(c)?;
            if due.is_empty() {
                return Ok(Vec::new());
            }
            let ids = json_ids(&due.iter().map(|d| d.job_id).collect::<Vec<_>>());
            let ready = Cached(prepared(MOVE_DUE).bind::<Text, _>(&ids)).execute(c)?;
            super::floor::moved(c, ready)?;
            Cached(prepared(DELETE_SCHEDULED).bind::<Text, _>(&ids)).execute(c)?;
            Ok(due.into_iter().map(|d| d.queue_name).collect())
        })
    }

    fn claimed_held(&mut self, process_id: i64, job_ids: &[i64]) -> QueryResult<Vec<i64>> {
        let rows: Vec<IdRow> = Cached(
            prepared(CLAIMS_HELD)
                .bind::<Text, _>(json_ids(job_ids))
                .bind::<BigInt, _>(process_id),
        )
        .load(self)?;
        Ok(rows.into_iter().map(|r| r.id).collect())
    }

    fn claimed_delete_fenced(&mut self, process_id: i64, job_ids: &[i64]) -> QueryResult<Vec<i64>> {
        in_tx(self, |c| {
            let rows: Vec<IdRow> = Cached(
                prepared(CLAIMS_HELD_LOCKED)
                    .bind::<Text, _>(json_ids(job_ids))
                    .bind::<BigInt, _>(process_id),
            )
            .load(c)?;
            let held: Vec<i64> = rows.into_iter().map(|r| r.id).collect();
            if !held.is_empty() {
                Cached(prepared(DELETE_CLAIMS_FENCED).bind::<Text, _>(json_ids(&held)))
                    .execute(c)?;
            }
            Ok(held)
        })
    }

    fn claimed_delete_by_process(&mut self, process_id: i64) -> QueryResult<Vec<ReleasedJob>> {
        write_tx(self, |c| {
            let jobs: Vec<ReleasedJob> =
                Cached(prepared(CLAIMS_OF_PROCESS_LOCKED).bind::<BigInt, _>(process_id)).load(c)?;
            if !jobs.is_empty() {
                let ids = json_ids(&jobs.iter().map(|j| j.id).collect::<Vec<_>>());
                Cached(prepared(DELETE_CLAIMS_OF_PROCESS).bind::<Text, _>(ids)).execute(c)?;
            }
            Ok(jobs)
        })
    }

    fn claimed_delete_orphans(&mut self, limit: usize) -> QueryResult<Vec<ReleasedJob>> {
        write_tx(self, |c| {
            let orphans: Vec<IdRow> =
                Cached(prepared(ORPHANS_LOCKED).bind::<BigInt, _>(limit as i64)).load(c)?;
            if orphans.is_empty() {
                return Ok(Vec::new());
            }
            let ids = json_ids(&orphans.iter().map(|o| o.id).collect::<Vec<_>>());
            let jobs: Vec<ReleasedJob> =
                Cached(prepared(ORPHANED_CLAIMS).bind::<Text, _>(&ids)).load(c)?;
            Cached(prepared(DELETE_ORPHANED_CLAIMS).bind::<Text, _>(&ids)).execute(c)?;
            Ok(jobs)
        })
    }

    fn jobs_succeed_fenced(
        &mut self,
        process_id: i64,
        rows: &[Succeeded],
        starts: &[i64],
    ) -> QueryResult<Vec<i64>> {
        // Outcomes without a result and with the same keep_result (nearly
        // all) are written by one UPDATE per group; a result row by row.
        let mut groups: HashMap<Duration, Vec<&Succeeded>> = HashMap::new();
        let mut with_result = Vec::new();
        for row in rows {
            match &row.result {
                None => groups.entry(row.keep).or_default().push(row),
                Some(_) => with_result.push(row),
            }
        }
        let mut ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
        ids.sort_unstable();
        ids.dedup();
        // The fence in one statement (its count tells whether every claim
        // was held), in a transaction of its own; when one was not (its
        // process was pruned, or released it), or inside the caller's
        // transaction, which it cannot roll back alone, the claims held are
        // read and locked first, then deleted.
        let mut not_all_held = false;
        if !in_transaction(self)? {
            let all = write_tx(self, |c| {
                if !starts.is_empty() {
                    ClaimsDriver::claimed_mark_started(c, process_id, starts)?;
                }
                let deleted = Cached(
                    prepared(DELETE_CLAIMS_HELD)
                        .bind::<Text, _>(json_ids(&ids))
                        .bind::<BigInt, _>(process_id),
                )
                .execute(c)?;
                if deleted != ids.len() {
                    not_all_held = true;
                    return Err(diesel::result::Error::RollbackTransaction);
                }
                write_succeeded(c, &groups, &with_result, None)?;
                Ok(ids.clone())
            });
            match all {
                Err(diesel::result::Error::RollbackTransaction) if not_all_held => {}
                all => return all,
            }
        }
        in_tx(self, |c| {
            if !starts.is_empty() {
                ClaimsDriver::claimed_mark_started(c, process_id, starts)?;
            }
            let fenced: Vec<i64> = ClaimsDriver::claimed_delete_fenced(c, process_id, &ids)?;
            if fenced.is_empty() {
                return Ok(fenced);
            }
            let held: HashSet<i64> = fenced.iter().copied().collect();
            write_succeeded(c, &groups, &with_result, Some(&held))?;
            Ok(fenced)
        })
    }
}

/// Writes successes: one `UPDATE` per group without a result and with the
/// same retention, a result row by row; of those in `held` only, when
/// given (the others' claims were not held).
fn write_succeeded(
    c: &mut MysqlConnection,
    groups: &HashMap<Duration, Vec<&Succeeded>>,
    with_result: &[&Succeeded],
    held: Option<&HashSet<i64>>,
) -> QueryResult<()> {
    let fenced = |id: &i64| held.is_none_or(|held| held.contains(id));
    for (keep, group) in groups {
        let mut group: Vec<&Succeeded> = group.iter().copied().filter(|r| fenced(&r.id)).collect();
        if group.is_empty() {
            continue;
        }
        group.sort_unstable_by_key(|r| r.id);
        let pairs = serde_json::Value::Array(
            group
                .iter()
                .map(|r| serde_json::json!([r.id, micros(r.started_ago)]))
                .collect(),
        );
        Cached(
            prepared(SUCCEED_GROUP)
                .bind::<Text, _>(pairs.to_string())
                .bind::<BigInt, _>(micros(*keep)),
        )
        .execute(c)?;
    }
    for row in with_result.iter().filter(|r| fenced(&r.id)) {
        Cached(
            prepared(SUCCEED_WITH_RESULT)
                .bind::<BigInt, _>(micros(row.keep))
                .bind::<Nullable<Text>, _>(row.result.as_deref())
                .bind::<BigInt, _>(micros(row.started_ago))
                .bind::<BigInt, _>(row.id),
        )
        .execute(c)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::fair::{READY_COLUMNS, ready_rows_sql};
    use crate::store::mysql::IDS;

    fn words(sql: &str) -> String {
        sql.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    /// A fresh migrated test database and a connection to it, or `None`
    /// without a server.
    fn migrated() -> Option<(crate::types::DatabaseUrl, MysqlConnection)> {
        let url = crate::store::conformance::mysql_url()?;
        let url = crate::types::DatabaseUrl::parse(&url).unwrap();
        let options = crate::store::PoolOptions {
            size: 1,
            timeout: std::time::Duration::from_secs(30),
            sqlite: crate::store::SqliteSettings::default(),
        };
        crate::store::Store::connect(&url, &options)
            .unwrap()
            .migrate()
            .unwrap();
        let conn = connect(&url);
        Some((url, conn))
    }

    /// Another connection to `url`'s database.
    fn connect(url: &crate::types::DatabaseUrl) -> MysqlConnection {
        let crate::store::AnyConnection::Mysql(conn) = url
            .establish(crate::store::SqliteSettings::default())
            .unwrap()
        else {
            panic!("a MySQL connection");
        };
        conn
    }

    /// Statements the connection executed so far, this read included.
    fn executed(conn: &mut MysqlConnection) -> i64 {
        #[derive(QueryableByName)]
        struct Status {
            #[diesel(sql_type = Text)]
            #[diesel(column_name = Value)]
            value: String,
        }
        let row: Status = sql_query("SHOW SESSION STATUS LIKE 'Com_stmt_execute'")
            .get_result(conn)
            .unwrap();
        row.value.parse().unwrap()
    }

    /// A claim that comes back short of jobs for its idle threads runs no
    /// read of jobs to take ahead (it could find nothing more): as many
    /// statements as a claim with nothing to take ahead. One that fills
    /// them runs that read, one statement more.
    #[test]
    fn a_claim_that_comes_back_short_reads_the_queue_once() {
        use diesel::Connection;

        use crate::store::{ClaimQuery, JobsDriver, NewJob};
        use crate::types::QueuePattern;

        let Some((_, mut conn)) = migrated() else {
            return;
        };
        let p = crate::store::conformance::process(&mut conn, "short");
        let enqueue = |conn: &mut MysqlConnection, n: usize| {
            let jobs: Vec<NewJob> = (0..n).map(|_| NewJob::plain("short", "noop")).collect();
            conn.jobs_insert(&jobs, false).unwrap();
        };
        let query = ClaimQuery::new(vec![QueuePattern::All]);
        // Statements a claim ran, and the jobs it took.
        let claim = |conn: &mut MysqlConnection, ahead: usize| -> (i64, usize) {
            let limits = ClaimLimits {
                immediate: 10,
                ahead,
                fast_kinds: if ahead > 0 {
                    vec!["noop".into()]
                } else {
                    Vec::new()
                },
                from: 0,
            };
            let before = executed(conn);
            let claimed = Connection::transaction(conn, |c| c.ready_claim(&query, p, &limits))
                .unwrap()
                .len();
            (executed(conn) - before, claimed)
        };
        enqueue(&mut conn, 5);
        let (without_ahead, claimed) = claim(&mut conn, 0);
        assert_eq!(claimed, 5);
        enqueue(&mut conn, 5);
        assert_eq!(
            claim(&mut conn, 10),
            (without_ahead, 5),
            "a claim of the last 5 jobs, 10 ahead allowed"
        );
        enqueue(&mut conn, 30);
        assert_eq!(
            claim(&mut conn, 10),
            (without_ahead + 1, 20),
            "a claim of 10 and 10 ahead"
        );
    }

    /// A claim reads its jobs in the locking read of their ready rows:
    /// from a floor, four statements (the process's row with the floor's
    /// counter, the candidates with their jobs, the ready rows' delete,
    /// the claims' insert), and a job whose row another transaction holds
    /// is skipped, as its ready row would be, until that one ends.
    #[test]
    fn a_claim_reads_and_locks_its_jobs_with_their_ready_rows() {
        use diesel::Connection;
        use diesel::connection::SimpleConnection;

        use crate::store::{ClaimQuery, JobsDriver, NewJob};
        use crate::types::QueuePattern;

        let Some((url, mut conn)) = migrated() else {
            return;
        };
        let mut other = connect(&url);
        let p = crate::store::conformance::process(&mut conn, "locked-jobs");
        let jobs: Vec<NewJob> = (0..3)
            .map(|_| NewJob::plain("claim_locks_jobs", "noop"))
            .collect();
        let ids: Vec<i64> = conn
            .jobs_insert(&jobs, false)
            .unwrap()
            .into_iter()
            .map(|id| id.unwrap())
            .collect();
        let query = ClaimQuery::new(vec![QueuePattern::Exact("claim_locks_jobs".into())]);
        let limits = ClaimLimits::idle(10);
        other
            .batch_execute(&format!(
                "BEGIN; SELECT id FROM solidq_jobs WHERE id = {} FOR UPDATE",
                ids[0]
            ))
            .unwrap();
        let before = executed(&mut conn);
        let claimed =
            Connection::transaction(&mut conn, |c| c.ready_claim(&query, p, &limits)).unwrap();
        // The second read of the counter counts itself.
        assert_eq!(executed(&mut conn) - before - 1, 4, "statements of a claim");
        let mut taken: Vec<i64> = claimed.iter().map(|j| j.id).collect();
        taken.sort_unstable();
        assert_eq!(taken, ids[1..], "the job held elsewhere is skipped");
        for job in &claimed {
            assert_eq!(
                (
                    job.queue_name.as_str(),
                    job.kind.as_str(),
                    job.attempts,
                    job.started
                ),
                ("claim_locks_jobs", "noop", 0, true)
            );
        }
        other.batch_execute("ROLLBACK").unwrap();
        let claimed =
            Connection::transaction(&mut conn, |c| c.ready_claim(&query, p, &limits)).unwrap();
        assert_eq!(
            claimed.iter().map(|j| j.id).collect::<Vec<_>>(),
            ids[..1],
            "taken once the other transaction ended"
        );
    }

    /// claims.sql holds the text store::fair makes for these arguments:
    /// a change there must be made here too.
    #[test]
    fn the_ready_rows_of_dispatched_jobs_are_placed_as_store_fair_places_them() {
        let fair = format!(
            "INSERT INTO solidq_ready_executions ({READY_COLUMNS}) {}",
            ready_rows_sql(
                "j",
                "UTC_TIMESTAMP(6)",
                &format!("FROM {IDS} STRAIGHT_JOIN solidq_jobs j ON j.id = ids.value")
            )
        );
        assert_eq!(words(MOVE_DUE), words(&fair));
    }

    /// The locked look for due jobs is the plain one, locked.
    #[test]
    fn dispatch_locks_the_due_jobs_it_finds() {
        assert_eq!(
            words(LOCK_DUE),
            words(&format!("{FIND_DUE} FOR UPDATE SKIP LOCKED"))
        );
    }
}
