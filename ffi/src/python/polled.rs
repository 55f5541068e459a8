//! asyncio's acquire and release: calls that the loop polls on its own thread (the core's
//! [`blocking::Polled`]), named by id and driven through the fast calls in `fast`.
//!
//! Why: run as a task on the shared runtime, a call woke three threads in turn (a worker to
//! start it, the worker that read the reply, then the loop). Polled by the loop, the first poll
//! writes the request on the loop's thread, and only the reply's worker wakes the loop, by
//! writing a byte to the call's [`WakeSignal`], which the loop watches. A hold, its fencing token
//! and the owner's book of tokens are handled as by the blocking calls.
//!
//! A call lives in [`CALLS`] from its start until Python ends it ([`end`]): ending an unfinished
//! acquire cancels it (nothing is left in Redis); an unfinished release runs to its end on the
//! runtime.

use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::Duration;

use redlock_core::{Hold, blocking};

use super::error::NativeError;
use super::lock::HoldBook;
use super::registry::Table;
use super::wake::WakeSignal;

pub(crate) struct PolledCall {
    kind: Kind,
    wake: Arc<WakeSignal>,
    waker: Waker,
}

enum Kind {
    Acquire {
        call: blocking::Polled<Hold>,
        holds: Arc<HoldBook>,
    },
    Release {
        call: blocking::Polled<u32>,
        holds: Arc<HoldBook>,
        token: String,
    },
}

impl Drop for PolledCall {
    fn drop(&mut self) {
        WakeSignal::give_back(self.wake.clone());
    }
}

/// Every call Python has started and not ended, by id.
static CALLS: Table<PolledCall> = Table::new();

/// Starts an acquire polled by the caller's loop; returns its id.
pub(crate) fn start_acquire(
    call: blocking::Polled<Hold>,
    holds: Arc<HoldBook>,
) -> Result<u64, NativeError> {
    start(Kind::Acquire { call, holds })
}

/// Starts a release polled by the caller's loop; returns its id.
pub(crate) fn start_release(
    call: blocking::Polled<u32>,
    holds: Arc<HoldBook>,
    token: String,
) -> Result<u64, NativeError> {
    start(Kind::Release { call, holds, token })
}

fn start(kind: Kind) -> Result<u64, NativeError> {
    let wake = WakeSignal::take()?;
    let waker = Waker::from(wake.clone());
    Ok(CALLS.insert(PolledCall { kind, wake, waker }))
}

fn by_id(id: u64) -> Result<Arc<PolledCall>, NativeError> {
    CALLS
        .get(id)
        .ok_or_else(|| NativeError::invalid(format!("no running call with id {id}")))
}

/// Polls the call once, after taking its pending wake-ups: `None` while it runs (its descriptor
/// becomes readable when it is worth polling again), else its outcome, once: 1 for an acquire
/// (the hold is the caller's), the holds left for a release.
pub(crate) fn drive(id: u64) -> Result<Option<u32>, NativeError> {
    let polled = by_id(id)?;
    polled.wake.drain();
    match &polled.kind {
        Kind::Acquire { call, holds } => match call.poll(&polled.waker) {
            Poll::Pending => Ok(None),
            Poll::Ready(outcome) => {
                holds.record(&outcome?);
                Ok(Some(1))
            }
        },
        Kind::Release { call, holds, token } => match call.poll(&polled.waker) {
            Poll::Pending => Ok(None),
            Poll::Ready(outcome) => {
                holds.after_release(token, &outcome);
                Ok(Some(outcome?))
            }
        },
    }
}

/// The descriptor the loop watches for the call's wake-ups.
pub(crate) fn wake_fd(id: u64) -> Result<i32, NativeError> {
    Ok(by_id(id)?.wake.fd())
}

/// Blocks up to `timeout` for a wake-up (for loops that cannot watch a descriptor).
pub(crate) fn sleep(id: u64, timeout: Duration) -> Result<bool, NativeError> {
    Ok(by_id(id)?.wake.sleep(timeout))
}

/// Ends the call: gives it up if unfinished (see the module docs), and wakes a thread sleeping
/// on it. Unknown ids are ignored, so ending twice is harmless.
pub(crate) fn end(id: u64) {
    let Some(polled) = CALLS.remove(id) else {
        return;
    };
    polled.waker.wake_by_ref();
    match &polled.kind {
        Kind::Acquire { call, .. } => call.abandon(),
        Kind::Release { call, .. } => call.abandon(),
    }
}
