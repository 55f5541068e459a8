//! One watchdog task per client keeps every lease-less hold alive.
//!
//! Every `lease / 3` it renews all tracked holds with as few script calls as it can: each call
//! renews a page of up to [`BATCH`] holds (of one hash slot, where calls must be valid on one
//! Redis Cluster node), and is built again only when a hold joins or leaves its page (`pages`).
//! A hold that Redis no longer has is marked lost: its [`crate::Hold::lost`] future resolves,
//! the client's lock-lost callback runs, and its release reports `LockLost`.

mod lost;
mod pages;
mod renewal;
mod tracked;

pub(crate) use lost::LostSignal;
pub(crate) use renewal::run;

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::client::ClientInner;
use crate::keys::LockKeys;
use crate::lock::Mode;
use lost::{EndedUntracked, LOST_LOGGED_EACH, LostHolds, log_lost_many, report_lost};
use renewal::Renewal;
use tracked::Tracked;

/// Holds renewed by one script call (2 keys each).
pub(crate) const BATCH: usize = 500;

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
    /// Names this tracking, and its renewal in the pages (see `tracked`): unique per tracking,
    /// so a hold released and taken again gets a new one.
    id: u64,
    /// The fencing token of the hold kept. Calls of one owner may finish in another order than
    /// Redis ran them: a release forgets only the hold it ended, not a newer one.
    fence: u64,
    /// The acquire that made the hold (hold count 1) was tracked, not only re-entries: another
    /// such acquire with the same fence made a new hold, on a server that counts fences anew.
    made: bool,
    /// Releases of this hold under way. A renewal that finds the hold gone meanwhile does not
    /// call it lost: the release may be what ended it, and its reply says.
    releasing: u32,
    /// When an acquire of it (the first or a re-entry) last answered: it set the lease then.
    acquired_at: Instant,
}

impl Drop for WatchEntry {
    /// However the tracking goes (released, lost, replaced, closed), the hold is no longer kept.
    fn drop(&mut self) {
        self.lost.ended.store(true, Ordering::SeqCst);
    }
}

#[derive(Default)]
pub(crate) struct Watchdog {
    entries: Mutex<Tracked>,
    /// Trackings that a new hold of their owner replaced while a release of them was under way,
    /// by id: that release's reply tells whether it ended the hold or found it lost. (Locked
    /// after `entries` when both are.)
    parked: Mutex<HashMap<u64, WatchEntry>>,
    lost: Mutex<LostHolds>,
    /// Locked after `entries` when both are.
    ended: Mutex<EndedUntracked>,
    next_id: AtomicU64,
    renew_calls: AtomicU64,
    /// Set by `stop` (under the entries' lock): a hold tracked after it is lost at once.
    stopped: AtomicBool,
    /// Trackings whose renewals failed (Redis unreachable or refusing), by id, with the last
    /// moment Redis surely set their lease (see `renewals_checked`). Empty while renewals work.
    unconfirmed: Mutex<HashMap<u64, Instant>>,
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
    /// returns its lost signal. `made`: the acquire's hold count was 1 (it made the hold). A
    /// tracked hold of the key with another fence is gone from Redis (this one could not be
    /// taken otherwise), so this one takes its place. (Not only an older one: a server that lost
    /// its data, by a restart or a failover, counts fences from 1 again, and may even draw the
    /// same fence: then a second acquire that made a hold with it tells.) Unless a release of it
    /// is under way, the hold replaced was lost, and is reported as a renewal would have:
    /// whether a tick or this acquire notices first must not matter.
    pub(crate) fn track(
        &self,
        client: &ClientInner,
        key: WatchKey,
        fence: u64,
        made: bool,
    ) -> Arc<LostSignal> {
        let (lost, replaced) = self.track_entry(key, fence, made);
        if let Some(key) = replaced {
            report_lost(client, &key, false);
        }
        lost
    }

    /// [`track`](Self::track) without the report: also returns the key of a replaced hold that
    /// was lost (its signal set).
    fn track_entry(
        &self,
        key: WatchKey,
        fence: u64,
        made: bool,
    ) -> (Arc<LostSignal>, Option<WatchKey>) {
        // A new hold of the same owner is not the lost one.
        self.lost.lock().unwrap().take(&key);
        let mut entries = self.entries.lock().unwrap();
        if self.stopped.load(Ordering::SeqCst) {
            // Closed while the acquire ran: nothing will renew it (as for the holds kept then).
            return (Arc::new(LostSignal::lost_and_ended()), None);
        }
        // Under the entries' lock, as a release records it there.
        if self.ended.lock().unwrap().take(&key, fence) {
            // Its release was heard first: nothing to keep.
            return (Arc::new(LostSignal::ended()), None);
        }
        let new_entry = |key: &WatchKey| {
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            let entry = WatchEntry {
                lost: Arc::default(),
                id,
                fence,
                made,
                releasing: 0,
                acquired_at: Instant::now(),
            };
            (entry, Renewal::new(key, id, fence))
        };
        if let Some(kept) = entries.get_mut(&key) {
            if kept.fence == fence && !(made && kept.made) {
                // A re-entry tracked before the acquire that made the hold, or after it.
                kept.made |= made;
                kept.acquired_at = Instant::now();
                return (kept.lost.clone(), None);
            }
        }
        let (entry, renewal) = new_entry(&key);
        let lost = entry.lost.clone();
        let replaced = match entries.insert(key.clone(), entry, renewal) {
            Some(old) => self.retire(old).then_some(key),
            None => None,
        };
        (lost, replaced)
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
            report_lost(client, key, false);
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
            self.parked.lock().unwrap().insert(entry.id, entry);
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
        self.releasing_fenced(key, None)
    }

    /// [`releasing`](Self::releasing) of the hold with the fencing token `meant` alone, if
    /// given: a tracked hold with another fence is not the one released, and is not marked.
    pub(crate) fn releasing_fenced(
        &self,
        key: impl FnOnce() -> WatchKey,
        meant: Option<u64>,
    ) -> Releasing<'_> {
        let mut entries = self.entries.lock().unwrap();
        let mut tracked = None;
        if !entries.is_empty() {
            let key = key();
            let entry = entries.get_mut(&key);
            if let Some(entry) = entry.filter(|e| meant.is_none_or(|m| e.fence == m)) {
                entry.releasing += 1;
                tracked = Some((key, entry.id));
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
        self.lost_all(client, self.take_renewals_gone(ids));
    }

    /// Reports holds lost together: one warn line for many (see `LOST_LOGGED_EACH`).
    fn lost_all(&self, client: &ClientInner, gone: Vec<(WatchKey, WatchEntry)>) {
        let summed_up = gone.len() > LOST_LOGGED_EACH;
        if summed_up {
            log_lost_many(
                client,
                gone.len(),
                gone.iter().map(|(key, _)| &*key.keys.name),
            );
        }
        for (key, entry) in gone {
            self.lost_logged(client, key, entry, summed_up);
        }
    }

    /// Whether some tracking's renewals are failing (see `renewals_checked`).
    fn any_unconfirmed(&self) -> bool {
        !self.unconfirmed.lock().unwrap().is_empty()
    }

    /// When the first lease of a tracked hold passes unless this tick renews it, counted as
    /// `renewals_checked` counts (from the last tick's start `previous`, or from the first
    /// failed renewal's); `None` before the first tick.
    pub(crate) fn first_lease_end(
        &self,
        previous: Option<Instant>,
        lease: Duration,
    ) -> Option<Instant> {
        let unconfirmed = self.unconfirmed.lock().unwrap();
        let earliest = unconfirmed.values().copied().chain(previous).min()?;
        earliest.checked_add(lease)
    }

    /// Renewals of the trackings `failed` got no answer or an error this tick; those of
    /// `confirmed` worked. A hold whose renewal fails for the first time had its lease last set
    /// by its acquire or by the tick before this one (which started at `previous`), whichever
    /// came later; it is remembered with that moment until a renewal of it works. Once `lease`
    /// has passed since then, Redis has let it expire (unless someone else renewed it), so it is
    /// reported lost rather than kept as held while nothing keeps it. (`previous` is the start
    /// of that tick, not the moment its call for this hold went: this errs early, by at most a
    /// tick's length. A holder told too soon stops early; one told too late does not stop.)
    fn renewals_checked(
        &self,
        client: &ClientInner,
        failed: &[u64],
        confirmed: &[u64],
        previous: Option<Instant>,
        lease: Duration,
    ) {
        let mut unconfirmed = self.unconfirmed.lock().unwrap();
        if failed.is_empty() && unconfirmed.is_empty() {
            return;
        }
        for id in confirmed {
            unconfirmed.remove(id);
        }
        if !failed.is_empty() {
            let entries = self.entries.lock().unwrap();
            let failed: HashSet<u64> = failed.iter().copied().collect();
            let mut live = HashSet::with_capacity(entries.len());
            for entry in entries.values() {
                let id = entry.id;
                live.insert(id);
                if failed.contains(&id) && !unconfirmed.contains_key(&id) {
                    let set = previous.map_or(entry.acquired_at, |p| p.max(entry.acquired_at));
                    unconfirmed.insert(id, set);
                }
            }
            // Trackings that ended (released, replaced, lost) are forgotten.
            unconfirmed.retain(|id, _| live.contains(id));
        }
        let now = Instant::now();
        let expired: HashSet<u64> = unconfirmed
            .iter()
            .filter(|(_, set)| now.saturating_duration_since(**set) >= lease)
            .map(|(id, _)| *id)
            .collect();
        if expired.is_empty() {
            return;
        }
        unconfirmed.retain(|id, _| !expired.contains(id));
        drop(unconfirmed);
        tracing::warn!(
            holds = expired.len(),
            "watchdog: renewals failed for a whole lease; the holds are reported lost"
        );
        self.mark_lost(client, &expired);
    }

    /// Takes the holds a renewal found gone out of tracking (see `mark_lost`).
    fn take_renewals_gone(&self, ids: &HashSet<u64>) -> Vec<(WatchKey, WatchEntry)> {
        self.take_where(|_, entry| entry.releasing == 0 && ids.contains(&entry.id))
    }

    /// Takes every tracked hold that `matches` out of tracking and reports it lost.
    fn mark_lost_where(
        &self,
        client: &ClientInner,
        matches: impl Fn(&WatchKey, &WatchEntry) -> bool,
    ) {
        self.lost_all(client, self.take_where(matches));
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
            report_lost(client, key, false);
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
        if parked.is_some() {
            return parked.map(|(_, entry)| entry);
        }
        let entry = take_gone(&mut entries, key, upto, releasing)?;
        // Another release of the same hold (another thread of the owner) is under way and may
        // be the one that ended it: its reply tells, as in `forget_entry`. Until then parked.
        if entry.releasing > u32::from(releasing.is_some_and(|r| r.marked(&entry))) {
            self.parked.lock().unwrap().insert(entry.id, entry);
            return None;
        }
        Some(entry)
    }

    /// A new hold of `key` with this fence that the watchdog does not keep (a fixed lease);
    /// `made` as for `track`. It is not the lost one (watched holds clear that in `track`). A
    /// tracked older hold of the key is gone from Redis (this one could not be taken
    /// otherwise), and so is one with the same fence whose making was tracked when this
    /// acquire made a hold too (a server counting fences anew): it is retired, and reported lost
    /// unless a release of it is under way, as `track` replaces one. A release of this hold
    /// heard before this acquire left a record for a watched acquire: dropped.
    pub(crate) fn untracked(
        &self,
        client: &ClientInner,
        key: impl FnOnce() -> WatchKey,
        fence: u64,
        made: bool,
    ) {
        if let Some(key) = self.untracked_entry(key, fence, made) {
            report_lost(client, &key, false);
        }
    }

    /// [`untracked`](Self::untracked) without the report: returns the key of a retired hold
    /// found lost (its signal set).
    fn untracked_entry(
        &self,
        key: impl FnOnce() -> WatchKey,
        fence: u64,
        made: bool,
    ) -> Option<WatchKey> {
        let key = std::cell::LazyCell::new(key);
        {
            let mut lost = self.lost.lock().unwrap();
            if !lost.keys.is_empty() {
                lost.take(&key);
            }
        }
        let mut entries = self.entries.lock().unwrap();
        {
            let mut ended = self.ended.lock().unwrap();
            if !ended.is_empty() {
                ended.take(&key, fence);
            }
        }
        let gone = |entry: &WatchEntry| {
            entry.fence < fence || (entry.fence == fence && made && entry.made)
        };
        if entries.is_empty() || !entries.get(&key).is_some_and(gone) {
            return None;
        }
        let key = WatchKey::clone(&key);
        let old = entries.remove(&key).expect("looked up above");
        self.retire(old).then_some(key)
    }

    /// A tracking that a newer hold of its key showed gone, taken out of `entries` (whose lock
    /// the caller holds): lost (its signal set; returns true), or parked while a release of it
    /// is under way, whose reply tells whether it ended it. Not remembered in `lost`: the key is
    /// the newer hold's too, and its release must not say LockLost.
    fn retire(&self, old: WatchEntry) -> bool {
        if old.releasing > 0 {
            self.parked.lock().unwrap().insert(old.id, old);
            return false;
        }
        old.lost.set();
        true
    }

    fn lost_logged(&self, client: &ClientInner, key: WatchKey, entry: WatchEntry, logged: bool) {
        // Remembered before anyone hears of it: a release right after the signal says lost.
        self.lost.lock().unwrap().insert(key.clone());
        entry.lost.set();
        report_lost(client, &key, logged);
    }

    /// On close: nothing renews the kept holds any more, so each lapses when its lease ends.
    /// Their lost signals are set (so waits on them end instead of hanging), without the
    /// lock-lost callback: the user closed the client.
    pub(crate) fn stop(&self) {
        let entries = {
            let mut entries = self.entries.lock().unwrap();
            self.stopped.store(true, Ordering::SeqCst);
            entries.take_all()
        };
        for entry in entries.into_values() {
            entry.lost.set();
        }
    }

    /// Marks every tracked hold of one name lost (after this client force-unlocked it).
    pub(crate) fn mark_name_lost(&self, client: &ClientInner, state_key: &str) {
        self.mark_lost_where(client, |key, _| key.keys.state() == state_key);
    }

    /// A tick's renewal calls: one per page of up to [`BATCH`] holds (see `pages`).
    fn plan_renewals(&self) -> Vec<pages::Planned> {
        self.entries.lock().unwrap().plan()
    }

    /// Keeps the call built for a page of a tick's plan, for the next ticks.
    fn keep_renewal_call(&self, built: pages::Built, call: Arc<redis::Cmd>, ids: Vec<u64>) {
        self.entries.lock().unwrap().keep(built, call, ids);
    }
}

/// Takes the tracking of `key` out if Redis said every hold of the name with a fence up to
/// `upto` is gone and it keeps one of them, or it is the tracking `releasing` marked (a server
/// that lost its data counts fences anew); a tracking with a larger fence keeps a later hold.
fn take_gone(
    entries: &mut Tracked,
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
    /// Whether the hold was tracked (kept by the watchdog) when the guard was made.
    pub(crate) fn is_tracked(&self) -> bool {
        self.tracked.is_some()
    }

    /// The mark, moved out of this guard for a release heard out in the background (see
    /// `lock::late_release`); `client` is the one whose watchdog made the guard.
    pub(crate) fn carry(mut self, client: Arc<ClientInner>) -> CarriedMark {
        CarriedMark {
            tracked: self.tracked.take(),
            client,
        }
    }

    /// Whether `entry` is the tracking this release marked (not replaced since).
    fn marked(&self, entry: &WatchEntry) -> bool {
        self.tracked.as_ref().is_some_and(|(_, id)| *id == entry.id)
    }
}

/// A [`Releasing`] mark that owns its client, so that it can outlive the call that made it.
/// Dropped, it is dropped as the guard would have been.
pub(crate) struct CarriedMark {
    client: Arc<ClientInner>,
    tracked: Option<(WatchKey, u64)>,
}

impl CarriedMark {
    /// The guard again, for the reply's verdict (`forget`, `take_lost`).
    pub(crate) fn resume(&mut self) -> Releasing<'_> {
        Releasing {
            watchdog: &self.client.watchdog,
            tracked: self.tracked.take(),
        }
    }
}

impl Drop for CarriedMark {
    fn drop(&mut self) {
        drop(self.resume());
    }
}

impl Drop for Releasing<'_> {
    fn drop(&mut self) {
        let Some((key, id)) = self.tracked.take() else {
            return;
        };
        let mut entries = self.watchdog.entries.lock().unwrap();
        if let Some(entry) = entries.get_mut(&key).filter(|e| e.id == id) {
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

#[cfg(test)]
mod tests;
