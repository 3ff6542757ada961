//! Runs one claimed job on the current thread and turns what happened into
//! an [`Outcome`]: success, a retry with its delay, or a final failure.
//! Panics are caught (`catch_unwind`) with their message and location.

use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

use chrono::Utc;

use super::registry::Registry;
use super::transaction::Finisher;
use crate::config::DEFAULT_MAX_SNOOZES;
use crate::job::{HandBack, JobContext, JobError, ProgressCell, ShutdownSignal, StepBook};
use crate::store::{ClaimedJob, DISCARDED, Outcome, StoredOptions};
use crate::types::{Delivery, ErrorInfo};

thread_local! {
    /// `Some` on executor threads: the panic hook leaves the panic's
    /// location and backtrace here instead of printing it.
    static PANIC_CAPTURE: RefCell<Option<Option<String>>> = const { RefCell::new(None) };
}

/// Installs (once per process) a panic hook that captures panics on
/// executor threads and defers to the previous hook everywhere else.
pub(crate) fn install_panic_capture() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let captured = PANIC_CAPTURE.with(|slot| {
                let mut slot = slot.borrow_mut();
                match slot.as_mut() {
                    Some(capture) => {
                        let location = info
                            .location()
                            .map(|l| {
                                format!("panicked at {}:{}:{}", l.file(), l.line(), l.column())
                            })
                            .unwrap_or_default();
                        let backtrace = std::backtrace::Backtrace::capture();
                        *capture = Some(match backtrace.status() {
                            std::backtrace::BacktraceStatus::Captured => {
                                format!("{location}\n{backtrace}")
                            }
                            _ => location,
                        });
                        true
                    }
                    None => false,
                }
            });
            if !captured {
                previous(info);
            }
        }));
    });
}

/// Marks the current thread as an executor for the panic hook.
pub(crate) fn arm_panic_capture() {
    PANIC_CAPTURE.with(|slot| *slot.borrow_mut() = Some(None));
}

/// Gives the current thread's panics back to the previous hook (a thread
/// that ran jobs for a while: a drain in the caller's thread).
pub(crate) fn disarm_panic_capture() {
    PANIC_CAPTURE.with(|slot| *slot.borrow_mut() = None);
}

/// What running a job came to, with the facts the worker logs.
pub(crate) struct Execution {
    pub outcome: Outcome,
    pub elapsed: Duration,
    /// The error's kind and message, for logs; `None` on success.
    pub error: Option<(String, String)>,
    /// When the attempt started; `None` when it did not (cancelled before
    /// this claim of it started).
    pub started: Option<Instant>,
    /// Already recorded: the job committed its success in its own
    /// transaction.
    pub recorded: bool,
}

/// What an attempt shares with its worker while it runs: where its
/// progress goes, the operator's cancel, and the way to finish in its own
/// transaction.
pub(crate) struct Attempt {
    pub progress: Option<Arc<ProgressCell>>,
    pub cancel: Arc<AtomicBool>,
    pub finisher: Option<Arc<Finisher>>,
}

/// Runs `job` and decides its outcome.
pub(crate) fn execute(
    job: &ClaimedJob,
    options: &StoredOptions,
    started: Instant,
    registry: &Registry,
    shutdown: &Arc<ShutdownSignal>,
    attempt: Attempt,
) -> Execution {
    let Attempt {
        progress,
        cancel,
        finisher,
    } = attempt;
    if cancel.load(Ordering::SeqCst) {
        // Asked to stop while a worker that is gone held it: not run.
        return cancelled(job, options, Duration::ZERO, None, None);
    }
    let attempt = u32::try_from(job.attempts).unwrap_or(0).saturating_add(1);
    let max_attempts = u32::try_from(job.max_attempts).unwrap_or(1).max(1);
    let deadline = deadline(options, started);
    let ctx = JobContext {
        id: job.id,
        kind: job.kind.clone(),
        queue: job.queue_name.clone(),
        attempt,
        max_attempts,
        stalled_count: u32::try_from(job.stalled_count).unwrap_or(0),
        snoozes: u32::try_from(job.snoozes).unwrap_or(0),
        enqueued_at: job.created_at.and_utc(),
        deadline,
        shutdown: Arc::clone(shutdown),
        state: registry.state.clone(),
        progress,
        steps: StepBook::load(job.id, job.checkpoint.as_deref()),
        batch_id: job.batch_id,
        cancel: Arc::clone(&cancel),
        finish: finisher
            .as_ref()
            .map(|f| Arc::clone(f) as Arc<dyn std::any::Any + Send + Sync>),
    };

    let ran = catch_unwind(AssertUnwindSafe(|| {
        registry.run(&job.kind, &job.arguments, &ctx)
    }));
    let elapsed = started.elapsed();
    // A job that committed its success in its own transaction succeeded,
    // whatever it did after.
    if let Some(result) = finisher.as_ref().and_then(|f| f.recorded()) {
        if !matches!(ran, Ok(Some(Ok(_)))) {
            log::warn!(
                "job {} committed its success in its transaction, then ended with an error or a panic; it stays succeeded",
                job.id
            );
        }
        return succeeded(result, options, elapsed, started, true);
    }
    let timed_out = deadline.is_some_and(|d| Instant::now() > d);
    // Cancelled and ended with any error (a panic, a snooze, an
    // interruption): discarded, whatever attempts or snoozes are left.
    // The job's own error is kept beside the operator's reason.
    if cancel.load(Ordering::SeqCst) && !matches!(ran, Ok(Some(Ok(_)))) {
        let own = match &ran {
            Err(payload) => (
                "panic".to_string(),
                crate::types::panic_message(payload.as_ref()),
            ),
            Ok(None) => (
                "unknown_kind".to_string(),
                format!("no job type registered for kind {:?}", job.kind),
            ),
            Ok(Some(Err(e))) => (e.kind.clone(), e.message.clone()),
            Ok(Some(Ok(_))) => unreachable!("checked above"),
        };
        return cancelled(job, options, elapsed, Some(started), Some(own));
    }

    let failure: Result<Option<String>, (ErrorInfo, bool)> = match ran {
        Err(payload) => {
            let message = crate::types::panic_message(payload.as_ref());
            let backtrace =
                PANIC_CAPTURE.with(|slot| slot.borrow_mut().as_mut().and_then(Option::take));
            Err((info("panic", message, backtrace, attempt), true))
        }
        Ok(None) => {
            let known = registry.kinds().join(", ");
            Err((
                info(
                    "unknown_kind",
                    format!(
                        "no job type registered for kind {:?} on this worker (registered: {known})",
                        job.kind
                    ),
                    None,
                    attempt,
                ),
                false,
            ))
        }
        Ok(Some(Err(JobError {
            hand_back: Some(hand_back),
            ..
        }))) if !timed_out => {
            return hand_back_execution(job, options, hand_back, elapsed, attempt, started);
        }
        Ok(Some(Err(JobError {
            kind,
            message,
            backtrace,
            retry,
            ..
        }))) => Err((info(&kind, message, backtrace, attempt), retry)),
        Ok(Some(Ok(value))) => {
            // Stored as JSON text: one over the limit fails the job, for
            // good (running it again would give the same), never cut.
            let text = (!value.is_null()).then(|| value.to_string());
            let size = text.as_ref().map_or(0, String::len);
            match registry.payload.check("result", &job.kind, size) {
                Ok(()) => Ok(text),
                Err(error) => Err((
                    info(
                        "result_too_large",
                        format!("{error}; the result was not stored"),
                        None,
                        attempt,
                    ),
                    false,
                )),
            }
        }
    };
    // A job that returns after its deadline failed by timeout, whatever it
    // returned: its caller was promised an answer by then.
    let failure = match failure {
        Ok(_) if timed_out => Err((timeout_info(options.timeout_ms, elapsed, attempt), true)),
        Err((e, retryable)) if timed_out && e.kind != "unknown_kind" => {
            let mut t = timeout_info(options.timeout_ms, elapsed, attempt);
            t.message = format!(
                "{}; the attempt also failed: {}: {}",
                t.message, e.kind, e.message
            );
            Err((t, retryable))
        }
        other => other,
    };

    match failure {
        Ok(result) => succeeded(result, options, elapsed, started, false),
        Err((error, retryable)) => {
            let summary = Some((error.kind.clone(), error.message.clone()));
            let at_most_once_timeout = error.kind == "timeout"
                && Delivery::from_column(&job.delivery) == Delivery::AtMostOnce;
            let outcome = if retryable && attempt < max_attempts && !at_most_once_timeout {
                let by_policy = || options.backoff.delay(attempt, fastrand::f64());
                let delay = match registry.retry_delay(&job.kind) {
                    // User code: a panic in it must not take the thread.
                    Some(retry_delay) => catch_unwind(AssertUnwindSafe(|| {
                        retry_delay(attempt, &error, &options.backoff)
                    }))
                    .unwrap_or_else(|payload| {
                        let location = PANIC_CAPTURE
                            .with(|slot| slot.borrow_mut().as_mut().and_then(Option::take));
                        log::error!(
                            "retry_delay of job kind {:?} panicked ({}{}); job {} waits by its backoff policy instead",
                            job.kind,
                            crate::types::panic_message(payload.as_ref()),
                            location.map(|l| format!(", {}", l.lines().next().unwrap_or(""))).unwrap_or_default(),
                            job.id
                        );
                        by_policy()
                    }),
                    None => by_policy(),
                };
                let mut error = error;
                error.retry_in_ms = Some(delay.as_millis() as u64);
                Outcome::Retry {
                    error: error.to_stored_json(),
                    delay,
                }
            } else {
                Outcome::Failed {
                    error: error.to_stored_json(),
                }
            };
            Execution {
                outcome,
                elapsed,
                error: summary,
                started: Some(started),
                recorded: false,
            }
        }
    }
}

/// A success with `result`; `recorded` when the job's own transaction
/// already wrote it.
fn succeeded(
    result: Option<String>,
    options: &StoredOptions,
    elapsed: Duration,
    started: Instant,
    recorded: bool,
) -> Execution {
    Execution {
        outcome: Outcome::Succeeded {
            result,
            keep: Duration::from_millis(options.keep_result_ms),
        },
        elapsed,
        error: None,
        started: Some(started),
        recorded,
    }
}

/// A job an operator cancelled: finished as discarded. `started` when its
/// attempt ran (it then counts as an attempt), with the error the job
/// itself ended with (`own`: kind and message), kept in the message.
fn cancelled(
    job: &ClaimedJob,
    options: &StoredOptions,
    elapsed: Duration,
    started: Option<Instant>,
    own: Option<(String, String)>,
) -> Execution {
    let message = match (&started, own) {
        (None, _) => "cancelled by an operator before this claim of it started".to_string(),
        (Some(_), None) => "cancelled by an operator while it ran".to_string(),
        (Some(_), Some((kind, message))) => {
            format!("cancelled by an operator while it ran; the job ended with {kind}: {message}")
        }
    };
    let error = ErrorInfo {
        kind: DISCARDED.into(),
        message,
        backtrace: None,
        attempt: Some(u32::try_from(job.attempts).unwrap_or(0).saturating_add(1)),
        at: Some(Utc::now()),
        retry_in_ms: None,
    };
    Execution {
        outcome: Outcome::Discarded {
            error: error.to_stored_json(),
            keep: Duration::from_millis(options.keep_result_ms),
        },
        elapsed,
        error: Some((error.kind, error.message)),
        started,
        recorded: false,
    }
}

/// A job that handed itself back: snoozed (or interrupted) without spending
/// an attempt, unless it has used up its snoozes, which fails it.
fn hand_back_execution(
    job: &ClaimedJob,
    options: &StoredOptions,
    hand_back: HandBack,
    elapsed: Duration,
    attempt: u32,
    started: Instant,
) -> Execution {
    let max = options.max_snoozes.unwrap_or(DEFAULT_MAX_SNOOZES);
    let (delay, asked) = match hand_back {
        HandBack::Snooze(delay) => (delay, format!("a snooze of {delay:?}")),
        HandBack::Interrupted => (
            Duration::ZERO,
            "to be handed back after an interruption".into(),
        ),
    };
    if u32::try_from(job.snoozes).unwrap_or(u32::MAX) >= max {
        let error = info(
            "snoozed_too_often",
            format!(
                "handed back {} times, its max_snoozes; asked for {asked} once more",
                job.snoozes
            ),
            None,
            attempt,
        );
        return Execution {
            error: Some((error.kind.clone(), error.message.clone())),
            outcome: Outcome::Failed {
                error: error.to_stored_json(),
            },
            elapsed,
            started: Some(started),
            recorded: false,
        };
    }
    Execution {
        outcome: Outcome::Snoozed { delay },
        elapsed,
        error: None,
        started: Some(started),
        recorded: false,
    }
}

/// When an attempt started at `started` must be done, if it has a timeout.
pub(crate) fn deadline(options: &StoredOptions, started: Instant) -> Option<Instant> {
    options
        .timeout_ms
        .map(|ms| started + Duration::from_millis(ms))
}

fn info(kind: &str, message: String, backtrace: Option<String>, attempt: u32) -> ErrorInfo {
    ErrorInfo {
        kind: kind.to_string(),
        message,
        backtrace,
        attempt: Some(attempt),
        at: Some(Utc::now()),
        retry_in_ms: None,
    }
}

fn timeout_info(timeout_ms: Option<u64>, elapsed: Duration, attempt: u32) -> ErrorInfo {
    info(
        "timeout",
        format!(
            "attempt ran {:.3}s, past its timeout of {:.3}s",
            elapsed.as_secs_f64(),
            Duration::from_millis(timeout_ms.unwrap_or(0)).as_secs_f64()
        ),
        None,
        attempt,
    )
}
