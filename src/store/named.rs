//! Named SQL statements: each backend keeps its statements in `.sql` files
//! beside its code (`store/<backend>/<area>.sql`), each under a line
//! `-- name: <statement>`, and takes them out at compile time:
//!
//! ```text
//! const RECURRING: &str = include_str!("recurring.sql");
//! const UPSERT_TASK: &str = named(RECURRING, "upsert_task");
//! ```
//!
//! A name that the file does not hold fails the build (the lookup runs in
//! a constant). The text of a statement is everything from the line after
//! its name to the next name (or the end of the file), without the
//! comment-only lines before and after it and without trailing blank space
//! or `;`. A comment line inside a statement stays in its text (it is a
//! comment to the database too); the statements test compares texts
//! without any.
//! `tests/it/statements.rs` checks that every backend defines the same
//! names in the same files and that each statement prepares on a migrated
//! database of its backend.
//!
//! A name may carry a step after a slash (`fold/lock`, `fold/delete`):
//! the statements of an operation that one backend does in several where
//! another does it in one (MySQL has no `RETURNING`, SQLite no
//! `DELETE … RETURNING` into an `INSERT`). Every backend defines each
//! operation, the part before the slash, as one statement or as steps.

/// The statement under `-- name: <name>` in `file`. Meant for constants:
/// a missing name panics, which in a constant fails the build.
pub(crate) const fn named(file: &'static str, name: &str) -> &'static str {
    let bytes = file.as_bytes();
    let marker = b"-- name: ";
    let mut at = 0;
    while at < bytes.len() {
        let name_end = line_end(bytes, at);
        if starts_with_at(bytes, at, marker) && equals(bytes, at + marker.len(), name_end, name) {
            let start = if name_end < bytes.len() {
                name_end + 1
            } else {
                name_end
            };
            let mut end = start;
            // The statement runs to the next name or the end.
            while end < bytes.len() && !starts_with_at(bytes, end, marker) {
                end = line_end(bytes, end) + 1;
            }
            if end > bytes.len() {
                end = bytes.len();
            }
            let (start, end) = trimmed(bytes, start, end);
            return match std::str::from_utf8(bytes.split_at(end).0.split_at(start).1) {
                Ok(text) => text,
                Err(_) => panic!("a statement is not UTF-8"),
            };
        }
        at = name_end + 1;
    }
    panic!("no statement of this name in the file")
}

/// The index of the newline ending the line at `at` (or the end).
const fn line_end(bytes: &[u8], at: usize) -> usize {
    let mut i = at;
    while i < bytes.len() && bytes[i] != b'\n' {
        i += 1;
    }
    i
}

const fn starts_with_at(bytes: &[u8], at: usize, prefix: &[u8]) -> bool {
    if at + prefix.len() > bytes.len() {
        return false;
    }
    let mut i = 0;
    while i < prefix.len() {
        if bytes[at + i] != prefix[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Whether `bytes[from..to]` (trailing spaces ignored) is `name`.
const fn equals(bytes: &[u8], from: usize, to: usize, name: &str) -> bool {
    let name = name.as_bytes();
    let mut to = to;
    while to > from && (bytes[to - 1] == b' ' || bytes[to - 1] == b'\r') {
        to -= 1;
    }
    if to - from != name.len() {
        return false;
    }
    starts_with_at(bytes, from, name)
}

/// `start..end` without leading comment-only and blank lines, and
/// without trailing blank space, comment-only lines and a final `;`.
const fn trimmed(bytes: &[u8], start: usize, end: usize) -> (usize, usize) {
    let mut start = start;
    // Leading blank or comment-only lines (a statement's own comment).
    loop {
        let mut i = start;
        while i < end && (bytes[i] == b' ' || bytes[i] == b'\t') {
            i += 1;
        }
        if i < end && bytes[i] == b'\n' {
            start = i + 1;
        } else if starts_with_at(bytes, i, b"--") && i < end {
            start = line_end(bytes, i) + 1;
            if start > end {
                start = end;
            }
        } else {
            break;
        }
    }
    let mut end = end;
    // Trailing comment-only lines between this statement and the next
    // name belong to the next one.
    loop {
        while end > start && matches!(bytes[end - 1], b' ' | b'\t' | b'\n' | b'\r' | b';') {
            end -= 1;
        }
        // The last line: a comment only?
        let mut line_start = end;
        while line_start > start && bytes[line_start - 1] != b'\n' {
            line_start -= 1;
        }
        let mut i = line_start;
        while i < end && (bytes[i] == b' ' || bytes[i] == b'\t') {
            i += 1;
        }
        if line_start < end && starts_with_at(bytes, i, b"--") {
            end = line_start;
        } else {
            break;
        }
    }
    (start, end)
}

/// Every name a file defines, in order (for the tests).
#[cfg(test)]
pub(crate) fn names(file: &str) -> Vec<&str> {
    file.lines()
        .filter_map(|l| l.strip_prefix("-- name: "))
        .map(str::trim)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "\
-- The area's header.

-- name: first
-- What the first does.
SELECT 1
FROM t;

-- A comment about the second.
-- name: second
UPDATE t SET a = 1
-- name: last
DELETE FROM t
";

    #[test]
    fn statements_are_found_by_name_without_comments_or_semicolons() {
        assert_eq!(named(FILE, "first"), "SELECT 1\nFROM t");
        assert_eq!(named(FILE, "second"), "UPDATE t SET a = 1");
        assert_eq!(named(FILE, "last"), "DELETE FROM t");
        assert_eq!(names(FILE), ["first", "second", "last"]);
        const IN_A_CONSTANT: &str = named(FILE, "second");
        assert_eq!(IN_A_CONSTANT, "UPDATE t SET a = 1");
    }

    #[test]
    #[should_panic(expected = "no statement of this name")]
    fn a_missing_name_is_refused() {
        named(FILE, "fir");
    }
}
