//! SQLite's processes area: registrations, heartbeats, and finding the
//! processes that are gone.

// The backend's statements, row types and helpers, which its areas share.
use super::*;

impl ProcessesDriver for SqliteConnection {
    fn process_insert(&mut self, p: &NewProcess) -> QueryResult<i64> {
        let now = utc_now();
        let row: IdRow = Cached(
            sql_query(
                "INSERT INTO solidq_processes (kind, name, pid, hostname, supervisor_id, metadata,
                                               last_heartbeat_at, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7) RETURNING id",
            )
            .bind::<Text, _>(&p.kind)
            .bind::<Text, _>(&p.name)
            .bind::<Integer, _>(p.pid)
            .bind::<Text, _>(&p.hostname)
            .bind::<Nullable<BigInt>, _>(p.supervisor_id)
            .bind::<Text, _>(&p.metadata)
            .bind::<Timestamp, _>(now),
        )
        .get_result(self)?;
        Ok(row.id)
    }

    fn process_heartbeat(&mut self, id: i64) -> QueryResult<bool> {
        let n = Cached(
            sql_query(HEARTBEAT)
                .bind::<Timestamp, _>(utc_now())
                .bind::<BigInt, _>(id),
        )
        .execute(self)?;
        Ok(n > 0)
    }

    fn process_delete(&mut self, id: i64) -> QueryResult<bool> {
        let n =
            Cached(sql_query("DELETE FROM solidq_processes WHERE id = ?1").bind::<BigInt, _>(id))
                .execute(self)?;
        Ok(n > 0)
    }

    fn process_find_expired(
        &mut self,
        threshold: Duration,
        exclude: i64,
        limit: usize,
    ) -> QueryResult<Vec<ProcessRow>> {
        Cached(
            sql_query(format!(
                "SELECT {PROCESS_COLUMNS} FROM solidq_processes
                 WHERE last_heartbeat_at < ?1 AND id <> ?2 ORDER BY last_heartbeat_at LIMIT ?3"
            ))
            .bind::<Timestamp, _>(minus(utc_now(), threshold))
            .bind::<BigInt, _>(exclude)
            .bind::<BigInt, _>(limit as i64),
        )
        .load(self)
    }

    fn process_find_by_pid(
        &mut self,
        hostname: &str,
        pid: i32,
        supervisor_id: i64,
    ) -> QueryResult<Vec<ProcessRow>> {
        Cached(
            sql_query(format!(
                "SELECT {PROCESS_COLUMNS} FROM solidq_processes
                 WHERE hostname = ?1 AND pid = ?2 AND supervisor_id = ?3 ORDER BY id"
            ))
            .bind::<Text, _>(hostname)
            .bind::<Integer, _>(pid)
            .bind::<BigInt, _>(supervisor_id),
        )
        .load(self)
    }

    fn process_lock(
        &mut self,
        id: i64,
        dead_for: Option<Duration>,
    ) -> QueryResult<Option<ProcessRow>> {
        // The write lock is held already (BEGIN IMMEDIATE): re-reading the
        // row is enough to see whether another pruner got there first.
        let rows: Vec<ProcessRow> = Cached(
            sql_query(format!(
                "SELECT {PROCESS_COLUMNS} FROM solidq_processes
                 WHERE id = ?1 AND (?2 IS NULL OR last_heartbeat_at < ?2)"
            ))
            .bind::<BigInt, _>(id)
            .bind::<Nullable<Timestamp>, _>(dead_for.map(|d| minus(utc_now(), d))),
        )
        .load(self)?;
        Ok(rows.into_iter().next())
    }
}
