//! `PendingAcquire`: an acquire waiting on the shared runtime (the core's
//! [`blocking::PendingAcquire`]), which Python waits for in slices (so Ctrl-C is seen between
//! them), awaits from asyncio, or cancels. The core guarantees that a hold acquired but never
//! taken (the caller cancelled or dropped this object) is released in the background.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redlock_core::blocking;

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
