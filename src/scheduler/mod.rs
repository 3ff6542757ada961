//! Recurring tasks: cron schedules, and the scheduler that enqueues each
//! task once per tick however many schedulers run.

mod cron;

pub use cron::{Schedule, ScheduleError};
