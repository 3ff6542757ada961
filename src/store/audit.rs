//! The audit log: one row per operator action that changed state. Rows
//! are written one at a time (an action is rare) and read newest first.
//! The time is the backend's clock (the database's on PostgreSQL).

use chrono::NaiveDateTime;
use diesel::prelude::*;

use super::schema::solidq_audit_log as audit;
use super::{Store, driver};
use crate::types::Result;

/// An audit entry to store, validated by the caller.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NewAudit<'a> {
    pub actor: &'a str,
    pub source: &'a str,
    pub action: &'a str,
    pub target: &'a str,
    pub rows: i64,
}

/// A stored audit entry.
#[derive(Debug, Clone, PartialEq, Eq, QueryableByName, Queryable)]
pub(crate) struct AuditRow {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub id: i64,
    #[diesel(sql_type = diesel::sql_types::Timestamp)]
    pub created_at: NaiveDateTime,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub actor: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub source: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub action: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub target: String,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub rows: i64,
}

impl Store {
    /// Stores one audit entry; returns it as stored (its id and time).
    pub(crate) fn audit_insert(&self, entry: &NewAudit<'_>) -> Result<AuditRow> {
        self.with_conn("audit_insert", |conn| driver(conn).audit_insert(entry))
    }

    /// Up to `limit` entries, newest first, only those older than entry
    /// `before` when given.
    pub(crate) fn audit_list(&self, limit: usize, before: Option<i64>) -> Result<Vec<AuditRow>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.with_read("audit_list", |conn| {
            let mut query = audit::table
                .select((
                    audit::id,
                    audit::created_at,
                    audit::actor,
                    audit::source,
                    audit::action,
                    audit::target,
                    audit::rows,
                ))
                .order(audit::id.desc())
                .limit(limit)
                .into_boxed();
            if let Some(before) = before {
                query = query.filter(audit::id.lt(before));
            }
            query.load(conn)
        })
    }
}
