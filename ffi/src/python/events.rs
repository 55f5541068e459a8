//! Python-implemented listener for the client's alerts.

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
