//! One watchdog task per client keeps every lease-less hold alive.
//!
//! Every `lease / 3` it renews all tracked holds with as few script calls as it can: holds are
//! grouped by hash slot (so each call is valid on a Redis Cluster node) and each call renews up to
//! [`BATCH`] holds. A hold that Redis no longer has is marked lost: its [`crate::Hold::lost`]
//! future resolves, the client's lock-lost callback runs, and its release reports `LockLost`.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::Notify;

use crate::client::ClientInner;
use crate::config::LockLostEvent;
use crate::keys::{KeyArg, LockKeys};
use crate::lock::Mode;
use crate::lock::scripts::SCRIPTS;

/// Holds renewed by one script call (2 keys each).
pub(crate) const BATCH: usize = 500;

/// Lost holds remembered until their owner's release or extend reports `LockLost`; the oldest
/// is forgotten past this many (a caller that never releases a lost hold must not grow memory).
const LOST_REMEMBERED: usize = 10_000;

/// Whose hold is kept: a name (by its state key), a mode and an owner. Cheap to clone. Redis
/// keeps one hold per key (re-entries count in it); which one, its fencing token says: a hold
/// taken after the owner's last release gets a new, larger one.
#[derive(Clone)]
pub(crate) struct WatchKey {
    keys: Arc<LockKeys>,
    mode: Mode,
    token: Arc<str>,
}

impl PartialEq for WatchKey {
    fn eq(&self, other: &Self) -> bool {
        self.mode == other.mode
            && self.token == other.token
            && self.keys.state() == other.keys.state()
    }
}

impl Eq for WatchKey {}

impl Hash for WatchKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.keys.state().hash(state);
        self.mode.hash(state);
        self.token.hash(state);
    }
}

struct WatchEntry {
    lost: Arc<LostSignal>,
    /// Also names this tracking (its id).
    renewal: Renewal,
    /// The fencing token of the hold kept. Calls of one owner may finish in another order than
    /// Redis ran them: a release forgets only the hold it ended, not a newer one.
    fence: u64,
    /// Releases of this hold under way. A renewal that finds the hold gone meanwhile does not
    /// call it lost: the release may be what ended it, and its reply says.
    releasing: u32,
}

impl Drop for WatchEntry {
    /// However the tracking goes (released, lost, replaced, closed), the hold is no longer kept.
    fn drop(&mut self) {
        self.lost.ended.store(true, Ordering::SeqCst);
    }
}

/// What a renewal sends for one hold, in one allocation: the state key, then the owner token. At 100 000 holds, building a tick's calls is mostly waiting for memory: one cache
/// miss per hold here instead of three (the lock's keys, the key text, the token).
#[derive(Clone)]
struct Renewal {
    text: Arc<str>,
    /// Where the token starts in `text`.
    split: u32,
    mode: Mode,
    slot: u16,
    /// Unique per tracking: a hold released and taken again gets a new one.
    id: u64,
}

impl Renewal {
    fn new(key: &WatchKey, id: u64) -> Self {
        let state = key.keys.state();
        let mut text = String::with_capacity(state.len() + key.token.len());
        text.push_str(state);
        text.push_str(&key.token);
        Renewal {
            text: text.into(),
            split: state.len() as u32,
            mode: key.mode,
            slot: key.keys.slot,
            id,
        }
    }

    fn state_key(&self) -> &str {
        &self.text[..self.split as usize]
    }

    fn token(&self) -> &str {
        &self.text[self.split as usize..]
    }
}

const PREFETCH_AHEAD: usize = 8;

#[cfg(target_arch = "x86_64")]
fn prefetch(text: &str) {
    use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
    // SAFETY: SSE is part of x86_64; a prefetch only hints the cache, it never faults.
    unsafe { _mm_prefetch::<_MM_HINT_T0>(text.as_ptr().cast()) };
}

#[cfg(not(target_arch = "x86_64"))]
fn prefetch(_text: &str) {}

/// Set once when a kept hold is found gone; shared by the watchdog and the hold's copies.
#[derive(Debug, Default)]
pub(crate) struct LostSignal {
    lost: AtomicBool,
    /// The watchdog stopped keeping the hold (its tracking was dropped). Set after `lost`, when
    /// both are: a reader that sees it set then reads `lost` as final.
    ended: AtomicBool,
    notify: Notify,
}

impl LostSignal {
    /// The signal of a hold that ended before it was tracked.
    fn ended() -> Self {
        let signal = LostSignal::default();
        signal.ended.store(true, Ordering::SeqCst);
        signal
    }

    fn set(&self) {
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

#[derive(Default)]
pub(crate) struct Watchdog {
    entries: Mutex<HashMap<WatchKey, WatchEntry>>,
    /// Trackings that a new hold of their owner replaced while a release of them was under way,
    /// by id: that release's reply tells whether it ended the hold or found it lost. (Locked
    /// after `entries` when both are.)
    parked: Mutex<HashMap<u64, WatchEntry>>,
    lost: Mutex<LostHolds>,
    /// Locked after `entries` when both are.
    ended: Mutex<EndedUntracked>,
    next_id: AtomicU64,
    renew_calls: AtomicU64,
}

/// Holds a release ended before this client heard of their acquire (calls of one owner may
/// finish in another order than Redis ran them), by key and fencing token, oldest first; the
/// oldest is forgotten past [`ENDED_REMEMBERED`].
#[derive(Default)]
struct EndedUntracked {
    holds: VecDeque<(WatchKey, u64)>,
}

/// Ended holds remembered until their late acquire is heard (see [`EndedUntracked`]).
const ENDED_REMEMBERED: usize = 1_000;

impl EndedUntracked {
    fn insert(&mut self, key: WatchKey, fence: u64) {
        if self.holds.len() == ENDED_REMEMBERED {
            self.holds.pop_front();
        }
        self.holds.push_back((key, fence));
    }

    /// Whether the hold of `key` with `fence` ended already (forgotten now).
    fn take(&mut self, key: &WatchKey, fence: u64) -> bool {
        let found = self.holds.iter().position(|(k, f)| *f == fence && k == key);
        found.and_then(|at| self.holds.remove(at)).is_some()
    }
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
    pub(crate) fn new(keys: &Arc<LockKeys>, mode: Mode, token: Arc<str>) -> Self {
        WatchKey {
            keys: keys.clone(),
            mode,
            token,
        }
    }
}

impl Watchdog {
    /// Starts keeping the hold with this fencing token (or joins its tracking: a re-entry);
    /// returns its lost signal. A tracked hold of the key with another fence is gone from Redis
    /// (this one could not be taken otherwise), so this one takes its place. (Not only an older
    /// one: a server that lost its data, by a restart or a failover, counts fences from 1 again.)
    /// Unless a release of it is under way, the hold replaced was lost, and is reported as a
    /// renewal would have: whether a tick or this acquire notices first must not matter.
    pub(crate) fn track(&self, client: &ClientInner, key: WatchKey, fence: u64) -> Arc<LostSignal> {
        let (lost, replaced) = self.track_entry(key, fence);
        if let Some(key) = replaced {
            report_lost(client, &key);
        }
        lost
    }

    /// [`track`](Self::track) without the report: also returns the key of a replaced hold that
    /// was lost (its signal set).
    fn track_entry(&self, key: WatchKey, fence: u64) -> (Arc<LostSignal>, Option<WatchKey>) {
        // A new hold of the same owner is not the lost one.
        self.lost.lock().unwrap().take(&key);
        let mut entries = self.entries.lock().unwrap();
        // Under the entries' lock, as a release records it there.
        if self.ended.lock().unwrap().take(&key, fence) {
            // Its release was heard first: nothing to keep.
            return (Arc::new(LostSignal::ended()), None);
        }
        let new_entry = |key: &WatchKey| WatchEntry {
            lost: Arc::default(),
            renewal: Renewal::new(key, self.next_id.fetch_add(1, Ordering::Relaxed)),
            fence,
            releasing: 0,
        };
        match entries.entry(key) {
            Entry::Occupied(mut tracked) => {
                let mut replaced = None;
                if tracked.get().fence != fence {
                    let entry = new_entry(tracked.key());
                    let old = tracked.insert(entry);
                    // Not remembered in `lost`: the key is the new hold's too, and its release
                    // must not say LockLost.
                    if old.releasing == 0 {
                        old.lost.set();
                        replaced = Some(tracked.key().clone());
                    } else {
                        let mut parked = self.parked.lock().unwrap();
                        parked.insert(old.renewal.id, old);
                    }
                }
                (tracked.get().lost.clone(), replaced)
            }
            Entry::Vacant(new) => {
                let entry = new_entry(new.key());
                (new.insert(entry).lost.clone(), None)
            }
        }
    }

    /// A release ended the hold with this fencing token: stops keeping it, or the tracking the
    /// release marked (`releasing`) if nothing replaced it since, or an older hold still
    /// tracked; not a hold taken after the release ran. Returns whether one was tracked. `key`
    /// is only made when something is tracked at all.
    ///
    /// A tracked hold with a smaller fence than the one ended, or one that a new hold of the
    /// owner replaced while this release was under way, was gone when the newer hold was taken:
    /// ended by this release (its fence is the one ended), by another release of it still under
    /// way (whose reply decides), or else lost, and reported so now.
    pub(crate) fn forget(
        &self,
        client: &ClientInner,
        key: impl FnOnce() -> WatchKey,
        fence: u64,
        releasing: &Releasing<'_>,
    ) -> bool {
        let (tracked, lost) = self.forget_entry(key, fence, releasing);
        for key in &lost {
            report_lost(client, key);
        }
        tracked
    }

    /// [`forget`](Self::forget) without the report: also returns the keys of holds found lost
    /// (their signals set).
    fn forget_entry(
        &self,
        key: impl FnOnce() -> WatchKey,
        fence: u64,
        releasing: &Releasing<'_>,
    ) -> (bool, Vec<WatchKey>) {
        let mut lost = Vec::new();
        let mut tracked = false;
        // Under the entries' lock: a new hold's tracking parks the marked one under it too.
        let mut entries = self.entries.lock().unwrap();
        if let Some((parked_key, parked)) = self.take_parked(releasing) {
            tracked = true;
            if parked.fence != fence {
                parked.lost.set();
                lost.push(parked_key);
            }
        }
        if entries.is_empty() {
            return (tracked, lost);
        }
        let key = key();
        let Some(entry) = entries.get(&key) else {
            return (tracked, lost);
        };
        let marked = releasing.marked(entry);
        // The hold this release ended; or, marked, one a server that lost its data counted anew.
        if entry.fence == fence || (marked && entry.fence > fence) {
            entries.remove(&key);
            return (true, lost);
        }
        // A later hold.
        if entry.fence > fence {
            return (tracked, lost);
        }
        // The tracked hold was gone when the one ended here was taken, whose acquire this client
        // has not heard yet: that one must not be kept when it is.
        self.ended.lock().unwrap().insert(key.clone(), fence);
        let entry = entries.remove(&key).expect("looked up above");
        if entry.releasing > u32::from(marked) {
            // Another release of it is under way: that one's reply tells whether it ended it.
            self.parked.lock().unwrap().insert(entry.renewal.id, entry);
        } else {
            entry.lost.set();
            lost.push(key);
        }
        (true, lost)
    }

    /// The tracking `releasing` marked, if a new hold replaced it meanwhile. Called with the
    /// entries' lock held (a tracking is parked under it).
    fn take_parked(&self, releasing: &Releasing<'_>) -> Option<(WatchKey, WatchEntry)> {
        let (key, id) = releasing.tracked.as_ref()?;
        let entry = self.parked.lock().unwrap().remove(id)?;
        Some((key.clone(), entry))
    }

    /// Marks the tracked hold of `key`, if any, as being released until the guard is dropped.
    pub(crate) fn releasing(&self, key: impl FnOnce() -> WatchKey) -> Releasing<'_> {
        let mut entries = self.entries.lock().unwrap();
        let mut tracked = None;
        if !entries.is_empty() {
            let key = key();
            if let Some(entry) = entries.get_mut(&key) {
                entry.releasing += 1;
                tracked = Some((key, entry.renewal.id));
            }
        }
        Releasing {
            watchdog: self,
            tracked,
        }
    }

    /// Holds currently kept alive.
    pub(crate) fn len(&self) -> usize {
        self.entries.lock().unwrap().len()
    }

    /// Script calls made by renewals so far.
    pub(crate) fn renew_calls(&self) -> u64 {
        self.renew_calls.load(Ordering::Relaxed)
    }

    /// Marks the tracked holds with these ids lost (an id names one tracking: a hold released
    /// and taken again since the snapshot is not it) and reports them. One pass over all
    /// entries, so even losing every hold at once (a flushed server) costs one pass per tick.
    /// A hold being released is left to its release.
    fn mark_lost(&self, client: &ClientInner, ids: &HashSet<u64>) {
        for (key, entry) in self.take_renewals_gone(ids) {
            self.lost(client, key, entry);
        }
    }

    /// Takes the holds a renewal found gone out of tracking (see `mark_lost`).
    fn take_renewals_gone(&self, ids: &HashSet<u64>) -> Vec<(WatchKey, WatchEntry)> {
        self.take_where(|_, entry| entry.releasing == 0 && ids.contains(&entry.renewal.id))
    }

    /// Takes every tracked hold that `matches` out of tracking and reports it lost.
    fn mark_lost_where(
        &self,
        client: &ClientInner,
        matches: impl Fn(&WatchKey, &WatchEntry) -> bool,
    ) {
        for (key, entry) in self.take_where(matches) {
            self.lost(client, key, entry);
        }
    }

    fn take_where(
        &self,
        matches: impl Fn(&WatchKey, &WatchEntry) -> bool,
    ) -> Vec<(WatchKey, WatchEntry)> {
        let mut entries = self.entries.lock().unwrap();
        let keys: Vec<WatchKey> = entries
            .iter()
            .filter(|(key, entry)| matches(key, entry))
            .map(|(key, _)| key.clone())
            .collect();
        keys.into_iter()
            .filter_map(|key| entries.remove(&key).map(|entry| (key, entry)))
            .collect()
    }

    /// A release or extend found no hold of `key`, and every hold of its name with a fence up
    /// to `upto` gone: was it a hold this client kept and has lost (now or earlier, as the
    /// watchdog or a force unlock found)? Reports it lost if not reported yet. A tracked hold
    /// with a larger fence was taken after that call ran, and is not lost, unless it is the
    /// very tracking a release marked (`releasing`): then the server counts fences anew.
    pub(crate) fn take_lost(
        &self,
        client: &ClientInner,
        key: &WatchKey,
        upto: u64,
        releasing: Option<&Releasing<'_>>,
    ) -> bool {
        if let Some(entry) = self.take_lost_entry(key, upto, releasing) {
            // Found by this call before the watchdog's next tick: report it now.
            entry.lost.set();
            report_lost(client, key);
            return true;
        }
        self.lost.lock().unwrap().take(key)
    }

    /// The tracking [`take_lost`](Self::take_lost) finds lost, taken out of tracking.
    fn take_lost_entry(
        &self,
        key: &WatchKey,
        upto: u64,
        releasing: Option<&Releasing<'_>>,
    ) -> Option<WatchEntry> {
        let mut entries = self.entries.lock().unwrap();
        // The marked tracking, replaced by a new hold meanwhile: gone, and not by this release.
        let parked = releasing.and_then(|r| self.take_parked(r));
        parked
            .map(|(_, entry)| entry)
            .or_else(|| take_gone(&mut entries, key, upto, releasing))
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
        entry.lost.set();
        report_lost(client, &key);
    }

    /// On close: nothing renews the kept holds any more, so each lapses when its lease ends.
    /// Their lost signals are set (so waits on them end instead of hanging), without the
    /// lock-lost callback: the user closed the client.
    pub(crate) fn stop(&self) {
        let entries = std::mem::take(&mut *self.entries.lock().unwrap());
        for entry in entries.into_values() {
            entry.lost.set();
        }
    }

    /// Marks every tracked hold of one name lost (after this client force-unlocked it).
    pub(crate) fn mark_name_lost(&self, client: &ClientInner, state_key: &str) {
        self.mark_lost_where(client, |key, _| key.keys.state() == state_key);
    }

    fn snapshot(&self) -> Vec<Renewal> {
        let entries = self.entries.lock().unwrap();
        entries.values().map(|e| e.renewal.clone()).collect()
    }
}

/// Takes the tracking of `key` out if Redis said every hold of the name with a fence up to
/// `upto` is gone and it keeps one of them, or it is the tracking `releasing` marked (a server
/// that lost its data counts fences anew); a tracking with a larger fence keeps a later hold.
fn take_gone(
    entries: &mut HashMap<WatchKey, WatchEntry>,
    key: &WatchKey,
    upto: u64,
    releasing: Option<&Releasing<'_>>,
) -> Option<WatchEntry> {
    let entry = entries.get(key)?;
    if entry.fence <= upto || releasing.is_some_and(|r| r.marked(entry)) {
        entries.remove(key)
    } else {
        None
    }
}

/// While alive, the watchdog leaves a renewal's "gone" about this hold to its release.
pub(crate) struct Releasing<'a> {
    watchdog: &'a Watchdog,
    /// The key and the tracking id it marked, if the hold was tracked.
    tracked: Option<(WatchKey, u64)>,
}

impl Releasing<'_> {
    /// Whether `entry` is the tracking this release marked (not replaced since).
    fn marked(&self, entry: &WatchEntry) -> bool {
        self.tracked
            .as_ref()
            .is_some_and(|(_, id)| *id == entry.renewal.id)
    }
}

impl Drop for Releasing<'_> {
    fn drop(&mut self) {
        let Some((key, id)) = self.tracked.take() else {
            return;
        };
        let mut entries = self.watchdog.entries.lock().unwrap();
        if let Some(entry) = entries.get_mut(&key).filter(|e| e.renewal.id == id) {
            entry.releasing -= 1;
            return;
        }
        // Replaced by a newer hold's tracking: once no release of it is under way, nobody can
        // tell any more whether it was lost (a release without a reply, say): dropped unreported.
        let mut parked = self.watchdog.parked.lock().unwrap();
        if let Some(entry) = parked.get_mut(&id) {
            entry.releasing -= 1;
            if entry.releasing == 0 {
                parked.remove(&id);
            }
        }
    }
}

fn report_lost(client: &ClientInner, key: &WatchKey) {
    let keys = &key.keys;
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
    let mut holds = client.watchdog.snapshot();
    // A standalone server takes keys of any slot in one script; a cluster node would not.
    if client.cluster_mode {
        holds.sort_unstable_by_key(|hold| hold.slot);
    }
    let same_group = |a: &Renewal, b: &Renewal| !client.cluster_mode || a.slot == b.slot;
    let lease_ms = client.config.lease.as_millis() as u64;
    let mut lost = HashSet::new();
    for group in holds.chunk_by(same_group) {
        for batch in group.chunks(BATCH) {
            client.watchdog.renew_calls.fetch_add(1, Ordering::Relaxed);
            match client
                .eval_cmd::<Vec<u8>>(&SCRIPTS.renew, &renew_call(batch, lease_ms), false)
                .await
            {
                Ok(renewed) => {
                    for (hold, ok) in batch.iter().zip(renewed) {
                        if ok == b'0' {
                            lost.insert(hold.id);
                        }
                    }
                }
                // Renewal is retried next tick; a hold only counts as lost once Redis says so.
                Err(err) => tracing::warn!(%err, holds = batch.len(), "watchdog renewal failed"),
            }
        }
    }
    drop(holds);
    if !lost.is_empty() {
        client.watchdog.mark_lost(client, &lost);
    }
}

/// The `EVALSHA` of renew.lua for one batch: a plain command, built in one buffer sized up
/// front (at 100 000 holds the arguments are most of a tick's work).
fn renew_call(batch: &[Renewal], lease_ms: u64) -> redis::Cmd {
    let bytes: usize = batch.iter().map(|hold| 2 * hold.text.len() + 8).sum();
    let mut call = redis::Cmd::with_capacity(3 + 4 * batch.len(), bytes + 64);
    call.arg("EVALSHA")
        .arg(SCRIPTS.renew.get_hash())
        .arg(2 * batch.len());
    for (i, hold) in batch.iter().enumerate() {
        // Each hold's bytes are somewhere else on the heap: ask for the ones a few holds ahead
        // now, so the copy does not stall on every hold.
        if let Some(ahead) = batch.get(i + PREFETCH_AHEAD) {
            prefetch(&ahead.text);
        }
        call.arg(hold.state_key())
            .arg(KeyArg::expiries_of(hold.state_key()));
    }
    call.arg(lease_ms);
    for hold in batch {
        call.arg(hold.mode.as_arg()).arg(hold.token());
    }
    call
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(token: &str) -> WatchKey {
        let keys = Arc::new(LockKeys::new("t", "orders").unwrap());
        WatchKey::new(&keys, Mode::Write, token.into())
    }

    fn tracked_fence(watchdog: &Watchdog, token: &str) -> Option<u64> {
        let entries = watchdog.entries.lock().unwrap();
        entries.get(&key(token)).map(|entry| entry.fence)
    }

    fn id_of(watchdog: &Watchdog, token: &str) -> u64 {
        watchdog.entries.lock().unwrap()[&key(token)].renewal.id
    }

    /// Tracks a hold (no client: lost holds are not reported).
    fn track(watchdog: &Watchdog, key: WatchKey, fence: u64) -> Arc<LostSignal> {
        watchdog.track_entry(key, fence).0
    }

    /// A release's forget (no client: returns the replaced hold found lost instead).
    fn forget(
        watchdog: &Watchdog,
        token: &str,
        fence: u64,
        releasing: &Releasing<'_>,
    ) -> Option<WatchKey> {
        let mut lost = watchdog.forget_entry(|| key(token), fence, releasing).1;
        assert!(lost.len() <= 1);
        lost.pop()
    }

    /// A guard that marks nothing (its release began while nothing of the key was tracked).
    fn unmarked(watchdog: &Watchdog) -> Releasing<'_> {
        watchdog.releasing(|| key("nobody"))
    }

    #[test]
    fn a_release_heard_after_the_next_hold_was_tracked_forgets_only_its_own() {
        let watchdog = Watchdog::default();
        let first = track(&watchdog, key("a"), 7);
        // Redis ran: release (ending fence 7), acquire (fence 9); this client heard the acquire
        // first.
        let releasing = watchdog.releasing(|| key("a"));
        let second = track(&watchdog, key("a"), 9);
        assert!(
            !Arc::ptr_eq(&first, &second),
            "a new hold gets its own lost signal"
        );
        assert!(!first.is_set(), "a hold being released is not lost");
        assert!(first.is_watched(), "its release decides");
        // The release's reply: it ended fence 7, the replaced hold; the new one stays kept.
        assert!(forget(&watchdog, "a", 7, &releasing).is_none());
        drop(releasing);
        assert!(!first.is_set() && !first.is_watched());
        assert!(second.is_watched());
        assert_eq!(tracked_fence(&watchdog, "a"), Some(9));
        assert!(forget(&watchdog, "a", 9, &unmarked(&watchdog)).is_none());
        assert!(!second.is_set() && !second.is_watched());
        assert_eq!(watchdog.len(), 0);
        assert!(watchdog.parked.lock().unwrap().is_empty());
    }

    #[test]
    fn a_hold_replaced_while_released_is_lost_when_the_release_ended_another() {
        let watchdog = Watchdog::default();
        let first = track(&watchdog, key("a"), 7);
        // Redis ran: a force unlock (fence 7 gone), the owner's acquire (fence 9), then the
        // release, which ended the owner's hold there: fence 9.
        let releasing = watchdog.releasing(|| key("a"));
        let second = track(&watchdog, key("a"), 9);
        assert!(forget(&watchdog, "a", 9, &releasing) == Some(key("a")));
        drop(releasing);
        assert!(first.is_set() && !first.is_watched());
        assert!(!second.is_set() && !second.is_watched());
        assert_eq!(watchdog.len(), 0);
        assert!(watchdog.parked.lock().unwrap().is_empty());
    }

    #[test]
    fn a_hold_replaced_while_released_is_lost_when_the_release_finds_nothing() {
        let watchdog = Watchdog::default();
        let first = track(&watchdog, key("a"), 7);
        // Redis ran: a force unlock, the release (nothing held, fences up to 8 gone), then the
        // owner's acquire (fence 9), which this client heard first.
        let releasing = watchdog.releasing(|| key("a"));
        let second = track(&watchdog, key("a"), 9);
        let lost = watchdog.take_lost_entry(&key("a"), 8, Some(&releasing));
        assert!(lost.is_some_and(|entry| entry.fence == 7));
        drop(releasing);
        // A second release of the owner, heard now, finds nothing: the new hold is not lost.
        assert!(
            watchdog
                .take_lost_entry(&key("a"), 8, Some(&unmarked(&watchdog)))
                .is_none()
        );
        assert!(second.is_watched() && !first.is_watched());
        assert!(watchdog.parked.lock().unwrap().is_empty());
    }

    #[test]
    fn a_release_heard_before_the_acquire_of_the_hold_it_ended_reports_the_older_lost() {
        let watchdog = Watchdog::default();
        let first = track(&watchdog, key("a"), 7);
        // Redis ran: a force unlock, the owner's acquire (fence 9), then the release, which
        // ended fence 9; this client heard the release first.
        let releasing = watchdog.releasing(|| key("a"));
        assert!(forget(&watchdog, "a", 9, &releasing) == Some(key("a")));
        drop(releasing);
        assert!(first.is_set() && !first.is_watched());
        let second = track(&watchdog, key("a"), 9);
        assert!(!second.is_watched() && !second.is_set(), "released already");
        assert_eq!(watchdog.len(), 0);
        // Remembered once: a later hold with that fence (a server counting anew) is kept.
        assert!(track(&watchdog, key("a"), 9).is_watched());
    }

    #[test]
    fn an_older_hold_that_another_release_is_ending_is_left_to_that_release() {
        let watchdog = Watchdog::default();
        let first = track(&watchdog, key("a"), 7);
        // Two releases of the owner: one ends fence 7, then an acquire takes fence 9 and the
        // other release ends it. The second is heard first, and began before any tracking.
        let ending_seven = watchdog.releasing(|| key("a"));
        assert!(forget(&watchdog, "a", 9, &unmarked(&watchdog)).is_none());
        assert!(first.is_watched(), "the release of it decides");
        assert!(forget(&watchdog, "a", 7, &ending_seven).is_none());
        drop(ending_seven);
        assert!(!first.is_set() && !first.is_watched());
        assert!(watchdog.parked.lock().unwrap().is_empty());
    }

    #[test]
    fn a_replaced_hold_whose_releases_end_without_a_reply_is_dropped_unreported() {
        let watchdog = Watchdog::default();
        let first = track(&watchdog, key("a"), 7);
        let one = watchdog.releasing(|| key("a"));
        let two = watchdog.releasing(|| key("a"));
        track(&watchdog, key("a"), 9);
        drop(one);
        assert!(first.is_watched(), "a release of it is still under way");
        drop(two);
        assert!(!first.is_watched() && !first.is_set());
        assert!(watchdog.parked.lock().unwrap().is_empty());
        assert_eq!(tracked_fence(&watchdog, "a"), Some(9));
    }

    #[test]
    fn a_re_entry_joins_and_a_hold_with_another_fence_takes_the_place() {
        let watchdog = Watchdog::default();
        let hold = track(&watchdog, key("a"), 9);
        assert!(Arc::ptr_eq(&hold, &track(&watchdog, key("a"), 9)));
        // A server that lost its data counts fences from 1 again: the new hold is kept.
        let (after_restart, replaced) = watchdog.track_entry(key("a"), 1);
        assert!(!Arc::ptr_eq(&hold, &after_restart));
        // The hold it replaced was gone with nobody releasing it: lost, and reported.
        assert!(hold.is_set() && !after_restart.is_set());
        assert!(replaced == Some(key("a")));
        assert!(!watchdog.lost.lock().unwrap().keys.contains(&key("a")));
        assert_eq!(tracked_fence(&watchdog, "a"), Some(1));
        assert!(
            watchdog
                .forget_entry(|| key("a"), 1, &unmarked(&watchdog))
                .0
        );
        // A release that ended a hold this client has not tracked (yet) clears an older one,
        // which was gone before: lost.
        let older = track(&watchdog, key("b"), 3);
        assert!(forget(&watchdog, "b", 5, &unmarked(&watchdog)) == Some(key("b")));
        assert!(older.is_set());
        // The ended hold's acquire, heard now, keeps nothing.
        let late = track(&watchdog, key("b"), 5);
        assert!(!late.is_watched() && !late.is_set());
        assert_eq!(watchdog.len(), 0);
    }

    #[test]
    fn a_release_forgets_the_tracking_it_marked_whatever_its_fence() {
        let watchdog = Watchdog::default();
        track(&watchdog, key("a"), 500);
        // The server restarted and the owner acquired again through an untracked call (fixed
        // lease): the release ends fence 2, and the tracking it marked goes with it.
        let releasing = watchdog.releasing(|| key("a"));
        assert!(watchdog.forget_entry(|| key("a"), 2, &releasing).0);
        drop(releasing);
        assert_eq!(watchdog.len(), 0);
    }

    #[test]
    fn a_renewal_that_finds_a_hold_gone_while_it_is_released_leaves_it_to_the_release() {
        let watchdog = Watchdog::default();
        track(&watchdog, key("a"), 1);
        track(&watchdog, key("b"), 2);
        let gone: HashSet<u64> = [id_of(&watchdog, "a"), id_of(&watchdog, "b")].into();
        {
            let _releasing = watchdog.releasing(|| key("a"));
            let taken = watchdog.take_renewals_gone(&gone);
            assert_eq!(taken.len(), 1);
            assert!(taken[0].0 == key("b"));
        }
        // The release failed (no reply, say): the next renewal decides.
        assert_eq!(watchdog.take_renewals_gone(&gone).len(), 1);
        assert_eq!(watchdog.len(), 0);
    }

    #[test]
    fn a_release_mark_outlives_neither_its_hold_nor_a_replaced_tracking() {
        let watchdog = Watchdog::default();
        track(&watchdog, key("a"), 1);
        let releasing = watchdog.releasing(|| key("a"));
        track(&watchdog, key("a"), 2);
        drop(releasing);
        let gone: HashSet<u64> = [id_of(&watchdog, "a")].into();
        assert_eq!(watchdog.take_renewals_gone(&gone).len(), 1);
        // Nothing tracked: no mark, and dropping it touches nothing.
        drop(watchdog.releasing(|| key("a")));
    }
}
