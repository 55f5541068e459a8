//! What a successful acquire returns.

use std::sync::Arc;
use std::time::Duration;

use super::Mode;
use crate::owner::Owner;
use crate::watchdog::LostSignal;

/// One successful acquisition. Informational: release through [`super::Lock::release`] with
/// the owner (from any thread, process or language that has the owner's token).
#[derive(Debug, Clone)]
pub struct Hold {
    pub(crate) name: Arc<str>,
    pub(crate) mode: Mode,
    pub(crate) owner: Owner,
    pub(crate) fencing_token: u64,
    pub(crate) hold_count: u32,
    pub(crate) lease: Option<Duration>,
    /// Present when the watchdog keeps the hold alive; flips to true when it is lost.
    pub(crate) lost: Option<Arc<LostSignal>>,
}

impl Hold {
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn mode(&self) -> Mode {
        self.mode
    }
    pub fn owner(&self) -> &Owner {
        &self.owner
    }
    /// Strictly increasing per name for new write holds; a re-entry returns the token of the
    /// hold it re-enters.
    pub fn fencing_token(&self) -> u64 {
        self.fencing_token
    }
    /// The owner's hold count in this mode right after this acquisition.
    pub fn hold_count(&self) -> u32 {
        self.hold_count
    }
    /// The lease asked for; `None` when the watchdog renews the hold.
    pub fn lease(&self) -> Option<Duration> {
        self.lease
    }
    /// Whether the hold was found gone from Redis: by a renewal of the watchdog, by this
    /// client's release or force unlock, or by the owner's next acquire of the name, which got a
    /// new hold where this one should have been re-entered. Always false for holds with an
    /// explicit lease (nothing watches them: use `is_held_by`).
    pub fn is_lost(&self) -> bool {
        self.lost.as_ref().is_some_and(|signal| signal.is_set())
    }
    /// Whether this client's watchdog still keeps the hold alive: false once a release ended
    /// it (the owner's last hold count), once it is lost, and after the client is closed. Always
    /// false for holds with an explicit lease. Once false, [`is_lost`](Self::is_lost) is final.
    pub fn is_watched(&self) -> bool {
        self.lost.as_ref().is_some_and(|signal| signal.is_watched())
    }
    /// Resolves when the hold is found gone (see [`is_lost`](Self::is_lost)); never for holds
    /// with an explicit lease.
    pub async fn lost(&self) {
        match &self.lost {
            Some(signal) => signal.wait().await,
            None => std::future::pending().await,
        }
    }
}
