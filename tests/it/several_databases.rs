//! One program, two solidq databases (docs/beyond-one-primary.md): a
//! `Queue` per database, the program routing each job kind to its
//! database, and a `Worker` per `Queue` in the same process. Each job runs
//! on the worker of its own database only, and each database records only
//! its own jobs and its own worker. On PostgreSQL the two "databases" are
//! two schemas of one server (each its own LISTEN payload prefix); on
//! SQLite two files.

use crate::common;

use std::time::Duration;

use serde::{Deserialize, Serialize};
use solidq::{Job, JobContext, JobResult, JobStatus, Queue, Worker};

use common::{TestDb, wait_for};

/// Lives in the "billing" database.
#[derive(Serialize, Deserialize)]
struct Invoice(i64);

impl Job for Invoice {
    const KIND: &'static str = "invoice";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        Ok(serde_json::json!(self.0))
    }
}

/// Lives in the "mail" database.
#[derive(Serialize, Deserialize)]
struct Mail(i64);

impl Job for Mail {
    const KIND: &'static str = "mail";
    fn perform(&self, _ctx: &JobContext) -> JobResult {
        Ok(serde_json::json!(self.0))
    }
}

#[cfg(feature = "sqlite")]
#[test]
fn sqlite_two_databases_in_one_program() {
    two_databases_in_one_program(&TestDb::sqlite(), &TestDb::sqlite());
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_two_databases_in_one_program() {
    let (Some(billing), Some(mail)) = (TestDb::postgres(), TestDb::postgres()) else {
        return;
    };
    two_databases_in_one_program(&billing, &mail);
}

fn two_databases_in_one_program(billing_db: &TestDb, mail_db: &TestDb) {
    let billing: Queue = billing_db.queue();
    let mail: Queue = mail_db.queue();
    // A worker per database, each knowing only its database's kinds.
    let billing_worker = Worker::new(billing.clone())
        .threads(2)
        .register::<Invoice>()
        .start()
        .expect("billing worker");
    let mail_worker = Worker::new(mail.clone())
        .threads(2)
        .register::<Mail>()
        .start()
        .expect("mail worker");

    // The program routes by kind.
    let invoices: Vec<i64> = (0..5)
        .map(|n| billing.enqueue(&Invoice(n)).unwrap())
        .collect();
    let mails: Vec<i64> = (0..5).map(|n| mail.enqueue(&Mail(n)).unwrap()).collect();

    let done = |queue: &Queue, ids: &[i64]| {
        ids.iter()
            .all(|id| queue.job(*id).unwrap().status == JobStatus::Succeeded)
    };
    wait_for(
        "every job succeeded in its own database",
        Duration::from_secs(20),
        || done(&billing, &invoices) && done(&mail, &mails),
    );
    billing_worker.stop().expect("stop billing worker");
    mail_worker.stop().expect("stop mail worker");

    for (db, kind, other) in [
        (billing_db, "invoice", "mail"),
        (mail_db, "mail", "invoice"),
    ] {
        assert_eq!(
            db.scalar(&format!("SELECT count(*) AS v FROM solidq_jobs WHERE kind = '{kind}' AND finished_at IS NOT NULL")),
            5,
            "{kind} jobs finished in their database"
        );
        assert_eq!(
            db.scalar(&format!(
                "SELECT count(*) AS v FROM solidq_jobs WHERE kind = '{other}'"
            )),
            0,
            "no {other} job in the {kind} database"
        );
    }
}
