//! A claim whose `COMMIT` reached the server and committed, but whose
//! answer never came back (the connection died in between): the jobs it
//! took must be run by the process that holds them, not stranded under a
//! live process that does not know them. A real server behind a TCP relay
//! that forwards the `COMMIT` and then drops the connection instead of
//! its answer; PostgreSQL and MySQL (SQLite's connections are never lost).
//! And a job's own transaction (`JobContext::complete_in_transaction`)
//! whose commit answer is lost: read back as committed when it did, as
//! failed when it did not, never run twice.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use super::conformance::{mysql_url, postgres_url};
use super::{
    ClaimLimits, ClaimQuery, Completion, NewJob, NewProcess, Outcome, PoolOptions, SqliteSettings,
    Store, TxEnd,
};
use crate::types::{Backend, DatabaseUrl, QueuePattern};

/// Relays connections to `upstream`; once armed, the first `COMMIT` a
/// client sends is forwarded (unless `forward` is unset: then it is
/// dropped too) and its connection closed before the server's answer is
/// passed back.
struct CommitEater {
    port: u16,
    armed: Arc<AtomicBool>,
    forward: Arc<AtomicBool>,
    eaten: Arc<AtomicUsize>,
}

impl CommitEater {
    fn start(upstream: String) -> CommitEater {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the relay");
        let port = listener.local_addr().unwrap().port();
        let armed = Arc::new(AtomicBool::new(false));
        let eaten = Arc::new(AtomicUsize::new(0));
        let forward = Arc::new(AtomicBool::new(true));
        let (a, e, f) = (armed.clone(), eaten.clone(), forward.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(&upstream) else {
                    continue;
                };
                let doomed = Arc::new(AtomicBool::new(false));
                let prepared = Arc::new(std::sync::Mutex::new(PreparedCommit::default()));
                let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                let (armed, eaten, d, forward) = (a.clone(), e.clone(), doomed.clone(), f.clone());
                let p2 = prepared.clone();
                std::thread::spawn(move || {
                    relay(c2, s2, |chunk| {
                        let commit = p2.lock().unwrap().client_sends(chunk);
                        if commit && armed.swap(false, Ordering::SeqCst) {
                            d.store(true, Ordering::SeqCst);
                            eaten.fetch_add(1, Ordering::SeqCst);
                            return forward.load(Ordering::SeqCst);
                        }
                        true
                    })
                });
                std::thread::spawn(move || {
                    relay(server, client, |chunk| {
                        prepared.lock().unwrap().server_sends(chunk);
                        !doomed.load(Ordering::SeqCst)
                    })
                });
            }
        });
        CommitEater {
            port,
            armed,
            forward,
            eaten,
        }
    }
}

/// Whether `chunk` is a `COMMIT` statement: PostgreSQL's simple query
/// (`Q`, its length, `COMMIT\0`) or MySQL's `COM_QUERY` (its header, 3,
/// `COMMIT`), not a text that holds the word (`READ COMMITTED`).
fn is_commit(chunk: &[u8]) -> bool {
    chunk == b"Q\0\0\0\x0bCOMMIT\0" || (chunk.len() == 11 && chunk.ends_with(b"\x03COMMIT"))
}

/// What a relayed MySQL connection has prepared as its `COMMIT`
/// (`store::mysql::commit` runs it so): the statement id the server gave
/// the client's `COM_STMT_PREPARE` of `COMMIT`.
#[derive(Default)]
struct PreparedCommit {
    /// The client asked to prepare `COMMIT`; the server's next answer
    /// gives its id.
    asked: bool,
    id: Option<[u8; 4]>,
}

impl PreparedCommit {
    /// Whether the client's `chunk` commits: a `COMMIT` in text
    /// ([`is_commit`]) or a `COM_STMT_EXECUTE` (its header, 0x17) of the
    /// statement prepared as `COMMIT`.
    fn client_sends(&mut self, chunk: &[u8]) -> bool {
        if chunk.len() == 11 && chunk.ends_with(b"\x16COMMIT") {
            self.asked = true;
        }
        is_commit(chunk)
            || (chunk.len() >= 9
                && chunk[4] == 0x17
                && self.id == Some(chunk[5..9].try_into().unwrap()))
    }

    /// Reads the id of the statement prepared as `COMMIT` from the
    /// server's answer (header, 0x00, the id).
    fn server_sends(&mut self, chunk: &[u8]) {
        if std::mem::take(&mut self.asked) && chunk.len() >= 9 && chunk[4] == 0 {
            self.id = Some(chunk[5..9].try_into().unwrap());
        }
    }
}

/// Copies `from` to `to` while `pass(chunk)` allows each chunk (it is
/// asked before the chunk is written); closes both ways at the end.
fn relay(mut from: TcpStream, mut to: TcpStream, mut pass: impl FnMut(&[u8]) -> bool) {
    let mut buffer = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if !pass(&buffer[..n]) || to.write_all(&buffer[..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

fn job() -> NewJob {
    NewJob::plain("lost", "lost_commit")
}

/// A migrated database of `backend` (`None`: skipped, loudly), reached
/// directly and through a relay: the direct store, the relay, the store
/// through the relay, and a registered worker process.
fn relayed(backend: Backend) -> Option<(Store, CommitEater, Store, i64)> {
    let url = match backend {
        Backend::Postgres => postgres_url(),
        Backend::Mysql => mysql_url(),
        Backend::Sqlite => unreachable!("SQLite's connections are never lost"),
    }?;
    let options = PoolOptions {
        size: 2,
        timeout: Duration::from_secs(10),
        sqlite: SqliteSettings::default(),
    };
    let direct = Store::connect(&DatabaseUrl::parse(&url).unwrap(), &options).unwrap();
    direct.migrate().unwrap();
    let process = direct
        .process_register(&NewProcess {
            kind: "worker".into(),
            name: "lost-commit".into(),
            pid: 1,
            hostname: "test".into(),
            supervisor_id: None,
            metadata: "{}".into(),
        })
        .unwrap();
    // The same database through the relay.
    let (scheme, rest) = url.split_once("://").unwrap();
    let (authority, path) = rest.split_once('/').unwrap();
    let (credentials, host) = authority
        .rsplit_once('@')
        .map_or(("", authority), |(c, h)| (c, h));
    let relay = CommitEater::start(host.to_string());
    let at = if credentials.is_empty() { "" } else { "@" };
    let mut relayed = format!(
        "{scheme}://{credentials}{at}127.0.0.1:{}/{path}",
        relay.port
    );
    if backend == Backend::Postgres {
        // In the clear, so the relay can see the COMMIT.
        relayed.push(if path.contains('?') { '&' } else { '?' });
        relayed.push_str("sslmode=disable");
    }
    let store = Store::connect(&DatabaseUrl::parse(&relayed).unwrap(), &options).unwrap();
    Some((direct, relay, store, process))
}

fn a_claim_whose_commit_answer_is_lost_runs_its_jobs(backend: Backend) {
    let Some((direct, relay, store, process)) = relayed(backend) else {
        return;
    };
    let ids: Vec<i64> = direct
        .jobs_enqueue(&[job(), job(), job()])
        .unwrap()
        .outcome
        .into_iter()
        .map(|o| o.unwrap())
        .collect();
    let claim = ClaimQuery::new(vec![QueuePattern::parse("lost").unwrap()]);
    let limits = ClaimLimits::idle(3);
    relay.armed.store(true, Ordering::SeqCst);
    let claimed = store
        .ready_claim(&claim, process, &limits)
        .expect("the lost claim is read back, not reported failed");
    assert_eq!(
        relay.eaten.load(Ordering::SeqCst),
        1,
        "the relay swallowed the answer to the claim's COMMIT"
    );
    let mut got: Vec<i64> = claimed.iter().map(|j| j.id).collect();
    got.sort_unstable();
    assert_eq!(
        got, ids,
        "the claim committed, and its jobs are this process's to run"
    );
    let mut held = direct
        .with_driver("claimed_held", |d| d.claimed_held(process, &ids))
        .unwrap();
    held.sort_unstable();
    assert_eq!(held, ids, "the claims are in the database");
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_a_claim_whose_commit_answer_is_lost_runs_its_jobs() {
    a_claim_whose_commit_answer_is_lost_runs_its_jobs(Backend::Postgres);
}

#[cfg(feature = "mysql")]
#[test]
fn mysql_a_claim_whose_commit_answer_is_lost_runs_its_jobs() {
    a_claim_whose_commit_answer_is_lost_runs_its_jobs(Backend::Mysql);
}

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    v: i64,
}

/// A job's own transaction (an effect row, then its success) through the
/// relay, armed: the answer to its `COMMIT` is lost, after the `COMMIT`
/// reached the server (`forward`) or before. Either way the effect is
/// there exactly when the job is recorded succeeded, and the result says
/// which.
fn a_job_transaction_whose_commit_answer_is_lost_is_read_back(backend: Backend, forward: bool) {
    use diesel::RunQueryDsl;
    let Some((direct, relay, store, process)) = relayed(backend) else {
        return;
    };
    direct
        .with_conn("effects", |c| {
            diesel::sql_query("CREATE TABLE effects (job_id BIGINT NOT NULL)").execute(c)
        })
        .unwrap();
    let id = direct.jobs_enqueue(&[job()]).unwrap().outcome[0].unwrap();
    let claim = ClaimQuery::new(vec![QueuePattern::parse("lost").unwrap()]);
    let limits = ClaimLimits::idle(1);
    let claimed = direct.ready_claim(&claim, process, &limits).unwrap();
    assert_eq!(claimed.len(), 1);
    let completion = Completion {
        job_id: id,
        process_id: process,
        outcome: Outcome::Succeeded {
            result: None,
            keep: Duration::from_secs(3600),
        },
        slot: None,
        batch_id: None,
        started: Some(std::time::Instant::now()),
        recorded: false,
    };
    relay.forward.store(forward, Ordering::SeqCst);
    relay.armed.store(true, Ordering::SeqCst);
    let mut runs = 0;
    let end = store.finish_in_transaction(&completion, &[], &mut |conn| {
        runs += 1;
        diesel::sql_query(format!("INSERT INTO effects (job_id) VALUES ({id})"))
            .execute(conn)
            .map_err(|e| e.to_string())?;
        Ok::<_, String>(Some("{\"done\":true}".into()))
    });
    assert_eq!(
        relay.eaten.load(Ordering::SeqCst),
        1,
        "the relay ate a COMMIT's answer"
    );
    assert_eq!(runs, 1, "the effects ran once");
    let effects = direct
        .with_conn("count", |c| {
            diesel::sql_query("SELECT count(*) AS v FROM effects").get_result::<Count>(c)
        })
        .unwrap()
        .v;
    let held = direct
        .with_driver("claimed_held", |d| d.claimed_held(process, &[id]))
        .unwrap();
    let info = direct.job_info(crate::store::JobLookup::Id(id)).unwrap();
    if forward {
        assert!(
            matches!(end, TxEnd::Committed),
            "a COMMIT that reached the server is read back as committed"
        );
        assert_eq!(effects, 1);
        assert!(held.is_empty(), "the commit deleted the claim");
        assert_eq!(info.status, crate::types::JobStatus::Succeeded);
        assert_eq!(info.result, Some(serde_json::json!({ "done": true })));
    } else {
        assert!(
            matches!(end, TxEnd::Failed(ref e) if e.is_connection_lost()),
            "a COMMIT that never reached the server is read back as not committed"
        );
        assert_eq!(effects, 0, "the effects rolled back with the connection");
        assert_eq!(
            held,
            vec![id],
            "the claim stands, for the completer to record a retry"
        );
        assert_eq!(info.status, crate::types::JobStatus::Running);
    }
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_a_job_transaction_whose_commit_answer_is_lost_is_read_back_as_committed() {
    a_job_transaction_whose_commit_answer_is_lost_is_read_back(Backend::Postgres, true);
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_a_job_transaction_whose_commit_never_arrived_is_read_back_as_not_committed() {
    a_job_transaction_whose_commit_answer_is_lost_is_read_back(Backend::Postgres, false);
}

#[cfg(feature = "mysql")]
#[test]
fn mysql_a_job_transaction_whose_commit_answer_is_lost_is_read_back_as_committed() {
    a_job_transaction_whose_commit_answer_is_lost_is_read_back(Backend::Mysql, true);
}

#[cfg(feature = "mysql")]
#[test]
fn mysql_a_job_transaction_whose_commit_never_arrived_is_read_back_as_not_committed() {
    a_job_transaction_whose_commit_answer_is_lost_is_read_back(Backend::Mysql, false);
}
