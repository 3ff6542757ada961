//! `GET /metrics`: the queues, processes and job outcomes in the
//! OpenMetrics text format (Prometheus scrapes it). Everything is read
//! at scrape time from the database, so any number of `solidq web`
//! servers report the same figures.
//!
//! | metric | type | labels | from |
//! |---|---|---|---|
//! | `solidq_queue_jobs` | gauge | queue, state | jobs by state (ready, scheduled, retrying, claimed, running, blocked, failed) |
//! | `solidq_queue_latency_seconds` | gauge | queue | how long the oldest ready job has waited |
//! | `solidq_queue_paused` | gauge | queue | 1 when paused |
//! | `solidq_processes` | gauge | kind | registered processes |
//! | `solidq_oldest_heartbeat_age_seconds` | gauge | | the stalest process's heartbeat age |
//! | `solidq_jobs_total` | counter | queue, kind, outcome | jobs that ended an attempt: succeeded, failed, retried, snoozed, discarded, stalled |
//! | `solidq_job_wait_seconds_total` | counter | queue, kind, outcome | their summed wait from due to start |
//! | `solidq_job_run_seconds_total` | counter | queue, kind, outcome | their summed run time |
//! | `solidq_web_auth_failures_total` | counter | scheme | requests this server refused for their credential since it started: `bearer`, `basic`, `other` (another scheme), `none` (no credential) |
//! | `solidq_scrape_duration_seconds` | gauge | | what this scrape cost |
//!
//! The counters come from `solidq_job_stats` ([`Queue::job_totals`]):
//! workers add their counts at each heartbeat, so they lag by up to a
//! heartbeat interval, and a worker killed outright loses at most one
//! interval's counts (the jobs table stays the truth).
//!
//! The refused credentials are this server process's own count (each
//! `solidq web` server has its own; Prometheus tells them apart by
//! instance), not the database's.
//!
//! Scrape cost is bounded: the counts come from the execution tables
//! (waiting, running and failed jobs only), never from a scan of the
//! finished jobs.

use std::sync::atomic::AtomicU64;
use std::time::Instant;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::Shared;
use super::pages::{PageError, db};
use solidq::Queue;

type Labels = Vec<(String, String)>;
type Gauges = Family<Labels, Gauge<f64, AtomicU64>>;

/// The content type of the OpenMetrics text format.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// One scrape: every metric, read now; `auth_failures` are this server's
/// refused credentials by scheme.
fn collect(queue: &Queue, auth_failures: &[(&str, u64)]) -> solidq::Result<String> {
    let started = Instant::now();
    let mut registry = Registry::default();
    let jobs = Gauges::default();
    let latency = Gauges::default();
    let paused = Gauges::default();
    for q in queue.queues()? {
        for (state, n) in [
            ("ready", q.ready),
            ("scheduled", q.scheduled),
            ("retrying", q.retrying),
            ("claimed", q.claimed),
            ("running", q.running),
            ("blocked", q.blocked),
            ("failed", q.failed),
            ("waiting", q.waiting),
        ] {
            jobs.get_or_create(&labels(&[("queue", &q.name), ("state", state)]))
                .set(n as f64);
        }
        latency
            .get_or_create(&labels(&[("queue", &q.name)]))
            .set(q.latency.map(|d| d.as_secs_f64()).unwrap_or(0.0));
        paused
            .get_or_create(&labels(&[("queue", &q.name)]))
            .set(if q.paused { 1.0 } else { 0.0 });
    }
    registry.register("solidq_queue_jobs", "Jobs by queue and state", jobs);
    registry.register(
        "solidq_queue_latency_seconds",
        "How long the oldest ready job of the queue has waited",
        latency,
    );
    registry.register("solidq_queue_paused", "1 when the queue is paused", paused);

    let processes = Gauges::default();
    let oldest: Gauge<f64, AtomicU64> = Gauge::default();
    let mut stalest = 0f64;
    for kind in ["worker", "dispatcher", "scheduler", "supervisor"] {
        processes.get_or_create(&labels(&[("kind", kind)])).set(0.0);
    }
    for p in queue.processes()? {
        processes.get_or_create(&labels(&[("kind", &p.kind)])).inc();
        stalest = stalest.max(p.heartbeat_age.as_secs_f64());
    }
    oldest.set(stalest);
    registry.register(
        "solidq_processes",
        "Registered processes by kind",
        processes,
    );
    registry.register(
        "solidq_oldest_heartbeat_age_seconds",
        "The heartbeat age of the process heard from least recently",
        oldest,
    );

    if queue.backend() != solidq::Backend::Sqlite {
        let horizon = queue.horizon()?;
        let held: Gauge<f64, AtomicU64> = Gauge::default();
        held.set(
            horizon
                .oldest_transaction
                .map_or(0.0, |t| t.age_ms as f64 / 1000.0),
        );
        registry.register(
            "solidq_oldest_transaction_seconds",
            "How long the oldest transaction open in another session has been open (0: none): while it is, the server keeps every row deleted since it began",
            held,
        );
        if let Some(n) = horizon.dead_rows {
            let dead: Gauge<f64, AtomicU64> = Gauge::default();
            dead.set(n as f64);
            registry.register(
                "solidq_dead_rows",
                "Rows waiting to be reclaimed: PostgreSQL's dead rows in solidq's tables, MySQL's InnoDB history list length",
                dead,
            );
        }
    }

    let jobs_total: Family<Labels, Counter<u64>> = Family::default();
    let wait_total: Family<Labels, Counter<f64, AtomicU64>> = Family::default();
    let run_total: Family<Labels, Counter<f64, AtomicU64>> = Family::default();
    for c in queue.job_totals()? {
        let l = labels(&[
            ("queue", &c.queue),
            ("kind", &c.kind),
            ("outcome", &c.outcome),
        ]);
        jobs_total.get_or_create(&l).inc_by(c.jobs);
        wait_total
            .get_or_create(&l)
            .inc_by(c.wait_ms as f64 / 1000.0);
        run_total.get_or_create(&l).inc_by(c.run_ms as f64 / 1000.0);
    }
    registry.register(
        "solidq_jobs",
        "Jobs that ended an attempt, by queue, kind and outcome",
        jobs_total,
    );
    registry.register(
        "solidq_job_wait_seconds",
        "Summed wait of those jobs, from due to start",
        wait_total,
    );
    registry.register(
        "solidq_job_run_seconds",
        "Summed run time of those jobs",
        run_total,
    );

    let refused: Family<Labels, Counter<u64>> = Family::default();
    for (scheme, n) in auth_failures {
        refused
            .get_or_create(&labels(&[("scheme", scheme)]))
            .inc_by(*n);
    }
    registry.register(
        "solidq_web_auth_failures",
        "Requests this server refused for their credential since it started, by what they presented",
        refused,
    );

    let cost: Gauge<f64, AtomicU64> = Gauge::default();
    cost.set(started.elapsed().as_secs_f64());
    registry.register(
        "solidq_scrape_duration_seconds",
        "How long this scrape took to read",
        cost,
    );
    let mut out = String::new();
    encode(&mut out, &registry).map_err(|e| solidq::Error::Io {
        context: "encode the metrics".into(),
        source: std::io::Error::other(e.to_string()),
    })?;
    Ok(out)
}

/// `GET /metrics`.
pub(super) async fn metrics(State(app): State<Shared>) -> Result<Response, PageError> {
    let refused = app.auth_failures.counts();
    let text = db(&app, move |queue| collect(queue, &refused)).await?;
    Ok(([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response())
}
