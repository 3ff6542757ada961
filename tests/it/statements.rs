//! solidq's SQL as named statements (`src/store/<backend>/<area>.sql`, one
//! statement under each `-- name:` line, loaded at compile time by
//! `store::named`): every backend defines the same files and the same
//! operations (a name, or its steps `name/step` where a backend needs
//! several statements), and every statement prepares on a migrated database of its
//! backend.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};

use common::{TestConn, TestDb};
use diesel::connection::SimpleConnection;
use solidq::Backend;

backend_tests!(every_named_statement_prepares);

const BACKENDS: [&str; 3] = ["sqlite", "postgres", "mysql"];

/// The `.sql` files of a backend: file name → text.
fn sql_files(backend: &str) -> BTreeMap<String, String> {
    let dir = common::repo_root().join("src/store").join(backend);
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).expect("the backend's folder") {
        let path = entry.expect("an entry").path();
        if path.extension().is_some_and(|e| e == "sql") {
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            files.insert(name, std::fs::read_to_string(&path).expect("read"));
        }
    }
    files
}

/// (name, statement) of a file, as `store::named` reads them: the lines
/// after each name up to the next, without comment-only lines and a
/// final `;`.
fn statements(text: &str) -> Vec<(String, String)> {
    let mut found: Vec<(String, Vec<&str>)> = Vec::new();
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("-- name: ") {
            found.push((name.trim().to_string(), Vec::new()));
        } else if let Some((_, lines)) = found.last_mut()
            && !line.trim_start().starts_with("--")
        {
            lines.push(line);
        }
    }
    found
        .into_iter()
        .map(|(name, lines)| {
            let text = lines.join("\n");
            (name, text.trim().trim_end_matches(';').trim().to_string())
        })
        .collect()
}

#[test]
fn every_backend_defines_the_same_files_and_names() {
    let by_backend: Vec<BTreeMap<String, String>> = BACKENDS.iter().map(|b| sql_files(b)).collect();
    let file_names: Vec<BTreeSet<&String>> =
        by_backend.iter().map(|f| f.keys().collect()).collect();
    assert!(
        !file_names[0].is_empty(),
        "no .sql file under src/store/sqlite"
    );
    for (backend, names) in BACKENDS.iter().zip(&file_names).skip(1) {
        assert_eq!(
            names, &file_names[0],
            "{backend}'s .sql files differ from sqlite's"
        );
    }
    for file in &file_names[0] {
        let mut bases: Vec<BTreeSet<String>> = Vec::new();
        for (backend, files) in BACKENDS.iter().zip(&by_backend) {
            let named = statements(&files[*file]);
            assert!(!named.is_empty(), "{backend}/{file} names no statement");
            let mut seen = BTreeSet::new();
            for (name, text) in &named {
                assert!(
                    seen.insert(name.clone()),
                    "{backend}/{file} names {name} twice"
                );
                assert!(!text.is_empty(), "{backend}/{file}: {name} is empty");
                assert!(
                    !text.contains("-- name:"),
                    "{backend}/{file}: {name} runs into another name"
                );
            }
            // An operation is one statement (`fold`) or, where a backend
            // needs several, its steps (`fold/lock`, `fold/delete`).
            let base: BTreeSet<String> = named
                .iter()
                .map(|(n, _)| n.split('/').next().unwrap().to_string())
                .collect();
            bases.push(base);
        }
        for (backend, base) in BACKENDS.iter().zip(&bases).skip(1) {
            assert_eq!(
                base, &bases[0],
                "{backend}/{file} names other statements than sqlite/{file}"
            );
        }
    }
}

/// Each statement prepared (not run) on a migrated database: PostgreSQL's
/// and MySQL's `PREPARE`, SQLite's `EXPLAIN` (which prepares and runs
/// nothing).
fn every_named_statement_prepares(db: &TestDb) {
    let _migrated = db.queue();
    let backend = match db.backend {
        Backend::Sqlite => "sqlite",
        Backend::Postgres => "postgres",
        Backend::Mysql => "mysql",
    };
    let mut conn = db.conn();
    // health.sql reads sqlite_stat1, which SQLite makes at the first
    // ANALYZE (the statement is run only once it exists).
    if db.backend == Backend::Sqlite {
        conn.execute("ANALYZE");
    }
    let mut failures = Vec::new();
    let mut prepared = 0;
    for (file, text) in sql_files(backend) {
        for (name, statement) in statements(&text) {
            let result = match &mut conn {
                #[cfg(feature = "postgres")]
                TestConn::Pg(c) => c.batch_execute(&format!(
                    "PREPARE solidq_check AS {statement}; DEALLOCATE solidq_check"
                )),
                #[cfg(feature = "sqlite")]
                TestConn::Sqlite(c) => c.batch_execute(&format!("EXPLAIN {statement}")),
                #[cfg(feature = "mysql")]
                TestConn::Mysql(c) => {
                    let quoted = statement.replace('\\', "\\\\").replace('\'', "\\'");
                    c.batch_execute(&format!("PREPARE solidq_check FROM '{quoted}'"))
                        .and_then(|()| c.batch_execute("DEALLOCATE PREPARE solidq_check"))
                }
            };
            match result {
                Ok(()) => prepared += 1,
                Err(e) => failures.push(format!("{backend}/{file} {name}: {e}")),
            }
        }
    }
    assert!(prepared > 0, "no statement of {backend} was prepared");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
