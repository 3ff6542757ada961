//! Recurring tasks: cron schedules, and the scheduler that enqueues each
//! task once per tick however many schedulers run.

mod cron;
mod runner;
mod task;

pub use cron::{Schedule, ScheduleError};
pub use runner::{Scheduler, SchedulerHandle};
pub use task::RecurringTask;
