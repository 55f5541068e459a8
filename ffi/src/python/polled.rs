//! asyncio's acquire and release: calls that the loop polls on its own thread (the core's
//! [`blocking::Polled`]), named by id and driven through the fast calls in `fast`.
//!
//! Why: run as a task on the shared runtime, a call woke three threads in turn (a worker to
//! start it, the worker that read the reply, then the loop). Polled by the loop, the first poll
//! writes the request on the loop's thread, and only the reply's worker wakes the loop, through
//! the loop's [`LoopWakeups`] (one descriptor per loop, which the loop watches). A hold, its
//! fencing token and the owner's book of tokens are handled as by the blocking calls.
//!
//! A call lives in [`CALLS`] from its start until Python ends it ([`end`]): ending an unfinished
//! acquire cancels it (nothing is left in Redis); an unfinished release runs to its end on the
//! runtime.

use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::Duration;

use redlock_core::{Hold, blocking};

use super::error::NativeError;
use super::registry::Table;
use super::wake::{CallWaker, LoopWakeups};

pub(crate) struct PolledCall {
    kind: Kind,
    wake: Arc<CallWaker>,
    waker: Waker,
}

enum Kind {
    Acquire { call: blocking::Polled<Hold> },
    Release { call: blocking::Polled<u32> },
}

/// Every call Python has started and not ended, by id.
pub(crate) static CALLS: Table<PolledCall> = Table::new();

/// Every event loop's wake-ups, by id, until Python frees them.
pub(crate) static LOOPS: Table<LoopWakeups> = Table::new();

/// Makes the wake-ups of one event loop; returns their id.
pub(crate) fn new_loop() -> Result<u64, NativeError> {
    let wakeups = LoopWakeups::new()?;
    Ok(LOOPS.insert_with(|_| wakeups))
}

fn loop_by_id(id: u64) -> Result<Arc<LoopWakeups>, NativeError> {
    LOOPS
        .get(id)
        .ok_or_else(|| NativeError::invalid(format!("no event loop wake-ups with id {id}")))
}

/// The descriptor the loop watches.
pub(crate) fn loop_fd(id: u64) -> Result<i32, NativeError> {
    Ok(loop_by_id(id)?.fd())
}

/// Takes the calls of the loop woken since it last looked (see [`LoopWakeups::take`]).
pub(crate) fn take_woken(id: u64, out: &mut [u64]) -> Result<usize, NativeError> {
    Ok(loop_by_id(id)?.take(out))
}

/// Frees a loop's wake-ups (its descriptor closes once no call of it is running).
pub(crate) fn free_loop(id: u64) {
    LOOPS.remove(id);
}

/// Starts an acquire polled by the caller's loop (`wakeups`: its loop's id, 0 for a loop that
/// cannot watch a descriptor); returns the call's id.
pub(crate) fn start_acquire(
    call: blocking::Polled<Hold>,
    wakeups: u64,
) -> Result<u64, NativeError> {
    start(Kind::Acquire { call }, wakeups)
}

/// Starts a release polled by the caller's loop (see [`start_acquire`]); returns its id.
pub(crate) fn start_release(call: blocking::Polled<u32>, wakeups: u64) -> Result<u64, NativeError> {
    start(Kind::Release { call }, wakeups)
}

fn start(kind: Kind, wakeups: u64) -> Result<u64, NativeError> {
    let wakeups = if wakeups == 0 {
        None
    } else {
        Some(loop_by_id(wakeups)?)
    };
    Ok(CALLS.insert_with(|id| {
        let wake = Arc::new(CallWaker::new(id, wakeups));
        let waker = Waker::from(wake.clone());
        PolledCall { kind, wake, waker }
    }))
}

fn by_id(id: u64) -> Result<Arc<PolledCall>, NativeError> {
    CALLS
        .get(id)
        .ok_or_else(|| NativeError::invalid(format!("no running call with id {id}")))
}

/// Polls the call once: `None` while it runs (its loop is told when it is worth polling
/// again), else its outcome, once: 1 for an acquire (the hold is the caller's), the holds left
/// for a release.
pub(crate) fn drive(id: u64) -> Result<Option<u32>, NativeError> {
    let polled = by_id(id)?;
    polled.wake.clear();
    match &polled.kind {
        Kind::Acquire { call } => match call.poll(&polled.waker) {
            Poll::Pending => Ok(None),
            Poll::Ready(outcome) => outcome.map(|_| Some(1)).map_err(Into::into),
        },
        Kind::Release { call } => match call.poll(&polled.waker) {
            Poll::Pending => Ok(None),
            Poll::Ready(outcome) => Ok(Some(outcome?)),
        },
    }
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
    polled.wake.end();
    match &polled.kind {
        Kind::Acquire { call } => call.abandon(),
        Kind::Release { call } => call.abandon(),
    }
}
