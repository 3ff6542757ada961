//! A panic's stored backtrace, user's frames first: `solidq job ID` (unless
//! `--full`) and the dashboard's job page (behind a second toggle) hide
//! the frames of solidq, the standard library and the runtime (thread
//! start, panic machinery); the panic's location line and every other
//! line stay.

/// Symbol prefixes of frames that are not the user's code.
const INTERNAL: &[&str] = &[
    "std::",
    "core::",
    "alloc::",
    "solidq::",
    "solidq_cli::",
    "backtrace::",
    "crossbeam_channel::",
    "panic_unwind::",
    "F as ",
    "__rust",
    "rust_begin_unwind",
    "rust_panic",
    "__libc_start",
    "__GI_",
    "_start",
    "start_thread",
    "clone",
    "__clone",
    "<unknown>",
];

/// `backtrace` without the frames of solidq, std and the runtime, with a
/// last line saying how many were hidden (none: unchanged).
pub(crate) fn user_frames(backtrace: &str) -> String {
    let mut kept: Vec<&str> = Vec::new();
    let mut hidden = 0usize;
    let mut hiding = false;
    let mut in_frames = false;
    for line in backtrace.lines() {
        let trimmed = line.trim_start();
        if let Some(symbol) = frame_symbol(trimmed) {
            in_frames = true;
            hiding = is_internal(symbol);
            if hiding {
                hidden += 1;
                continue;
            }
        } else if in_frames && trimmed.starts_with("at ") && hiding {
            continue;
        }
        kept.push(line);
    }
    let mut text = kept.join("\n");
    if hidden > 0 {
        text.push_str(&format!(
            "\n({hidden} frames of solidq, the standard library and the runtime hidden; --full shows them)"
        ));
    }
    text
}

/// The symbol of a frame line (`12: crate::module::function`).
fn frame_symbol(line: &str) -> Option<&str> {
    let (number, symbol) = line.split_once(": ")?;
    (!number.is_empty() && number.bytes().all(|b| b.is_ascii_digit())).then_some(symbol)
}

fn is_internal(symbol: &str) -> bool {
    let symbol = symbol.trim_start_matches('<');
    INTERNAL.iter().any(|prefix| symbol.starts_with(prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_frames_stay_and_the_rest_is_counted() {
        let stored = "panicked at src/jobs.rs:10:5\n   0: std::backtrace::Backtrace::capture\n             at /rustc/x/library/std/src/backtrace.rs:1:1\n   1: <myapp::SendEmail as solidq::job::Job>::perform\n             at ./src/jobs.rs:10:5\n   2: solidq::worker::executor::run\n             at ./src/worker/executor.rs:1:1\n   3: myapp::helpers::send\n   4: __rust_try";
        assert_eq!(
            user_frames(stored),
            "panicked at src/jobs.rs:10:5\n   1: <myapp::SendEmail as solidq::job::Job>::perform\n             at ./src/jobs.rs:10:5\n   3: myapp::helpers::send\n(3 frames of solidq, the standard library and the runtime hidden; --full shows them)"
        );
        assert_eq!(
            user_frames("panicked at src/a.rs:1:1"),
            "panicked at src/a.rs:1:1"
        );
    }
}
