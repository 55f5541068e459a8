//! Where a client's own work runs: the watchdog, the keepalive, the command connection's first
//! driver, and the tidy-ups that cancelled or abandoned calls leave.
//!
//! Guarantee: none of it runs on a caller's runtime. A client outlives the runtime it was made
//! or used in (a `static` client made by the first `#[tokio::test]`, a request's runtime that
//! ends), and a caller's runtime may be busy in user code for longer than a lease: on either,
//! a watchdog would stop renewing without a word (and a second owner take the lock), and a
//! waiter's withdrawal would never be sent (and a release grant the lock to nobody for a
//! lease). All of it runs on the process's own runtime instead (the one the blocking API uses;
//! see `blocking::runtime`), started on first use.
//!
//! Not here: the hot calls (acquire attempts, releases), which stay on the caller's runtime,
//! on sockets of that runtime (see `direct::hot`), and the pub/sub connection, which runs on
//! the runtime of the first caller that waits so that a grant wakes its waiter without a thread
//! hop; it is started again should that runtime end (see `pubsub`). Neither is needed for
//! safety: a grant not heard is found by the waiter's re-check, or given back by its
//! withdrawal.

use std::future::Future;

/// Runs `task` on the process's own runtime. `None` only if that runtime cannot be started
/// (no thread can be made), which `Client::connect` reports; once a client exists, it runs.
pub(crate) fn spawn<F>(task: F) -> Option<tokio::task::JoinHandle<F::Output>>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match crate::blocking::try_runtime() {
        Ok(runtime) => Some(runtime.spawn(task)),
        Err(error) => {
            tracing::error!(%error, "a redlock background task could not start");
            None
        }
    }
}
