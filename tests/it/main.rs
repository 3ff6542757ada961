//! The integration tests, as one binary: one link instead of fifty, and one
//! harness that runs them all in parallel (`RUST_TEST_THREADS` sets how many
//! at once). Each module is one area; `common` is the shared harness. Run
//! one area with `cargo test --test it outage::`. `tests/deadlocks.rs` stays
//! its own binary: it counts every warning the process logs.

#[macro_use]
mod common;

mod audit;
mod backend_kills;
mod bad_bytes;
mod batches;
mod callbacks;
mod cli;
mod cli_control;
mod cli_names;
mod cli_tables;
mod concurrency;
mod config_errors;
mod control;
mod deploy;
mod engine;
mod events;
mod exactly_once;
mod exit;
mod failover;
mod fairness;
mod foreign_connection;
mod health;
mod hoarding;
#[cfg(feature = "sqlite")]
mod idle;
mod job_stats;
mod layers;
mod logging;
mod multihost;
mod options;
mod outage;
#[cfg(all(feature = "sqlite", feature = "postgres"))]
mod own_connection;
mod partition;
mod pgbouncer;
mod plans;
mod poison;
mod processes;
mod progress;
mod rate_limits;
mod recurring;
mod schedule;
mod several_databases;
mod snooze;
mod standalone;
mod state_and_middleware;
mod statements;
mod steps;
mod supervisor;
mod testing_helpers;
#[cfg(feature = "postgres")]
mod wakeups;
mod web;
mod web_api;
mod web_e2e;
mod web_security;
mod workflows;
mod zombies;
