//! What is known of holds gone from Redis: the signal a hold's copies wait on, the lost and
//! ended holds remembered until a release or a late acquire asks, and the lock-lost report.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

use super::WatchKey;
use crate::client::ClientInner;
use crate::config::LockLostEvent;
use crate::logs::OneLine;

/// Lost holds remembered until their owner's release or extend reports `LockLost`; the oldest
/// is forgotten past this many (a caller that never releases a lost hold must not grow memory).
const LOST_REMEMBERED: usize = 10_000;

/// Set once when a kept hold is found gone; shared by the watchdog and the hold's copies.
#[derive(Debug, Default)]
pub(crate) struct LostSignal {
    lost: AtomicBool,
    /// The watchdog stopped keeping the hold (its tracking was dropped). Set after `lost`, when
    /// both are: a reader that sees it set then reads `lost` as final.
    pub(super) ended: AtomicBool,
    notify: Notify,
}

impl LostSignal {
    /// The signal of a hold that ended before it was tracked.
    pub(super) fn ended() -> Self {
        let signal = LostSignal::default();
        signal.ended.store(true, Ordering::SeqCst);
        signal
    }

    /// The signal of a hold tracked after the watchdog stopped: lost, and not kept.
    pub(super) fn lost_and_ended() -> Self {
        let signal = LostSignal::default();
        signal.set();
        signal.ended.store(true, Ordering::SeqCst);
        signal
    }

    pub(super) fn set(&self) {
        self.lost.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    pub(crate) fn is_set(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// Whether the watchdog still keeps the hold: not lost, and its tracking not dropped (by
    /// the release that ended it, or on close). Once false, `is_set` no longer changes.
    pub(crate) fn is_watched(&self) -> bool {
        !self.ended.load(Ordering::SeqCst) && !self.is_set()
    }

    /// Resolves once set; never if the hold ends without being lost.
    pub(crate) async fn wait(&self) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            // Registered before the check, so a set() in between is not missed.
            notified.as_mut().enable();
            if self.is_set() {
                return;
            }
            notified.await;
        }
    }
}

/// Holds a release ended before this client heard of their acquire (calls of one owner may
/// finish in another order than Redis ran them), by key and fencing token, oldest first; the
/// oldest is forgotten past [`ENDED_REMEMBERED`].
#[derive(Default)]
pub(super) struct EndedUntracked {
    holds: VecDeque<(WatchKey, u64)>,
}

/// Ended holds remembered until their late acquire is heard (see [`EndedUntracked`]).
const ENDED_REMEMBERED: usize = 1_000;

impl EndedUntracked {
    pub(super) fn insert(&mut self, key: WatchKey, fence: u64) {
        if self.holds.len() == ENDED_REMEMBERED {
            self.holds.pop_front();
        }
        self.holds.push_back((key, fence));
    }

    pub(super) fn is_empty(&self) -> bool {
        self.holds.is_empty()
    }

    /// Whether the hold of `key` with `fence` ended already (forgotten now).
    pub(super) fn take(&mut self, key: &WatchKey, fence: u64) -> bool {
        let found = self.holds.iter().position(|(k, f)| *f == fence && k == key);
        found.and_then(|at| self.holds.remove(at)).is_some()
    }
}

/// Holds found lost and not yet released, oldest first.
#[derive(Default)]
pub(super) struct LostHolds {
    pub(super) keys: HashSet<WatchKey>,
    order: VecDeque<WatchKey>,
}

impl LostHolds {
    pub(super) fn insert(&mut self, key: WatchKey) {
        if self.keys.insert(key.clone()) {
            self.order.push_back(key);
        }
        while self.order.len() > LOST_REMEMBERED {
            if let Some(old) = self.order.pop_front() {
                self.keys.remove(&old);
            }
        }
    }

    /// Forgets `key`; the queue entry goes when it reaches the front or is evicted.
    pub(super) fn take(&mut self, key: &WatchKey) -> bool {
        let found = self.keys.remove(key);
        if found {
            self.order.retain(|k| k != key);
        }
        found
    }
}

/// Past this many holds lost at once, one warn line sums them up and each hold's own line is
/// at debug level: an outage that loses 2 000 holds must not write 2 000 warn lines at once.
pub(super) const LOST_LOGGED_EACH: usize = 10;

/// One warn line for `count` holds lost together (when more than [`LOST_LOGGED_EACH`]), naming
/// the first few.
pub(super) fn log_lost_many<'a>(
    client: &ClientInner,
    count: usize,
    names: impl Iterator<Item = &'a str>,
) {
    let names: Vec<&str> = names.take(LOST_LOGGED_EACH).collect();
    tracing::warn!(
        holds = count,
        server = %crate::config::redact(&client.config.url),
        first_locks = ?names,
        "locks lost: the holds are gone from Redis (expired or force-unlocked); their owners no \
         longer hold them, releases report LockLost"
    );
}

pub(super) fn report_lost(client: &ClientInner, key: &WatchKey, logged: bool) {
    let keys = &key.keys;
    if logged {
        tracing::debug!(lock = %OneLine(&keys.name), mode = ?key.mode, owner = %OneLine(&key.token), "lock lost: the hold is gone from Redis");
    } else {
        tracing::warn!(
            lock = %OneLine(&keys.name),
            mode = ?key.mode,
            owner = %OneLine(&key.token),
            server = %crate::config::redact(&client.config.url),
            "lock lost: the hold is gone from Redis (expired or force-unlocked); its owner no \
             longer holds it, a release reports LockLost"
        );
    }
    if let Some(callback) = client.config.on_lock_lost.clone() {
        let event = LockLostEvent {
            name: keys.name.to_string(),
            mode: key.mode,
            owner_token: key.token.to_string(),
        };
        client.callbacks.run(move || callback(&event));
    }
}
