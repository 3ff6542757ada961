//! The statements of rate limits (`rate_driver_methods!`, the driver's
//! bodies on each backend); the grants themselves, which decide, are in
//! `lifecycle/rates.rs`.

/// The rate-limit methods of [`Driver`](super::Driver), written once with diesel's query
/// builder; `$backend` picks how the key's row is created and locked.
macro_rules! rate_driver_methods {
    ($backend:ident) => {
        fn rate_keys_lock(
            &mut self,
            keys: &[String],
        ) -> QueryResult<Vec<(String, chrono::NaiveDateTime)>> {
            use $crate::store::schema::solidq_rate_limits as r;
            use diesel::prelude::*;
            let epoch = chrono::DateTime::UNIX_EPOCH.naive_utc();
            let now = chrono::Utc::now().naive_utc();
            let rows: Vec<_> = keys
                .iter()
                .map(|key| (r::key.eq(key.as_str()), r::next_at.eq(epoch), r::created_at.eq(now)))
                .collect();
            for chunk in rows.chunks(500) {
                $crate::store::rates::rate_driver_methods!(@insert $backend self, r::table, chunk);
            }
            let query = r::table
                .filter(r::key.eq_any(keys))
                .order(r::key)
                .select((r::key, r::next_at));
            $crate::store::rates::rate_driver_methods!(@lock $backend self, query)
        }

        fn rate_clock(&mut self) -> QueryResult<chrono::NaiveDateTime> {
            $crate::store::rates::rate_driver_methods!(@clock $backend self)
        }

        fn rate_key_set_next(&mut self, key: &str, at: chrono::NaiveDateTime) -> QueryResult<()> {
            use $crate::store::schema::solidq_rate_limits as r;
            use diesel::prelude::*;
            diesel::update(r::table.find(key))
                .set(r::next_at.eq(at))
                .execute(self)
                .map(drop)
        }

        fn rate_starts_counts(
            &mut self,
            keys: &[String],
            since: chrono::NaiveDateTime,
        ) -> QueryResult<Vec<(String, i64)>> {
            use $crate::store::schema::solidq_rate_starts as s;
            use diesel::prelude::*;
            s::table
                .filter(s::key.eq_any(keys))
                .filter(s::started_at.gt(since))
                .group_by(s::key)
                .select((s::key, diesel::dsl::count(s::id)))
                .load(self)
        }

        fn rate_start_nth(
            &mut self,
            key: &str,
            since: chrono::NaiveDateTime,
            offset: i64,
        ) -> QueryResult<chrono::NaiveDateTime> {
            use $crate::store::schema::solidq_rate_starts as s;
            use diesel::prelude::*;
            s::table
                .filter(s::key.eq(key))
                .filter(s::started_at.gt(since))
                .order(s::started_at)
                .select(s::started_at)
                .offset(offset)
                .first(self)
        }

        fn rate_starts_prune(
            &mut self,
            keys: &[String],
            since: chrono::NaiveDateTime,
        ) -> QueryResult<()> {
            use $crate::store::schema::solidq_rate_starts as s;
            use diesel::prelude::*;
            diesel::delete(
                s::table
                    .filter(s::key.eq_any(keys))
                    .filter(s::started_at.le(since)),
            )
            .execute(self)
            .map(drop)
        }

        fn rate_starts_forget(&mut self, job_ids: &[i64]) -> QueryResult<()> {
            use $crate::store::schema::solidq_rate_starts as s;
            use diesel::prelude::*;
            diesel::delete(s::table.filter(s::job_id.eq_any(job_ids)))
                .execute(self)
                .map(drop)
        }

        fn rate_starts_insert(
            &mut self,
            starts: &[(String, i64)],
            at: chrono::NaiveDateTime,
        ) -> QueryResult<()> {
            use $crate::store::schema::solidq_rate_starts as s;
            use diesel::prelude::*;
            let rows: Vec<_> = starts
                .iter()
                .map(|(key, id)| (s::key.eq(key.as_str()), s::job_id.eq(*id), s::started_at.eq(at)))
                .collect();
            for chunk in rows.chunks(500) {
                diesel::insert_into(s::table).values(chunk).execute(self)?;
            }
            Ok(())
        }

        fn jobs_defer(
            &mut self,
            job_id: i64,
            at: chrono::NaiveDateTime,
        ) -> QueryResult<Option<String>> {
            use $crate::store::schema::solidq_jobs as j;
            use $crate::store::schema::solidq_scheduled_executions as x;
            use diesel::prelude::*;
            let (queue, priority, key): (String, i32, Option<String>) = j::table
                .find(job_id)
                .select((j::queue_name, j::priority, j::concurrency_key))
                .first(self)?;
            diesel::update(j::table.find(job_id))
                .set(j::scheduled_at.eq(at))
                .execute(self)?;
            diesel::insert_into(x::table)
                .values((
                    x::job_id.eq(job_id),
                    x::queue_name.eq(queue),
                    x::priority.eq(priority),
                    x::scheduled_at.eq(at),
                    x::created_at.eq(chrono::Utc::now().naive_utc()),
                    x::concurrency_key.eq(key.as_deref()),
                ))
                .execute(self)?;
            Ok(key)
        }
    };
    (@insert postgres $conn:ident, $table:expr, $row:expr) => {
        diesel::insert_into($table)
            .values($row)
            .on_conflict_do_nothing()
            .execute($conn)?;
    };
    (@insert sqlite $conn:ident, $table:expr, $row:expr) => {
        diesel::insert_or_ignore_into($table).values($row).execute($conn)?;
    };
    (@insert mysql $conn:ident, $table:expr, $row:expr) => {
        diesel::insert_or_ignore_into($table).values($row).execute($conn)?;
    };
    (@clock postgres $conn:ident) => {{
        use diesel::prelude::*;
        // The statement's time (`LOCALTIMESTAMP` is the transaction's).
        diesel::select(diesel::dsl::sql::<diesel::sql_types::Timestamp>(
            "CAST(clock_timestamp() AS timestamp)",
        ))
        .get_result($conn)
    }};
    (@clock mysql $conn:ident) => {{
        use diesel::prelude::*;
        diesel::select(diesel::dsl::sql::<diesel::sql_types::Timestamp>("UTC_TIMESTAMP(6)"))
            .get_result($conn)
    }};
    (@clock sqlite $conn:ident) => {
        Ok($crate::store::utc_now())
    };
    (@lock sqlite $conn:ident, $query:expr) => {
        $query.load($conn)
    };
    (@lock $other:ident $conn:ident, $query:expr) => {
        $query.for_update().load($conn)
    };
}
pub(crate) use rate_driver_methods;
