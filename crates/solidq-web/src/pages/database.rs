//! Database health: solidq's tables with their rows and sizes; dead rows
//! and vacuums on PostgreSQL; the file, WAL and pages on SQLite. The URL
//! is shown redacted: never its password.

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
