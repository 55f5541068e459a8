//! `PendingAcquire`: an acquire waiting on the shared runtime (the core's
//! [`blocking::PendingAcquire`]), which Python waits for in slices (so Ctrl-C is seen between
//! them), awaits from asyncio, or cancels. The core guarantees that a hold acquired but never
//! taken (the caller cancelled or dropped this object) is released in the background.
//!
//! `PendingRelease`: an asyncio release running on the shared runtime. Both are awaited the
//! same way: the loop watches `ready_fd` (see `ready`), or awaits `finished` where it cannot.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redlock_core::blocking;
use tokio::sync::watch;

use super::error::{NativeError, seconds};
use super::lock::HoldBook;
use super::ready::ReadySignal;

#[derive(uniffi::Object)]
pub struct PendingAcquire {
    pending: blocking::PendingAcquire,
    holds: Arc<HoldBook>,
    ready: Mutex<Option<Arc<ReadySignal>>>,
}

impl PendingAcquire {
    pub(crate) fn new(pending: blocking::PendingAcquire, holds: Arc<HoldBook>) -> Arc<Self> {
        Arc::new(PendingAcquire {
            pending,
            holds,
            ready: Mutex::default(),
        })
    }
}

#[uniffi::export]
impl PendingAcquire {
    /// Waits up to `timeout` seconds: `true` once the hold is the caller's, `false` while the
    /// acquire is still waiting, or the acquire's error (`Timeout` when its own wait ran out).
    pub fn wait(&self, timeout: f64) -> Result<bool, NativeError> {
        let timeout = seconds("timeout", timeout)?.min(Duration::from_secs(3600));
        match self.pending.wait(timeout)? {
            Some(hold) => {
                self.holds.record(&hold);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Resolves once the outcome is ready (then `wait(0)` hands it out). Dropping this future
    /// does not cancel the acquire: call `cancel`.
    pub async fn finished(&self) {
        self.pending.finished().await;
    }

    /// A descriptor that becomes readable once the outcome is ready (then `wait(0)` hands it
    /// out), for an asyncio loop's `add_reader`; the same one on every call, open while this
    /// object lives.
    pub fn ready_fd(&self) -> Result<i32, NativeError> {
        let mut ready = self.ready.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(signal) = &*ready {
            return Ok(signal.fd());
        }
        let signal = ReadySignal::new()?;
        let setter = signal.clone();
        self.pending.on_finished(move || setter.set());
        let fd = signal.fd();
        *ready = Some(signal);
        Ok(fd)
    }

    /// Gives up: a running acquire is cancelled (nothing is left in Redis) and a hold that was
    /// acquired but not taken is released. Harmless after the hold was taken.
    pub fn cancel(&self) {
        self.pending.cancel();
    }
}

/// A release running on the shared runtime (see the module docs). It runs to its end even if
/// nobody waits for it: a release that was sent is not taken back.
#[derive(uniffi::Object)]
pub struct PendingRelease {
    outcome: Mutex<Option<Result<u32, NativeError>>>,
    ready: Arc<ReadySignal>,
    finished: watch::Receiver<bool>,
}

impl PendingRelease {
    pub(crate) fn spawn(
        release: impl Future<Output = Result<u32, NativeError>> + Send + 'static,
    ) -> Result<Arc<Self>, NativeError> {
        let (finish, finished) = watch::channel(false);
        let pending = Arc::new(PendingRelease {
            outcome: Mutex::default(),
            ready: ReadySignal::new()?,
            finished,
        });
        let done = pending.clone();
        blocking::runtime().spawn(async move {
            let outcome = release.await;
            *done.outcome.lock().unwrap_or_else(|e| e.into_inner()) = Some(outcome);
            finish.send_replace(true);
            done.ready.set();
        });
        Ok(pending)
    }
}

#[uniffi::export]
impl PendingRelease {
    /// A descriptor that becomes readable once the outcome is ready (see
    /// [`PendingAcquire::ready_fd`]).
    pub fn ready_fd(&self) -> i32 {
        self.ready.fd()
    }

    /// Resolves once the outcome is ready.
    pub async fn finished(&self) {
        let mut finished = self.finished.clone();
        // An error means the sender is gone, which it only is once it has sent `true`.
        let _ = finished.wait_for(|done| *done).await;
    }

    /// The holds the owner has left in this mode, or the release's error; once, after the
    /// outcome is ready (`Internal` before).
    pub fn outcome(&self) -> Result<u32, NativeError> {
        let taken = self
            .outcome
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        taken.unwrap_or_else(|| Err(NativeError::internal("the release has not finished")))
    }
}
