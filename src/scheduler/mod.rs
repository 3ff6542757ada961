//! Recurring tasks on cron schedules ([`crate::Schedule`]), and the scheduler that enqueues each
//! task once per tick however many schedulers run.

mod clock;
mod runner;
mod task;

pub use runner::{Scheduler, SchedulerHandle};
pub use task::RecurringTask;
