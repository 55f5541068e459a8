//! `PendingAcquire`: a sync acquire still waiting after its first slice, on the shared runtime
//! (the core's [`blocking::PendingAcquire`]), which Python waits for in slices (so Ctrl-C is
//! seen between them) or cancels. The core guarantees that a hold acquired but never taken (the
//! caller cancelled or dropped this object) is released in the background.

use std::sync::Arc;
use std::time::Duration;

use redlock_core::blocking;

use super::error::{NativeError, seconds};

#[derive(uniffi::Object)]
pub struct PendingAcquire {
    pending: blocking::PendingAcquire,
    /// The Python call's ticket (see `NativeLock::take_delivered`).
    ticket: u64,
}

impl PendingAcquire {
    pub(crate) fn new(pending: blocking::PendingAcquire, ticket: u64) -> Arc<Self> {
        Arc::new(PendingAcquire { pending, ticket })
    }
}

#[uniffi::export]
impl PendingAcquire {
    /// Waits up to `timeout` seconds: `true` once the hold is the caller's, `false` while the
    /// acquire is still waiting, or the acquire's error (`Timeout` when its own wait ran out).
    pub fn wait(&self, timeout: f64) -> Result<bool, NativeError> {
        let timeout = seconds("timeout", timeout)?.min(Duration::from_secs(3600));
        match self.pending.wait(timeout)? {
            Some(_) => {
                super::lock::delivered(self.ticket);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Gives up: a running acquire is cancelled (nothing is left in Redis) and a hold that was
    /// acquired but not taken is released. Harmless after the hold was taken.
    pub fn cancel(&self) {
        self.pending.cancel();
    }
}
