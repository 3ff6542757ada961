//! An idle worker on SQLite reads, it does not write: between its
//! heartbeats (and maintenance rounds, on the same interval) it only reads
//! the change counter and asks whether anything scheduled is due, so it
//! never takes the write lock that the application's own transactions
//! need. (SQLite only: on PostgreSQL the idle cost is a statement count,
//! measured by the benchmark.)

use crate::common;

use std::time::Duration;

use common::child::Child;
use common::{TestDb, wait_for};
use diesel::connection::SimpleConnection;
use diesel::{Connection, SqliteConnection};

mod sqlite {
    #[test]
    fn an_idle_standalone_worker_takes_no_write_lock() {
        super::an_idle_standalone_worker_takes_no_write_lock(&super::TestDb::sqlite());
    }
}

fn an_idle_standalone_worker_takes_no_write_lock(db: &TestDb) {
    let queue = db.queue();
    // Heartbeats and maintenance every 20 s; the dispatcher polls every
    // 50 ms; a write would give up after 100 ms behind the lock.
    let worker = Child::worker(
        &db.url,
        &[
            ("SOLIDQ_TEST_HEARTBEAT_MS", "20000"),
            ("SOLIDQ_TEST_ALIVE_MS", "60000"),
            ("SOLIDQ_TEST_POLLING_MS", "50"),
            ("SOLIDQ_TEST_BUSY_MS", "100"),
        ],
    );
    wait_for("the worker to register", Duration::from_secs(30), || {
        db.count("solidq_processes") == 1
    });
    // Its first maintenance round runs at start; let it end.
    std::thread::sleep(Duration::from_secs(1));
    let path = db.url.trim_start_matches("sqlite://");
    let mut holder = SqliteConnection::establish(path).expect("open");
    holder
        .batch_execute("BEGIN IMMEDIATE")
        .expect("take the write lock");
    std::thread::sleep(Duration::from_secs(3));
    holder.batch_execute("COMMIT").expect("release it");
    let logs = worker.logs();
    assert!(
        !logs.contains("locked"),
        "the idle worker tried to write:\n{logs}"
    );
    drop(queue);
}
