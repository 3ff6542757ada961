//! Shared test harness: a fresh database per test on any backend, the
//! `backend_tests!` macro that instantiates each test for SQLite,
//! PostgreSQL and (with the `mysql` feature) MySQL, raw SQL helpers, `wait_for`, test job types, and the entry
//! point of the worker processes that multi-process tests spawn.
#![allow(dead_code)]

pub mod child;
pub mod cluster;
pub mod jobs;
#[cfg(feature = "mysql")]
pub mod mariadb;
pub mod netns;
#[cfg(feature = "postgres")]
pub mod pgbouncer;
pub mod recorder;
pub mod template;
pub mod tmpfs;

use std::sync::Mutex;
#[cfg_attr(not(feature = "postgres"), allow(unused_imports))]
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

#[cfg(feature = "mysql")]
use diesel::MysqlConnection;
#[cfg(feature = "postgres")]
use diesel::PgConnection;
#[cfg(feature = "sqlite")]
use diesel::SqliteConnection;
use diesel::connection::SimpleConnection;
use diesel::{Connection, QueryableByName, RunQueryDsl};
use solidq::{Backend, Queue, QueueConfig};

/// Instantiates each named test function (taking `&TestDb`) once per
/// backend: `sqlite::name`, `postgres::name` and `mysql::name`, each only
/// when solidq's feature for that backend is on.
///
/// `backend_tests!(alone: a, b)` runs each of them with no other such test
/// at the same time (see [`machine`]): for tests that measure a rate or a
/// time, which a busy machine would skew; `backend_tests!(exclusive: a)`
/// with no other test at all. Their names hold `::alone::`
/// (`area::alone::sqlite::name`), so a run can leave them out
/// (`--skip ::alone::`) and run them apart, as `cargo xtask test` does.
#[macro_export]
macro_rules! backend_tests {
    (alone: $($name:ident),* $(,)?) => {
        /// Tests that run with no other test beside them: `cargo xtask
        /// test` runs them after the others, one at a time.
        mod alone {
            #[allow(unused_imports)]
            use super::*;

            $crate::backend_tests!(@machine alone; $($name),*);
        }
    };
    (exclusive: $($name:ident),* $(,)?) => {
        /// Tests that run with no other test at all beside them, not even
        /// another alone test: for a rate that two such tests side by side
        /// pull below what one reaches (named `::alone::` all the same).
        mod alone {
            #[allow(unused_imports)]
            use super::*;

            /// `::alone::exclusive::` in their names: `cargo xtask test`
            /// runs them first of the second phase, one after another,
            /// so no alone test has to drain before each.
            mod exclusive {
                #[allow(unused_imports)]
                use super::*;

                $crate::backend_tests!(@machine exclusive; $($name),*);
            }
        }
    };
    (@machine $mode:ident; $($name:ident),*) => {
        #[cfg(feature = "sqlite")]
        mod sqlite {
            $(
                #[test]
                fn $name() {
                    let _machine = $crate::common::machine::$mode();
                    let db = $crate::common::TestDb::sqlite();
                    super::$name(&db);
                }
            )*
        }
        #[cfg(feature = "postgres")]
        mod postgres {
            $(
                #[test]
                fn $name() {
                    let _machine = $crate::common::machine::$mode();
                    if let Some(db) = $crate::common::TestDb::postgres() {
                        super::$name(&db);
                    }
                }
            )*
        }
        #[cfg(feature = "mysql")]
        mod mysql {
            $(
                #[test]
                fn $name() {
                    let _machine = $crate::common::machine::$mode();
                    if let Some(db) = $crate::common::TestDb::mysql() {
                        super::$name(&db);
                    }
                }
            )*
        }
    };
    ($($name:ident),* $(,)?) => {
        $crate::backend_tests!(@machine shared; $($name),*);
    };
}

/// The machine, shared by the tests of one binary: the harness runs
/// several at once (`RUST_TEST_THREADS`), which most tests do not mind;
/// a test that measures a rate or a time runs [`alone`](machine::alone):
/// with no [`shared`](machine::shared) test beside it, and with at most
/// `SOLIDQ_TEST_ALONE_AT_ONCE` (1 unless set) other such tests. Waiting
/// alone tests go first: no shared test starts while one waits.
pub mod machine {
    use std::sync::{Condvar, Mutex};

    #[derive(Default)]
    struct State {
        shared: usize,
        alone: usize,
        alone_waiting: usize,
        /// An exclusive test runs or waits: no other alone test starts.
        exclusive: usize,
    }

    static STATE: Mutex<State> = Mutex::new(State {
        shared: 0,
        alone: 0,
        alone_waiting: 0,
        exclusive: 0,
    });
    static CHANGED: Condvar = Condvar::new();

    fn state() -> std::sync::MutexGuard<'static, State> {
        STATE.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wait(guard: std::sync::MutexGuard<'static, State>) -> std::sync::MutexGuard<'static, State> {
        CHANGED.wait(guard).unwrap_or_else(|p| p.into_inner())
    }

    /// How many alone tests may run at once.
    fn alone_at_once() -> usize {
        std::env::var("SOLIDQ_TEST_ALONE_AT_ONCE")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .filter(|n| *n > 0)
            .unwrap_or(1)
    }

    /// Held while a test runs; its drop lets the others on.
    pub struct Guard {
        alone: bool,
        exclusive: bool,
    }

    impl Drop for Guard {
        fn drop(&mut self) {
            let mut state = state();
            if self.exclusive {
                state.exclusive -= 1;
            }
            if self.alone {
                state.alone -= 1;
            } else {
                state.shared -= 1;
            }
            CHANGED.notify_all();
        }
    }

    /// Runs beside other shared tests.
    pub fn shared() -> Guard {
        let mut state = state();
        while state.alone > 0 || state.alone_waiting > 0 {
            state = wait(state);
        }
        state.shared += 1;
        Guard {
            alone: false,
            exclusive: false,
        }
    }

    /// Runs with no shared test at the same time, and with at most
    /// `SOLIDQ_TEST_ALONE_AT_ONCE - 1` other alone tests.
    pub fn alone() -> Guard {
        let limit = alone_at_once();
        let mut state = state();
        state.alone_waiting += 1;
        while state.shared > 0 || state.alone >= limit || state.exclusive > 0 {
            state = wait(state);
        }
        state.alone_waiting -= 1;
        state.alone += 1;
        Guard {
            alone: true,
            exclusive: false,
        }
    }

    /// Runs with no other test at all: for a test that compares a rate
    /// before and after an event, which other alone tests starting and
    /// ending beside it would skew (a throughput measured with two other
    /// supervisors running, then with none).
    pub fn exclusive() -> Guard {
        let mut state = state();
        state.alone_waiting += 1;
        state.exclusive += 1;
        while state.shared > 0 || state.alone > 0 {
            state = wait(state);
        }
        state.alone_waiting -= 1;
        state.alone += 1;
        Guard {
            alone: true,
            exclusive: true,
        }
    }
}

/// A database owned by one test: an SQLite file in a temporary directory,
/// a fresh schema in the PostgreSQL database of `SOLIDQ_TEST_POSTGRES_URL`,
/// or a fresh database on the MySQL server of `SOLIDQ_TEST_MYSQL_URL`.
/// Dropped with the test.
pub struct TestDb {
    pub url: String,
    pub backend: Backend,
    guard: Guard,
    /// PostgreSQL and MySQL: sessions [`TestDb::scalar`] and
    /// [`TestDb::column_of`] keep for their next call. A test polling
    /// `db.scalar` every 10 ms opened 100 sessions a second: PostgreSQL
    /// forked a backend for each (10,604 backends in a run of the suite;
    /// about 6,200 sessions since).
    kept: Mutex<Vec<TestConn>>,
}

enum Guard {
    Sqlite(#[allow(dead_code)] tempfile::TempDir),
    Postgres { admin_url: String, schema: String },
    Mysql { admin_url: String, database: String },
}

pub const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";
pub const DEFAULT_MYSQL_URL: &str = "mysql://root@127.0.0.1:3306/test";

/// Whether a missing MySQL fails the test (`SOLIDQ_REQUIRE_MYSQL`), as
/// [`postgres_required`].
/// The repository's root: the tests are solidq-cli's (they start its
/// binary), and read the library's sources, migrations and recipes there.
pub fn repo_root() -> &'static std::path::Path {
    static ROOT: std::sync::LazyLock<std::path::PathBuf> = std::sync::LazyLock::new(|| {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        root.canonicalize().unwrap_or(root)
    });
    &ROOT
}

pub fn mysql_required() -> bool {
    std::env::var("SOLIDQ_REQUIRE_MYSQL").is_ok_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "yes" | "on"
        )
    })
}

/// Whether a missing PostgreSQL fails the test (`SOLIDQ_REQUIRE_POSTGRES`
/// set to `1`, `true` or `yes`, as CI does) instead of skipping it.
pub fn postgres_required() -> bool {
    std::env::var("SOLIDQ_REQUIRE_POSTGRES").is_ok_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "yes" | "on"
        )
    })
}

/// Reports a skipped test where it is seen: straight to the process's
/// stderr (the test harness captures `eprintln!` and shows it only for
/// failures), naming the test.
pub fn skip(reason: &str) {
    use std::io::Write;
    let test = std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string();
    let _ = writeln!(
        std::io::stderr().lock(),
        "\n*** SKIPPED {test}: {reason} (set SOLIDQ_REQUIRE_POSTGRES=1 or SOLIDQ_REQUIRE_MYSQL=1 to fail instead)"
    );
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

impl TestDb {
    /// A fresh database of the same backend, for a test that measures
    /// again.
    pub fn another(&self) -> TestDb {
        match self.backend {
            #[cfg(feature = "sqlite")]
            Backend::Sqlite => TestDb::sqlite(),
            #[cfg(feature = "postgres")]
            Backend::Postgres => TestDb::postgres().expect("PostgreSQL answered a moment ago"),
            #[cfg(feature = "mysql")]
            Backend::Mysql => TestDb::mysql().expect("MySQL answered a moment ago"),
            #[allow(unreachable_patterns)]
            other => panic!("{other} is not in this build"),
        }
    }

    pub fn sqlite() -> TestDb {
        init_logs();
        let dir = tempfile::tempdir().expect("temporary directory");
        let url = format!("sqlite://{}", dir.path().join("test.sqlite3").display());
        TestDb {
            url,
            backend: Backend::Sqlite,
            guard: Guard::Sqlite(dir),
            kept: Mutex::default(),
        }
    }

    /// A fresh schema in `SOLIDQ_TEST_POSTGRES_URL` (default: the local
    /// server, [`DEFAULT_POSTGRES_URL`]). `None` (the test is skipped,
    /// loudly) when it is unreachable, unless `SOLIDQ_REQUIRE_POSTGRES=1`:
    /// then the test fails.
    #[cfg(feature = "postgres")]
    pub fn postgres() -> Option<TestDb> {
        init_logs();
        let required = postgres_required();
        let admin_url = std::env::var("SOLIDQ_TEST_POSTGRES_URL")
            .ok()
            .filter(|url| !url.is_empty())
            .unwrap_or_else(|| DEFAULT_POSTGRES_URL.to_string());
        let mut admin = match PgConnection::establish(&admin_url) {
            Ok(c) => c,
            Err(e) => {
                assert!(
                    !required,
                    "SOLIDQ_REQUIRE_POSTGRES is set but PostgreSQL is unreachable: {e}"
                );
                skip(&format!("PostgreSQL unreachable at {admin_url}: {e}"));
                return None;
            }
        };
        drop_stale_schemas(&mut admin);
        let schema = format!(
            "solidq_t_{}_{}_{:x}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst),
            fastrand::u32(..)
        );
        admin
            .batch_execute(&format!("CREATE SCHEMA {schema}"))
            .expect("create schema");
        let sep = if admin_url.contains('?') { '&' } else { '?' };
        let url = format!(
            "{admin_url}{sep}options=-c%20search_path%3D{schema}&application_name={schema}"
        );
        Some(TestDb {
            url,
            backend: Backend::Postgres,
            guard: Guard::Postgres { admin_url, schema },
            kept: Mutex::default(),
        })
    }

    /// A fresh database on the server of `SOLIDQ_TEST_MYSQL_URL` (default:
    /// the local one, [`DEFAULT_MYSQL_URL`]). `None` (the test is
    /// skipped, loudly) when it is unreachable, unless
    /// `SOLIDQ_REQUIRE_MYSQL=1`: then the test fails.
    #[cfg(feature = "mysql")]
    pub fn mysql() -> Option<TestDb> {
        init_logs();
        let required = mysql_required();
        let admin_url = std::env::var("SOLIDQ_TEST_MYSQL_URL")
            .ok()
            .filter(|url| !url.is_empty())
            .unwrap_or_else(|| DEFAULT_MYSQL_URL.to_string());
        let mut admin = match MysqlConnection::establish(&admin_url) {
            Ok(c) => c,
            Err(e) => {
                assert!(
                    !required,
                    "SOLIDQ_REQUIRE_MYSQL is set but MySQL is unreachable: {e}"
                );
                skip(&format!("MySQL unreachable at {admin_url}: {e}"));
                return None;
            }
        };
        drop_stale_databases(&mut admin);
        let database = format!(
            "solidq_t_{}_{}_{:x}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst),
            fastrand::u32(..)
        );
        admin
            .batch_execute(&format!("CREATE DATABASE {database}"))
            .expect("create database");
        // The same server and credentials, this test's database.
        let (server, _) = admin_url
            .split_once('?')
            .map_or((admin_url.as_str(), ""), |(s, q)| (s, q));
        let base = match server.rsplit_once('/') {
            Some((base, _)) if base.contains("://") && base.len() > "mysql://".len() => base,
            _ => server.trim_end_matches('/'),
        };
        let url = format!("{base}/{database}");
        Some(TestDb {
            url,
            backend: Backend::Mysql,
            guard: Guard::Mysql {
                admin_url,
                database,
            },
            kept: Mutex::default(),
        })
    }

    /// A migrated queue.
    pub fn queue(&self) -> Queue {
        self.queue_with(QueueConfig::default())
    }

    /// A migrated queue: the database starts as a copy of the migrated
    /// template (see [`template`]) unless it was migrated already.
    pub fn queue_with(&self, config: QueueConfig) -> Queue {
        let copied = template::install(self);
        let queue = Queue::connect_with(&self.url, config).expect("connect");
        let applied = queue.migrate().expect("migrate");
        assert!(
            !copied || applied.is_empty(),
            "the migrated template lacked {applied:?}"
        );
        queue
    }

    /// A plain connection for test-side SQL.
    pub fn conn(&self) -> TestConn {
        TestConn::open(&self.url)
    }

    pub fn execute(&self, sql: &str) {
        self.conn().execute(sql);
    }

    pub fn scalar(&self, sql: &str) -> i64 {
        self.read(|conn| conn.scalar(sql))
    }

    /// The first column of every row of `sql` (aliased `v`).
    pub fn column_of(&self, sql: &str) -> Vec<i64> {
        self.read(|conn| conn.column(sql))
    }

    /// Runs `read` on a kept session (PostgreSQL and MySQL, see
    /// [`TestDb::kept`]) or a new one, and keeps the session for the next
    /// call. A kept session the server or the test ended meanwhile (a
    /// restart, a kill) panics; `read` then runs once more on a new one,
    /// as it would have without keeping. SQLite opens a connection each
    /// time: a test may swap or freeze the file under it.
    fn read<R>(&self, read: impl Fn(&mut TestConn) -> R) -> R {
        if self.backend == Backend::Sqlite {
            return read(&mut self.conn());
        }
        let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner()).pop();
        if let Some(mut conn) = kept
            && let Ok(value) =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read(&mut conn)))
        {
            self.keep(conn);
            return value;
        }
        let mut conn = self.conn();
        let value = read(&mut conn);
        self.keep(conn);
        value
    }

    fn keep(&self, conn: TestConn) {
        self.kept
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(conn);
    }

    pub fn count(&self, table: &str) -> i64 {
        self.scalar(&format!("SELECT count(*) AS v FROM {table}"))
    }

    /// `expr` cast to a 64-bit integer, as [`TestDb::scalar`] reads it:
    /// `CAST(… AS BIGINT)`, or `CAST(… AS SIGNED)` on MySQL.
    pub fn bigint(&self, expr: &str) -> String {
        match self.backend {
            Backend::Mysql => format!("CAST({expr} AS SIGNED)"),
            _ => format!("CAST({expr} AS BIGINT)"),
        }
    }

    /// SQL for timestamp `column` (UTC) in microseconds since the Unix
    /// epoch, whatever the session's time zone.
    pub fn epoch_us(&self, column: &str) -> String {
        match self.backend {
            Backend::Postgres => format!("CAST(EXTRACT(EPOCH FROM {column}) * 1000000 AS BIGINT)"),
            Backend::Sqlite => {
                format!("CAST((julianday({column}) - 2440587.5) * 86400000000.0 AS INTEGER)")
            }
            Backend::Mysql => {
                format!("TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {column})")
            }
        }
    }

    /// `text` as an SQL string literal: quotes doubled, and on MySQL
    /// (where a backslash escapes in a literal) backslashes doubled too.
    pub fn literal(&self, text: &str) -> String {
        let text = text.replace('\'', "''");
        match self.backend {
            Backend::Mysql => format!("'{}'", text.replace('\\', "\\\\")),
            _ => format!("'{text}'"),
        }
    }

    /// The `n`th (from 1) bind parameter of a raw query: `$n` on
    /// PostgreSQL, `?` elsewhere (binds then go in order).
    pub fn param(&self, n: usize) -> String {
        match self.backend {
            Backend::Postgres => format!("${n}"),
            _ => "?".to_string(),
        }
    }

    /// `name` quoted as an identifier (for reserved words such as `key`):
    /// `"name"`, or `` `name` `` on MySQL.
    pub fn quote(&self, name: &str) -> String {
        match self.backend {
            Backend::Mysql => format!("`{name}`"),
            _ => format!("\"{name}\""),
        }
    }

    /// PostgreSQL and MySQL: terminates every server connection this test's
    /// processes hold (but the caller's), as a database restart would.
    /// Returns how many were killed.
    pub fn kill_connections(&self) -> i64 {
        if let Guard::Mysql { database, .. } = &self.guard {
            let mut conn = self.conn();
            let ids = conn.column(&format!(
                "SELECT CAST(ID AS SIGNED) AS v FROM information_schema.PROCESSLIST
                 WHERE DB = '{database}' AND ID <> CONNECTION_ID()"
            ));
            for id in &ids {
                // Gone meanwhile is fine.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    conn.execute(&format!("KILL {id}"))
                }));
            }
            return ids.len() as i64;
        }
        let Guard::Postgres { schema, .. } = &self.guard else {
            panic!("kill_connections is for PostgreSQL and MySQL");
        };
        self.scalar(&format!(
            "SELECT count(pg_terminate_backend(pid)) AS v FROM pg_stat_activity
             WHERE application_name = '{schema}' AND pid <> pg_backend_pid()"
        ))
    }

    /// Creates the ledger table jobs of kind `ledger` append to.
    pub fn create_ledger(&self) {
        self.execute(
            "CREATE TABLE test_ledger (
                 seq INTEGER PRIMARY KEY, job_id BIGINT NOT NULL, n BIGINT NOT NULL,
                 pid BIGINT NOT NULL, event TEXT NOT NULL, at_us BIGINT NOT NULL)"
                .replace(
                    "seq INTEGER PRIMARY KEY",
                    match self.backend {
                        Backend::Postgres => "seq BIGSERIAL PRIMARY KEY",
                        Backend::Sqlite => "seq INTEGER PRIMARY KEY AUTOINCREMENT",
                        _ => "seq BIGINT AUTO_INCREMENT PRIMARY KEY",
                    },
                )
                .as_str(),
        );
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        self.kept
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        #[cfg(feature = "postgres")]
        if let Guard::Postgres { admin_url, schema } = &self.guard
            && let Ok(mut admin) = PgConnection::establish(admin_url)
        {
            let _ = admin.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
        }
        #[cfg(feature = "mysql")]
        if let Guard::Mysql {
            admin_url,
            database,
        } = &self.guard
            && let Ok(mut admin) = MysqlConnection::establish(admin_url)
        {
            let _ = admin.batch_execute(&format!("DROP DATABASE IF EXISTS {database}"));
        }
    }
}

/// Databases left by test processes that were killed before dropping them.
#[cfg(feature = "mysql")]
fn drop_stale_databases(admin: &mut MysqlConnection) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        #[derive(QueryableByName)]
        struct Name {
            #[diesel(sql_type = diesel::sql_types::Text)]
            name: String,
        }
        let names: Vec<Name> = diesel::sql_query(
            "SELECT SCHEMA_NAME AS name FROM information_schema.SCHEMATA
             WHERE SCHEMA_NAME LIKE 'solidq\\_t\\_%'",
        )
        .load(admin)
        .unwrap_or_default();
        for Name { name } in names {
            let pid = name.split('_').nth(2).and_then(|p| p.parse::<u32>().ok());
            let alive = pid.is_some_and(|p| std::path::Path::new(&format!("/proc/{p}")).exists());
            if !alive {
                let _ = admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name}"));
            }
        }
    });
}

/// Schemas left by test processes that were killed before dropping them.
#[cfg(feature = "postgres")]
fn drop_stale_schemas(admin: &mut PgConnection) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        #[derive(QueryableByName)]
        struct Name {
            #[diesel(sql_type = diesel::sql_types::Text)]
            nspname: String,
        }
        let names: Vec<Name> = diesel::sql_query(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'solidq\\_t\\_%'",
        )
        .load(admin)
        .unwrap_or_default();
        for Name { nspname } in names {
            // solidq_t_<pid>_<counter>_<random>
            let pid = nspname
                .split('_')
                .nth(2)
                .and_then(|p| p.parse::<u32>().ok());
            let alive = pid.is_some_and(|p| std::path::Path::new(&format!("/proc/{p}")).exists());
            if !alive {
                let _ = admin.batch_execute(&format!("DROP SCHEMA IF EXISTS {nspname} CASCADE"));
            }
        }
    });
}

/// A test's own SQLite connection (ledgers, assertions). It waits for the
/// write lock as long as solidq's most patient callers do: a ledger write
/// that gives up first panics, failing the attempt of the job that wrote
/// it, which `deadlocks` (whose solidq connections wait 30 s) would count
/// against solidq.
#[cfg(feature = "sqlite")]
fn open_sqlite(url: &str) -> SqliteConnection {
    let path = url.trim_start_matches("sqlite://");
    let mut c = SqliteConnection::establish(path).expect("open sqlite");
    c.batch_execute("PRAGMA busy_timeout = 60000; PRAGMA foreign_keys = ON;")
        .expect("pragmas");
    c
}

/// A raw connection to a test database, for SQL the library does not offer.
pub enum TestConn {
    #[cfg(feature = "postgres")]
    Pg(PgConnection),
    #[cfg(feature = "sqlite")]
    Sqlite(SqliteConnection),
    #[cfg(feature = "mysql")]
    Mysql(MysqlConnection),
}

#[derive(QueryableByName)]
struct Scalar {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    v: i64,
}

impl TestConn {
    pub fn open(url: &str) -> TestConn {
        #[cfg(feature = "postgres")]
        if url.starts_with("postgres") {
            return TestConn::Pg(PgConnection::establish(url).expect("connect to postgres"));
        }
        #[cfg(feature = "mysql")]
        if url.starts_with("mysql") {
            let mut c = MysqlConnection::establish(url).expect("connect to mysql");
            // What solidq's own sessions run with (and `||` as OR, not
            // concatenation, whatever the server's mode).
            c.batch_execute(
                "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED;
                 SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION'",
            )
            .expect("session settings");
            return TestConn::Mysql(c);
        }
        #[cfg(feature = "sqlite")]
        return TestConn::Sqlite(open_sqlite(url));
        #[allow(unreachable_code)]
        {
            panic!("this build has no backend for {url}")
        }
    }

    pub fn execute(&mut self, sql: &str) {
        self.try_execute(sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    /// Runs `sql`, returning the database's refusal.
    pub fn try_execute(&mut self, sql: &str) -> diesel::QueryResult<()> {
        match self {
            #[cfg(feature = "postgres")]
            TestConn::Pg(c) => c.batch_execute(sql),
            #[cfg(feature = "sqlite")]
            TestConn::Sqlite(c) => c.batch_execute(sql),
            #[cfg(feature = "mysql")]
            TestConn::Mysql(c) => c.batch_execute(sql),
        }
    }

    /// Runs a query returning one BIGINT column named `v`.
    pub fn scalar(&mut self, sql: &str) -> i64 {
        let row: Result<Scalar, _> = match self {
            #[cfg(feature = "postgres")]
            TestConn::Pg(c) => diesel::sql_query(sql).get_result(c),
            #[cfg(feature = "sqlite")]
            TestConn::Sqlite(c) => diesel::sql_query(sql).get_result(c),
            #[cfg(feature = "mysql")]
            TestConn::Mysql(c) => diesel::sql_query(sql).get_result(c),
        };
        row.unwrap_or_else(|e| panic!("{sql}: {e}")).v
    }

    /// Runs a query returning BIGINT column `v` per row.
    pub fn column(&mut self, sql: &str) -> Vec<i64> {
        let rows: Result<Vec<Scalar>, _> = match self {
            #[cfg(feature = "postgres")]
            TestConn::Pg(c) => diesel::sql_query(sql).load(c),
            #[cfg(feature = "sqlite")]
            TestConn::Sqlite(c) => diesel::sql_query(sql).load(c),
            #[cfg(feature = "mysql")]
            TestConn::Mysql(c) => diesel::sql_query(sql).load(c),
        };
        rows.unwrap_or_else(|e| panic!("{sql}: {e}"))
            .into_iter()
            .map(|r| r.v)
            .collect()
    }
}

/// MySQL: a derived table of one column `i`, 0 to `count - 1` (at most
/// 10,000), as `(...) AS {alias}`. Its recursive CTEs stop at 1,000 rows by
/// default (`cte_max_recursion_depth`, MariaDB's
/// `max_recursive_iterations`), so these come from digits.
pub fn mysql_numbers(count: i64, alias: &str) -> String {
    assert!(count <= 10_000, "{count} rows: up to 10,000");
    let digits = "(SELECT 0 AS n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 \
                  UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 \
                  UNION ALL SELECT 8 UNION ALL SELECT 9)";
    format!(
        "(SELECT a.n + 10 * b.n + 100 * c.n + 1000 * d.n AS i \
          FROM {digits} AS a, {digits} AS b, {digits} AS c, {digits} AS d \
          WHERE a.n + 10 * b.n + 100 * c.n + 1000 * d.n < {count}) AS {alias}"
    )
}

/// Asserts the schema's invariant: every job is finished or in exactly one
/// execution table, and no execution row points at a missing job.
pub fn assert_invariants(db: &TestDb) {
    let tables = [
        "solidq_ready_executions",
        "solidq_scheduled_executions",
        "solidq_claimed_executions",
        "solidq_blocked_executions",
        "solidq_failed_executions",
        "solidq_waiting_executions",
    ];
    let places = tables
        .iter()
        .map(|t| format!("(SELECT count(*) FROM {t} e WHERE e.job_id = j.id)"))
        .collect::<Vec<_>>()
        .join(" + ");
    let misplaced = db.scalar(&format!(
        "SELECT count(*) AS v FROM solidq_jobs j
         WHERE (CASE WHEN j.finished_at IS NULL THEN 0 ELSE 1 END) + {places} <> 1"
    ));
    assert_eq!(misplaced, 0, "jobs not in exactly one place");
    for table in tables {
        let orphans = db.scalar(&format!(
            "SELECT count(*) AS v FROM {table} e WHERE NOT EXISTS (SELECT 1 FROM solidq_jobs j WHERE j.id = e.job_id)"
        ));
        assert_eq!(orphans, 0, "{table} rows without a job");
    }
    // Every path into ready writes the job's kind and delivery on its row
    // (claims taking jobs ahead filter on them; migration 2026-12-08).
    let uncarried = db.scalar(
        "SELECT count(*) AS v FROM solidq_ready_executions r JOIN solidq_jobs j ON j.id = r.job_id
         WHERE r.kind IS NULL OR r.delivery IS NULL OR r.kind <> j.kind OR r.delivery <> j.delivery",
    );
    assert_eq!(
        uncarried, 0,
        "ready rows without their job's kind and delivery"
    );
}

/// Polls `condition` until it holds or `timeout` passes; panics with
/// `what` on timeout.
pub fn wait_for(what: &str, timeout: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Polls `probe` until it gives a value or `timeout` passes (`None`): for
/// a wait whose failure message needs more than a name.
pub fn wait_until<T>(timeout: Duration, mut probe: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = probe() {
            return Some(value);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub fn init_logs() {
    let _ = env_logger::builder().is_test(true).try_init();
}

/// Microseconds since the Unix epoch on this host.
pub fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_micros() as i64
}

/// Runs the `solidq` binary with `args` in `dir`, with
/// `SOLIDQ_DATABASE_URL` set to `url` (or unset); returns (exit code,
/// stdout, stderr).
#[allow(dead_code)]
pub fn run_cli_in(
    dir: &std::path::Path,
    url: Option<&str>,
    args: &[&str],
) -> (i32, String, String) {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_solidq"));
    command
        .args(args)
        .env("RUST_LOG", "warn")
        .env_remove("SOLIDQ_DATABASE_URL")
        .current_dir(dir);
    if let Some(url) = url {
        command.env("SOLIDQ_DATABASE_URL", url);
    }
    let output = command.output().expect("run solidq");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Runs the `solidq` binary with `args` on `db`'s database; returns (exit
/// code, stdout, stderr).
#[allow(dead_code)]
pub fn run_cli(db: &TestDb, args: &[&str]) -> (i32, String, String) {
    run_cli_in(&std::env::temp_dir(), Some(&db.url), args)
}

impl TestDb {
    /// The PostgreSQL schema this test owns (`None` on SQLite and MySQL).
    pub fn schema(&self) -> Option<&str> {
        match &self.guard {
            Guard::Postgres { schema, .. } => Some(schema),
            Guard::Sqlite(_) | Guard::Mysql { .. } => None,
        }
    }

    /// The URL `SOLIDQ_TEST_POSTGRES_URL` named, without the schema
    /// (`None` on SQLite).
    pub fn admin_url(&self) -> Option<&str> {
        match &self.guard {
            Guard::Postgres { admin_url, .. } => Some(admin_url),
            Guard::Sqlite(_) | Guard::Mysql { .. } => None,
        }
    }
}
