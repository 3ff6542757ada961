//! libpq multi-host URLs (`postgres://a:5433,b:5432/db`): solidq's pool,
//! its LISTEN connection and the CLI all connect through the host list,
//! skipping a host that is down, and a password in such a URL is redacted
//! in errors. PostgreSQL only (issue 14, item 1; the failover tests build
//! on it).

#[cfg(feature = "postgres")]
use crate::common;

#[cfg(feature = "postgres")]
mod postgres {
    use std::time::Duration;

    use solidq::{Queue, QueueConfig, WorkerConfig};

    use super::common::jobs::{Echo, worker};
    use super::common::{TestDb, run_cli, wait_for};

    /// `127.0.0.1:<port>` where nothing listens.
    fn free_port_url() -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        format!("127.0.0.1:{port}")
    }

    /// `db`'s URL with a host that refuses connections put first.
    fn behind_a_dead_host(db: &TestDb) -> String {
        let dead = free_port_url();
        let (scheme, rest) = db.url.split_once("://").expect("a URL");
        let (user, rest) = rest.split_once('@').expect("a user in the test URL");
        format!("{scheme}://{user}@{dead},{rest}")
    }

    #[test]
    fn the_pool_the_listener_and_the_cli_skip_a_dead_host() {
        let Some(db) = TestDb::postgres() else { return };
        db.queue();
        let url = behind_a_dead_host(&db);
        let queue = Queue::connect_with(&url, QueueConfig::default()).unwrap();
        // Polling only once a minute: only a notification on the LISTEN
        // connection (made through the host list too) wakes the worker.
        let running = worker(queue.clone())
            .config(WorkerConfig {
                polling_interval: Duration::from_secs(60),
                fallback_polling_interval: Duration::from_secs(60),
                ..WorkerConfig::default()
            })
            .start()
            .unwrap();
        wait_for("the worker to register", Duration::from_secs(10), || {
            db.count("solidq_processes") == 1
        });
        // The listener's LISTEN is in place (the test's connection has the
        // same application_name as solidq's).
        wait_for("the worker to LISTEN", Duration::from_secs(10), || {
            db.scalar(
                "SELECT COUNT(*) AS v FROM pg_stat_activity WHERE query ILIKE 'LISTEN%' \
                 AND application_name = current_setting('application_name')",
            ) >= 1
        });
        let id = queue
            .enqueue(&Echo {
                value: serde_json::json!("through the host list"),
            })
            .unwrap();
        wait_for("the job to succeed", Duration::from_secs(20), || {
            queue.job(id).unwrap().finished_at.is_some()
        });
        running.stop().unwrap();
        let shown = id.to_string();
        let (code, stdout, stderr) =
            run_cli(&db, &["job", &shown, "--database-url", &url, "--json"]);
        assert_eq!(code, 0, "{stderr}");
        assert!(stdout.contains("\"succeeded\""), "{stdout}");
    }

    #[test]
    fn a_password_in_a_multi_host_url_is_redacted() {
        let url = format!(
            "postgres://postgres:s3cr3t@{},{}/postgres",
            free_port_url(),
            free_port_url()
        );
        let error = Queue::connect(&url).err().expect("no host answers");
        let shown = error.to_string();
        assert!(!shown.contains("s3cr3t"), "{shown}");
        assert!(shown.contains("***"), "{shown}");
    }
}
