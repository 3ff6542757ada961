//! PostgreSQL statements of the job statistics: a flush is one upsert of
//! every row (arrays through `unnest`), a fold one statement that deletes
//! the old rows and adds exactly what it deleted to the totals rows.

use std::time::Duration;

use diesel::sql_types::{Array, BigInt, Text, Timestamp};
use diesel::{PgConnection, QueryResult, QueryableByName, RunQueryDsl};

use crate::store::named::named;
use crate::store::{Cached, StatsDelta, StatsDriver, TOTALS_BUCKET, micros, prepared};

const SQL: &str = include_str!("stats.sql");
const ADD: &str = named(SQL, "add_deltas");
const FOLD: &str = named(SQL, "fold");

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    v: i64,
}

impl StatsDriver for PgConnection {
    fn job_stats_add(&mut self, rows: &[&StatsDelta]) -> QueryResult<()> {
        let conn = self;
        Cached(
            prepared(ADD)
                .bind::<Array<Timestamp>, _>(rows.iter().map(|r| r.bucket).collect::<Vec<_>>())
                .bind::<Array<Text>, _>(
                    rows.iter()
                        .map(|r| r.queue_name.as_str())
                        .collect::<Vec<_>>(),
                )
                .bind::<Array<Text>, _>(rows.iter().map(|r| r.kind.as_str()).collect::<Vec<_>>())
                .bind::<Array<Text>, _>(rows.iter().map(|r| r.outcome.as_str()).collect::<Vec<_>>())
                .bind::<Array<BigInt>, _>(rows.iter().map(|r| r.jobs).collect::<Vec<_>>())
                .bind::<Array<BigInt>, _>(rows.iter().map(|r| r.wait_ms).collect::<Vec<_>>())
                .bind::<Array<BigInt>, _>(rows.iter().map(|r| r.run_ms).collect::<Vec<_>>()),
        )
        .execute(conn)
        .map(drop)
    }

    fn job_stats_fold(&mut self, older_than: Duration) -> QueryResult<usize> {
        let conn = self;
        let folded: Count = Cached(
            prepared(FOLD)
                .bind::<Timestamp, _>(TOTALS_BUCKET)
                .bind::<BigInt, _>(micros(older_than)),
        )
        .get_result(conn)?;
        Ok(folded.v as usize)
    }
}
