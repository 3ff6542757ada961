//! The audit log, on both backends: entries recorded through the library
//! come back newest first, page by page, as stored; bad input is refused
//! naming the field and writes nothing; every CLI command that changes
//! state records itself (source `cli`, actor `$USER@hostname`); and an
//! audit log that cannot be written does not fail a command that worked.

use crate::common;

use std::time::Duration;

use common::jobs::{Echo, Fail};
use common::{TestDb, run_cli};
use solidq::{AuditSource, EnqueueOptions, Error, JobStatus, NewAuditEntry};

backend_tests!(
    entries_come_back_newest_first_page_by_page,
    bad_entries_are_refused_naming_the_field_and_write_nothing,
    cli_commands_that_change_state_record_themselves,
    a_failed_audit_write_does_not_fail_the_command,
);

fn entries_come_back_newest_first_page_by_page(db: &TestDb) {
    let queue = db.queue();
    assert!(queue.audit_log(10, None).unwrap().is_empty());
    let before = chrono::Utc::now() - chrono::Duration::seconds(5);
    let mut recorded = Vec::new();
    for n in 0..5u64 {
        let entry = NewAuditEntry::new(
            AuditSource::ALL[n as usize % 4],
            format!("user{n}@example.com"),
            "retry",
            format!("{{\"kind\":\"mail\",\"n\":{n}}}"),
            n * 10,
        );
        let stored = queue.record_audit(&entry).unwrap();
        assert_eq!(stored.actor, entry.actor);
        assert_eq!(stored.source, entry.source);
        assert_eq!(stored.target, entry.target);
        assert_eq!(stored.rows, n * 10);
        assert!(stored.created_at > before, "{}", stored.created_at);
        recorded.push(stored);
    }
    let all = queue.audit_log(100, None).unwrap();
    let newest_first: Vec<_> = recorded.iter().rev().cloned().collect();
    assert_eq!(all, newest_first, "as stored, newest first");
    let page = queue.audit_log(2, None).unwrap();
    assert_eq!(page, newest_first[..2]);
    let next = queue.audit_log(2, Some(page[1].id)).unwrap();
    assert_eq!(next, newest_first[2..4]);
    let last = queue.audit_log(2, Some(next[1].id)).unwrap();
    assert_eq!(last, newest_first[4..]);
    assert!(queue.audit_log(0, None).unwrap().is_empty());
    let json = serde_json::to_value(&all[0]).unwrap();
    assert_eq!(json["source"], all[0].source.as_str());
    assert_eq!(json["rows"], 40);
}

fn bad_entries_are_refused_naming_the_field_and_write_nothing(db: &TestDb) {
    let queue = db.queue();
    let cases = [
        (
            NewAuditEntry::new(AuditSource::Web, "alice", "", "7", 1),
            "audit action",
            "\"\"",
        ),
        (
            NewAuditEntry::new(AuditSource::Web, "alice", "retry", "7\0 8", 1),
            "audit target",
            "7\\0 8",
        ),
        (
            NewAuditEntry::new(AuditSource::Api, "al\0ice", "retry", "7", 1),
            "audit actor",
            "al\\0ice",
        ),
        (
            NewAuditEntry::new(AuditSource::Api, "alice", "retry", "x".repeat(1 << 20), 1),
            "audit target",
            "1048576 bytes",
        ),
    ];
    for (entry, field, value) in cases {
        match queue.record_audit(&entry) {
            Err(error @ Error::InvalidOption { .. }) => {
                let text = error.to_string();
                assert!(
                    text.contains(field) && text.contains(value),
                    "names {field} and {value}: {text}"
                );
                assert!(
                    text.len() < 400,
                    "a long value is cut: {} bytes",
                    text.len()
                );
            }
            other => panic!("{entry:?}: expected InvalidOption, got {other:?}"),
        }
    }
    assert!(queue.audit_log(10, None).unwrap().is_empty());
}

/// The CLI's actor: `$USER@hostname` as the child sees it.
fn local_actor_suffix() -> String {
    format!("@{}", gethostname())
}

fn gethostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

fn cli(db: &TestDb, args: &[&str]) -> String {
    let (code, out, err) = run_cli(db, args);
    assert_eq!(code, 0, "{args:?}: {err}");
    out
}

fn cli_commands_that_change_state_record_themselves(db: &TestDb) {
    let queue = db.queue();
    let failed: Vec<i64> = (0..3)
        .map(|n| {
            queue
                .enqueue(&Fail {
                    message: format!("boom {n}"),
                })
                .unwrap()
        })
        .collect();
    let worker = common::jobs::worker(queue.clone()).start().unwrap();
    common::wait_for("three failures", Duration::from_secs(30), || {
        failed
            .iter()
            .all(|id| queue.job(*id).unwrap().status == JobStatus::Failed)
    });
    worker.stop().unwrap();
    let later = queue
        .enqueue_with(
            &Echo { value: 1.into() },
            EnqueueOptions::new()
                .queue("mail")
                .delay(Duration::from_secs(3600)),
        )
        .unwrap();

    cli(db, &["pause", "mail"]);
    cli(db, &["resume", "mail"]);
    cli(db, &["failed", "retry", &failed[0].to_string()]);
    cli(db, &["failed", "discard", "--kind", "fail"]);
    cli(db, &["job", "run-now", &later.to_string()]);
    let out = cli(
        db,
        &["enqueue", "echo", "--args", "{\"value\":2}", "--json"],
    );
    let enqueued: serde_json::Value = serde_json::from_str(&out).unwrap();
    cli(db, &["jobs", "cancel", "--queue", "mail"]);
    // Nothing to delete: exit 1 (issue 26 item 3), and still recorded
    // with its 0 rows.
    let (code, _, err) = run_cli(db, &["clear-finished", "--older-than", "1h"]);
    assert_eq!(code, 1, "{err}");

    let log = queue.audit_log(100, None).unwrap();
    let seen: Vec<(&str, &str, u64)> = log
        .iter()
        .rev()
        .map(|e| (e.action.as_str(), e.target.as_str(), e.rows))
        .collect();
    let enqueued_id = enqueued["id"].to_string();
    assert_eq!(
        seen,
        [
            ("pause", "mail", 1),
            ("resume", "mail", 1),
            ("retry", failed[0].to_string().as_str(), 1),
            ("discard", r#"{"kind":"fail"}"#, 2),
            ("run_now", later.to_string().as_str(), 1),
            ("enqueue", enqueued_id.as_str(), 1),
            ("cancel", r#"{"limit":100000,"queue":"mail"}"#, 1),
            ("clear_finished", r#"{"older_than":"1h"}"#, 0),
        ]
    );
    for entry in &log {
        assert_eq!(entry.source, AuditSource::Cli);
        assert!(
            entry.actor.ends_with(&local_actor_suffix())
                && entry.actor.len() > 1 + gethostname().len(),
            "actor {:?} is user@host",
            entry.actor
        );
    }
}

fn a_failed_audit_write_does_not_fail_the_command(db: &TestDb) {
    let queue = db.queue();
    queue
        .enqueue_with(
            &Echo { value: 1.into() },
            EnqueueOptions::new().queue("mail"),
        )
        .unwrap();
    db.execute("DROP TABLE solidq_audit_log");
    let (code, _, err) = run_cli(db, &["pause", "mail"]);
    assert_eq!(code, 0, "the pause worked: {err}");
    assert!(
        err.contains("could not be recorded in the audit log"),
        "a warning says so: {err}"
    );
    assert!(queue.queue_stats("mail").unwrap().paused);
}
