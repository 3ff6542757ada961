//! Throughput, failures and latency of the last hour, per minute, for
//! every queue and kind or one of them: drawn by the vendored uPlot from
//! `GET /charts/data`, which reads `solidq_job_stats`
//! ([`Queue::job_series`](solidq::Queue::job_series)). Redrawn every
//! minute.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Query, State};
use chrono::{Duration, DurationRound, Utc};
use maud::html;
use serde::{Deserialize, Serialize};

use super::{Page, PageError, db};
use crate::Shared;
use crate::layout::{Ctx, shell};

/// `?queue=&kind=` of the charts.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ChartQuery {
    /// Only this queue.
    pub queue: Option<String>,
    /// Only this kind.
    pub kind: Option<String>,
}

/// The last hour, one entry per minute (oldest first), as uPlot takes it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Series {
    /// Each minute's start, Unix seconds.
    pub minutes: Vec<i64>,
    /// Jobs that succeeded.
    pub succeeded: Vec<u64>,
    /// Jobs that failed an attempt: failed for good, retried, stalled.
    pub failed: Vec<u64>,
    /// Mean wait from due to start, in seconds (`null` with no job).
    pub latency: Vec<Option<f64>>,
    /// Every queue and kind in the hour, for the filters.
    pub queues: Vec<String>,
    /// See `queues`.
    pub kinds: Vec<String>,
}

fn series(queue: &solidq::Queue, query: &ChartQuery) -> solidq::Result<Series> {
    let now = Utc::now();
    let start = (now - Duration::minutes(59))
        .duration_trunc(Duration::minutes(1))
        .unwrap_or(now);
    let rows = queue.job_series(start)?;
    let mut out = Series::default();
    let mut index = BTreeMap::new();
    for i in 0..60 {
        let minute = start + Duration::minutes(i);
        index.insert(minute.timestamp(), i as usize);
        out.minutes.push(minute.timestamp());
    }
    out.succeeded = vec![0; 60];
    out.failed = vec![0; 60];
    let mut waits = vec![(0u64, 0u64); 60];
    let wanted = |value: &str, filter: &Option<String>| {
        filter.as_deref().is_none_or(|f| f.is_empty() || f == value)
    };
    for row in rows {
        out.queues.push(row.queue.clone());
        out.kinds.push(row.kind.clone());
        if !wanted(&row.queue, &query.queue) || !wanted(&row.kind, &query.kind) {
            continue;
        }
        let Some(&i) = index.get(&row.bucket.timestamp()) else {
            continue;
        };
        match row.outcome.as_str() {
            "succeeded" => out.succeeded[i] += row.jobs,
            "failed" | "retried" | "stalled" => out.failed[i] += row.jobs,
            _ => {}
        }
        waits[i].0 += row.wait_ms;
        waits[i].1 += row.jobs;
    }
    out.latency = waits
        .into_iter()
        .map(|(ms, n)| (n > 0).then(|| ms as f64 / n as f64 / 1000.0))
        .collect();
    for list in [&mut out.queues, &mut out.kinds] {
        list.sort();
        list.dedup();
    }
    Ok(out)
}

/// `GET /charts/data?queue=&kind=`.
pub async fn data(
    State(app): State<Shared>,
    Query(query): Query<ChartQuery>,
) -> Result<Json<Series>, PageError> {
    Ok(Json(db(&app, move |q| series(q, &query)).await?))
}

/// `GET /charts?queue=&kind=`.
pub async fn page(State(app): State<Shared>, ctx: Ctx, Query(query): Query<ChartQuery>) -> Page {
    let q = query.clone();
    let names = db(&app, move |queue| series(queue, &q)).await?;
    let mut source = form_urlencoded::Serializer::new(String::new());
    if let Some(queue) = &query.queue {
        source.append_pair("queue", queue);
    }
    if let Some(kind) = &query.kind {
        source.append_pair("kind", kind);
    }
    let source = ctx.url(&format!("/charts/data?{}", source.finish()));
    let body = html! {
        h1 { "Last hour" }
        form class="filters" method="get" action=(ctx.url("/charts")) {
            label { "Queue" select name="queue" {
                option value="" { "every queue" }
                @for n in &names.queues { option value=(n) selected[query.queue.as_deref() == Some(n.as_str())] { (n) } }
            } }
            label { "Kind" select name="kind" {
                option value="" { "every kind" }
                @for n in &names.kinds { option value=(n) selected[query.kind.as_deref() == Some(n.as_str())] { (n) } }
            } }
            button class="primary" type="submit" { "Show" }
        }
        p class="muted" { "Counted by workers per minute and written at each heartbeat; redrawn every minute." }
        link rel="stylesheet" href=(ctx.url("/assets/uPlot.min.css"));
        script src=(ctx.url("/assets/uPlot.iife.min.js")) {}
        div id="charts" data-source=(source) {
            div class="chart" id="throughput" {}
            div class="chart" id="latency" {}
        }
        script src=(ctx.url("/assets/charts.js")) {}
    };
    Ok(shell(&ctx, "Charts", "charts", body))
}
