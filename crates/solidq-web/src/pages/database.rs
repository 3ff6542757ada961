//! Database health: solidq's tables with their rows and sizes; dead rows
//! and vacuums on PostgreSQL; the file, WAL and pages on SQLite; on the
//! servers, the oldest transaction held open elsewhere, with a warning
//! past a minute ([`solidq::Horizon`]). The URL is shown redacted: never
//! its password.

use axum::extract::State;
use maud::html;

use super::{Page, db};
use crate::Shared;
use crate::layout::{Ctx, maybe_time, shell, thousands, time};

/// Bytes for people: "1.5 MiB".
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// A transaction's age for people: "2 min 5 s", "350 ms".
fn age(ms: u64) -> String {
    if ms < 1_000 {
        return format!("{ms} ms");
    }
    let s = ms / 1_000;
    match (s / 3_600, s / 60 % 60, s % 60) {
        (0, 0, s) => format!("{s} s"),
        (0, m, s) => format!("{m} min {s} s"),
        (h, m, _) => format!("{h} h {m} min"),
    }
}

/// `GET /database`.
pub async fn page(State(app): State<Shared>, ctx: Ctx) -> Page {
    let health = db(&app, |q| q.database_health()).await?;
    let body = html! {
        h1 { "Database" }
        dl class="kv" {
            dt { "Backend" } dd { (health.backend) }
            dt { "Database" } dd { code { (health.database) } }
            dt { "Read at" } dd { (time(health.checked_at)) }
            @if let Some(pg) = &health.postgres {
                dt { "Server" } dd { "PostgreSQL " (pg.server_version) }
                dt { "Schema" } dd { (pg.schema) }
                dt { "Database size" } dd { (bytes(pg.database_bytes)) }
            }
            @if let Some(lite) = &health.sqlite {
                dt { "File" } dd { code { (lite.path) } " · " (bytes(lite.file_bytes)) }
                dt { "Write-ahead log" } dd { (bytes(lite.wal_bytes)) }
                dt { "Pages" } dd { (thousands(lite.page_count)) " of " (bytes(lite.page_size)) ", " (thousands(lite.freelist_pages)) " free" }
            }
        }
        @if let Some(warning) = &health.horizon.warning {
            p class="flash bad" id="hold-warning" { (warning) }
        }
        @if health.sqlite.is_none() {
            h2 { "Open transactions" }
            dl class="kv" id="horizon" {
                dt { "Oldest, in another session" }
                dd {
                    @match &health.horizon.oldest_transaction {
                        Some(t) => {
                            (age(t.age_ms)) " · session " (t.session) " · " code { (t.holder) } " · " (t.state)
                        }
                        None => { "none" }
                    }
                }
                dt { @if health.backend == "mysql" { "History list length" } @else { "Dead rows in solidq's tables" } }
                dd { (health.horizon.dead_rows.map(thousands).unwrap_or_else(|| "—".into())) }
            }
        }
        h2 { "Tables" }
        table id="tables" {
            thead { tr {
                th { "Table" } th class="n" { "Rows" } th class="n" { "Size" }
                @if health.postgres.is_some() { th class="n" { "Dead rows" } th { "Last vacuum" } th { "Last autovacuum" } }
            } }
            tbody {
                @for t in &health.tables {
                    tr data-table=(t.name) {
                        td { code { (t.name) } }
                        td class="n" { @if !t.rows_exact { "≈ " } (thousands(t.rows)) }
                        td class="n" { (t.total_bytes.map(bytes).unwrap_or_else(|| "—".into())) }
                        @if health.postgres.is_some() {
                            td class="n" { (t.dead_rows.map(thousands).unwrap_or_else(|| "—".into())) }
                            td { (maybe_time(t.last_vacuum)) }
                            td { (maybe_time(t.last_autovacuum)) }
                        }
                    }
                }
            }
        }
    };
    Ok(shell(&ctx, "Database", "database", body))
}
