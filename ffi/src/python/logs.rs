//! The library's log lines handed to Python's `logging` (logger `redlock_sdk`), through a ctypes
//! callback the package registers at import (`_logs.py`).

use std::ffi::{c_char, c_int};
use std::sync::Arc;

use redlock_core::logs::{LogRecord, LogSink, forward_logs, level_from_number, level_number};

use super::events::InPython;

/// `(level 1 error .. 5 trace, target, message)`: a ctypes function, which takes the GIL itself.
pub type PythonLogFn =
    unsafe extern "C" fn(level: c_int, target: *const c_char, message: *const c_char);

/// Sends the log lines at `level` (1 error .. 5 trace) or more severe to `callback`; 0 or a NULL
/// callback stops them. Returns 0, or 1 for a level out of range, or 2 when the process has a
/// Rust `tracing` subscriber of its own already. No line enters Python once it is exiting (see
/// `events::InPython`).
#[unsafe(no_mangle)]
pub extern "C" fn redlock_python_forward_logs(
    level: c_int,
    callback: Option<PythonLogFn>,
) -> c_int {
    let Ok(wanted) = level_from_number(i64::from(level)) else {
        return 1;
    };
    let sink = callback.map(|function| {
        Arc::new(move |record: &LogRecord<'_>| {
            let Some(_in_python) = InPython::enter() else {
                return;
            };
            let target = crate::c_text::nul_replaced(record.target);
            let message = crate::c_text::nul_replaced(record.message);
            let level = c_int::from(level_number(record.level));
            // SAFETY: a ctypes function of this signature, kept alive by the package for the
            // life of the process; both strings live through the call.
            unsafe { function(level, target.as_ptr(), message.as_ptr()) }
        }) as LogSink
    });
    // Not a panic across the boundary: forward_logs does not panic; its error is one case.
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| forward_logs(wanted, sink))) {
        Ok(Ok(())) => 0,
        _ => 2,
    }
}
