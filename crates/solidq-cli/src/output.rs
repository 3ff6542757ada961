//! How commands print: a table, or with `--json` one JSON document on
//! stdout. Messages, notes and errors go to stderr.
//!
//! Tables are plain text, columns two spaces apart, no trailing spaces.
//! With a width (the terminal's, or `COLUMNS`), a table that is too wide
//! first cuts its free-text columns (kind, queue, error, name…) with "…",
//! never an id, a number or a time, then hides its least useful columns
//! and says which on stderr; without one (piped, no `COLUMNS`) every cell
//! is printed whole.

use std::io::IsTerminal;
use std::time::Duration;

use chrono::{DateTime, Utc};

/// Spaces between columns.
const GAP: usize = 2;

/// Where a command's result goes.
#[derive(Debug, Clone, Copy)]
pub(super) struct Output {
    pub json: bool,
}

impl Output {
    /// Prints `document` with `--json`, else `table()` fitted to the
    /// output's width.
    pub(super) fn print(&self, document: serde_json::Value, table: impl FnOnce() -> Table) {
        if self.json {
            println!("{}", pretty(&document));
        } else {
            let (text, hidden) = table().render(width());
            print!("{text}");
            if !hidden.is_empty() {
                eprintln!(
                    "solidq: hidden to fit the width: {} (--json or a wider terminal shows them)",
                    hidden.join(", ")
                );
            }
        }
    }

    /// Prints `document` with `--json`, else `text()` as it is.
    pub(super) fn print_text(&self, document: serde_json::Value, text: impl FnOnce() -> String) {
        if self.json {
            println!("{}", pretty(&document));
        } else {
            print!("{}", text());
        }
    }

    /// An action that changed nothing: with `--json` its `document` (the
    /// counts) on stdout, then [`Error::NothingToDo`](solidq::Error::NothingToDo)
    /// saying why, one line on stderr and exit 1.
    pub(super) fn nothing_done(
        &self,
        document: serde_json::Value,
        action: &'static str,
        reason: String,
    ) -> solidq::Result<()> {
        if self.json {
            println!("{}", pretty(&document));
        }
        Err(solidq::Error::NothingToDo { action, reason })
    }

    /// Prints `document` with `--json`, else the line `text`.
    pub(super) fn say(&self, document: serde_json::Value, text: &str) {
        if self.json {
            println!("{}", pretty(&document));
        } else {
            println!("{text}");
        }
    }
}

fn pretty(document: &serde_json::Value) -> String {
    serde_json::to_string_pretty(document).expect("JSON values serialize")
}

/// The width tables are fitted to: `COLUMNS` when set (as `ls` does), else
/// the terminal's when stdout is one, else none.
fn width() -> Option<usize> {
    if let Some(columns) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|&c| c > 0)
    {
        return Some(columns);
    }
    if !std::io::stdout().is_terminal() {
        return None;
    }
    terminal_columns().or(Some(80))
}

#[cfg(unix)]
fn terminal_columns() -> Option<usize> {
    // SAFETY: TIOCGWINSZ fills the winsize struct we own; a failure leaves
    // it zeroed and is reported through the return value.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) } == 0;
    (ok && size.ws_col > 0).then_some(usize::from(size.ws_col))
}

#[cfg(not(unix))]
fn terminal_columns() -> Option<usize> {
    None
}

/// How a column behaves when the table is too wide.
#[derive(Debug, Clone, Copy)]
pub(super) struct Column {
    header: &'static str,
    /// Free text that may be cut with "…", down to this many characters.
    clip_to: Option<usize>,
    right: bool,
    /// Hidden when cutting is not enough: higher goes first.
    drop: u8,
}

impl Column {
    /// A column printed whole: ids, numbers, times, states.
    pub(super) fn keep(header: &'static str) -> Column {
        Column {
            header,
            clip_to: None,
            right: false,
            drop: 0,
        }
    }

    /// Free text, cut with "…" to no fewer than `min` characters when the
    /// table is too wide.
    pub(super) fn clip(header: &'static str, min: usize) -> Column {
        Column {
            clip_to: Some(min.max(header.chars().count())),
            ..Column::keep(header)
        }
    }

    /// Right-aligned (numbers).
    pub(super) fn right(mut self) -> Column {
        self.right = true;
        self
    }

    /// Hidden when cutting free text is not enough; `rank` orders the
    /// hidden columns (higher first).
    pub(super) fn optional(mut self, rank: u8) -> Column {
        self.drop = rank;
        self
    }
}

/// Rows under column headers.
pub(super) struct Table {
    columns: Vec<Column>,
    rows: Vec<Vec<String>>,
}

/// A table with these columns.
pub(super) fn table(columns: &[Column]) -> Table {
    Table {
        columns: columns.to_vec(),
        rows: Vec::new(),
    }
}

impl Table {
    /// Adds a row: one cell per column; line breaks become spaces.
    pub(super) fn add_row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.columns.len());
        self.rows.push(
            cells
                .into_iter()
                .map(|c| {
                    c.chars()
                        .map(|ch| if ch.is_control() { ' ' } else { ch })
                        .collect()
                })
                .collect(),
        );
    }

    /// The table as text fitted to `width` (none: every cell whole), and
    /// the headers of the columns hidden to fit.
    pub(super) fn render(&self, width: Option<usize>) -> (String, Vec<&'static str>) {
        let mut shown: Vec<usize> = (0..self.columns.len()).collect();
        let mut hidden = Vec::new();
        let widths = loop {
            let mut widths: Vec<usize> = shown
                .iter()
                .map(|&c| {
                    self.rows
                        .iter()
                        .map(|r| len(&r[c]))
                        .chain([len(self.columns[c].header)])
                        .max()
                        .unwrap_or(0)
                })
                .collect();
            let Some(limit) = width else { break widths };
            let total = |w: &[usize]| w.iter().sum::<usize>() + GAP * w.len().saturating_sub(1);
            // Cut the widest free-text column by one until it fits.
            while total(&widths) > limit {
                let widest = shown
                    .iter()
                    .enumerate()
                    .filter_map(|(i, &c)| {
                        let min = self.columns[c].clip_to?;
                        (widths[i] > min).then(|| (widths[i] - min, i))
                    })
                    .max();
                match widest {
                    Some((_, i)) => widths[i] -= 1,
                    None => break,
                }
            }
            if total(&widths) <= limit {
                break widths;
            }
            let next = shown
                .iter()
                .enumerate()
                .filter(|&(_, &c)| self.columns[c].drop > 0)
                .max_by_key(|&(i, &c)| (self.columns[c].drop, i));
            match next {
                Some((i, &c)) => {
                    hidden.push(self.columns[c].header);
                    shown.remove(i);
                }
                None => break widths,
            }
        };
        let mut out = String::new();
        let header: Vec<String> = self.columns.iter().map(|c| c.header.to_string()).collect();
        for cells in std::iter::once(&header).chain(self.rows.iter()) {
            let mut line = String::new();
            for (i, &c) in shown.iter().enumerate() {
                let text = clip(&cells[c], widths[i]);
                let pad = " ".repeat(widths[i] - len(&text));
                if i > 0 {
                    line.push_str(&" ".repeat(GAP));
                }
                if self.columns[c].right {
                    line.push_str(&pad);
                    line.push_str(&text);
                } else {
                    line.push_str(&text);
                    line.push_str(&pad);
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        (out, hidden)
    }
}

fn len(s: &str) -> usize {
    s.chars().count()
}

/// A key/value listing: one field per line, the values aligned; a value
/// of several lines continues under itself.
pub(super) fn fields(rows: Vec<(&str, String)>) -> String {
    let key_width = rows.iter().map(|(k, _)| len(k)).max().unwrap_or(0);
    let indent = " ".repeat(key_width + GAP);
    let mut out = String::new();
    for (key, value) in rows {
        let mut lines = value.lines();
        let first = lines.next().unwrap_or("");
        let line = format!("{key:key_width$}{}{first}", " ".repeat(GAP));
        out.push_str(line.trim_end());
        out.push('\n');
        for more in lines {
            let line = format!("{indent}{more}");
            out.push_str(line.trim_end());
            out.push('\n');
        }
    }
    out
}

/// A time for a table: UTC to the second.
pub(super) fn time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%SZ").to_string()
}

/// An optional time for a table (`-` when none).
pub(super) fn maybe_time(t: Option<DateTime<Utc>>) -> String {
    t.map_or_else(|| "-".to_string(), time)
}

/// A duration for a table: whole milliseconds below a second, else to a
/// tenth of a second or whole units.
pub(super) fn age(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else if d < Duration::from_secs(60) {
        format!("{:.1}s", d.as_secs_f64())
    } else {
        humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
    }
}

/// At most `max` characters of `s`, with an ellipsis when cut.
pub(super) fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let cut: String = s.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Table {
        let mut t = table(&[
            Column::keep("ID").right(),
            Column::clip("KIND", 4),
            Column::keep("CREATED").optional(1),
            Column::keep("AT"),
            Column::clip("ERROR", 5),
        ]);
        t.add_row(vec![
            "123456".into(),
            "send_welcome_email".into(),
            "2026-11-23 14:05:09Z".into(),
            "2026-11-23 14:05:10Z".into(),
            "connection refused\nat line 2".into(),
        ]);
        t.add_row(vec![
            "7".into(),
            "echo".into(),
            "2026-11-23 14:05:09Z".into(),
            "-".into(),
            String::new(),
        ]);
        t
    }

    #[test]
    fn without_a_width_every_cell_is_whole_and_lines_end_in_text() {
        let (text, hidden) = sample().render(None);
        assert!(hidden.is_empty());
        assert!(text.contains("send_welcome_email"), "{text}");
        assert!(text.contains("connection refused at line 2"), "{text}");
        for line in text.lines() {
            assert_eq!(line, line.trim_end(), "trailing spaces in {line:?}");
        }
        assert!(
            text.lines().nth(2).unwrap().starts_with("     7  echo"),
            "{text}"
        );
    }

    #[test]
    fn a_narrow_width_cuts_free_text_then_hides_columns_but_never_splits_a_time() {
        let (text, hidden) = sample().render(Some(70));
        assert!(hidden.is_empty(), "{hidden:?}");
        assert!(text.lines().all(|l| l.chars().count() <= 70), "{text}");
        assert!(text.contains("2026-11-23 14:05:09Z"), "{text}");
        assert_eq!(text.matches('…').count(), 2, "kind and error cut: {text}");
        let (text, hidden) = sample().render(Some(60));
        assert_eq!(hidden, ["CREATED"]);
        assert!(text.lines().all(|l| l.chars().count() <= 60), "{text}");
        assert!(
            text.contains("123456") && text.contains("2026-11-23 14:05:10Z"),
            "{text}"
        );
    }

    #[test]
    fn fields_continue_multi_line_values_under_themselves() {
        let text = fields(vec![("id", "7".into()), ("backtrace", "a\nb".into())]);
        assert_eq!(text, "id         7\nbacktrace  a\n           b\n");
    }
}
