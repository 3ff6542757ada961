//! Every command that changes state records itself in the audit log
//! (source `cli`, actor `$USER@hostname`) once its action succeeded. An
//! entry that cannot be written is a warning, never a failed command: the
//! action happened, and saying it failed would invite a second one.

use solidq::{AuditSource, NewAuditEntry, Queue};

/// Records `action` on `target`, which changed `rows` rows.
pub(super) fn record(queue: &Queue, action: &str, target: &str, rows: u64) {
    let entry = NewAuditEntry::by_local_user(AuditSource::Cli, action, target, rows);
    if let Err(error) = queue.record_audit(&entry) {
        log::warn!(
            "{action} {target} done ({rows} rows), but it could not be recorded in the audit log: {error}"
        );
    }
}

/// The target of an action on jobs by id: the id of one job, else
/// `{"ids":[…]}`.
pub(super) fn ids(ids: &[i64]) -> String {
    match ids {
        [id] => id.to_string(),
        _ => serde_json::json!({ "ids": ids }).to_string(),
    }
}

/// The target of an action on a filter: its conditions as a JSON object,
/// those not given left out.
pub(super) fn filter(conditions: &[(&str, Option<serde_json::Value>)]) -> String {
    let object: serde_json::Map<String, serde_json::Value> = conditions
        .iter()
        .filter_map(|(name, value)| value.clone().map(|v| (name.to_string(), v)))
        .collect();
    serde_json::Value::Object(object).to_string()
}
