//! Migrated templates: a test's database starts as a copy of one migrated
//! once per test process, instead of running every migration again (about
//! 0.4 s a test on PostgreSQL and 0.9 s on MariaDB, serialized across tests
//! by `migrate`'s lock).
//!
//! [`TestDb::queue`](super::TestDb::queue) installs the copy when the
//! database has no migrations table yet (a test that migrates partway or by
//! hand, or creates a `Queue` itself, still runs the real migrations), then
//! calls `Queue::migrate` as before, which must find nothing to apply. The
//! copy per backend:
//! - SQLite: the template file, copied (it is checkpointed, so it holds
//!   everything);
//! - PostgreSQL: every `up.sql` of `migrations/postgres` in order and diesel's
//!   migrations table, in one transaction, in the test's schema;
//! - MySQL: `SHOW CREATE TABLE` of each table of a template database that
//!   `Queue::migrate` made, replayed in the test's database, and the
//!   template's migration rows.

#[cfg(feature = "sqlite")]
use std::path::Path;
use std::path::PathBuf;
use std::sync::OnceLock;

use solidq::Backend;

use super::{TestConn, TestDb};

/// Installs the migrated template into `db` when it has no migrations table
/// yet; `true` when it did.
pub fn install(db: &TestDb) -> bool {
    if std::env::var_os("SOLIDQ_TEST_NO_TEMPLATE").is_some_and(|v| !v.is_empty()) {
        return false;
    }
    match db.backend {
        #[cfg(feature = "sqlite")]
        Backend::Sqlite => {
            let path = Path::new(db.url.trim_start_matches("sqlite://"));
            if path.exists() {
                return false;
            }
            std::fs::copy(sqlite_template(), path).expect("copy the SQLite template");
            true
        }
        #[cfg(feature = "postgres")]
        Backend::Postgres => {
            let mut conn = TestConn::open(&db.url);
            if migrated(&mut conn, "current_schema()") {
                return false;
            }
            conn.execute(postgres_template());
            true
        }
        #[cfg(feature = "mysql")]
        Backend::Mysql => {
            let mut conn = TestConn::open(&db.url);
            if migrated(&mut conn, "DATABASE()") {
                return false;
            }
            conn.execute(&mysql_template(db));
            true
        }
        #[allow(unreachable_patterns)]
        _ => false,
    }
}

/// Whether the current schema (`schema`: the SQL that names it) has
/// diesel's migrations table.
#[cfg(any(feature = "postgres", feature = "mysql"))]
fn migrated(conn: &mut TestConn, schema: &str) -> bool {
    conn.scalar(&format!(
        "SELECT CAST(COUNT(*) AS {}) AS v FROM information_schema.tables \
         WHERE table_schema = {schema} AND table_name = '__diesel_schema_migrations'",
        match conn {
            #[cfg(feature = "mysql")]
            TestConn::Mysql(_) => "SIGNED",
            #[allow(unreachable_patterns)]
            _ => "BIGINT",
        }
    )) > 0
}

/// A migrated SQLite file for this process, checkpointed and closed.
#[cfg(feature = "sqlite")]
fn sqlite_template() -> &'static Path {
    static TEMPLATE: OnceLock<PathBuf> = OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
        // Templates of test processes that have ended.
        if let Ok(entries) = std::fs::read_dir(dir) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let pid = name
                    .strip_prefix("sqlite-template-")
                    .and_then(|rest| rest.split('.').next())
                    .and_then(|pid| pid.parse::<u32>().ok());
                if pid.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()) {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
        let path = dir.join(format!("sqlite-template-{}.sqlite3", std::process::id()));
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
        let url = format!("sqlite://{}", path.display());
        {
            let queue = solidq::Queue::connect(&url).expect("connect to the SQLite template");
            queue.migrate().expect("migrate the SQLite template");
        }
        TestConn::open(&url).execute("PRAGMA wal_checkpoint(TRUNCATE)");
        path
    })
}

/// Every PostgreSQL migration in order and diesel's table of them, as one
/// transaction for the test's schema (its `search_path`).
#[cfg(feature = "postgres")]
fn postgres_template() -> &'static str {
    static TEMPLATE: OnceLock<String> = OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let dir = crate::common::repo_root().join("migrations/postgres");
        let mut migrations: Vec<PathBuf> = std::fs::read_dir(&dir)
            .expect("read migrations/postgres")
            .map(|entry| entry.expect("a migration").path())
            .collect();
        migrations.sort();
        let versions = solidq::embedded_migrations(Backend::Postgres);
        assert_eq!(
            migrations.len(),
            versions.len(),
            "migrations/postgres and the build's migrations differ"
        );
        let mut sql = String::from(
            "BEGIN;\n\
             CREATE TABLE __diesel_schema_migrations (\n\
             version VARCHAR(50) PRIMARY KEY NOT NULL,\n\
             run_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP);\n",
        );
        for (migration, version) in migrations.iter().zip(&versions) {
            let name = migration.file_name().unwrap().to_string_lossy();
            assert_eq!(
                name.split('_').next().unwrap().replace('-', ""),
                *version,
                "{name} is not the build's migration {version}"
            );
            sql.push_str(&std::fs::read_to_string(migration.join("up.sql")).expect("read up.sql"));
            sql.push_str(";\n");
            sql.push_str(&format!(
                "INSERT INTO __diesel_schema_migrations (version) VALUES ('{version}');\n"
            ));
        }
        sql.push_str("COMMIT;");
        sql
    })
}

/// The tables of a database `Queue::migrate` made (once per process), to
/// create in the test's database, and its migration rows.
#[cfg(feature = "mysql")]
fn mysql_template(db: &TestDb) -> String {
    use diesel::{QueryableByName, RunQueryDsl};
    static TEMPLATE: OnceLock<(String, Vec<String>)> = OnceLock::new();
    let (template, tables) = TEMPLATE.get_or_init(|| {
        let name = format!("solidq_t_{}_template", std::process::id());
        let super::Guard::Mysql { admin_url, .. } = &db.guard else {
            unreachable!("a MySQL test database")
        };
        let mut conn = TestConn::open(admin_url);
        conn.execute(&format!(
            "DROP DATABASE IF EXISTS {name}; CREATE DATABASE {name}"
        ));
        let url = format!("{}/{name}", db.url.rsplit_once('/').unwrap().0);
        solidq::Queue::connect(&url)
            .expect("connect to the MySQL template")
            .migrate()
            .expect("migrate the MySQL template");
        let TestConn::Mysql(c) = &mut conn else {
            unreachable!()
        };
        #[derive(QueryableByName)]
        struct Table {
            #[diesel(sql_type = diesel::sql_types::Text)]
            name: String,
        }
        #[derive(QueryableByName)]
        struct Create {
            #[diesel(sql_type = diesel::sql_types::Text, column_name = "Create Table")]
            create: String,
        }
        let names: Vec<Table> = diesel::sql_query(format!(
            "SELECT CAST(table_name AS CHAR) AS name FROM information_schema.tables \
             WHERE table_schema = '{name}' ORDER BY table_name"
        ))
        .load(c)
        .expect("the template's tables");
        let creates = names
            .iter()
            .map(|table| {
                let create: Create =
                    diesel::sql_query(format!("SHOW CREATE TABLE {name}.`{}`", table.name))
                        .get_result(c)
                        .expect("SHOW CREATE TABLE");
                create.create
            })
            .collect();
        (name, creates)
    });
    let mut sql = String::from("SET FOREIGN_KEY_CHECKS = 0;\n");
    for create in tables {
        sql.push_str(create);
        sql.push_str(";\n");
    }
    sql.push_str("SET FOREIGN_KEY_CHECKS = 1;\n");
    sql.push_str(&format!(
        "INSERT INTO __diesel_schema_migrations SELECT * FROM {template}.__diesel_schema_migrations"
    ));
    sql
}
