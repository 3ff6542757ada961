//! `Queue::enqueue_statement`: the job enqueued by SQL run on a connection
//! solidq does not own and cannot see (rust-postgres, rusqlite; on MySQL a
//! plain diesel connection, binding the values as any driver would), inside
//! that connection's transaction: committed, a worker runs it; rolled back,
//! nothing is left.

use crate::common;

use std::time::Duration;

use common::jobs::{Echo, LimitedOne};
use common::{TestDb, wait_for};
use serde_json::json;
use solidq::{Backend, EnqueueOptions, EnqueueStatement, JobStatus, Queue, SqlValue};

backend_tests!(
    a_committed_foreign_transaction_enqueues_and_a_rolled_back_one_leaves_nothing,
    a_taken_unique_key_inserts_nothing_and_keeps_the_transaction,
    jobs_under_a_concurrency_limit_are_refused,
);

const WAIT: Duration = Duration::from_secs(30);

/// A transaction on a connection of another driver.
enum Foreign {
    Postgres(::postgres::Client),
    Sqlite(rusqlite::Connection),
    #[cfg(feature = "mysql")]
    Mysql(diesel::MysqlConnection),
}

impl Foreign {
    fn open(db: &TestDb) -> Foreign {
        match db.backend {
            Backend::Postgres => Foreign::Postgres(
                ::postgres::Client::connect(&db.url, ::postgres::NoTls).expect("rust-postgres"),
            ),
            Backend::Sqlite => {
                let conn = rusqlite::Connection::open(db.url.trim_start_matches("sqlite://"))
                    .expect("rusqlite");
                conn.busy_timeout(Duration::from_secs(10)).unwrap();
                Foreign::Sqlite(conn)
            }
            Backend::Mysql => {
                #[cfg(feature = "mysql")]
                {
                    use diesel::Connection;
                    Foreign::Mysql(diesel::MysqlConnection::establish(&db.url).expect("mysql"))
                }
                #[cfg(not(feature = "mysql"))]
                unreachable!("no MySQL in this build")
            }
        }
    }

    /// Runs `enqueue` in a transaction of its own, with `more` after it,
    /// and commits or rolls back; returns the job id the statements gave.
    fn run(&mut self, enqueue: &[&EnqueueStatement], commit: bool) -> Vec<Option<i64>> {
        match self {
            Foreign::Postgres(client) => {
                let mut tx = client.transaction().unwrap();
                let ids = enqueue.iter().map(|e| pg_run(&mut tx, e)).collect();
                if commit {
                    tx.commit().unwrap();
                } else {
                    tx.rollback().unwrap();
                }
                ids
            }
            #[cfg(feature = "mysql")]
            Foreign::Mysql(conn) => {
                use diesel::connection::SimpleConnection;
                conn.batch_execute("BEGIN").unwrap();
                let ids = enqueue.iter().map(|e| mysql_run(conn, e)).collect();
                conn.batch_execute(if commit { "COMMIT" } else { "ROLLBACK" })
                    .unwrap();
                ids
            }
            Foreign::Sqlite(conn) => {
                let tx = conn
                    .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                    .unwrap();
                let ids = enqueue.iter().map(|e| sqlite_run(&tx, e)).collect();
                if commit {
                    tx.commit().unwrap();
                } else {
                    tx.rollback().unwrap();
                }
                ids
            }
        }
    }
}

fn pg_run(tx: &mut ::postgres::Transaction<'_>, enqueue: &EnqueueStatement) -> Option<i64> {
    use ::postgres::types::ToSql;
    assert_eq!(enqueue.backend, Backend::Postgres);
    assert_eq!(enqueue.statements.len(), 1, "one statement on PostgreSQL");
    let statement = &enqueue.statements[0];
    let params: Vec<Box<dyn ToSql + Sync>> = statement
        .params
        .iter()
        .map(|value| -> Box<dyn ToSql + Sync> {
            match value.clone() {
                SqlValue::Integer(v) => Box::new(v),
                SqlValue::BigInt(v) => Box::new(v),
                SqlValue::Text(v) => Box::new(v),
                SqlValue::Timestamp(v) => Box::new(v),
                other => panic!("unknown value {other:?}"),
            }
        })
        .collect();
    let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p.as_ref()).collect();
    let rows = tx
        .query(statement.sql.as_str(), &refs)
        .expect("enqueue statement");
    rows.first().map(|row| row.get::<_, i64>("id"))
}

/// Runs the statements in order with their values bound, then reads the
/// new job's id as the statements' docs say: `LAST_INSERT_ID()`, 0 when
/// the unique key was taken.
#[cfg(feature = "mysql")]
fn mysql_run(conn: &mut diesel::MysqlConnection, enqueue: &EnqueueStatement) -> Option<i64> {
    use diesel::RunQueryDsl;
    use diesel::sql_types::{BigInt, Integer, Nullable, Text, Timestamp};
    assert_eq!(enqueue.backend, Backend::Mysql);
    for statement in &enqueue.statements {
        let mut query =
            diesel::sql_query(statement.sql.as_str()).into_boxed::<diesel::mysql::Mysql>();
        for value in &statement.params {
            query = match value.clone() {
                SqlValue::Integer(v) => query.bind::<Nullable<Integer>, _>(v),
                SqlValue::BigInt(v) => query.bind::<Nullable<BigInt>, _>(v),
                SqlValue::Text(v) => query.bind::<Nullable<Text>, _>(v),
                SqlValue::Timestamp(v) => query.bind::<Nullable<Timestamp>, _>(v),
                other => panic!("unknown value {other:?}"),
            };
        }
        query.execute(conn).expect("enqueue statement");
    }
    #[derive(diesel::QueryableByName)]
    struct Id {
        #[diesel(sql_type = BigInt)]
        id: i64,
    }
    let Id { id } = diesel::sql_query("SELECT CAST(LAST_INSERT_ID() AS SIGNED) AS id")
        .get_result(conn)
        .unwrap();
    (id != 0).then_some(id)
}

fn sqlite_run(tx: &rusqlite::Transaction<'_>, enqueue: &EnqueueStatement) -> Option<i64> {
    use rusqlite::types::Value;
    assert_eq!(enqueue.backend, Backend::Sqlite);
    let mut id = None;
    for (n, statement) in enqueue.statements.iter().enumerate() {
        let params: Vec<Value> = statement
            .params
            .iter()
            .map(|value| match value.clone() {
                SqlValue::Integer(v) => v.map_or(Value::Null, |v| Value::Integer(v.into())),
                SqlValue::BigInt(v) => v.map_or(Value::Null, Value::Integer),
                SqlValue::Text(v) => v.map_or(Value::Null, Value::Text),
                other => panic!("no {other:?} on SQLite"),
            })
            .collect();
        let mut prepared = tx.prepare(&statement.sql).unwrap();
        let mut rows = prepared
            .query(rusqlite::params_from_iter(params))
            .expect("enqueue statement");
        let row = rows.next().unwrap();
        if n == 0 {
            id = row.map(|row| row.get::<_, i64>(0).unwrap());
        }
    }
    id
}

fn statement(queue: &Queue, value: serde_json::Value, options: EnqueueOptions) -> EnqueueStatement {
    queue.enqueue_statement(&Echo { value }, options).unwrap()
}

fn a_committed_foreign_transaction_enqueues_and_a_rolled_back_one_leaves_nothing(db: &TestDb) {
    let queue = db.queue();
    let mut foreign = Foreign::open(db);

    let rolled_back = statement(&queue, json!("rolled back"), EnqueueOptions::new());
    let delayed_rolled_back = statement(
        &queue,
        json!("rolled back"),
        EnqueueOptions::new().delay(Duration::from_secs(3600)),
    );
    let ids = foreign.run(&[&rolled_back, &delayed_rolled_back], false);
    assert!(
        ids.iter().all(Option::is_some),
        "inserted inside the transaction: {ids:?}"
    );
    assert_eq!(db.count("solidq_jobs"), 0, "a rollback leaves no job");
    assert_eq!(db.count("solidq_ready_executions"), 0);
    assert_eq!(db.count("solidq_scheduled_executions"), 0);

    let now = statement(&queue, json!("committed"), EnqueueOptions::new());
    let later = statement(
        &queue,
        json!("later"),
        EnqueueOptions::new().delay(Duration::from_secs(3600)),
    );
    let at = statement(
        &queue,
        json!("at"),
        EnqueueOptions::new().run_at(chrono::Utc::now() + chrono::Duration::hours(2)),
    );
    let ids = foreign.run(&[&now, &later, &at], true);
    let [Some(now), Some(later), Some(at)] = ids[..] else {
        panic!("three ids: {ids:?}");
    };
    assert_eq!(queue.job(later).unwrap().status, JobStatus::Scheduled);
    assert_eq!(queue.job(at).unwrap().status, JobStatus::Scheduled);
    let at_info = queue.job(at).unwrap();
    let in_two_hours = chrono::Utc::now() + chrono::Duration::hours(2);
    assert!(
        (at_info.scheduled_at - in_two_hours).num_seconds().abs() < 60,
        "run_at kept: {:?}",
        at_info.scheduled_at
    );

    let worker = common::jobs::worker(queue.clone())
        .polling_interval(Duration::from_millis(50))
        .start()
        .unwrap();
    wait_for("the committed job to succeed", WAIT, || {
        queue.job(now).unwrap().status == JobStatus::Succeeded
    });
    worker.stop().unwrap();
    let info = queue.job(now).unwrap();
    assert_eq!(info.result, Some(json!("committed")));
    assert_eq!(info.queue, "default");
    assert_eq!(queue.job(later).unwrap().status, JobStatus::Scheduled);
    assert_eq!(db.count("solidq_jobs"), 3);
}

fn a_taken_unique_key_inserts_nothing_and_keeps_the_transaction(db: &TestDb) {
    let queue = db.queue();
    let mut foreign = Foreign::open(db);
    let keyed = || {
        statement(
            &queue,
            json!("once"),
            EnqueueOptions::new().unique_key("k1"),
        )
    };
    let first = keyed();
    let second = keyed();
    let other = statement(&queue, json!("other"), EnqueueOptions::new());
    let ids = foreign.run(&[&first, &second, &other], true);
    let [Some(first), None, Some(other)] = ids[..] else {
        panic!("the second gave no id: {ids:?}");
    };
    assert_eq!(queue.job_by_unique_key("k1").unwrap().id, first);
    assert_eq!(queue.job(other).unwrap().status, JobStatus::Ready);
    assert_eq!(db.count("solidq_jobs"), 2);
    assert_eq!(
        db.count("solidq_ready_executions"),
        2,
        "no execution row for the duplicate, none for another job"
    );
    // Already held: nothing, even in a fresh transaction.
    let third = keyed();
    assert_eq!(foreign.run(&[&third], true), vec![None]);
    assert_eq!(db.count("solidq_ready_executions"), 2);
}

fn jobs_under_a_concurrency_limit_are_refused(db: &TestDb) {
    let queue = db.queue();
    let error = queue
        .enqueue_statement(
            &LimitedOne {
                url: db.url.clone(),
                n: 1,
                sleep_ms: 0,
                key: "k".into(),
            },
            EnqueueOptions::new(),
        )
        .unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(error, solidq::Error::InvalidOption { .. }),
        "{message}"
    );
    assert!(message.contains("concurrency limit"), "{message}");
    assert!(message.contains("enqueue_on"), "{message}");
}
