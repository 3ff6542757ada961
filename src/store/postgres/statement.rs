//! The enqueue statement for a connection solidq does not own: the same
//! single-job insert solidq runs on the caller's diesel connection, notify
//! included, so the job is there (and listeners hear of it) exactly when
//! the caller's transaction commits.

use super::InsertShape;
use crate::store::{NewJob, SqlValue, Statement, micros};

pub(in crate::store) fn enqueue_statement(job: &NewJob) -> Vec<Statement> {
    let shape = InsertShape::of(std::slice::from_ref(job), true);
    let mut params = job.column_values();
    if !shape.immediate {
        params.push(SqlValue::Timestamp(job.run_at));
        params.push(SqlValue::BigInt(Some(micros(job.delay))));
    }
    let mut statements = vec![Statement {
        sql: shape.statement().to_string(),
        params,
    }];
    if crate::store::floor::moves_on(std::slice::from_ref(job)) {
        statements.push(Statement {
            sql: super::floor::MOVE_ON.to_string(),
            params: Vec::new(),
        });
    }
    statements
}
