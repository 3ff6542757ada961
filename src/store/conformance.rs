//! The drivers' conformance suite, in the spirit of River's
//! `riverdrivertest`: each case calls `Driver` methods directly, the same
//! case on every backend, inside a transaction that is rolled back, so the
//! cases share one migrated database per backend and leave nothing behind.
//! The edge cases are the point: empty batches, ids that do not exist,
//! a unique key taken, a tick taken, text beyond ASCII, a claim that is
//! another process's. A case that calls an operation (a method that opens
//! its own transaction, as claims do: SQLite's `BEGIN IMMEDIATE` cannot
//! nest) runs on a database of its own instead, outside any transaction.
//!
//! SQLite always runs (a file in a temporary folder); PostgreSQL and
//! MySQL run against `SOLIDQ_TEST_POSTGRES_URL` / `SOLIDQ_TEST_MYSQL_URL`
//! (the integration tests' defaults), each case in a schema or database of
//! its own process, and are skipped loudly when the server does not
//! answer, unless `SOLIDQ_REQUIRE_POSTGRES=1` / `SOLIDQ_REQUIRE_MYSQL=1`.

use std::sync::OnceLock;
use std::time::Duration;

use diesel::result::Error as DieselError;

use super::batches::{BatchDelta, Callback, NewBatch};
use super::{AttemptStarted, Failed, HorizonFacts, LimitedJob, Released, ReleasedJob, Snoozed};
use super::{
    ClaimLimits, ClaimQuery, Counted, Driver, NewAudit, NewJob, NewProcess, PoolOptions,
    RecurringTaskRow, SqliteSettings, StatsDelta, Store, Succeeded, in_transaction,
};
use crate::types::{Backend, DatabaseUrl, Delivery, OnConflict, QueuePattern, StoredLimit};

/// Runs `case` on `backend`'s database in a transaction that is rolled
/// back; a failed assertion inside fails the test with its message.
fn run(backend: Backend, case: fn(&mut dyn Driver)) {
    let Some(store) = store(backend) else {
        return;
    };
    let mut panicked = None;
    let result: crate::types::Result<()> = store.with_driver("conformance", |d| {
        in_transaction(d, |d| {
            if let Err(panic) =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| case(&mut *d)))
            {
                panicked = Some(panic);
            }
            Err(DieselError::RollbackTransaction)
        })
    });
    if let Some(panic) = panicked {
        std::panic::resume_unwind(panic);
    }
    assert!(result.is_err(), "the case's transaction was rolled back");
}

/// Runs `case` on a database of its own, outside any transaction: for
/// cases that call operations, which open their own (SQLite's `BEGIN
/// IMMEDIATE` cannot nest).
fn run_alone(backend: Backend, case: fn(&mut dyn Driver)) {
    let Some(store) = fresh(backend) else {
        return;
    };
    let mut ran = false;
    store
        .with_driver("conformance", |d| {
            if !ran {
                ran = true;
                case(d);
            }
            Ok(())
        })
        .expect("the case's connection");
}

/// One migrated database per backend for this test process.
fn store(backend: Backend) -> Option<&'static Store> {
    static SQLITE: OnceLock<Option<Store>> = OnceLock::new();
    static POSTGRES: OnceLock<Option<Store>> = OnceLock::new();
    static MYSQL: OnceLock<Option<Store>> = OnceLock::new();
    let cell = match backend {
        Backend::Sqlite => &SQLITE,
        Backend::Postgres => &POSTGRES,
        Backend::Mysql => &MYSQL,
    };
    cell.get_or_init(|| fresh(backend)).as_ref()
}

/// A newly migrated database of `backend`.
fn fresh(backend: Backend) -> Option<Store> {
    let url = match backend {
        Backend::Sqlite => sqlite_url(),
        Backend::Postgres => postgres_url(),
        Backend::Mysql => mysql_url(),
    }?;
    let options = PoolOptions {
        size: 4,
        timeout: Duration::from_secs(30),
        sqlite: SqliteSettings::default(),
    };
    let store = Store::connect(&DatabaseUrl::parse(&url).expect("a URL"), &options)
        .expect("connect for the conformance suite");
    store.migrate().expect("migrate");
    Some(store)
}

/// A file of this process in the temporary folder; those of processes
/// that have ended are removed first.
fn sqlite_url() -> Option<String> {
    let dir = std::env::temp_dir();
    let prefix = "solidq-conformance-";
    if let Ok(entries) = std::fs::read_dir(&dir) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let pid = name
                .strip_prefix(prefix)
                .and_then(|rest| rest.split('.').next())
                .and_then(|pid| pid.parse::<u32>().ok());
            if pid.is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists()) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let path = dir.join(format!("{prefix}{}.{n}.sqlite3", std::process::id()));
    for stale in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{stale}", path.display()));
    }
    Some(format!("sqlite://{}", path.display()))
}

#[cfg(any(feature = "postgres", feature = "mysql"))]
/// A name the integration tests' clean-up recognises as this process's
/// (`solidq_t_<pid>_…`), so it is dropped once the process is gone.
fn private_name() -> String {
    format!(
        "solidq_t_{}_conformance_{:x}",
        std::process::id(),
        fastrand::u32(..)
    )
}

#[cfg(any(feature = "postgres", feature = "mysql"))]
/// The server's URL, or `None` (skipped loudly) when it does not answer
/// and `require` is not set.
fn server<C: diesel::Connection>(
    variable: &str,
    default: &str,
    require: &str,
) -> Option<(String, C)> {
    let url = std::env::var(variable)
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| default.to_string());
    match C::establish(&url) {
        Ok(conn) => Some((url, conn)),
        Err(error) => {
            assert!(
                std::env::var(require).as_deref() != Ok("1"),
                "{require} is set but the server at {url} does not answer: {error}"
            );
            eprintln!("*** SKIPPED: the conformance suite on {url}: {error}");
            None
        }
    }
}

#[cfg(feature = "postgres")]
pub(in crate::store) fn postgres_url() -> Option<String> {
    use diesel::connection::SimpleConnection;
    let (url, mut admin) = server::<diesel::PgConnection>(
        "SOLIDQ_TEST_POSTGRES_URL",
        "postgres://postgres@127.0.0.1:5432/postgres",
        "SOLIDQ_REQUIRE_POSTGRES",
    )?;
    let schema = private_name();
    admin
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .expect("create a schema");
    let sep = if url.contains('?') { '&' } else { '?' };
    Some(format!("{url}{sep}options=-c%20search_path%3D{schema}"))
}

#[cfg(not(feature = "postgres"))]
pub(in crate::store) fn postgres_url() -> Option<String> {
    None
}

#[cfg(feature = "mysql")]
pub(super) fn mysql_url() -> Option<String> {
    use diesel::connection::SimpleConnection;
    let (url, mut admin) = server::<diesel::MysqlConnection>(
        "SOLIDQ_TEST_MYSQL_URL",
        "mysql://root@127.0.0.1:3306/test",
        "SOLIDQ_REQUIRE_MYSQL",
    )?;
    let database = private_name();
    admin
        .batch_execute(&format!("CREATE DATABASE {database}"))
        .expect("create a database");
    let server = url.split_once('?').map_or(url.as_str(), |(s, _)| s);
    let base = server.rsplit_once('/').map_or(server, |(base, _)| base);
    Some(format!("{base}/{database}"))
}

#[cfg(not(feature = "mysql"))]
pub(super) fn mysql_url() -> Option<String> {
    None
}

/// The cases, each a test per backend compiled in: those of the first
/// list in a rolled-back transaction, those after `alone:` on a database
/// of their own.
macro_rules! conformance {
    ($($case:ident),* $(,)? ; alone: $($alone:ident),* $(,)?) => {
        #[cfg(feature = "sqlite")]
        mod sqlite {
            use crate::types::Backend::Sqlite as B;
            $(#[test] fn $case() { super::run(B, super::$case); })*
            $(#[test] fn $alone() { super::run_alone(B, super::$alone); })*
        }
        #[cfg(feature = "postgres")]
        mod postgres {
            use crate::types::Backend::Postgres as B;
            $(#[test] fn $case() { super::run(B, super::$case); })*
            $(#[test] fn $alone() { super::run_alone(B, super::$alone); })*
        }
        #[cfg(feature = "mysql")]
        mod mysql {
            use crate::types::Backend::Mysql as B;
            $(#[test] fn $case() { super::run(B, super::$case); })*
            $(#[test] fn $alone() { super::run_alone(B, super::$alone); })*
        }
    };
}

conformance!(
    empty_batches_read_and_change_nothing,
    ids_that_do_not_exist_are_no_rows,
    a_taken_unique_key_is_no_id_and_is_found_by_its_holder,
    a_process_is_registered_heartbeats_and_goes,
    the_database_clock_is_utc_and_moves_forward,
    an_audit_entry_reads_back_as_written,
    a_batch_counts_closes_and_finishes_once,
    a_tick_is_guarded_once_and_old_guards_go,
    statistics_add_up_and_fold_into_the_totals,
    database_health_names_solidqs_tables,
    the_horizon_is_one_row_whole_or_empty,
    a_semaphore_gives_its_limit_and_takes_back_what_was_given,
    rate_starts_are_counted_pruned_and_forgotten,
    a_dependant_waits_and_its_edges_resolve_once,
    escaped_nul_and_text_beyond_ascii_read_back_as_written,
    blocked_jobs_wait_in_priority_order_and_are_taken_once,
    a_queue_is_paused_once_and_resumed_once,
    a_look_below_a_floor_finds_what_a_claim_there_would_take;
    alone: a_claim_is_its_processs_alone_and_finishes_once,
    a_many_job_insert_gives_each_job_its_own_id_in_order,
    claims_taken_ahead_are_not_started_until_marked,
    a_lost_claim_finishes_nothing,
    a_finish_writes_only_the_claims_its_process_holds,
    a_stalled_job_runs_alone_until_an_attempt_ends,
    a_failed_job_is_retried_once,
    a_job_made_ready_behind_the_claims_is_claimed_next,
    a_delayed_job_is_made_due_and_dispatched_once,
    a_gone_processs_claim_is_an_orphan_released_once,
    a_silent_process_is_found_by_its_silence_and_locked,
    finished_jobs_are_deleted_when_their_keep_ends_or_by_age,
    an_expired_semaphore_is_deleted_and_a_live_one_kept,
    tending_the_tables_twice_does_nothing_the_second_time,
);

/// Never an id of a row of a fresh database.
const MISSING: [i64; 2] = [987_654_321, i64::MAX - 1];

fn job(unique_key: Option<&str>) -> NewJob {
    NewJob {
        queue_name: "conformance".into(),
        kind: "conformance_job".into(),
        arguments: r#"{"n":1}"#.into(),
        priority: 0,
        unique_key: unique_key.map(Into::into),
        concurrency_key: None,
        fairness_key: None,
        options: "{}".into(),
        delivery: Delivery::AtLeastOnce,
        max_attempts: 3,
        max_stalled_count: None,
        run_at: None,
        delay: Duration::ZERO,
    }
}

fn empty_batches_read_and_change_nothing(d: &mut dyn Driver) {
    assert!(d.jobs_insert(&[], false).unwrap().is_empty());
    assert!(d.jobs_find_by_unique_keys(&[]).unwrap().is_empty());
    assert!(d.claimed_held(1, &[]).unwrap().is_empty());
    assert!(d.claimed_delete_fenced(1, &[]).unwrap().is_empty());
    d.claimed_mark_started(1, &[]).unwrap();
    d.jobs_delete(&[]).unwrap();
    d.jobs_retry(&[]).unwrap();
    d.jobs_snooze(&[]).unwrap();
    d.jobs_set_progress(&[]).unwrap();
    d.jobs_fail(&[]).unwrap();
    d.jobs_attempt_started(&[]).unwrap();
    d.jobs_release(&[]).unwrap();
    d.jobs_discard(&[]).unwrap();
    assert_eq!(d.failed_retry(&[]).unwrap(), 0);
    assert_eq!(d.failed_discard(&[]).unwrap(), 0);
    d.ready_insert(&[]).unwrap();
    d.blocked_insert(&[]).unwrap();
    assert!(d.pending_remove(&[]).unwrap().is_empty());
    assert_eq!(d.scheduled_make_due(&[]).unwrap(), 0);
    assert!(d.blocked_run_now(&[]).unwrap().is_empty());
    assert!(d.jobs_request_cancel(&[]).unwrap().is_empty());
    d.job_stats_add(&[]).unwrap();
    assert!(d.batch_members(&[]).unwrap().is_empty());
    assert!(d.dependency_parents(&[]).unwrap().is_empty());
    assert!(d.dependencies_resolve(&[], "succeeded").unwrap().is_empty());
    assert!(d.dependencies_of(&[]).unwrap().is_empty());
    assert!(d.waiting_get(&[]).unwrap().is_empty());
    d.waiting_delete(&[]).unwrap();
    assert!(d.jobs_options(&[]).unwrap().is_empty());
    assert!(d.dependants_read(&[]).unwrap().is_empty());
    d.dependants_ready(&[]).unwrap();
    d.dependants_schedule(&[]).unwrap();
    d.notify_ready(&[]).unwrap();
}

fn ids_that_do_not_exist_are_no_rows(d: &mut dyn Driver) {
    assert!(d.claimed_held(MISSING[0], &MISSING).unwrap().is_empty());
    assert!(
        d.claimed_delete_fenced(MISSING[0], &MISSING)
            .unwrap()
            .is_empty()
    );
    assert!(d.claimed_delete_by_process(MISSING[0]).unwrap().is_empty());
    assert_eq!(d.failed_retry(&MISSING).unwrap(), 0);
    assert_eq!(d.failed_discard(&MISSING).unwrap(), 0);
    assert!(d.pending_remove(&MISSING).unwrap().is_empty());
    assert_eq!(d.scheduled_make_due(&MISSING).unwrap(), 0);
    assert!(d.blocked_run_now(&MISSING).unwrap().is_empty());
    assert!(d.jobs_request_cancel(&MISSING).unwrap().is_empty());
    assert!(d.jobs_options(&MISSING).unwrap().is_empty());
    assert!(d.batch_members(&MISSING).unwrap().is_empty());
    assert!(d.dependency_parents(&MISSING).unwrap().is_empty());
    assert!(d.waiting_get(&MISSING).unwrap().is_empty());
    assert!(d.dependants_read(&MISSING).unwrap().is_empty());
    assert_eq!(d.batch_get(MISSING[0]).unwrap(), None);
    assert_eq!(d.batch_close(MISSING[0]).unwrap(), None);
    assert_eq!(
        d.batch_change(MISSING[0], &BatchDelta::default()).unwrap(),
        None
    );
    assert!(!d.batch_fire(MISSING[0], Callback::Complete).unwrap());
    assert!(!d.batch_finish(MISSING[0]).unwrap());
    assert!(!d.process_heartbeat(MISSING[0]).unwrap());
    assert!(!d.process_delete(MISSING[0]).unwrap());
    let now = d.db_now().unwrap();
    assert_eq!(
        d.recurring_execution_insert("conformance", now, MISSING[0])
            .unwrap(),
        None,
        "a guard for a job that does not exist"
    );
}

fn a_taken_unique_key_is_no_id_and_is_found_by_its_holder(d: &mut dyn Driver) {
    let first = d
        .jobs_insert(&[job(Some("conformance-key"))], false)
        .unwrap();
    let [Some(id)] = first[..] else {
        panic!("one new id: {first:?}")
    };
    let again = d
        .jobs_insert(&[job(Some("conformance-key")), job(None)], false)
        .unwrap();
    assert_eq!(again.len(), 2, "{again:?}");
    assert_eq!(again[0], None, "the taken key has no new id");
    assert!(again[1].is_some_and(|other| other != id), "{again:?}");
    assert_eq!(
        d.jobs_find_by_unique_keys(&["conformance-key".into(), "no-such-key".into()])
            .unwrap(),
        [("conformance-key".to_string(), id)]
    );
    assert_eq!(d.jobs_options(&[id]).unwrap(), [(id, "{}".to_string())]);
}

/// More jobs than one multi-row statement takes (MySQL's 500), some with
/// unique keys (one taken by an earlier job of the same call), some
/// delayed: each id is its own job's, in the order given, and exactly the
/// jobs due now are ready, in id order.
fn a_many_job_insert_gives_each_job_its_own_id_in_order(d: &mut dyn Driver) {
    let jobs: Vec<NewJob> = (0..1_203)
        .map(|n| {
            let key = match n {
                1_100 => Some("many-key-300".to_string()),
                n if n % 300 == 0 => Some(format!("many-key-{n}")),
                _ => None,
            };
            NewJob {
                arguments: format!(r#"{{"n":{n}}}"#),
                options: format!(r#"{{"n":{n}}}"#),
                unique_key: key,
                delay: if n % 7 == 0 {
                    Duration::from_secs(3_600)
                } else {
                    Duration::ZERO
                },
                ..job(None)
            }
        })
        .collect();
    let ids = d.jobs_insert(&jobs, false).unwrap();
    assert_eq!(ids.len(), jobs.len());
    assert_eq!(ids[1_100], None, "the key taken by job 300 of the call");
    let given: Vec<(i64, usize)> = ids
        .iter()
        .enumerate()
        .filter_map(|(n, id)| id.map(|id| (id, n)))
        .collect();
    assert_eq!(given.len(), jobs.len() - 1, "every other job has an id");
    let mut read = d
        .jobs_options(&given.iter().map(|(id, _)| *id).collect::<Vec<_>>())
        .unwrap();
    read.sort();
    let mut expected: Vec<(i64, String)> = given
        .iter()
        .map(|(id, n)| (*id, format!(r#"{{"n":{n}}}"#)))
        .collect();
    expected.sort();
    assert!(
        read == expected,
        "each id holds its own job: the first that does not, {:?}",
        read.iter().zip(&expected).find(|(r, e)| r != e)
    );
    let process = process(d, "conformance-many");
    let query = ClaimQuery::new(vec![QueuePattern::Exact("conformance".into())]);
    let claimed: Vec<i64> = d
        .ready_claim(&query, process, &ClaimLimits::idle(2_000))
        .unwrap()
        .iter()
        .map(|j| j.id)
        .collect();
    let mut due: Vec<i64> = given
        .iter()
        .filter(|(_, n)| n % 7 != 0)
        .map(|(id, _)| *id)
        .collect();
    due.sort();
    assert_eq!(claimed, due, "the jobs due now, ready in id order");
}

fn a_process_is_registered_heartbeats_and_goes(d: &mut dyn Driver) {
    let process = NewProcess {
        kind: "worker".into(),
        name: "conformance-ü".into(),
        pid: 4711,
        hostname: "host".into(),
        supervisor_id: None,
        metadata: "{}".into(),
    };
    let id = d.process_insert(&process).unwrap();
    assert!(d.process_heartbeat(id).unwrap());
    assert!(d.claimed_delete_by_process(id).unwrap().is_empty());
    assert!(d.process_delete(id).unwrap());
    assert!(!d.process_delete(id).unwrap(), "deleted once");
    assert!(!d.process_heartbeat(id).unwrap(), "a deleted process");
}

fn the_database_clock_is_utc_and_moves_forward(d: &mut dyn Driver) {
    let first = d.db_now().unwrap();
    let second = d.db_now().unwrap();
    assert!(second >= first, "{first} then {second}");
    let here = chrono::Utc::now().naive_utc();
    let apart = (here - first).num_seconds().abs();
    assert!(
        apart < 60,
        "the database says {first}, this host {here} (UTC)"
    );
}

fn an_audit_entry_reads_back_as_written(d: &mut dyn Driver) {
    let entry = NewAudit {
        actor: "ops@host — Zoë",
        source: "cli",
        action: "retry_failed",
        target: "queue 日本",
        rows: 3,
    };
    let row = d.audit_insert(&entry).unwrap();
    assert_eq!(
        (
            row.actor.as_str(),
            row.source.as_str(),
            row.action.as_str(),
            row.target.as_str(),
            row.rows
        ),
        (
            entry.actor,
            entry.source,
            entry.action,
            entry.target,
            entry.rows
        )
    );
    let now = d.db_now().unwrap();
    assert!(
        (now - row.created_at).num_seconds().abs() < 60,
        "{}",
        row.created_at
    );
    assert!(d.audit_insert(&entry).unwrap().id > row.id, "ids grow");
}

fn a_batch_counts_closes_and_finishes_once(d: &mut dyn Driver) {
    let id = d
        .batch_insert(&NewBatch {
            parent_id: None,
            description: Some("conformance".into()),
        })
        .unwrap();
    let row = d.batch_get(id).unwrap().expect("the batch");
    assert_eq!((row.total, row.pending, row.closed_at), (0, 0, None));
    let callbacks = r#"{"success":{"kind":"done","arguments":"Zoë"}}"#;
    d.batch_set_callbacks(id, callbacks).unwrap();
    assert_eq!(d.batch_get(id).unwrap().unwrap().callbacks, callbacks);
    d.batch_set_callbacks(MISSING[0], callbacks).unwrap();
    assert!(d.batch_get(MISSING[0]).unwrap().is_none(), "no batch made");
    let delta = BatchDelta {
        total: 2,
        pending: 2,
        ..BatchDelta::default()
    };
    let changed = d.batch_change(id, &delta).unwrap().expect("the batch");
    assert_eq!((changed.total, changed.pending), (2, 2));
    let done = BatchDelta {
        pending: -2,
        succeeded: 2,
        ..BatchDelta::default()
    };
    let changed = d.batch_change(id, &done).unwrap().expect("the batch");
    assert_eq!((changed.pending, changed.succeeded), (0, 2));
    let closed = d.batch_close(id).unwrap().expect("the batch");
    assert!(closed.closed_at.is_some());
    assert!(d.batch_finish(id).unwrap(), "finished");
    assert!(!d.batch_finish(id).unwrap(), "finished once");
    assert!(d.batch_fire(id, Callback::Success).unwrap(), "fired");
    assert!(!d.batch_fire(id, Callback::Success).unwrap(), "fired once");
    assert!(d.batch_unfinish(id).unwrap(), "open again");
    assert_eq!(d.batch_get(id).unwrap().unwrap().finished_at, None);
}

fn a_tick_is_guarded_once_and_old_guards_go(d: &mut dyn Driver) {
    d.recurring_tasks_sync(&[RecurringTaskRow {
        key: "conformance_task".into(),
        schedule: "* * * * *".into(),
        timezone: "UTC".into(),
        kind: "conformance_job".into(),
        arguments: "{}".into(),
        queue_name: None,
        priority: None,
        description: Some("a task".into()),
    }])
    .unwrap();
    let [Some(job_id)] = d.jobs_insert(&[job(None)], false).unwrap()[..] else {
        panic!("a job")
    };
    let tick = chrono::NaiveDate::from_ymd_opt(2026, 1, 1)
        .unwrap()
        .and_hms_opt(0, 0, 0)
        .unwrap();
    let guarded = d
        .recurring_execution_insert("conformance_task", tick, job_id)
        .unwrap();
    assert!(guarded.is_some(), "the first guard of a tick");
    assert_eq!(
        d.recurring_execution_insert("conformance_task", tick, job_id)
            .unwrap(),
        None,
        "the tick is taken"
    );
    // The task's only guard is its latest: kept however old.
    assert_eq!(
        d.recurring_executions_delete_old(Duration::ZERO, 100)
            .unwrap(),
        0
    );
    let later = tick + chrono::Duration::minutes(1);
    assert!(
        d.recurring_execution_insert("conformance_task", later, job_id)
            .unwrap()
            .is_some()
    );
    assert_eq!(
        d.recurring_executions_delete_old(Duration::ZERO, 100)
            .unwrap(),
        1,
        "the older guard goes, the latest stays"
    );
    d.recurring_tasks_sync(&[]).unwrap();
}

fn statistics_add_up_and_fold_into_the_totals(d: &mut dyn Driver) {
    let bucket = chrono::NaiveDate::from_ymd_opt(2026, 1, 1)
        .unwrap()
        .and_hms_opt(12, 0, 0)
        .unwrap();
    let delta = StatsDelta {
        bucket,
        queue_name: "conformance".into(),
        kind: "conformance_job".into(),
        outcome: Counted::Succeeded,
        jobs: 2,
        wait_ms: 10,
        run_ms: 20,
    };
    d.job_stats_add(&[&delta]).unwrap();
    d.job_stats_add(&[&delta]).unwrap();
    assert_eq!(
        d.job_stats_fold(Duration::from_secs(3600)).unwrap(),
        1,
        "the one old minute row, added to twice, folded"
    );
    assert_eq!(d.job_stats_fold(Duration::from_secs(3600)).unwrap(), 0);
}

fn database_health_names_solidqs_tables(d: &mut dyn Driver) {
    let facts = d.database_health().unwrap();
    let names: Vec<&str> = facts.tables.iter().map(|t| t.name.as_str()).collect();
    for table in [
        "solidq_jobs",
        "solidq_ready_executions",
        "solidq_claimed_executions",
        "solidq_scheduled_executions",
        "solidq_failed_executions",
        "solidq_processes",
        "solidq_batches",
        "solidq_audit_log",
        "solidq_job_stats",
        "solidq_recurring_tasks",
        "solidq_recurring_executions",
    ] {
        assert!(names.contains(&table), "{table} in {names:?}");
    }
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted, "by name, byte for byte");
    assert!(names.iter().all(|n| n.starts_with("solidq_")), "{names:?}");
}

/// The case's own transaction is not counted (it is this session's); the
/// suite's other sessions may hold one, so only the row's shape is fixed
/// here (tests/it/health.rs holds one open and reads it back).
fn the_horizon_is_one_row_whole_or_empty(d: &mut dyn Driver) {
    let h = d.horizon().unwrap();
    if h == HorizonFacts::default() {
        return; // SQLite: no old row versions
    }
    assert!(h.backlog.is_some_and(|n| n >= 0), "{h:?}");
    if let Some(age) = h.age_ms {
        assert!(age >= 0, "{h:?}");
        assert!(
            h.pid.is_some() && h.holder.is_some() && h.state.is_some(),
            "{h:?}"
        );
    } else {
        assert_eq!((h.pid, h.holder, h.state), (None, None, None));
    }
}

/// A worker process's row named `name`; its id.
pub(crate) fn process(d: &mut dyn Driver, name: &str) -> i64 {
    d.process_insert(&NewProcess {
        kind: "worker".into(),
        name: name.into(),
        pid: 4711,
        hostname: "host".into(),
        supervisor_id: None,
        metadata: "{}".into(),
    })
    .unwrap()
}

fn a_claim_is_its_processs_alone_and_finishes_once(d: &mut dyn Driver) {
    let (a, b) = (process(d, "conformance-a"), process(d, "conformance-b"));
    let ids: Vec<i64> = inserted(d, &[job(None), job(None), job(None)]);
    let query = ClaimQuery::new(vec![QueuePattern::Exact("conformance".into())]);
    let claimed: Vec<i64> = d
        .ready_claim(&query, a, &ClaimLimits::idle(2))
        .unwrap()
        .iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(claimed, ids[..2], "two, in id order");
    assert_eq!(d.claimed_held(a, &ids).unwrap(), ids[..2]);
    assert!(d.claimed_held(b, &ids).unwrap().is_empty(), "not b's");
    let success = |id| Succeeded {
        id,
        result: Some(r#"{"ok":1}"#.into()),
        keep: Duration::from_secs(3600),
        started_ago: Duration::ZERO,
    };
    assert!(
        d.jobs_succeed_fenced(b, &[success(ids[0])], &[])
            .unwrap()
            .is_empty(),
        "b cannot finish a's job"
    );
    assert_eq!(
        d.jobs_succeed_fenced(a, &[success(ids[0])], &[]).unwrap(),
        [ids[0]]
    );
    assert!(
        d.jobs_succeed_fenced(a, &[success(ids[0])], &[])
            .unwrap()
            .is_empty(),
        "finished once: its claim is gone"
    );
    let released = d.claimed_delete_by_process(a).unwrap();
    assert_eq!(
        released
            .iter()
            .map(|r| (r.id, r.process_id))
            .collect::<Vec<_>>(),
        [(ids[1], a)]
    );
    let rest: Vec<i64> = d
        .ready_claim(&query, b, &ClaimLimits::idle(5))
        .unwrap()
        .iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(rest, [ids[2]], "what is left in ready");
    let other = ClaimQuery::new(vec![QueuePattern::Exact("elsewhere".into())]);
    assert!(
        d.ready_claim(&other, b, &ClaimLimits::idle(5))
            .unwrap()
            .is_empty()
    );
}

fn a_semaphore_gives_its_limit_and_takes_back_what_was_given(d: &mut dyn Driver) {
    let limit = StoredLimit {
        limit: 2,
        duration_ms: 60_000,
        on_conflict: OnConflict::Block,
    };
    assert!(d.semaphore_acquire("conformance-key", &limit).unwrap());
    assert!(d.semaphore_acquire("conformance-key", &limit).unwrap());
    assert!(
        !d.semaphore_acquire("conformance-key", &limit).unwrap(),
        "two slots given: no third"
    );
    assert!(
        d.semaphore_acquire("another-key", &limit).unwrap(),
        "each key its own"
    );
    assert!(d.semaphore_signal("conformance-key", &limit).unwrap());
    assert!(
        d.semaphore_acquire("conformance-key", &limit).unwrap(),
        "the slot given back"
    );
    assert!(
        !d.semaphore_signal("no-such-key", &limit).unwrap(),
        "no semaphore"
    );
    assert!(d.blocked_next("conformance-key").unwrap().is_none());
}

fn a_failed_job_is_retried_once(d: &mut dyn Driver) {
    let p = process(d, "conformance-failing");
    let [Some(id)] = d.jobs_insert(&[job(None)], false).unwrap()[..] else {
        panic!("a job")
    };
    let query = ClaimQuery::new(vec![QueuePattern::Exact("conformance".into())]);
    let limits = ClaimLimits::idle(1);
    let claimed = d.ready_claim(&query, p, &limits).unwrap();
    assert_eq!(claimed.iter().map(|j| j.id).collect::<Vec<_>>(), [id]);
    d.transaction(&mut |d| {
        assert_eq!(d.claimed_delete_fenced(p, &[id])?, [id]);
        d.jobs_fail(&[Failed {
            id,
            error: r#"{"kind":"conformance","message":"no"}"#.into(),
            ends_attempt: true,
            stalled: false,
        }])
    })
    .unwrap();
    let left: Vec<ReleasedJob> = d.claimed_delete_by_process(p).unwrap();
    assert!(left.is_empty(), "no claim is left: {left:?}");
    assert_eq!(d.failed_retry(&[id, MISSING[0]]).unwrap(), 1, "retried");
    assert_eq!(d.failed_retry(&[id]).unwrap(), 0, "retried once");
    assert_eq!(d.failed_discard(&[id]).unwrap(), 0, "no longer failed");
    let again: Vec<i64> = d
        .ready_claim(&query, p, &limits)
        .unwrap()
        .iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(again, [id], "ready again");
}

/// Every way a job becomes ready where claims already went is seen by the
/// next claim of the same worker (PostgreSQL's and MySQL's claims start
/// where earlier ones ended while nothing was made ready behind them:
/// `store::floor`; unit tests settle places at once): a due
/// scheduled job, a snooze, a release, a retried failure, a freed
/// concurrency slot, a negative priority, a resumed queue. (A fair
/// placement goes no further forward than the first ready row of its
/// queue; it moves the counter on all the same.)
fn a_job_made_ready_behind_the_claims_is_claimed_next(d: &mut dyn Driver) {
    let p = process(d, "conformance-floor");
    // A prefix: the queue paused below is claimed from too.
    let query = ClaimQuery::new(vec![QueuePattern::Prefix("conformance".into())]);
    let claim = |d: &mut dyn Driver, n| -> Vec<i64> {
        let limits = ClaimLimits::idle(n);
        d.ready_claim(&query, p, &limits)
            .unwrap()
            .iter()
            .map(|j| j.id)
            .collect()
    };
    let insert = |d: &mut dyn Driver, job: NewJob| -> i64 {
        d.jobs_insert(&[job], false).unwrap()[0].expect("a new id")
    };
    let delayed = insert(
        d,
        NewJob {
            delay: Duration::from_secs(3600),
            ..job(None)
        },
    );
    let paused = insert(
        d,
        NewJob {
            queue_name: "conformance-paused".into(),
            ..job(None)
        },
    );
    assert!(d.pause_set("conformance-paused", true).unwrap());
    let [snoozed, released, failed, limited] = [0; 4].map(|_| insert(d, job(None)));
    assert_eq!(claim(d, 4), [snoozed, released, failed, limited]);
    // Claims move on past the jobs above, twice, so the next starts past
    // where the first ended.
    let tail = |d: &mut dyn Driver| {
        let id = insert(d, job(None));
        assert_eq!(claim(d, 1), [id], "the tail");
    };
    tail(d);
    tail(d);
    assert_eq!(d.scheduled_make_due(&[delayed]).unwrap(), 1);
    assert_eq!(d.scheduled_dispatch(10).unwrap(), ["conformance"]);
    assert_eq!(claim(d, 5), [delayed], "a scheduled job due");
    tail(d);
    d.transaction(&mut |d| {
        d.claimed_delete_fenced(p, &[snoozed])?;
        d.jobs_snooze(&[Snoozed {
            id: snoozed,
            delay: Duration::ZERO,
        }])
    })
    .unwrap();
    assert_eq!(claim(d, 5), [snoozed], "a snoozed job");
    tail(d);
    d.transaction(&mut |d| {
        d.claimed_delete_fenced(p, &[released])?;
        d.jobs_release(&[Released {
            id: released,
            stalled: false,
            error: None,
        }])
    })
    .unwrap();
    assert_eq!(claim(d, 5), [released], "a released job");
    tail(d);
    d.transaction(&mut |d| {
        d.claimed_delete_fenced(p, &[failed])?;
        d.jobs_fail(&[Failed {
            id: failed,
            error: r#"{"kind":"conformance","message":"no"}"#.into(),
            ends_attempt: true,
            stalled: false,
        }])
    })
    .unwrap();
    assert_eq!(d.failed_retry(&[failed]).unwrap(), 1);
    assert_eq!(claim(d, 5), [failed], "a failed job retried");
    tail(d);
    d.transaction(&mut |d| {
        d.claimed_delete_fenced(p, &[limited])?;
        d.ready_insert(&[LimitedJob {
            job_id: limited,
            queue_name: "conformance".into(),
            priority: 0,
            concurrency_key: "conformance-key".into(),
            kind: "conformance_job".into(),
            options: "{}".into(),
        }])
    })
    .unwrap();
    assert_eq!(claim(d, 5), [limited], "a job given a concurrency slot");
    tail(d);
    let urgent = insert(
        d,
        NewJob {
            priority: -1,
            ..job(None)
        },
    );
    assert_eq!(claim(d, 5), [urgent], "a negative priority");
    tail(d);
    assert!(d.pause_set("conformance-paused", false).unwrap());
    assert_eq!(claim(d, 5), [paused], "a resumed queue");
}

/// The look below a worker's floor (`store::floor`, a read without locks
/// on a connection of its own) finds a ready job exactly when a claim from
/// the head would take one placed before the floor: of priority 0 placed
/// before it or of a negative priority, in a queue of the pattern that is
/// not paused.
fn a_look_below_a_floor_finds_what_a_claim_there_would_take(d: &mut dyn Driver) {
    let queue = "conformance-look";
    let insert = |d: &mut dyn Driver, priority: i32| -> i64 {
        let job = NewJob {
            queue_name: queue.into(),
            priority,
            ..job(None)
        };
        d.jobs_insert(&[job], false).unwrap()[0].expect("a new id")
    };
    let exact = ClaimQuery::new(vec![QueuePattern::Exact(queue.into())]);
    let prefix = ClaimQuery::new(vec![QueuePattern::Prefix("conformance-lo".into())]);
    let other = ClaimQuery::new(vec![QueuePattern::Exact("conformance-elsewhere".into())]);
    let first = insert(d, 0);
    let second = insert(d, 0);
    insert(d, 5);
    for query in [&exact, &prefix] {
        assert!(
            !d.ready_below_floor(query, first).unwrap(),
            "none before the first"
        );
        assert!(
            d.ready_below_floor(query, second).unwrap(),
            "the first, before the second"
        );
    }
    assert!(
        !d.ready_below_floor(&other, second).unwrap(),
        "another queue"
    );
    insert(d, -1);
    assert!(
        d.ready_below_floor(&exact, first).unwrap(),
        "a negative priority"
    );
    assert!(d.pause_set(queue, true).unwrap());
    assert!(
        !d.ready_below_floor(&exact, second).unwrap(),
        "a paused queue"
    );
    assert!(
        !d.ready_below_floor(&prefix, second).unwrap(),
        "a paused queue"
    );
}

fn claim_ids(d: &mut dyn Driver, process: i64, n: usize) -> Vec<i64> {
    let query = ClaimQuery::new(vec![QueuePattern::Exact("conformance".into())]);
    let limits = ClaimLimits::idle(n);
    d.ready_claim(&query, process, &limits)
        .unwrap()
        .iter()
        .map(|j| j.id)
        .collect()
}

fn a_delayed_job_is_made_due_and_dispatched_once(d: &mut dyn Driver) {
    let p = process(d, "conformance-dispatch");
    let delayed = NewJob {
        delay: Duration::from_secs(3600),
        ..job(None)
    };
    let [Some(id)] = d.jobs_insert(&[delayed], false).unwrap()[..] else {
        panic!("a job")
    };
    assert!(claim_ids(d, p, 5).is_empty(), "not due for an hour");
    assert!(d.scheduled_dispatch(10).unwrap().is_empty(), "nothing due");
    assert_eq!(d.scheduled_make_due(&[id, MISSING[0]]).unwrap(), 1);
    assert_eq!(d.scheduled_dispatch(10).unwrap(), ["conformance"]);
    assert!(d.scheduled_dispatch(10).unwrap().is_empty(), "moved once");
    assert_eq!(claim_ids(d, p, 5), [id]);
}

fn a_gone_processs_claim_is_an_orphan_released_once(d: &mut dyn Driver) {
    let p = process(d, "conformance-gone");
    let [Some(id)] = d.jobs_insert(&[job(None)], false).unwrap()[..] else {
        panic!("a job")
    };
    assert_eq!(claim_ids(d, p, 1), [id]);
    assert!(d.claimed_delete_orphans(10).unwrap().is_empty(), "p lives");
    assert!(d.process_delete(p).unwrap());
    let orphans: Vec<ReleasedJob> = d.claimed_delete_orphans(10).unwrap();
    assert_eq!(
        orphans
            .iter()
            .map(|o| (o.id, o.process_id, o.stalled_count))
            .collect::<Vec<_>>(),
        [(id, p, 0)]
    );
    assert!(d.claimed_delete_orphans(10).unwrap().is_empty(), "once");
    d.transaction(&mut |d| {
        d.jobs_release(&[Released {
            id,
            stalled: true,
            error: Some(r#"{"kind":"stalled","message":"process gone"}"#.into()),
        }])
    })
    .unwrap();
    let q = process(d, "conformance-next");
    assert_eq!(claim_ids(d, q, 5), [id], "ready again");
    let held: Vec<ReleasedJob> = d.claimed_delete_by_process(q).unwrap();
    assert_eq!(
        held.iter()
            .map(|h| (h.id, h.stalled_count))
            .collect::<Vec<_>>(),
        [(id, 1)],
        "the stall counted"
    );
}

fn rate_starts_are_counted_pruned_and_forgotten(d: &mut dyn Driver) {
    let keys = vec!["conformance:a".to_string(), "conformance:b".to_string()];
    let locked = d.rate_keys_lock(&keys).unwrap();
    let epoch = chrono::DateTime::UNIX_EPOCH.naive_utc();
    assert_eq!(
        locked,
        vec![(keys[0].clone(), epoch), (keys[1].clone(), epoch)],
        "missing keys are created, in key order, never handed out"
    );
    let now = d.rate_clock().unwrap();
    d.rate_key_set_next(&keys[0], now).unwrap();
    let again = d.rate_keys_lock(&keys).unwrap();
    assert_eq!(again[0], (keys[0].clone(), now), "a key is created once");
    let ids = d
        .jobs_insert(&[job(None), job(None), job(None)], false)
        .unwrap();
    let ids: Vec<i64> = ids.into_iter().map(|id| id.expect("an id")).collect();
    let earlier = now - chrono::Duration::seconds(30);
    d.rate_starts_insert(&[(keys[0].clone(), ids[0])], earlier)
        .unwrap();
    d.rate_starts_insert(&[(keys[0].clone(), ids[1]), (keys[1].clone(), ids[2])], now)
        .unwrap();
    let since = now - chrono::Duration::seconds(60);
    let mut counts = d.rate_starts_counts(&keys, since).unwrap();
    counts.sort();
    assert_eq!(counts, vec![(keys[0].clone(), 2), (keys[1].clone(), 1)]);
    assert_eq!(d.rate_start_nth(&keys[0], since, 0).unwrap(), earlier);
    assert_eq!(d.rate_start_nth(&keys[0], since, 1).unwrap(), now);
    assert!(
        d.rate_start_nth(&keys[0], since, 2).is_err(),
        "no start past the last"
    );
    d.rate_starts_prune(&keys, earlier).unwrap();
    assert_eq!(
        d.rate_starts_counts(&keys[..1], since).unwrap(),
        vec![(keys[0].clone(), 1)],
        "starts at or before the cut are pruned"
    );
    d.rate_starts_forget(&ids[1..]).unwrap();
    assert!(d.rate_starts_counts(&keys, since).unwrap().is_empty());
    assert_eq!(
        d.jobs_defer(ids[0], now).unwrap(),
        None,
        "no concurrency key"
    );
    assert!(
        d.jobs_defer(MISSING[0], now).is_err(),
        "a job that does not exist cannot be sent back"
    );
}

fn a_dependant_waits_and_its_edges_resolve_once(d: &mut dyn Driver) {
    use super::dependencies::{Edge, WaitingRow};
    // A dependant is inserted scheduled far off, then held.
    let held = NewJob {
        run_at: Some(
            chrono::NaiveDate::from_ymd_opt(9999, 12, 31)
                .unwrap()
                .into(),
        ),
        ..job(None)
    };
    let ids = d.jobs_insert(&[job(None), job(None), held], false).unwrap();
    let ids: Vec<i64> = ids.into_iter().map(|id| id.expect("an id")).collect();
    let (parent, other, child) = (ids[0], ids[1], ids[2]);
    let batch = d
        .batch_insert(&NewBatch {
            parent_id: None,
            description: None,
        })
        .unwrap();
    d.batch_assign(batch, &ids).unwrap();
    let mut members = d.batch_members(&ids).unwrap();
    members.sort();
    assert_eq!(
        members,
        ids.iter().map(|id| (batch, *id)).collect::<Vec<_>>()
    );
    d.dependencies_insert(batch, &[(child, parent), (child, other)])
        .unwrap();
    let edge = |parent_id, outcome: Option<&str>| Edge {
        job_id: child,
        parent_id,
        outcome: outcome.map(Into::into),
    };
    assert_eq!(
        d.dependencies_in_batch(batch).unwrap(),
        vec![edge(parent, None), edge(other, None)]
    );
    d.waiting_hold(&[WaitingRow {
        job_id: child,
        run_anyway: true,
        run_at: None,
    }])
    .unwrap();
    assert_eq!(
        d.waiting_get(&[child, parent]).unwrap(),
        vec![WaitingRow {
            job_id: child,
            run_anyway: true,
            run_at: None
        }],
        "only the held job waits"
    );
    let parents = d.dependency_parents(&[parent, MISSING[0]]).unwrap();
    assert_eq!(parents.len(), 1, "a parent that does not exist is no row");
    assert_eq!((parents[0].batch_id, parents[0].ended), (Some(batch), None));
    assert_eq!(
        d.dependencies_resolve(&[parent], super::dependencies::SUCCEEDED)
            .unwrap(),
        vec![child]
    );
    assert!(
        d.dependencies_resolve(&[parent], super::dependencies::FAILED)
            .unwrap()
            .is_empty(),
        "an edge resolves once"
    );
    let mut of = d.dependencies_of(&[child]).unwrap();
    of.sort_by_key(|e| e.parent_id);
    assert_eq!(of, vec![edge(parent, Some("succeeded")), edge(other, None)]);
    let released = d.dependants_read(&[child]).unwrap();
    assert_eq!(released.len(), 1);
    assert_eq!(
        (released[0].id, released[0].queue_name.as_str()),
        (child, "conformance")
    );
    d.waiting_delete(&[child]).unwrap();
    assert!(d.waiting_get(&[child]).unwrap().is_empty());
    d.dependants_ready(&released).unwrap();
}

fn escaped_nul_and_text_beyond_ascii_read_back_as_written(d: &mut dyn Driver) {
    // The rules above never hand a driver a raw NUL (PostgreSQL cannot
    // store one): JSON escapes it. Escaped, and beside text beyond ASCII,
    // it must read back byte for byte on every backend.
    let options = r#"{"note":"a\u0000b","who":"Zoë 🚀"}"#;
    let ids = d
        .jobs_insert(
            &[NewJob {
                options: options.into(),
                ..job(None)
            }],
            false,
        )
        .unwrap();
    let id = ids[0].expect("an id");
    assert_eq!(
        d.jobs_options(&[id]).unwrap(),
        vec![(id, options.to_string())]
    );
}

fn blocked_jobs_wait_in_priority_order_and_are_taken_once(d: &mut dyn Driver) {
    let key = "conformance-limit";
    let limited = |priority| NewJob {
        priority,
        concurrency_key: Some(key.into()),
        ..job(None)
    };
    let ids: Vec<i64> = inserted(d, &[limited(5), limited(1), limited(5)]);
    // Jobs under a limit wait in scheduled for their caller to place them.
    assert!(d.scheduled_limited_due().unwrap(), "limited jobs are due");
    let mut taken = d.scheduled_take_limited(Some(&ids), 10).unwrap();
    taken.sort_by_key(|j| j.job_id);
    assert_eq!(
        taken.iter().map(|j| j.job_id).collect::<Vec<_>>(),
        ids,
        "every limited job, due now"
    );
    assert!(
        d.scheduled_take_limited(Some(&ids), 10).unwrap().is_empty(),
        "taken once"
    );
    assert!(!d.scheduled_limited_due().unwrap(), "none left due");
    d.blocked_insert(&taken).unwrap();
    let next = |d: &mut dyn Driver| d.blocked_next(key).unwrap().map(|j| j.job_id);
    assert_eq!(next(d), Some(ids[1]), "priority first");
    d.blocked_delete(ids[1]).unwrap();
    assert_eq!(next(d), Some(ids[0]), "then the older");
    d.blocked_delete(ids[0]).unwrap();
    assert_eq!(next(d), Some(ids[2]));
    d.blocked_delete(ids[2]).unwrap();
    assert_eq!(next(d), None);
    assert!(d.blocked_next("no-such-key").unwrap().is_none());
    assert!(
        d.blocked_expired_keys(10).unwrap().is_empty(),
        "none expired: they expire a limit's duration from now"
    );
}

/// Inserts `jobs` (none with a key already taken): their ids, in order.
fn inserted(d: &mut dyn Driver, jobs: &[NewJob]) -> Vec<i64> {
    d.jobs_insert(jobs, false)
        .unwrap()
        .into_iter()
        .map(|id| id.expect("a new id"))
        .collect()
}

/// The claims of process `p`, released: (id, started), in id order.
fn released_claims(d: &mut dyn Driver, p: i64) -> Vec<(i64, bool)> {
    let mut released: Vec<(i64, bool)> = d
        .claimed_delete_by_process(p)
        .unwrap()
        .iter()
        .map(|r| (r.id, r.started))
        .collect();
    released.sort();
    released
}

/// Claims from queue `conformance` for process `p` one job to start and
/// up to three ahead, of kind `conformance_job` only: (id, started).
fn claim_one_and_three_ahead(d: &mut dyn Driver, p: i64) -> Vec<(i64, bool)> {
    let query = ClaimQuery::new(vec![QueuePattern::Exact("conformance".into())]);
    let limits = ClaimLimits {
        immediate: 1,
        ahead: 3,
        fast_kinds: vec!["conformance_job".into()],
        from: 0,
    };
    d.ready_claim(&query, p, &limits)
        .unwrap()
        .iter()
        .map(|j| (j.id, j.started))
        .collect()
}

fn claims_taken_ahead_are_not_started_until_marked(d: &mut dyn Driver) {
    let p = process(d, "conformance-ahead");
    let once = NewJob {
        delivery: Delivery::AtMostOnce,
        ..job(None)
    };
    let ids: Vec<i64> = inserted(d, &[job(None), job(None), once, job(None)]);
    assert_eq!(
        claim_one_and_three_ahead(d, p),
        [(ids[0], true), (ids[1], false), (ids[3], false)],
        "one started, the rest ahead but never an at-most-once job"
    );
    assert_eq!(
        d.claimed_held(p, &[ids[0], ids[1], ids[2], ids[3], MISSING[0]])
            .unwrap()
            .len(),
        3
    );
    d.transaction(&mut |d| d.claimed_mark_started(p, &[ids[1]]))
        .unwrap();
    let released = released_claims(d, p);
    assert_eq!(
        released,
        [(ids[0], true), (ids[1], true), (ids[3], false)],
        "marked started once it ran; the one held ahead never started"
    );
}

/// A ready row carries its job's kind and delivery, which a claim taking
/// jobs ahead filters on; a row an older release wrote has neither (they
/// are NULL) and is judged by its job, as before migration
/// `2026-12-08-000001`. The same claim as in
/// [`claims_taken_ahead_are_not_started_until_marked`], on rows written
/// with and without them.
fn ready_rows_without_kind_are_judged_by_their_job(backend: Backend) {
    use diesel::RunQueryDsl;
    let Some(store) = fresh(backend) else { return };
    let sql = |statement: &str| {
        store
            .with_conn("conformance", |c| diesel::sql_query(statement).execute(c))
            .expect(statement)
    };
    for older in [false, true] {
        store
            .with_driver("conformance", |d| {
                let p = process(d, &format!("conformance-older-{older}"));
                let once = NewJob {
                    delivery: Delivery::AtMostOnce,
                    ..job(None)
                };
                let slow = NewJob {
                    kind: "conformance_slow".into(),
                    ..job(None)
                };
                let ids: Vec<i64> = inserted(d, &[job(None), once, slow, job(None)]);
                if older {
                    sql("UPDATE solidq_ready_executions SET kind = NULL, delivery = NULL");
                }
                let carried = sql(
                    "UPDATE solidq_ready_executions SET created_at = created_at \
                     WHERE kind IS NOT NULL AND delivery IS NOT NULL",
                );
                assert_eq!(
                    carried,
                    if older { 0 } else { 4 },
                    "kind and delivery written"
                );
                assert_eq!(
                    claim_one_and_three_ahead(d, p),
                    [(ids[0], true), (ids[3], false)],
                    "rows {}: ahead only a fast kind, never an at-most-once job",
                    if older {
                        "of an older release"
                    } else {
                        "as written"
                    }
                );
                Ok(())
            })
            .unwrap();
        sql("DELETE FROM solidq_claimed_executions");
        sql("DELETE FROM solidq_ready_executions");
        sql("DELETE FROM solidq_jobs");
    }
}

#[cfg(feature = "sqlite")]
#[test]
fn sqlite_ready_rows_without_kind_are_judged_by_their_job() {
    ready_rows_without_kind_are_judged_by_their_job(Backend::Sqlite);
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_ready_rows_without_kind_are_judged_by_their_job() {
    ready_rows_without_kind_are_judged_by_their_job(Backend::Postgres);
}

#[cfg(feature = "mysql")]
#[test]
fn mysql_ready_rows_without_kind_are_judged_by_their_job() {
    ready_rows_without_kind_are_judged_by_their_job(Backend::Mysql);
}

fn a_lost_claim_finishes_nothing(d: &mut dyn Driver) {
    let p = process(d, "conformance-lost");
    let [Some(id)] = d.jobs_insert(&[job(None)], false).unwrap()[..] else {
        panic!("a job")
    };
    assert_eq!(claim_ids(d, p, 1), [id]);
    // Pruned: its row and its claims gone, the job back in ready.
    assert!(d.process_delete(p).unwrap());
    assert_eq!(d.claimed_delete_orphans(10).unwrap().len(), 1);
    d.transaction(&mut |d| {
        d.jobs_release(&[Released {
            id,
            stalled: true,
            error: None,
        }])
    })
    .unwrap();
    let success = Succeeded {
        id,
        result: None,
        keep: Duration::from_secs(60),
        started_ago: Duration::ZERO,
    };
    assert!(
        d.jobs_succeed_fenced(p, &[success], &[])
            .unwrap()
            .is_empty(),
        "the fence: a claim that is gone finishes nothing"
    );
    assert!(
        d.claimed_delete_fenced(p, &[id]).unwrap().is_empty(),
        "nor releases anything"
    );
    let q = process(d, "conformance-after");
    assert_eq!(claim_ids(d, q, 5), [id], "still ready, for another");
}

/// A finish of jobs only some of whose claims its process holds (one is
/// another process's) writes those and records its starts; the other
/// claim, and the other job, are left as they were. On its own and
/// inside a transaction of the caller's. (MySQL fences a finish by one
/// delete whose count tells whether every claim was held, and when one
/// was not, starts again with a locking read: this is that second way.)
fn a_finish_writes_only_the_claims_its_process_holds(d: &mut dyn Driver) {
    let (p, q) = (
        process(d, "conformance-fence-p"),
        process(d, "conformance-fence-q"),
    );
    let ids: Vec<i64> = inserted(d, &[job(None), job(None), job(None), job(None), job(None)]);
    assert_eq!(
        claim_one_and_three_ahead(d, p),
        [
            (ids[0], true),
            (ids[1], false),
            (ids[2], false),
            (ids[3], false)
        ]
    );
    assert_eq!(claim_ids(d, q, 1), [ids[4]]);
    let success = |id| Succeeded {
        id,
        result: None,
        keep: Duration::ZERO,
        started_ago: Duration::ZERO,
    };
    let sorted = |mut ids: Vec<i64>| {
        ids.sort_unstable();
        ids
    };
    let written = d
        .jobs_succeed_fenced(
            p,
            &[success(ids[4]), success(ids[1]), success(ids[0])],
            &[ids[2]],
        )
        .unwrap();
    assert_eq!(sorted(written), [ids[0], ids[1]], "p's two, not q's");
    assert_eq!(
        d.claimed_held(q, &ids).unwrap(),
        [ids[4]],
        "q's claim stays"
    );
    assert_eq!(
        sorted(d.claimed_held(p, &ids).unwrap()),
        [ids[2], ids[3]],
        "p's others stay"
    );
    let mut written = Vec::new();
    d.transaction(&mut |d| {
        written = d.jobs_succeed_fenced(q, &[success(ids[0]), success(ids[4])], &[])?;
        Ok(())
    })
    .unwrap();
    assert_eq!(written, [ids[4]], "in the caller's transaction too");
    let_time_pass(Duration::from_millis(20));
    assert_eq!(
        d.jobs_delete_finished(None, 10).unwrap(),
        3,
        "three finished, each once; the other two not"
    );
    let released = released_claims(d, p);
    assert_eq!(
        released,
        [(ids[2], true), (ids[3], false)],
        "the start recorded with the finish"
    );
}

fn a_stalled_job_runs_alone_until_an_attempt_ends(d: &mut dyn Driver) {
    let p = process(d, "conformance-alone");
    let ids: Vec<i64> = inserted(d, &[job(None), job(None)]);
    let query = ClaimQuery::new(vec![QueuePattern::Exact("conformance".into())]);
    let limits = ClaimLimits::idle(2);
    let alone = |d: &mut dyn Driver, p| -> Vec<(i64, bool, bool)> {
        let mut claimed: Vec<(i64, bool, bool)> = d
            .ready_claim(&query, p, &limits)
            .unwrap()
            .iter()
            .map(|j| (j.id, j.started, j.run_alone))
            .collect();
        claimed.sort();
        claimed
    };
    assert_eq!(
        alone(d, p),
        [(ids[0], true, false), (ids[1], true, false)],
        "new jobs run beside others"
    );
    // Its process died: the one it ran stalls and runs alone next, the
    // one handed back unstarted does not.
    assert_eq!(d.claimed_delete_by_process(p).unwrap().len(), 2);
    d.transaction(&mut |d| {
        d.jobs_release(&[
            Released {
                id: ids[0],
                stalled: true,
                error: None,
            },
            Released {
                id: ids[1],
                stalled: false,
                error: None,
            },
        ])
    })
    .unwrap();
    let q = process(d, "conformance-alone-next");
    assert_eq!(
        alone(d, q),
        [(ids[0], true, true), (ids[1], true, false)],
        "the stalled one runs alone"
    );
    // Claimed beside others, it waits unstarted: a crash meanwhile is not
    // its stall, and handed back it still runs alone.
    d.transaction(&mut |d| d.claimed_mark_unstarted(q, &[ids[0], MISSING[0]]))
        .unwrap();
    let held = released_claims(d, q);
    assert_eq!(held, [(ids[0], false), (ids[1], true)]);
    d.transaction(&mut |d| {
        d.jobs_release(&[Released {
            id: ids[0],
            stalled: false,
            error: None,
        }])
    })
    .unwrap();
    let r = process(d, "conformance-alone-last");
    assert_eq!(alone(d, r), [(ids[0], true, true)], "still alone");
    // An attempt that ends with an outcome ends its run alone.
    d.jobs_attempt_started(&[AttemptStarted {
        id: ids[0],
        ago: Duration::ZERO,
        count: false,
    }])
    .unwrap();
    assert_eq!(d.claimed_delete_by_process(r).unwrap().len(), 1);
    d.transaction(&mut |d| {
        d.jobs_release(&[Released {
            id: ids[0],
            stalled: false,
            error: None,
        }])
    })
    .unwrap();
    let s = process(d, "conformance-alone-after");
    assert_eq!(
        alone(d, s),
        [(ids[0], true, false)],
        "back to running beside others"
    );
}

fn a_queue_is_paused_once_and_resumed_once(d: &mut dyn Driver) {
    assert!(d.pause_set("conformance-日本", true).unwrap(), "paused");
    assert!(
        !d.pause_set("conformance-日本", true).unwrap(),
        "paused once"
    );
    assert!(!d.pause_set("another", false).unwrap(), "never paused");
    assert!(d.pause_set("conformance-日本", false).unwrap(), "resumed");
    assert!(
        !d.pause_set("conformance-日本", false).unwrap(),
        "resumed once"
    );
}

/// Lets the clock move on past `d`: what was written before is older
/// than this by at least `d` on every backend's clock.
fn let_time_pass(d: Duration) {
    std::thread::sleep(d + Duration::from_millis(5));
}

fn a_silent_process_is_found_by_its_silence_and_locked(d: &mut dyn Driver) {
    let supervisor = process(d, "conformance-supervisor");
    let worker = d
        .process_insert(&NewProcess {
            kind: "worker".into(),
            name: "conformance-worker".into(),
            pid: 4712,
            hostname: "host-ü".into(),
            supervisor_id: Some(supervisor),
            metadata: "{}".into(),
        })
        .unwrap();
    let found: Vec<i64> = d
        .process_find_by_pid("host-ü", 4712, supervisor)
        .unwrap()
        .iter()
        .map(|p| p.id)
        .collect();
    assert_eq!(found, [worker]);
    assert!(
        d.process_find_by_pid("host-ü", 4712, MISSING[0])
            .unwrap()
            .is_empty()
    );
    assert!(
        d.process_find_by_pid("host", 4712, supervisor)
            .unwrap()
            .is_empty()
    );
    assert!(
        d.process_find_by_pid("host-ü", 4711, supervisor)
            .unwrap()
            .is_empty()
    );
    let hour = Duration::from_secs(3600);
    assert!(
        d.process_find_expired(hour, 0, 10).unwrap().is_empty(),
        "none silent an hour"
    );
    // Long enough that the supervisor's heartbeat below is younger than
    // it however loaded the machine (50 ms was not, once in .ci/run).
    let silence = Duration::from_millis(1000);
    let_time_pass(silence);
    assert!(d.process_heartbeat(supervisor).unwrap());
    let silent = |d: &mut dyn Driver, exclude| -> Vec<i64> {
        d.process_find_expired(silence, exclude, 10)
            .unwrap()
            .iter()
            .map(|p| p.id)
            .collect()
    };
    assert_eq!(silent(d, 0), [worker], "the supervisor heartbeated");
    assert!(silent(d, worker).is_empty(), "excluded");
    d.transaction(&mut |d| {
        assert!(
            d.process_lock(worker, Some(hour))?.is_none(),
            "heard within the hour"
        );
        assert!(
            d.process_lock(MISSING[0], None)?.is_none(),
            "no such process"
        );
        let locked = d
            .process_lock(worker, Some(silence))?
            .expect("silent long enough");
        assert_eq!(
            (locked.id, locked.supervisor_id, locked.pid),
            (worker, Some(supervisor), 4712)
        );
        let locked = d.process_lock(supervisor, None)?.expect("any age");
        assert_eq!(locked.id, supervisor);
        Ok(())
    })
    .unwrap();
}

fn finished_jobs_are_deleted_when_their_keep_ends_or_by_age(d: &mut dyn Driver) {
    let p = process(d, "conformance-cleaner");
    let ids: Vec<i64> = inserted(d, &[job(None), job(None)]);
    assert_eq!(claim_ids(d, p, 2), ids);
    let success = |id, keep| Succeeded {
        id,
        result: None,
        keep,
        started_ago: Duration::ZERO,
    };
    let hour = Duration::from_secs(3600);
    assert_eq!(
        d.jobs_succeed_fenced(
            p,
            &[success(ids[0], Duration::ZERO), success(ids[1], hour)],
            &[]
        )
        .unwrap()
        .len(),
        2
    );
    let_time_pass(Duration::from_millis(20));
    assert_eq!(
        d.jobs_delete_finished(None, 10).unwrap(),
        1,
        "the one kept for no time"
    );
    assert_eq!(d.jobs_delete_finished(None, 10).unwrap(), 0, "deleted once");
    assert_eq!(
        d.jobs_delete_finished(Some(hour), 10).unwrap(),
        0,
        "not an hour old"
    );
    assert_eq!(
        d.jobs_delete_finished(Some(Duration::from_millis(10)), 0)
            .unwrap(),
        0,
        "a limit of none"
    );
    assert_eq!(
        d.jobs_delete_finished(Some(Duration::from_millis(10)), 10)
            .unwrap(),
        1,
        "by age, whatever its keep"
    );
    assert!(d.jobs_options(&ids).unwrap().is_empty(), "both gone");
}

fn an_expired_semaphore_is_deleted_and_a_live_one_kept(d: &mut dyn Driver) {
    let short = StoredLimit {
        limit: 1,
        duration_ms: 10,
        on_conflict: OnConflict::Block,
    };
    let long = StoredLimit {
        duration_ms: 3_600_000,
        ..short
    };
    assert!(d.semaphore_acquire("conformance-short", &short).unwrap());
    assert!(d.semaphore_acquire("conformance-long", &long).unwrap());
    let_time_pass(Duration::from_millis(20));
    assert_eq!(
        d.semaphores_delete_expired().unwrap(),
        ["conformance-short"]
    );
    assert!(
        d.semaphores_delete_expired().unwrap().is_empty(),
        "deleted once"
    );
    assert!(
        !d.semaphore_acquire("conformance-long", &long).unwrap(),
        "the live one still holds its slot"
    );
    assert!(
        d.semaphore_acquire("conformance-short", &short).unwrap(),
        "the expired one's key starts afresh"
    );
}

fn tending_the_tables_twice_does_nothing_the_second_time(d: &mut dyn Driver) {
    let ids = d.jobs_insert(&[job(None), job(None)], false).unwrap();
    assert_eq!(ids.len(), 2);
    let first = d.tables_tend().unwrap();
    assert!(
        first.iter().all(|done| done.contains("solidq_")),
        "only solidq's tables: {first:?}"
    );
    assert_eq!(
        d.tables_tend().unwrap(),
        Vec::<String>::new(),
        "after {first:?}"
    );
}
