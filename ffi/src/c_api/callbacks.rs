//! Lock-lost and contention callbacks: C function pointers with user data.
//!
//! The core calls them on a blocking-pool thread, one at a time per client. Each client has a gate so that once
//! `rl_client_close` (or `rl_client_free`) returns, no callback of that client is running or will
//! start: the caller may then free its `user_data`.

#![allow(non_camel_case_types)]

use std::cell::Cell;
use std::ffi::{CString, c_char, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError};

use redlock_core::{ContentionAlert, LockLostEvent};

use super::inspect::holders_json;
use super::status::rl_mode;

/// A hold this client's watchdog kept alive is gone from Redis. Valid only during the call.
#[repr(C)]
pub struct rl_lock_lost_event {
    /// The lock name (NUL-terminated UTF-8).
    pub name: *const c_char,
    /// The view that was held.
    pub mode: rl_mode,
    /// The owner token of the lost hold.
    pub owner_token: *const c_char,
}

/// A waiter passed the client's contention threshold (a possible dead lock). Valid only during
/// the call.
#[repr(C)]
pub struct rl_contention_alert {
    /// The lock name (NUL-terminated UTF-8).
    pub name: *const c_char,
    /// The view the waiter asks for.
    pub mode: rl_mode,
    /// The waiting owner's token.
    pub owner_token: *const c_char,
    /// How long the waiter has waited so far, in milliseconds.
    pub waited_ms: u64,
    /// How many attempts found the lock taken.
    pub failed_attempts: u64,
    /// The holders at the time of the alert: a JSON array as in `rl_lock_inspect`'s "holders".
    pub holders_json: *const c_char,
}

/// Called on a library thread when a watched hold is lost. A client's callbacks run one at a
/// time, in the order raised: a slow one delays that client's later ones (never a lock call or
/// a renewal). Must return promptly and must not unwind (no C++ exceptions, no Go panics) into
/// the library.
pub type rl_lock_lost_fn =
    Option<unsafe extern "C" fn(user_data: *mut c_void, event: *const rl_lock_lost_event)>;

/// Called on a library thread, once per waiting acquire that passes the contention threshold;
/// after the client's earlier callbacks, as `rl_lock_lost_fn`. Must return promptly and must
/// not unwind into the library.
pub type rl_contention_fn =
    Option<unsafe extern "C" fn(user_data: *mut c_void, alert: *const rl_contention_alert)>;

/// A C callback and its user data. The pointer is kept as an integer: the library never
/// dereferences it, it only hands it back, and the caller vouches for its thread safety.
#[derive(Clone, Copy)]
pub(crate) struct CCallback<F> {
    pub(crate) function: F,
    pub(crate) user_data: usize,
}

thread_local! {
    /// The gate whose callback this thread runs (its address; 0: none), so that closing a
    /// client from inside its own callback does not wait for itself. Per gate, not a flag: a
    /// callback of one client that closes another must still wait for that one's callback.
    static IN_CALLBACK_OF: Cell<usize> = const { Cell::new(0) };
}

/// Lets callbacks run until the client is closed, and makes closing wait for a running one.
pub(crate) struct CallbackGate {
    closed: AtomicBool,
    /// Per process: a child must not inherit it locked by a parent's callback thread.
    running: redlock_core::blocking::PerProcess<()>,
}

impl Default for CallbackGate {
    fn default() -> Self {
        CallbackGate {
            closed: AtomicBool::new(false),
            running: redlock_core::blocking::PerProcess::new(()),
        }
    }
}

impl CallbackGate {
    fn run(&self, callback: impl FnOnce()) {
        let _running = self
            .running
            .slot()
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        let outer = IN_CALLBACK_OF.replace(self.address());
        callback();
        IN_CALLBACK_OF.set(outer);
    }

    /// After this returns no callback of the gate runs (unless called from inside one of its
    /// own, which cannot wait for itself). Two clients' callbacks that close each other's client
    /// at the same moment wait for each other: close another client after its callbacks.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        if IN_CALLBACK_OF.get() != self.address() {
            drop(
                self.running
                    .slot()
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner),
            );
        }
    }

    fn address(&self) -> usize {
        self as *const Self as usize
    }
}

type LostFn = unsafe extern "C" fn(*mut c_void, *const rl_lock_lost_event);
type ContentionFn = unsafe extern "C" fn(*mut c_void, *const rl_contention_alert);

/// The core callback that forwards lock-lost events to C.
pub(crate) fn lost_forwarder(
    callback: CCallback<LostFn>,
    gate: Arc<CallbackGate>,
) -> impl Fn(&LockLostEvent) + Send + Sync + 'static {
    move |event| {
        let name = c_text(&event.name);
        let token = c_text(&event.owner_token);
        let c_event = rl_lock_lost_event {
            name: name.as_ptr(),
            mode: event.mode.into(),
            owner_token: token.as_ptr(),
        };
        // SAFETY: the caller registered this function for exactly these arguments; the event
        // and its strings outlive the call.
        gate.run(|| unsafe { (callback.function)(callback.user_data as *mut c_void, &c_event) });
    }
}

/// The core callback that forwards contention alerts to C.
pub(crate) fn contention_forwarder(
    callback: CCallback<ContentionFn>,
    gate: Arc<CallbackGate>,
) -> impl Fn(&ContentionAlert) + Send + Sync + 'static {
    move |alert| {
        let name = c_text(&alert.name);
        let token = c_text(&alert.owner_token);
        let holders = c_text(&holders_json(&alert.holders).to_string());
        let c_alert = rl_contention_alert {
            name: name.as_ptr(),
            mode: alert.mode.into(),
            owner_token: token.as_ptr(),
            waited_ms: alert.waited.as_millis() as u64,
            failed_attempts: alert.failed_attempts,
            holders_json: holders.as_ptr(),
        };
        // SAFETY: as in `lost_forwarder`.
        gate.run(|| unsafe { (callback.function)(callback.user_data as *mut c_void, &c_alert) });
    }
}

/// A temporary C string for the duration of a callback (NUL bytes inside become U+FFFD).
fn c_text(text: &str) -> CString {
    CString::new(text.replace('\0', "\u{FFFD}")).unwrap_or_default()
}

pub(crate) type LostCallback = CCallback<LostFn>;
pub(crate) type ContentionCallback = CCallback<ContentionFn>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn closing_a_client_from_its_own_callback_does_not_wait_for_itself() {
        let gate = Arc::new(CallbackGate::default());
        let inner = gate.clone();
        gate.run(move || inner.close());
        let mut ran = false;
        gate.run(|| ran = true);
        assert!(!ran, "no callback runs after close");
    }

    #[test]
    fn closing_another_client_from_a_callback_waits_for_its_running_callback() {
        let (a, b) = (
            Arc::new(CallbackGate::default()),
            Arc::new(CallbackGate::default()),
        );
        let (started, started_rx) = mpsc::channel();
        let (finish, finish_rx) = mpsc::channel::<()>();
        let finished = Arc::new(AtomicBool::new(false));
        let b_callback = {
            let (b, finished) = (b.clone(), finished.clone());
            std::thread::spawn(move || {
                b.run(|| {
                    started.send(()).unwrap();
                    finish_rx.recv().unwrap();
                    std::thread::sleep(Duration::from_millis(50));
                    finished.store(true, Ordering::SeqCst);
                })
            })
        };
        started_rx.recv().unwrap();
        let b_was_done = {
            let b = b.clone();
            let finished = finished.clone();
            let mut seen = None;
            a.run(|| {
                finish.send(()).unwrap();
                b.close();
                seen = Some(finished.load(Ordering::SeqCst));
            });
            seen
        };
        assert_eq!(
            b_was_done,
            Some(true),
            "B's close returned while B's callback ran"
        );
        b_callback.join().unwrap();
    }
}
