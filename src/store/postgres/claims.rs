//! PostgreSQL's claims area: claiming ready jobs, dispatching due ones, the fence
//! that keeps a claim its process's, and releasing claims.

// The backend's statements, row types and helpers, which its areas share.
use super::*;

impl ClaimsDriver for PgConnection {
    fn ready_claim(
        &mut self,
        claim: &ClaimQuery,
        process_id: i64,
        limits: &ClaimLimits,
    ) -> QueryResult<Vec<ClaimedJob>> {
        let sql = claim.postgres_sql();
        let mut jobs: Vec<ClaimedJob> = Cached(
            sql_query(sql)
                .bind::<BigInt, _>(limits.immediate as i64)
                .bind::<BigInt, _>(process_id)
                .bind::<BigInt, _>((limits.total() - limits.immediate) as i64)
                .bind::<Array<Text>, _>(&limits.fast_kinds),
        )
        .load(self)?;
        claim.sort(&mut jobs);
        Ok(jobs)
    }

    fn scheduled_dispatch(&mut self, batch: usize) -> QueryResult<Vec<String>> {
        let rows: Vec<QueueRow> =
            Cached(sql_query(DISPATCH_SCHEDULED.as_str()).bind::<BigInt, _>(batch as i64))
                .load(self)?;
        Ok(rows.into_iter().map(|r| r.queue_name).collect())
    }

    fn claimed_held(&mut self, process_id: i64, job_ids: &[i64]) -> QueryResult<Vec<i64>> {
        let rows: Vec<IdRow> = Cached(
            sql_query(CLAIMS_HELD)
                .bind::<BigInt, _>(process_id)
                .bind::<Array<BigInt>, _>(job_ids),
        )
        .load(self)?;
        Ok(rows.into_iter().map(|r| r.id).collect())
    }

    fn claimed_delete_fenced(&mut self, process_id: i64, job_ids: &[i64]) -> QueryResult<Vec<i64>> {
        let rows: Vec<IdRow> = Cached(
            sql_query(DELETE_CLAIMS_FENCED)
                .bind::<BigInt, _>(process_id)
                .bind::<Array<BigInt>, _>(job_ids),
        )
        .load(self)?;
        Ok(rows.into_iter().map(|r| r.id).collect())
    }

    fn claimed_mark_started(&mut self, process_id: i64, job_ids: &[i64]) -> QueryResult<()> {
        Cached(
            sql_query(MARK_STARTED)
                .bind::<BigInt, _>(process_id)
                .bind::<Array<BigInt>, _>(job_ids),
        )
        .execute(self)
        .map(drop)
    }

    fn claimed_delete_by_process(&mut self, process_id: i64) -> QueryResult<Vec<ReleasedJob>> {
        Cached(sql_query(DELETE_CLAIMS_OF_PROCESS).bind::<BigInt, _>(process_id)).load(self)
    }

    fn claimed_delete_orphans(&mut self, limit: usize) -> QueryResult<Vec<ReleasedJob>> {
        Cached(sql_query(DELETE_ORPHANED_CLAIMS).bind::<BigInt, _>(limit as i64)).load(self)
    }

    fn jobs_succeed_fenced(
        &mut self,
        process_id: i64,
        rows: &[Succeeded],
        starts: &[i64],
    ) -> QueryResult<Vec<i64>> {
        // Sorted by id: the statement binary-searches the ids.
        let mut rows: Vec<&Succeeded> = rows.iter().collect();
        rows.sort_unstable_by_key(|r| r.id);
        let written: Vec<IdRow> = Cached(
            sql_query(SUCCEED_FENCED)
                .bind::<BigInt, _>(process_id)
                .bind::<Array<BigInt>, _>(rows.iter().map(|r| r.id).collect::<Vec<_>>())
                .bind::<Array<Nullable<Text>>, _>(
                    rows.iter().map(|r| r.result.as_deref()).collect::<Vec<_>>(),
                )
                .bind::<Array<BigInt>, _>(rows.iter().map(|r| micros(r.keep)).collect::<Vec<_>>())
                .bind::<Array<BigInt>, _>(starts)
                .bind::<Array<BigInt>, _>(
                    rows.iter()
                        .map(|r| micros(r.started_ago))
                        .collect::<Vec<_>>(),
                ),
        )
        .load(self)?;
        Ok(written.into_iter().map(|r| r.id).collect())
    }
}
