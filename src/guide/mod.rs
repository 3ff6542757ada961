//! # The guide: solidq by task
//!
//! Each chapter starts from something you want done and shows the calls
//! that do it; every Rust example in it is compiled by `cargo test --doc`.
//! Read [`jobs`] first; the rest in any order.
//!
//! | chapter | the task |
//! | --- | --- |
//! | [`jobs`] | send an email after signup without losing it: a job, an enqueue in your transaction, a worker; from async code too |
//! | [`options`] | retry a flaky call, time it out, keep its result; every setting and its default |
//! | [`limits`] | one sync per account at a time, ten API calls a second, fair turns between tenants |
//! | [`steps`] | resume a long import where it stopped |
//! | [`batches_and_workflows`] | report once a set of jobs is done; run jobs as a graph |
//! | [`recurring`] | enqueue a job on a cron schedule, once per tick however many servers run |
//! | [`workers_and_supervisor`] | keep workers running through crashes and deploys |
//! | [`operating`] | the `solidq` CLI, logs, the dashboard, the HTTP API, metrics, web security, and what happens when the database fails |
//! | [`deployment`] | systemd and container recipes; the deploy order of an upgrade |
//! | [`backends`] | SQLite, PostgreSQL (failover, PgBouncer), MySQL/MariaDB; cargo features |
//! | [`performance`] | what makes it fast, the benchmark, and what each feature costs, with dates and commands |
//! | [`testing`] | test your jobs; run solidq's own tests |

#![allow(rustdoc::redundant_explicit_links)]

macro_rules! chapter {
    ($name:ident, $file:literal) => {
        #[doc = include_str!($file)]
        pub mod $name {}
    };
}

chapter!(jobs, "jobs.md");
chapter!(options, "options.md");
chapter!(limits, "limits.md");
chapter!(steps, "steps.md");
chapter!(batches_and_workflows, "batches_and_workflows.md");
chapter!(recurring, "recurring.md");
chapter!(workers_and_supervisor, "workers_and_supervisor.md");
chapter!(operating, "operating.md");
chapter!(deployment, "deployment.md");
chapter!(backends, "backends.md");
chapter!(performance, "performance.md");
chapter!(testing, "testing.md");
