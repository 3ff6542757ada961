//! The module layering of the crate docs, checked: a module may use only
//! modules of a lower layer (or itself). `types` is the bottom and uses
//! nothing of solidq; `cli` is the top. A `use crate::X` that points up
//! fails here with the file and line.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Low to high; modules on one line are one layer and may not use each
/// other. Keep in step with "Layers" in src/lib.rs.
const LAYERS: &[&[&str]] = &[
    &["types"],
    &["config", "concurrency"],
    &["job"],
    &["store"],
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
    &["web"],
    &["cli"],
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
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
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
