//! One watchdog task per client keeps every lease-less hold alive.
//!
//! Every `lease / 3` it renews all tracked holds with as few script calls as it can: holds are
//! grouped by hash slot (so each call is valid on a Redis Cluster node) and each call renews up to
//! [`BATCH`] holds. A hold that Redis no longer has is marked lost: its [`crate::Hold::lost`]
//! future resolves, the client's lock-lost callback runs, and its release reports `LockLost`.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::watch;

use crate::client::ClientInner;
use crate::config::LockLostEvent;
use crate::keys::LockKeys;
use crate::lock::Mode;
use crate::lock::scripts::SCRIPTS;

/// Holds renewed by one script call (2 keys each).
pub(crate) const BATCH: usize = 500;

/// Lost holds remembered until their owner's release or extend reports `LockLost`; the oldest
/// is forgotten past this many (a caller that never releases a lost hold must not grow memory).
const LOST_REMEMBERED: usize = 10_000;

#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct WatchKey {
    state_key: String,
    mode: Mode,
    token: Arc<str>,
}

struct WatchEntry {
    keys: Arc<LockKeys>,
    id: u64,
    lost: watch::Sender<bool>,
}

#[derive(Default)]
pub(crate) struct Watchdog {
    entries: Mutex<HashMap<WatchKey, WatchEntry>>,
    lost: Mutex<LostHolds>,
    next_id: AtomicU64,
    renew_calls: AtomicU64,
}

/// Holds found lost and not yet released, oldest first.
#[derive(Default)]
struct LostHolds {
    keys: HashSet<WatchKey>,
    order: VecDeque<WatchKey>,
}

impl LostHolds {
    fn insert(&mut self, key: WatchKey) {
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
    fn take(&mut self, key: &WatchKey) -> bool {
        let found = self.keys.remove(key);
        if found {
            self.order.retain(|k| k != key);
        }
        found
    }
}

impl WatchKey {
    pub(crate) fn new(keys: &LockKeys, mode: Mode, token: Arc<str>) -> Self {
        WatchKey {
            state_key: keys.state.clone(),
            mode,
            token,
        }
    }
}

impl Watchdog {
    /// Starts tracking a hold (or joins its existing tracking); returns its lost signal.
    pub(crate) fn track(&self, keys: &Arc<LockKeys>, key: WatchKey) -> watch::Receiver<bool> {
        // A new hold of the same owner is not the lost one.
        self.lost.lock().unwrap().take(&key);
        let mut entries = self.entries.lock().unwrap();
        let entry = entries.entry(key).or_insert_with(|| WatchEntry {
            keys: keys.clone(),
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            lost: watch::channel(false).0,
        });
        entry.lost.subscribe()
    }

    /// Stops tracking; returns whether the hold was tracked.
    pub(crate) fn forget(&self, key: &WatchKey) -> bool {
        self.entries.lock().unwrap().remove(key).is_some()
    }

    /// Holds currently kept alive.
    pub(crate) fn len(&self) -> usize {
        self.entries.lock().unwrap().len()
    }

    /// Script calls made by renewals so far.
    pub(crate) fn renew_calls(&self) -> u64 {
        self.renew_calls.load(Ordering::Relaxed)
    }

    /// Marks one tracked hold lost, if it is still the same tracking (`id`), and reports it.
    fn mark_lost(&self, client: &ClientInner, key: &WatchKey, id: u64) {
        let entry = {
            let mut entries = self.entries.lock().unwrap();
            match entries.get(key) {
                Some(e) if e.id == id => entries.remove(key),
                _ => None,
            }
        };
        if let Some(entry) = entry {
            self.lost(client, key.clone(), entry);
        }
    }

    /// A release or extend found no hold: was it a hold this client kept and has lost (now or
    /// earlier, as the watchdog or a force unlock found)? Reports it lost if not reported yet.
    pub(crate) fn take_lost(&self, client: &ClientInner, key: &WatchKey) -> bool {
        let tracked = self.entries.lock().unwrap().remove(key);
        if let Some(entry) = tracked {
            // Found by this call before the watchdog's next tick: report it now.
            entry.lost.send_replace(true);
            report_lost(client, &entry.keys, key);
            return true;
        }
        self.lost.lock().unwrap().take(key)
    }

    /// A new fixed-lease hold of `key` is not the lost one (watched holds clear it in `track`).
    pub(crate) fn clear_lost(&self, key: impl FnOnce() -> WatchKey) {
        let mut lost = self.lost.lock().unwrap();
        if !lost.keys.is_empty() {
            lost.take(&key());
        }
    }

    fn lost(&self, client: &ClientInner, key: WatchKey, entry: WatchEntry) {
        // Remembered before anyone hears of it: a release right after the signal says lost.
        self.lost.lock().unwrap().insert(key.clone());
        entry.lost.send_replace(true);
        report_lost(client, &entry.keys, &key);
    }

    /// Marks every tracked hold of one name lost (after this client force-unlocked it).
    pub(crate) fn mark_name_lost(&self, client: &ClientInner, state_key: &str) {
        let lost: Vec<(WatchKey, WatchEntry)> = {
            let mut entries = self.entries.lock().unwrap();
            let keys: Vec<WatchKey> = entries
                .keys()
                .filter(|k| k.state_key == state_key)
                .cloned()
                .collect();
            keys.into_iter()
                .filter_map(|k| entries.remove(&k).map(|e| (k, e)))
                .collect()
        };
        for (key, entry) in lost {
            self.lost(client, key, entry);
        }
    }

    fn snapshot(&self) -> Vec<(WatchKey, Arc<LockKeys>, u64)> {
        let entries = self.entries.lock().unwrap();
        entries
            .iter()
            .map(|(k, e)| (k.clone(), e.keys.clone(), e.id))
            .collect()
    }
}

fn report_lost(client: &ClientInner, keys: &LockKeys, key: &WatchKey) {
    tracing::warn!(lock = %keys.name, mode = ?key.mode, owner = %key.token, "lock lost: the hold is gone from Redis");
    if let Some(callback) = client.config.on_lock_lost.clone() {
        let event = LockLostEvent {
            name: keys.name.to_string(),
            mode: key.mode,
            owner_token: key.token.to_string(),
        };
        crate::client::run_callback(move || callback(&event));
    }
}

/// The renewal loop; ends when the client is closed or dropped.
pub(crate) async fn run(client: Weak<ClientInner>, period: Duration) {
    let Some(shutdown) = client.upgrade().map(|c| c.shutdown.clone()) else {
        return;
    };
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = ticker.tick() => {}
        }
        let Some(client) = client.upgrade() else {
            return;
        };
        renew_all(&client).await;
    }
}

async fn renew_all(client: &ClientInner) {
    let mut by_slot: HashMap<u16, Vec<(WatchKey, Arc<LockKeys>, u64)>> = HashMap::new();
    for hold in client.watchdog.snapshot() {
        // A standalone server takes keys of any slot in one script; a cluster node would not.
        let group = if client.cluster_mode { hold.1.slot } else { 0 };
        by_slot.entry(group).or_default().push(hold);
    }
    let lease_ms = client.config.lease.as_millis() as u64;
    for holds in by_slot.values() {
        for batch in holds.chunks(BATCH) {
            let mut invocation = SCRIPTS.renew.prepare_invoke();
            invocation.arg(lease_ms);
            for (key, keys, _) in batch {
                invocation
                    .key(&keys.state)
                    .key(&keys.expiries)
                    .arg(key.mode.as_arg())
                    .arg(&*key.token);
            }
            client.watchdog.renew_calls.fetch_add(1, Ordering::Relaxed);
            match client.invoke::<Vec<i64>>(&invocation).await {
                Ok(renewed) => {
                    for ((key, _, id), ok) in batch.iter().zip(renewed) {
                        if ok == 0 {
                            client.watchdog.mark_lost(client, key, *id);
                        }
                    }
                }
                // Renewal is retried next tick; a hold only counts as lost once Redis says so.
                Err(err) => tracing::warn!(%err, holds = batch.len(), "watchdog renewal failed"),
            }
        }
    }
}
