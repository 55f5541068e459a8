//! UniFFI exports for the Python package `redlock_sdk` (issue 4).
//!
//! This module only adapts [`redlock_core`] to UniFFI: the pure-Python layer in
//! `bindings/python/python/redlock_sdk/` turns these objects into Python idioms (owners per thread
//! or task, `with`, `bool` on timeout, exception classes). No lock logic lives here.
//!
//! The hot calls, acquire and release, are also exported as plain C functions of numbers
//! (`fast`): the generated wrapper of a method costs Python more CPU than the call's own work.
//!
//! Threads and the GIL:
//! - every call is made through ctypes, which releases the GIL for its duration;
//! - a sync acquire makes its first attempt on the calling thread; one that must wait goes on
//!   as a task on the core's shared runtime ([`blocking::runtime`], re-created after `fork()`),
//!   parked in its `NativeLock` by ticket until its outcome is handed out, so Python can wait
//!   in short slices (Ctrl-C works) and cancel it by ticket whenever an exception comes;
//! - asyncio's acquire and release are polled by the loop on its own thread (`polled`), woken
//!   through a descriptor the loop watches: no thread of ours waits for the GIL;
//! - the other async results are handed to Python from a blocking-pool thread, never from a
//!   runtime worker: waking a Python event loop takes the GIL, and a worker stuck on the GIL
//!   would stall every lock of the process (watchdog renewals included).

mod client;
mod error;
mod events;
mod fast;
mod lock;
mod logs;
mod owner;
mod polled;
mod records;
mod registry;
mod wake;

use std::future::Future;

use redlock_core::blocking;

use error::NativeError;

/// A fresh random owner token (a UUID v4 plus this process instance's id).
#[uniffi::export]
pub fn new_owner_token() -> String {
    redlock_core::Owner::random().token().to_owned()
}

/// Runs `future` on the shared runtime and returns its output to an awaiting foreign future.
///
/// The output is sent from a blocking-pool thread: the send wakes the Python event loop, which
/// takes the GIL (see the module docs). Dropping the returned future (a cancelled Python task)
/// does not stop `future`: a release or extend that was sent completes anyway.
pub(crate) async fn on_runtime<T, F>(future: F) -> Result<T, NativeError>
where
    T: Send + 'static,
    F: Future<Output = Result<T, NativeError>> + Send + 'static,
{
    let (sender, receiver) = tokio::sync::oneshot::channel();
    blocking::runtime().spawn(async move {
        let output = future.await;
        tokio::task::spawn_blocking(move || {
            // The send wakes the awaiting future: UniFFI's continuation callback, in Python.
            match events::InPython::enter() {
                Some(_in_python) => {
                    let _ = sender.send(output);
                }
                // Python is exiting: nobody will await it; dropping the sender would wake it.
                None => std::mem::forget(sender),
            }
        });
    });
    receiver
        .await
        .unwrap_or_else(|_| Err(NativeError::internal("the lock operation was aborted")))
}

pub(crate) use events::forget_threads_in_python;

/// Every registry, locked in one order (see `crate::fork_safety`).
pub(crate) fn lock_every_registry(held: &mut Vec<Box<dyn std::any::Any>>) {
    held.push(owner::OWNERS.lock_for_fork());
    held.push(lock::LOCKS.lock_for_fork());
    held.push(polled::LOOPS.lock_for_fork());
    held.push(polled::CALLS.lock_for_fork());
}
