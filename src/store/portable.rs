//! Statements written once, with diesel's query builder, for every backend.
//!
//! The three backends agree on most of the statements of batches,
//! dependencies and rate-limit starts: only how a query is run differs,
//! because each runs on its own connection type. [`Portable`] is that
//! difference: a connection that runs any query the query builder can
//! render on every compiled backend ([`Runs`], [`Loads`]), plus the few
//! primitives the backends spell differently (the id of the row just
//! inserted, a time as an SQL literal). The areas whose statements agree are
//! then implemented once, for every `Portable` connection (in `batches.rs`,
//! `dependencies.rs` and `rates.rs`), and each backend implements only the
//! areas and methods where it differs: Oban's engines delegate what is
//! shared and override what differs the same way.
//!
//! A query's type does not depend on the connection it runs on, so the
//! compiler checks a shared statement against every compiled backend where
//! it is written, and a statement one backend cannot render fails the build.

use chrono::NaiveDateTime;
use diesel::QueryResult;
use diesel::RunQueryDsl;
use diesel::query_dsl::methods::{ExecuteDsl, LoadQuery};

/// Stands for a backend that is not compiled in, so that the bounds below
/// name three connection types whatever the features: every query runs on
/// it (it is never run).
pub(crate) struct NotCompiled<const BACKEND: u8>;

#[cfg(feature = "sqlite")]
type SqliteConn = diesel::SqliteConnection;
#[cfg(not(feature = "sqlite"))]
type SqliteConn = NotCompiled<0>;
#[cfg(feature = "postgres")]
type PgConn = diesel::PgConnection;
#[cfg(not(feature = "postgres"))]
type PgConn = NotCompiled<1>;
#[cfg(feature = "mysql")]
type MysqlConn = diesel::MysqlConnection;
#[cfg(not(feature = "mysql"))]
type MysqlConn = NotCompiled<2>;

/// A statement that runs on connections of type `C`.
pub(crate) trait RunsOn<C>: Sized {
    /// Runs it, giving the number of rows it changed.
    fn run_on(self, conn: &mut C) -> QueryResult<usize>;
}

impl<Q, C> RunsOn<C> for Q
where
    C: diesel::Connection,
    Q: RunQueryDsl<C> + ExecuteDsl<C>,
{
    fn run_on(self, conn: &mut C) -> QueryResult<usize> {
        RunQueryDsl::execute(self, conn)
    }
}

impl<Q, const B: u8> RunsOn<NotCompiled<B>> for Q {
    fn run_on(self, _: &mut NotCompiled<B>) -> QueryResult<usize> {
        unreachable!("a backend that is not compiled in has no connection")
    }
}

/// A query that loads rows of `U` on connections of type `C`.
pub(crate) trait LoadsOn<'q, C, U>: Sized {
    /// Runs it, giving its rows.
    fn load_on(self, conn: &mut C) -> QueryResult<Vec<U>>;
}

impl<'q, Q, C, U> LoadsOn<'q, C, U> for Q
where
    C: diesel::Connection,
    Q: RunQueryDsl<C> + LoadQuery<'q, C, U>,
{
    fn load_on(self, conn: &mut C) -> QueryResult<Vec<U>> {
        RunQueryDsl::load(self, conn)
    }
}

impl<'q, Q, U, const B: u8> LoadsOn<'q, NotCompiled<B>, U> for Q {
    fn load_on(self, _: &mut NotCompiled<B>) -> QueryResult<Vec<U>> {
        unreachable!("a backend that is not compiled in has no connection")
    }
}

/// A statement every compiled backend can run.
pub(crate) trait Runs: RunsOn<SqliteConn> + RunsOn<PgConn> + RunsOn<MysqlConn> {}

impl<Q> Runs for Q where Q: RunsOn<SqliteConn> + RunsOn<PgConn> + RunsOn<MysqlConn> {}

/// A query every compiled backend can load rows of `U` from.
pub(crate) trait Loads<'q, U>:
    LoadsOn<'q, SqliteConn, U> + LoadsOn<'q, PgConn, U> + LoadsOn<'q, MysqlConn, U>
{
}

impl<'q, Q, U> Loads<'q, U> for Q where
    Q: LoadsOn<'q, SqliteConn, U> + LoadsOn<'q, PgConn, U> + LoadsOn<'q, MysqlConn, U>
{
}

/// A backend's connection, running the statements written once.
pub(crate) trait Portable: Sized {
    /// Runs `statement`, giving the number of rows it changed.
    fn run<Q: Runs>(&mut self, statement: Q) -> QueryResult<usize>;

    /// Runs `query`, giving its rows.
    fn fetch<'q, Q: Loads<'q, U>, U>(&mut self, query: Q) -> QueryResult<Vec<U>>;

    /// The id the last insert on this connection gave its row.
    fn last_insert_id(&mut self) -> QueryResult<i64>;

    /// `at` as an SQL literal of diesel's `Timestamp` on this backend.
    fn timestamp_literal(at: NaiveDateTime) -> String;

    /// What follows an insert of ready rows: on PostgreSQL, the move of
    /// the counter of jobs made ready below the tail
    /// (`store::postgres::floor`), once per row.
    const READY_INSERTED: &'static str = "";

    /// After an insert of `rows` ready rows, in its transaction: on MySQL,
    /// the move of the counter of jobs made ready below the tail
    /// (`store::floor`) when there were any.
    fn ready_inserted(&mut self, _rows: usize) -> QueryResult<()> {
        Ok(())
    }

    /// `query`'s first row, if any (`query` limits itself).
    fn fetch_first<'q, Q: Loads<'q, U>, U>(&mut self, query: Q) -> QueryResult<Option<U>> {
        Ok(self.fetch(query)?.into_iter().next())
    }
}

#[cfg(feature = "sqlite")]
impl Portable for diesel::SqliteConnection {
    fn run<Q: Runs>(&mut self, statement: Q) -> QueryResult<usize> {
        RunsOn::<Self>::run_on(statement, self)
    }

    fn fetch<'q, Q: Loads<'q, U>, U>(&mut self, query: Q) -> QueryResult<Vec<U>> {
        LoadsOn::<'q, Self, U>::load_on(query, self)
    }

    fn last_insert_id(&mut self) -> QueryResult<i64> {
        use diesel::sql_types::BigInt;
        diesel::select(diesel::dsl::sql::<BigInt>("last_insert_rowid()")).get_result(self)
    }

    /// Text, as diesel writes it (SQLite compares times as text).
    fn timestamp_literal(at: NaiveDateTime) -> String {
        format!("'{}'", at.format("%F %T%.f"))
    }
}

#[cfg(feature = "postgres")]
impl Portable for diesel::PgConnection {
    /// `store::postgres::floor`'s sequence moved on, once per ready row.
    const READY_INSERTED: &'static str = " RETURNING nextval('solidq_ready_below') AS below";

    fn run<Q: Runs>(&mut self, statement: Q) -> QueryResult<usize> {
        RunsOn::<Self>::run_on(statement, self)
    }

    fn fetch<'q, Q: Loads<'q, U>, U>(&mut self, query: Q) -> QueryResult<Vec<U>> {
        LoadsOn::<'q, Self, U>::load_on(query, self)
    }

    /// The session's last value of any sequence: the tables written once
    /// have no triggers, so it is the row's.
    fn last_insert_id(&mut self) -> QueryResult<i64> {
        use diesel::sql_types::BigInt;
        diesel::select(diesel::dsl::sql::<BigInt>("lastval()")).get_result(self)
    }

    fn timestamp_literal(at: NaiveDateTime) -> String {
        format!("TIMESTAMP '{}'", at.format("%F %T%.f"))
    }
}

#[cfg(feature = "mysql")]
impl Portable for diesel::MysqlConnection {
    fn run<Q: Runs>(&mut self, statement: Q) -> QueryResult<usize> {
        RunsOn::<Self>::run_on(statement, self)
    }

    fn fetch<'q, Q: Loads<'q, U>, U>(&mut self, query: Q) -> QueryResult<Vec<U>> {
        LoadsOn::<'q, Self, U>::load_on(query, self)
    }

    fn last_insert_id(&mut self) -> QueryResult<i64> {
        use diesel::sql_types::BigInt;
        diesel::select(diesel::dsl::sql::<BigInt>(
            "CAST(LAST_INSERT_ID() AS SIGNED)",
        ))
        .get_result(self)
    }

    fn timestamp_literal(at: NaiveDateTime) -> String {
        format!("TIMESTAMP '{}'", at.format("%F %T%.f"))
    }

    /// `store::mysql::floor`'s counter moved on: a row inserted, which
    /// commits with the ready rows it announces.
    fn ready_inserted(&mut self, rows: usize) -> QueryResult<()> {
        if rows > 0 {
            self.run(diesel::sql_query(MYSQL_MOVE_ON))?;
        }
        Ok(())
    }
}

/// MySQL's move of the counter of jobs made ready below the tail
/// (`store::mysql::floor`): here, so that the statements written once
/// (`fair`, `dependencies`) reach it without a circle through the backend.
#[cfg(feature = "mysql")]
pub(in crate::store) const MYSQL_MOVE_ON: &str = "INSERT INTO solidq_ready_below () VALUES ()";
