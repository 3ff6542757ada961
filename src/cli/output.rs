//! How commands print: a table sized to the terminal, or with `--json` one
//! JSON document on stdout. Messages and errors go to stderr.

use std::time::Duration;

use chrono::{DateTime, Utc};
use comfy_table::{ContentArrangement, Table, presets};

/// Where a command's result goes.
#[derive(Debug, Clone, Copy)]
pub(super) struct Output {
    pub json: bool,
}

impl Output {
    /// Prints `document` with `--json`, else `table()`.
    pub(super) fn print(&self, document: serde_json::Value, table: impl FnOnce() -> Table) {
        if self.json {
            println!(
                "{}",
                serde_json::to_string_pretty(&document).expect("JSON values serialize")
            );
        } else {
            println!("{}", table());
        }
    }

    /// Prints `document` with `--json`, else the line `text`.
    pub(super) fn say(&self, document: serde_json::Value, text: &str) {
        if self.json {
            println!(
                "{}",
                serde_json::to_string_pretty(&document).expect("JSON values serialize")
            );
        } else {
            println!("{text}");
        }
    }
}

/// A table with these column headers, fitted to the terminal's width (long
/// cells wrap) when stdout is one.
pub(super) fn table(headers: &[&str]) -> Table {
    let mut table = Table::new();
    table
        .load_preset(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(headers.iter().copied());
    table
}

/// A key/value table: one row per field.
pub(super) fn fields(rows: Vec<(&str, String)>) -> Table {
    let mut table = Table::new();
    table
        .load_preset(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Dynamic);
    for (key, value) in rows {
        table.add_row(vec![key.to_string(), value]);
    }
    table
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
