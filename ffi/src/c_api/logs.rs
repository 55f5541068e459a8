//! The library's log lines (a lost hold, a failed renewal, a contention alert, ...) handed to a
//! C callback, for hosts that log in their own way (Go's binding passes them to `slog`).

#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_void};
use std::sync::Arc;

use redlock_core::logs::{Level, LogRecord, forward_logs, level_from_number, level_number};

use super::error::{FfiError, rl_error};
use super::guard::guard;
use super::status::rl_status;

/// How severe a log line is; `rl_set_log_callback` takes the least severe one wanted.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rl_log_level {
    /// No line (turns forwarding off).
    #[allow(dead_code)] // C passes it as an int
    RL_LOG_OFF = 0,
    RL_LOG_ERROR = 1,
    RL_LOG_WARN = 2,
    RL_LOG_INFO = 3,
    RL_LOG_DEBUG = 4,
    RL_LOG_TRACE = 5,
}

/// Called with NUL-terminated UTF-8 valid only during the call: `target` is where the line comes
/// from (a module path), `message` the line with its fields (`key=value`). Called on a thread the
/// library keeps for its log lines, one line at a time, in order: a slow callback holds up none
/// of the library's work (past 1024 lines waiting, lines are dropped and a warn line counts
/// them). Must not call `rl_set_log_callback`, and must not unwind into the library.
pub type rl_log_fn = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        level: rl_log_level,
        target: *const c_char,
        message: *const c_char,
    ),
>;

/// Sends the library's log lines at `level` (an `rl_log_level`) or more severe to `callback`
/// with `user_data`, in this whole process; `RL_LOG_OFF` or a NULL callback stops them. A new
/// call replaces the callback before. A thread already inside the old callback may still be
/// there when this returns: keep `user_data` valid for the life of the process.
///
/// Fails with `RL_INVALID_ARGUMENT` for a level out of range, or when the process already has
/// a Rust `tracing` subscriber of its own (which then gets the lines).
///
/// # Safety
/// `callback` is NULL or a function of the signature above, safe to call from any thread with
/// `user_data`; `err` is NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_set_log_callback(
    level: c_int,
    callback: rl_log_fn,
    user_data: *mut c_void,
    err: *mut rl_error,
) -> rl_status {
    guard(err, || {
        let wanted = level_from_number(i64::from(level))?;
        // An address the library only hands back (the caller vouches for its thread safety).
        let user_data = user_data as usize;
        let sink = callback.map(|function| {
            Arc::new(move |record: &LogRecord<'_>| {
                let target = crate::c_text::nul_replaced(record.target);
                let message = crate::c_text::nul_replaced(record.message);
                // SAFETY: per this function's contract; both strings live through the call.
                unsafe {
                    function(
                        user_data as *mut c_void,
                        level_of(record.level),
                        target.as_ptr(),
                        message.as_ptr(),
                    )
                }
            }) as redlock_core::logs::LogSink
        });
        forward_logs(wanted, sink).map_err(FfiError::from)
    })
}

fn level_of(level: Level) -> rl_log_level {
    match level_number(level) {
        1 => rl_log_level::RL_LOG_ERROR,
        2 => rl_log_level::RL_LOG_WARN,
        3 => rl_log_level::RL_LOG_INFO,
        4 => rl_log_level::RL_LOG_DEBUG,
        _ => rl_log_level::RL_LOG_TRACE,
    }
}
