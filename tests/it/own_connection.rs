//! The caller's own connection (README: "Transactional enqueue"). The
//! headline pattern — your transaction writes your rows and enqueues with
//! `enqueue_on` — must hold under worker load: a connection from
//! `Queue::open_connection` waits for SQLite's write lock as solidq's own
//! connections do, where a plain `SqliteConnection::establish` fails with
//! `database is locked`. And that connection (and a pool set up with
//! `Queue::connection_customizer`) carries the queue's SQLite settings.

use crate::common;

use std::time::{Duration, Instant};

use common::child::Child;
use common::jobs::Echo;
use common::{TestDb, assert_invariants, wait_for};
use diesel::connection::SimpleConnection;
use diesel::sql_types::{BigInt, Integer, Text};
use diesel::{Connection, PgConnection, QueryableByName, RunQueryDsl, SqliteConnection};
use serde_json::json;
use solidq::{AnyConnection, Backend, JobStatus, QueueConfig, SqliteSynchronous};

backend_tests!(
    transactional_enqueues_on_an_own_connection_never_hit_a_locked_database,
    open_connection_carries_the_queues_sqlite_settings,
    open_connection_refuses_the_other_backends_type,
    a_customized_pool_carries_the_queues_sqlite_settings,
);

const WAIT: Duration = Duration::from_secs(60);
const ORDERS: i64 = 2_000;

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

fn transactional_enqueues_on_an_own_connection_never_hit_a_locked_database(db: &TestDb) {
    db.execute(
        "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer TEXT NOT NULL, job_id BIGINT)",
    );
    let queue = db.queue();
    let workers: Vec<Child> = (0..2)
        .map(|_| Child::worker(&db.url, &[("SOLIDQ_TEST_THREADS", "8")]))
        .collect();
    wait_for("both workers to register", WAIT, || {
        db.count("solidq_processes") == 2
    });

    let mut conn: AnyConnection = queue.open_connection().expect("open a connection");
    let started = Instant::now();
    let mut errors = Vec::new();
    for order in 1..=ORDERS {
        // A read, then writes: as an order handler would. On SQLite the
        // transaction takes the write lock up front (BEGIN IMMEDIATE).
        let placed = conn.write_transaction::<_, solidq::Error, _>(|c| {
            let before: Count =
                diesel::sql_query("SELECT count(*) AS n FROM orders").get_result(c)?;
            assert!(before.n < order, "orders are placed one by one");
            diesel::sql_query(format!(
                "INSERT INTO orders (id, customer) VALUES ({}, {})",
                db.param(1),
                db.param(2)
            ))
            .bind::<BigInt, _>(order)
            .bind::<Text, _>(format!("customer-{}", order % 17))
            .execute(c)?;
            let job = queue.enqueue_on(
                c,
                &Echo {
                    value: json!(order),
                },
            )?;
            diesel::sql_query(format!(
                "UPDATE orders SET job_id = {} WHERE id = {}",
                db.param(1),
                db.param(2)
            ))
            .bind::<BigInt, _>(job)
            .bind::<BigInt, _>(order)
            .execute(c)?;
            Ok(job)
        });
        if let Err(error) = placed {
            errors.push(format!("order {order}: {error}"));
        }
    }
    let enqueuing = started.elapsed();
    let finished_meanwhile =
        db.scalar("SELECT count(*) AS v FROM solidq_jobs WHERE finished_at IS NOT NULL");
    let locked = errors
        .iter()
        .filter(|e| e.contains("locked") || e.contains("busy"))
        .count();
    assert!(
        errors.is_empty(),
        "{} of {ORDERS} transactions failed ({locked} lock errors), first: {:?}",
        errors.len(),
        errors.iter().take(3).collect::<Vec<_>>()
    );
    assert!(
        finished_meanwhile > 0,
        "the workers consumed while the orders were placed"
    );

    wait_for("every order's job to succeed", WAIT, || {
        db.scalar("SELECT count(*) AS v FROM solidq_jobs WHERE finished_at IS NOT NULL") == ORDERS
    });
    assert_eq!(db.count("orders"), ORDERS, "every order is there");
    assert_eq!(db.count("solidq_jobs"), ORDERS, "one job per order");
    assert_eq!(
        db.scalar(
            "SELECT count(*) AS v FROM orders o JOIN solidq_jobs j ON j.id = o.job_id
             WHERE j.finished_at IS NOT NULL AND j.attempts = 1"
        ),
        ORDERS,
        "each order's own job succeeded at its first attempt"
    );
    assert_eq!(db.count("solidq_failed_executions"), 0);
    for id in db.column_of("SELECT job_id AS v FROM orders WHERE id % 250 = 0") {
        let info = queue.job(id).unwrap();
        assert_eq!(info.status, JobStatus::Succeeded);
        assert_eq!(info.result, Some(info.arguments["value"].clone()));
    }
    assert_invariants(db);
    eprintln!(
        "{}: {ORDERS} transactional enqueues on an own connection in {enqueuing:?} \
         while 2 workers x 8 threads consumed ({finished_meanwhile} done meanwhile): 0 errors",
        db.backend
    );
    drop(workers);
}

#[derive(QueryableByName)]
struct Synchronous {
    #[diesel(sql_type = Integer)]
    synchronous: i32,
}

#[derive(QueryableByName)]
struct BusyTimeout {
    #[diesel(sql_type = Integer)]
    timeout: i32,
}

#[derive(QueryableByName)]
struct JournalMode {
    #[diesel(sql_type = Text)]
    journal_mode: String,
}

/// What a caller's SQLite connection should carry: (synchronous level,
/// busy timeout in ms, journal mode).
fn sqlite_settings(conn: &mut SqliteConnection) -> (i32, i32, String) {
    let synchronous: Synchronous = diesel::sql_query("PRAGMA synchronous")
        .get_result(conn)
        .unwrap();
    let busy: BusyTimeout = diesel::sql_query("PRAGMA busy_timeout")
        .get_result(conn)
        .unwrap();
    let journal: JournalMode = diesel::sql_query("PRAGMA journal_mode")
        .get_result(conn)
        .unwrap();
    (synchronous.synchronous, busy.timeout, journal.journal_mode)
}

fn configs() -> Vec<QueueConfig> {
    SqliteSynchronous::ALL
        .into_iter()
        .map(|synchronous| QueueConfig {
            sqlite_synchronous: synchronous,
            sqlite_busy_timeout: Duration::from_millis(1234),
            ..QueueConfig::default()
        })
        .collect()
}

fn open_connection_carries_the_queues_sqlite_settings(db: &TestDb) {
    for config in configs() {
        let queue = db.queue_with(config.clone());
        let mut any: AnyConnection = queue.open_connection().unwrap();
        match (&mut any, db.backend) {
            (AnyConnection::Sqlite(conn), Backend::Sqlite) => {
                let expected = (
                    config.sqlite_synchronous.pragma_level(),
                    1234,
                    "wal".to_string(),
                );
                assert_eq!(sqlite_settings(conn), expected, "{config:?}");
                let mut typed: SqliteConnection = queue.open_connection().unwrap();
                assert_eq!(sqlite_settings(&mut typed), expected, "{config:?}");
            }
            (AnyConnection::Postgres(conn), Backend::Postgres) => {
                conn.batch_execute("SELECT 1").unwrap();
                let mut typed: PgConnection = queue.open_connection().unwrap();
                typed.batch_execute("SELECT 1").unwrap();
            }
            #[cfg(feature = "mysql")]
            (AnyConnection::Mysql(conn), Backend::Mysql) => {
                conn.batch_execute("SELECT 1").unwrap();
                let mut typed: diesel::MysqlConnection = queue.open_connection().unwrap();
                typed.batch_execute("SELECT 1").unwrap();
            }
            _ => panic!("open_connection gave the wrong backend"),
        }
        // Usable for the caller's own work, solidq's tables included.
        let n: Count = diesel::sql_query("SELECT count(*) AS n FROM solidq_jobs")
            .get_result(&mut any)
            .unwrap();
        assert_eq!(n.n, 0);
    }
}

fn open_connection_refuses_the_other_backends_type(db: &TestDb) {
    let queue = db.queue();
    let (error, wanted) = match db.backend {
        Backend::Sqlite => (
            queue.open_connection::<PgConnection>().err().unwrap(),
            "PgConnection",
        ),
        Backend::Postgres | Backend::Mysql => (
            queue.open_connection::<SqliteConnection>().err().unwrap(),
            "SqliteConnection",
        ),
    };
    let message = error.to_string();
    assert!(
        matches!(error, solidq::Error::InvalidOption { .. }),
        "{message}"
    );
    assert!(
        message.contains(&format!("invalid connection type \"{wanted}\"")),
        "{message}"
    );
    assert!(message.contains(&db.backend.to_string()), "{message}");
}

fn a_customized_pool_carries_the_queues_sqlite_settings(db: &TestDb) {
    use diesel::r2d2::{ConnectionManager, Pool};
    for config in configs() {
        let queue = db.queue_with(config.clone());
        match db.backend {
            Backend::Sqlite => {
                let path = db.url.trim_start_matches("sqlite://");
                let pool = Pool::builder()
                    .max_size(2)
                    .connection_customizer(Box::new(queue.connection_customizer()))
                    .build(ConnectionManager::<SqliteConnection>::new(path))
                    .unwrap();
                let mut conn = pool.get().unwrap();
                assert_eq!(
                    sqlite_settings(&mut conn),
                    (
                        config.sqlite_synchronous.pragma_level(),
                        1234,
                        "wal".to_string()
                    ),
                    "{config:?}"
                );
                let id = conn
                    .immediate_transaction::<_, solidq::Error, _>(|c| {
                        queue.enqueue_on(c, &Echo { value: json!(1) })
                    })
                    .unwrap();
                assert_eq!(queue.job(id).unwrap().status, JobStatus::Ready);
            }
            Backend::Postgres => {
                let pool = Pool::builder()
                    .max_size(2)
                    .connection_customizer(Box::new(queue.connection_customizer()))
                    .build(ConnectionManager::<PgConnection>::new(&db.url))
                    .unwrap();
                let mut conn = pool.get().unwrap();
                let id = conn
                    .transaction::<_, solidq::Error, _>(|c| {
                        queue.enqueue_on(&mut **c, &Echo { value: json!(1) })
                    })
                    .unwrap();
                assert_eq!(queue.job(id).unwrap().status, JobStatus::Ready);
            }
            Backend::Mysql => {
                #[cfg(feature = "mysql")]
                {
                    let pool = Pool::builder()
                        .max_size(2)
                        .connection_customizer(Box::new(queue.connection_customizer()))
                        .build(ConnectionManager::<diesel::MysqlConnection>::new(&db.url))
                        .unwrap();
                    let mut conn = pool.get().unwrap();
                    // The customizer set the session as solidq's own.
                    #[derive(diesel::QueryableByName)]
                    struct Isolation {
                        #[diesel(sql_type = diesel::sql_types::Text)]
                        v: String,
                    }
                    let isolation: Isolation =
                        diesel::sql_query("SELECT @@SESSION.tx_isolation AS v")
                            .get_result(&mut *conn)
                            .unwrap();
                    assert_eq!(isolation.v, "READ-COMMITTED");
                    let id = conn
                        .transaction::<_, solidq::Error, _>(|c| {
                            queue.enqueue_on(&mut **c, &Echo { value: json!(1) })
                        })
                        .unwrap();
                    assert_eq!(queue.job(id).unwrap().status, JobStatus::Ready);
                }
            }
        }
        db.execute("DELETE FROM solidq_ready_executions; DELETE FROM solidq_jobs");
    }
}
