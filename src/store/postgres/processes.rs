//! PostgreSQL's processes area: registrations, heartbeats, and finding the
//! processes that are gone.

// The backend's statements, row types and helpers, which its areas share.
use super::*;
use crate::store::named::named;

const SQL: &str = include_str!("processes.sql");
const PROCESS_INSERT: &str = named(SQL, "process_insert");
pub(super) const PROCESS_HEARTBEAT: &str = named(SQL, "process_heartbeat");
const PROCESS_DELETE: &str = named(SQL, "process_delete");
const PROCESS_FIND_EXPIRED: &str = named(SQL, "process_find_expired");
const PROCESS_FIND_BY_PID: &str = named(SQL, "process_find_by_pid");
const PROCESS_LOCK: &str = named(SQL, "process_lock");

impl ProcessesDriver for PgConnection {
    fn process_insert(&mut self, p: &NewProcess) -> QueryResult<i64> {
        let row: IdRow = Cached(
            prepared(PROCESS_INSERT)
                .bind::<Text, _>(&p.kind)
                .bind::<Text, _>(&p.name)
                .bind::<Integer, _>(p.pid)
                .bind::<Text, _>(&p.hostname)
                .bind::<Nullable<BigInt>, _>(p.supervisor_id)
                .bind::<Text, _>(&p.metadata),
        )
        .get_result(self)?;
        Ok(row.id)
    }

    fn process_heartbeat(&mut self, id: i64) -> QueryResult<bool> {
        let n = Cached(prepared(PROCESS_HEARTBEAT).bind::<BigInt, _>(id)).execute(self)?;
        Ok(n > 0)
    }

    fn process_delete(&mut self, id: i64) -> QueryResult<bool> {
        let n = Cached(prepared(PROCESS_DELETE).bind::<BigInt, _>(id)).execute(self)?;
        Ok(n > 0)
    }

    fn process_find_expired(
        &mut self,
        threshold: Duration,
        exclude: i64,
        limit: usize,
    ) -> QueryResult<Vec<ProcessRow>> {
        Cached(
            prepared(PROCESS_FIND_EXPIRED)
                .bind::<BigInt, _>(micros(threshold))
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
            prepared(PROCESS_FIND_BY_PID)
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
        let rows: Vec<ProcessRow> = Cached(
            prepared(PROCESS_LOCK)
                .bind::<BigInt, _>(id)
                .bind::<BigInt, _>(dead_for.map_or(-1, micros)),
        )
        .load(self)?;
        Ok(rows.into_iter().next())
    }
}
