//! Python-implemented listener for the client's alerts.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::records::{ContentionRecord, LockLostRecord};

/// Receives the client's events. Implemented in Python; called on a blocking-pool thread of the
/// core (never a runtime worker), so a slow handler delays nothing but itself.
#[uniffi::export(with_foreign)]
pub trait EventListener: Send + Sync {
    /// A waiter passed the contention threshold (possible dead lock).
    fn on_contention(&self, alert: ContentionRecord);
    /// A hold kept alive by the watchdog is gone (expired during an outage, or force-unlocked).
    fn on_lock_lost(&self, event: LockLostRecord);
}

/// Native threads of the library that are calling into Python (a listener method, the send
/// that wakes an awaiting UniFFI future), and whether Python is exiting.
///
/// CPython (up to 3.13) ends a thread that asks for the GIL while the interpreter finalizes
/// with `pthread_exit()`, a forced unwind; met in a native thread by a `catch_unwind` (ours,
/// tokio's task harness) or a `nounwind` frame, it aborts the process ("FATAL: exception not
/// rethrown"). So no native thread may enter Python once finalization begins: the package's
/// `atexit` hook (which runs before it) closes this gate through [`redlock_python_exiting`].
static IN_PYTHON: AtomicUsize = AtomicUsize::new(0);
static EXITING: AtomicBool = AtomicBool::new(false);

/// In a forked child (its `pthread_atfork` handler, `fork_safety`): the threads the parent had
/// inside Python do not exist here, and the child's exit must not wait for them.
pub(crate) fn forget_threads_in_python() {
    IN_PYTHON.store(0, Ordering::SeqCst);
}

/// While alive, a native thread may call into Python.
pub(crate) struct InPython(());

impl InPython {
    /// `None` once Python is exiting: the caller must not enter Python.
    pub(crate) fn enter() -> Option<InPython> {
        IN_PYTHON.fetch_add(1, Ordering::SeqCst);
        if EXITING.load(Ordering::SeqCst) {
            IN_PYTHON.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        Some(InPython(()))
    }
}

impl Drop for InPython {
    fn drop(&mut self) {
        IN_PYTHON.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Called by the package's `atexit` hook (through ctypes, so without the GIL): from now on no
/// native thread enters Python, and those inside are waited for (briefly: user callbacks run
/// on Python threads of their own), for at most `patience` seconds.
#[unsafe(no_mangle)]
pub extern "C" fn redlock_python_exiting(patience: f64) {
    EXITING.store(true, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs_f64(patience.clamp(0.0, 60.0));
    while IN_PYTHON.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
}
