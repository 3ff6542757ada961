//! The module layering of the crate docs, checked: a module may use only
//! modules of a lower layer (or itself). `types` is the bottom and uses
//! nothing of solidq; `testing` is the library's top (the dashboard and
//! the CLI are crates of their own, on its public API). A `use crate::X`
//! that points up fails here with the file and line.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Low to high; modules on one line are one layer and may not use each
/// other. Keep in step with "Layers" in src/lib.rs.
const LAYERS: &[&[&str]] = &[
    &["types"],
    &["config", "concurrency"],
    &["job"],
    &["store"],
    &["lifecycle"],
    &["events"],
    &["process"],
    &["client", "logging"],
    &["workflow"],
    &["batch"],
    &["maintenance"],
    &["dispatcher"],
    &["scheduler"],
    &["worker"],
    &["supervisor"],
    &["admin"],
    &["testing"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `pub use module::{A, B}` in lib.rs: which module a root name comes from.
fn root_reexports(lib: &str) -> HashMap<String, String> {
    let mut names = HashMap::new();
    let flat = lib.replace('\n', " ");
    for statement in flat.split(';') {
        let Some(rest) = statement.trim().strip_prefix("pub use ") else {
            continue;
        };
        let Some((module, items)) = rest.split_once("::") else {
            continue;
        };
        for item in items
            .trim_matches(|c| c == '{' || c == '}' || c == ' ')
            .split(',')
        {
            let name = item.split(" as ").last().unwrap_or("").trim();
            if !name.is_empty() {
                names.insert(name.to_string(), module.trim().to_string());
            }
        }
    }
    names
}

/// Every `crate::name` on the line, outside comments.
fn crate_paths(line: &str) -> Vec<String> {
    let code = line.split("//").next().unwrap_or("");
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let after = &rest[i + "crate::".len()..];
        if after.starts_with('{') {
            let end = after.find('}').unwrap_or(after.len());
            for item in after[1..end].split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    found.push(name);
                }
            }
        } else {
            let name: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            found.push(name);
        }
        rest = after;
    }
    found
}

#[test]
fn no_module_uses_a_higher_layer() {
    let src = crate::common::repo_root().join("src");
    let reexports = root_reexports(&std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs"));
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut violations = Vec::new();
    let mut unknown = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&src).expect("under src");
        let first = relative.components().next().expect("a component");
        let module = first
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if module == "lib" || module == "bin" {
            continue;
        }
        let Some(own) = layer_of(&module) else {
            unknown.push(format!(
                "{}: module {module} has no layer",
                relative.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(file).expect("read file");
        for (n, line) in text.lines().enumerate() {
            for name in crate_paths(line) {
                let target = reexports.get(&name).cloned().unwrap_or(name.clone());
                let Some(theirs) = layer_of(&target) else {
                    unknown.push(format!(
                        "{}:{}: crate::{name} is in no layer",
                        relative.display(),
                        n + 1
                    ));
                    continue;
                };
                if target != module && theirs >= own {
                    violations.push(format!(
                        "{}:{}: {module} (layer {own}) uses {target} (layer {theirs}): {}",
                        relative.display(),
                        n + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "unplaced modules:\n{}",
        unknown.join("\n")
    );
    assert!(
        violations.is_empty(),
        "imports that point up or sideways:\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_checker_sees_a_violation() {
    assert_eq!(crate_paths("use crate::worker::Foo;"), ["worker"]);
    assert_eq!(
        crate_paths("use crate::{Error, Queue};"),
        ["Error", "Queue"]
    );
    assert!(crate_paths("// see crate::worker").is_empty());
    let exports = root_reexports("pub use worker::{Worker, WorkerHandle};\npub use types::Error;");
    assert_eq!(exports["Worker"], "worker");
    assert_eq!(exports["Error"], "types");
}

/// The module path of a file under `src`: `web/pages/mod.rs` is
/// `["web", "pages"]`, `web/access.rs` is `["web", "access"]`.
fn module_of(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_string());
    }
    parts
}

/// The module paths a file's code names through `crate::`, `super::` or
/// `self::` (doc comments, comments and `#[cfg(test)]` modules left out),
/// each as far as its identifiers go; a `{…}` list gives one path per
/// item.
fn module_paths(text: &str, own: &[String], is_mod: bool) -> Vec<Vec<String>> {
    let code: String = text
        .split("#[cfg(test)]\nmod tests")
        .next()
        .unwrap_or("")
        .lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let parent: Vec<String> = own[..own.len().saturating_sub(1)].to_vec();
    let this: Vec<String> = if is_mod { own.to_vec() } else { parent.clone() };
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut found = Vec::new();
    for (prefix, base) in [
        ("crate::", Vec::new()),
        ("super::", parent),
        ("self::", this),
    ] {
        let mut rest = code.as_str();
        while let Some(i) = rest.find(prefix) {
            let before = rest[..i].chars().last();
            rest = &rest[i + prefix.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut path = base.clone();
            let mut tail = rest;
            loop {
                if let Some(list) = tail.strip_prefix('{') {
                    let end = list.find('}').unwrap_or(list.len());
                    for item in list[..end].split(',') {
                        let name = ident(item.trim());
                        if !name.is_empty() {
                            let mut one = path.clone();
                            one.push(name);
                            found.push(one);
                        }
                    }
                    break;
                }
                let name = ident(tail);
                if name.is_empty() {
                    found.push(path);
                    break;
                }
                tail = &tail[name.len()..];
                path.push(name);
                match tail.strip_prefix("::") {
                    Some(more) => tail = more,
                    None => {
                        found.push(path);
                        break;
                    }
                }
            }
        }
    }
    found
}

/// The import graph of each folder's files (a subfolder is one node), and
/// a circle in any of them: `a.rs` uses `b.rs`, which uses `a.rs`
/// (through any of the folder's files). Each folder's files must stand in
/// an order, as the crate's modules do.
#[test]
fn no_folder_holds_a_circle() {
    use std::collections::{BTreeMap, BTreeSet};
    let src = crate::common::repo_root().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeSet<Vec<String>> = files
        .iter()
        .map(|f| module_of(f.strip_prefix(&src).unwrap()))
        .collect();
    // folder -> file -> the folder's files it uses
    let mut graphs: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        let own = module_of(relative);
        let is_mod = relative
            .file_name()
            .is_some_and(|n| n == "mod.rs" || n == "lib.rs");
        let text = std::fs::read_to_string(file).unwrap();
        for target in module_paths(&text, &own, is_mod) {
            let common = own.iter().zip(&target).take_while(|(a, b)| a == b).count();
            if common >= own.len() || common >= target.len() {
                continue;
            }
            let folder = own[..common].to_vec();
            let mut to = folder.clone();
            to.push(target[common].clone());
            if !modules.contains(&to) {
                continue;
            }
            graphs
                .entry(folder)
                .or_default()
                .entry(own[common].clone())
                .or_default()
                .insert(target[common].clone());
        }
    }
    let mut circles = Vec::new();
    for (folder, graph) in &graphs {
        // A depth-first search; a node met again on the current path
        // closes a circle.
        fn visit(
            node: &str,
            graph: &BTreeMap<String, BTreeSet<String>>,
            path: &mut Vec<String>,
            done: &mut BTreeSet<String>,
            circles: &mut Vec<Vec<String>>,
        ) {
            if let Some(at) = path.iter().position(|n| n == node) {
                circles.push(path[at..].to_vec());
                return;
            }
            if !done.insert(node.to_string()) {
                return;
            }
            path.push(node.to_string());
            for next in graph.get(node).into_iter().flatten() {
                visit(next, graph, path, done, circles);
            }
            path.pop();
        }
        let mut found = Vec::new();
        let mut done = BTreeSet::new();
        for node in graph.keys() {
            visit(node, graph, &mut Vec::new(), &mut done, &mut found);
        }
        for circle in found {
            circles.push(format!("src/{}: {}", folder.join("/"), circle.join(" -> ")));
        }
    }
    assert!(
        circles.is_empty(),
        "files of one folder that use each other in a circle:\n{}",
        circles.join("\n")
    );
    // The checker sees the circles it guards against.
    let own = vec!["store".to_string(), "batches".to_string()];
    assert_eq!(
        module_paths("use super::dependencies::{held, Wait};", &own, false),
        [
            vec!["store", "dependencies", "held"],
            vec!["store", "dependencies", "Wait"]
        ]
    );
    assert_eq!(
        module_paths(
            "crate::store::{jobs, batches}::x // crate::web",
            &own,
            false
        ),
        [vec!["store", "jobs"], vec!["store", "batches"]]
    );
}

/// The library is just a library: its dependencies (every backend's) hold
/// no web server, async runtime or command-line parser; those are
/// solidq-web's and solidq-cli's.
#[test]
fn the_library_builds_no_web_server_runtime_or_cli_parser() {
    let manifest =
        std::fs::read_to_string(crate::common::repo_root().join("Cargo.toml")).expect("Cargo.toml");
    let start = manifest.find("\n[dependencies]").expect("[dependencies]");
    let section = &manifest[start + 1..];
    let end = section[1..].find("\n[").map_or(section.len(), |i| i + 1);
    let names: Vec<&str> = section[..end]
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once('=').map(|(name, _)| name.trim()))
        .filter(|name| !name.starts_with('#'))
        .collect();
    assert!(
        names.contains(&"diesel"),
        "read the dependencies: {names:?}"
    );
    for banned in [
        "axum",
        "tokio",
        "hyper",
        "maud",
        "utoipa",
        "clap",
        "tower-http",
    ] {
        assert!(
            !names.contains(&banned),
            "the solidq library depends on {banned}: it belongs to solidq-web or solidq-cli"
        );
    }
}

/// The job rules (`src/lifecycle/`) decide over the driver's areas: they
/// hold no statement, name no table of the schema and no backend.
#[test]
fn no_rule_module_holds_sql_or_names_a_backend() {
    let src = crate::common::repo_root().join("src");
    let mut files = Vec::new();
    rust_files(&src.join("lifecycle"), &mut files);
    assert!(!files.is_empty(), "read src/lifecycle");
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for banned in [
                "sql_query",
                "schema::",
                "diesel::prelude",
                "diesel::dsl",
                "SqliteConnection",
                "PgConnection",
                "MysqlConnection",
                "store::sqlite",
                "store::postgres",
                "store::mysql",
            ] {
                if code.contains(banned) {
                    found.push(format!("{}:{}: {banned}", file.display(), n + 1));
                }
            }
        }
        let literals = sql_literals(&text);
        if literals > 0 {
            found.push(format!("{}: {literals} SQL text(s)", file.display()));
        }
    }
    assert!(
        found.is_empty(),
        "rules holding SQL or a backend: {found:#?}"
    );
}

/// The `.rs` files of `src` that still hold SQL text, and how many
/// statements (or fragments) each; everything else is in the backends'
/// `.sql` files (`store::named`). What is left is composed at run time:
///
/// * the enqueue insert, one text per shape of the jobs enqueued
///   (`statement.rs`, `insert_jobs` in each backend's `mod.rs`);
/// * the claim, composed from a worker's list of queues (`params.rs`'s
///   `ClaimQuery`, the candidates of each backend's `mod.rs`), and the
///   steps of a claim that go with it (the floor's reads and where the
///   jobs claimed ahead start, `floor.rs` of PostgreSQL and MySQL, which
///   no other backend has a statement for,
///   and MySQL's trim of its counter; the counter's move on MySQL, in
///   `portable.rs`, which the statements written once run);
/// * the fair-share placement's fragments (`fair.rs`), which the named
///   statements hold written out (each with a test comparing the two);
/// * what names tables or statistics chosen at run time (health's and
///   the tables' upkeep, `tables_tend`; the listener's and the lookup's
///   table names; statistics with their integer type per backend);
/// * MySQL's EXPLAIN copies with literals in place of parameters, and
///   PostgreSQL's `notify_ready` (no other backend has a statement for it).
///
/// A file may only go down: when one does, lower its figure here (and drop
/// it at zero).
const SQL_IN_RUST: &[(&str, usize)] = &[
    ("store/fair.rs", 3),
    ("store/info.rs", 1),
    ("store/listener.rs", 1),
    ("store/mysql/explain.rs", 7),
    ("store/mysql/floor.rs", 2),
    ("store/mysql/mod.rs", 9),
    ("store/mysql/statement.rs", 3),
    ("store/params.rs", 5),
    ("store/portable.rs", 1),
    ("store/postgres/floor.rs", 6),
    ("store/postgres/health.rs", 1),
    ("store/postgres/jobs.rs", 1),
    ("store/postgres/mod.rs", 11),
    ("store/sqlite/health.rs", 3),
    ("store/sqlite/mod.rs", 11),
    ("store/sqlite/statement.rs", 2),
    ("store/stats.rs", 1),
];

/// SQL stays in the store's `.sql` files: no `.rs` file outside `store`
/// holds a statement, and those inside hold no more than
/// [`SQL_IN_RUST`] says (the statements composed at run time, and what is
/// still to move).
#[test]
fn sql_lives_in_the_stores_sql_files() {
    let src = crate::common::repo_root().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut counts: Vec<(String, usize)> = Vec::new();
    for file in &files {
        let relative = file
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .to_string();
        // The driver's conformance suite and the lost-commit cases are
        // tests: their SQL makes and reads back rows of their own.
        if relative == "store/conformance.rs" || relative == "store/lost_commit.rs" {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("read");
        // A file's own unit tests may read rows back with SQL.
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
        let code = code.split("#[cfg(all(test").next().unwrap_or("");
        let n = sql_literals(code);
        if n > 0 {
            counts.push((relative, n));
        }
    }
    counts.sort();
    let expected: Vec<(String, usize)> = SQL_IN_RUST
        .iter()
        .map(|(file, n)| (file.to_string(), *n))
        .collect();
    assert!(
        counts.iter().all(|(file, _)| file.starts_with("store/")),
        "SQL outside the store: {counts:#?}"
    );
    assert_eq!(
        counts, expected,
        "SQL text in .rs files (file, statements) differs from SQL_IN_RUST: \
         move new statements to a .sql file, or lower the figures of files that lost some"
    );
}

#[test]
fn the_sql_counter_sees_statements_and_not_words() {
    assert_eq!(sql_literals(r#"let q = "SELECT id FROM solidq_jobs";"#), 1);
    assert_eq!(
        sql_literals("let q = r\"DELETE FROM solidq_jobs\";\nlet w = \"selected\";"),
        1
    );
    assert_eq!(sql_literals("// \"UPDATE solidq_jobs SET a = 1\""), 0);
    assert_eq!(sql_literals(r#"let s = "a \" SELECT x FROM y";"#), 1);
}

/// The string literals of `code` (comments left out) that hold an SQL
/// statement or a fragment of one.
fn sql_literals(code: &str) -> usize {
    let mut n = 0;
    for literal in string_literals(code) {
        let upper = literal.to_uppercase();
        let words: Vec<&str> = upper
            .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .filter(|w| !w.is_empty())
            .collect();
        let has = |pair: &[&str]| words.windows(pair.len()).any(|w| w == pair);
        let statement = (literal.contains("SELECT") && has(&["FROM"]))
            || literal.contains("INSERT INTO")
            || literal.contains("DELETE FROM")
            || (literal.contains("UPDATE") && literal.contains(" SET "))
            || literal.contains("CREATE TABLE")
            || literal.contains("ALTER TABLE");
        if statement {
            n += 1;
        }
    }
    n
}

/// The contents of the string literals of `code`, outside `//` comments:
/// `"…"` with escapes, and raw `r"…"`, `r#"…"#`.
fn string_literals(code: &str) -> Vec<String> {
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'\'' => {
                // A char literal ('"', '\'') or a lifetime: skip what
                // could hide a quote.
                if bytes.get(i + 2) == Some(&b'\'') {
                    i += 3;
                } else if bytes.get(i + 1) == Some(&b'\\') && bytes.get(i + 3) == Some(&b'\'') {
                    i += 4;
                } else {
                    i += 1;
                }
            }
            b'r' if matches!(bytes.get(i + 1), Some(b'"') | Some(b'#'))
                && (i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_')) =>
            {
                let mut j = i + 1;
                let mut hashes = 0;
                while bytes.get(j) == Some(&b'#') {
                    hashes += 1;
                    j += 1;
                }
                if bytes.get(j) != Some(&b'"') {
                    i += 1;
                    continue;
                }
                let close = format!("\"{}", "#".repeat(hashes));
                let start = j + 1;
                let end = code[start..].find(&close).map_or(code.len(), |e| start + e);
                out.push(code[start..end].to_string());
                i = end + close.len();
            }
            b'"' => {
                let mut j = i + 1;
                while j < bytes.len() && bytes[j] != b'"' {
                    if bytes[j] == b'\\' {
                        j += 1;
                    }
                    j += 1;
                }
                out.push(code[(i + 1).min(code.len())..j.min(code.len())].to_string());
                i = j + 1;
            }
            _ => i += 1,
        }
    }
    out
}
