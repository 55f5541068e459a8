//! Unit tests of the tracking, without a client or Redis: releases and acquires heard in either
//! order, re-entries, replaced and lost holds.

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
    watchdog.entries.lock().unwrap()[&key(token)].id
}

/// Tracks a hold its acquire made (no client: lost holds are not reported).
fn track(watchdog: &Watchdog, key: WatchKey, fence: u64) -> Arc<LostSignal> {
    watchdog.track_entry(key, fence, true).0
}

/// Tracks a re-entry (a hold count above 1).
fn reenter(watchdog: &Watchdog, key: WatchKey, fence: u64) -> Arc<LostSignal> {
    watchdog.track_entry(key, fence, false).0
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
    assert!(Arc::ptr_eq(&hold, &reenter(&watchdog, key("a"), 9)));
    // A server that lost its data counts fences from 1 again: the new hold is kept.
    let (after_restart, replaced) = watchdog.track_entry(key("a"), 1, true);
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

#[test]
fn a_hold_tracked_after_stop_is_lost_and_not_kept() {
    let watchdog = Watchdog::default();
    let before = track(&watchdog, key("a"), 1);
    watchdog.stop();
    assert!(before.is_set() && !before.is_watched());
    // An acquire that finished as the client closed: nothing would renew it.
    let after = track(&watchdog, key("b"), 2);
    assert!(after.is_set(), "reported lost");
    assert!(!after.is_watched());
    assert_eq!(watchdog.len(), 0);
}

#[test]
fn a_fixed_lease_hold_retires_an_older_tracking_of_its_key_only() {
    let watchdog = Watchdog::default();
    let old = track(&watchdog, key("a"), 3);
    let other = track(&watchdog, key("b"), 4);
    // The owner of "a" took a fixed-lease hold with fence 5: the one with fence 3 is gone.
    assert!(watchdog.untracked_entry(|| key("a"), 5, true) == Some(key("a")));
    assert!(old.is_set() && !old.is_watched());
    assert!(other.is_watched(), "another key's hold is kept");
    // A fixed-lease hold heard after a newer watched one (replies out of order) retires nothing.
    let newer = track(&watchdog, key("b"), 9);
    assert!(watchdog.untracked_entry(|| key("b"), 6, true).is_none());
    assert!(newer.is_watched());
    assert_eq!(tracked_fence(&watchdog, "b"), Some(9));
}

#[test]
fn a_fixed_lease_acquire_drops_the_ended_record_its_early_release_left() {
    let watchdog = Watchdog::default();
    let _old = track(&watchdog, key("a"), 3);
    // Its fixed-lease hold with fence 5 was released before its acquire was heard: the release
    // found fence 3 tracked and remembered fence 5 as ended.
    let releasing = unmarked(&watchdog);
    assert!(forget(&watchdog, "a", 5, &releasing) == Some(key("a")));
    drop(releasing);
    assert!(watchdog.untracked_entry(|| key("a"), 5, true).is_none());
    // A later watched hold that draws fence 5 (a restarted server) is kept.
    let later = track(&watchdog, key("a"), 5);
    assert!(later.is_watched());
}

#[test]
fn a_second_hold_made_with_the_same_fence_replaces_the_first() {
    let watchdog = Watchdog::default();
    // A server that lost its data drew fence 1 again for the owner's next hold.
    let first = track(&watchdog, key("a"), 1);
    let (second, replaced) = watchdog.track_entry(key("a"), 1, true);
    assert!(first.is_set() && !first.is_watched() && replaced == Some(key("a")));
    assert!(second.is_watched() && !second.is_set());
    // A re-entry heard before the acquire that made its hold (two calls of one owner at once)
    // joins, and so does that acquire.
    let reentered = reenter(&watchdog, key("b"), 4);
    assert!(Arc::ptr_eq(&reentered, &track(&watchdog, key("b"), 4)));
    assert!(Arc::ptr_eq(&reentered, &reenter(&watchdog, key("b"), 4)));
    assert!(reentered.is_watched());
    // A fixed-lease hold made with the fence of a tracked hold that was made: a new server's.
    assert!(watchdog.untracked_entry(|| key("b"), 4, false).is_none());
    assert!(watchdog.untracked_entry(|| key("b"), 4, true) == Some(key("b")));
    assert!(reentered.is_set() && !reentered.is_watched());
}

/// The ids a tick would renew, each once, against the tracked holds' ids.
fn assert_renewals_match_tracking(watchdog: &Watchdog) {
    let renewed: Vec<u64> = (watchdog.plan_renewals().iter())
        .flat_map(|call| call.ids())
        .collect();
    let unique: HashSet<u64> = renewed.iter().copied().collect();
    assert_eq!(
        unique.len(),
        renewed.len(),
        "a hold renewed twice in a tick"
    );
    let tracked: HashSet<u64> = (watchdog.entries.lock().unwrap().values())
        .map(|entry| entry.id)
        .collect();
    assert_eq!(unique, tracked);
}

#[test]
fn a_tick_renews_exactly_the_tracked_holds_however_they_came_and_went() {
    let watchdog = Watchdog::default();
    for token in ["a", "b", "c", "d"] {
        track(&watchdog, key(token), 1);
    }
    assert_renewals_match_tracking(&watchdog);
    // A re-entry keeps the tracking; another fence replaces it (a new id).
    let before = id_of(&watchdog, "a");
    reenter(&watchdog, key("a"), 1);
    assert_eq!(id_of(&watchdog, "a"), before);
    track(&watchdog, key("b"), 2);
    assert_renewals_match_tracking(&watchdog);
    // Released; retired by a fixed-lease hold; replaced while being released (parked).
    let releasing = watchdog.releasing(|| key("a"));
    assert!(forget(&watchdog, "a", 1, &releasing).is_none());
    drop(releasing);
    watchdog.untracked_entry(|| key("c"), 3, true);
    let releasing = watchdog.releasing(|| key("d"));
    track(&watchdog, key("d"), 4);
    assert_renewals_match_tracking(&watchdog);
    drop(releasing);
    // Found gone by a renewal, and every hold at close.
    let gone = HashSet::from([id_of(&watchdog, "b")]);
    assert_eq!(watchdog.take_renewals_gone(&gone).len(), 1);
    assert_renewals_match_tracking(&watchdog);
    assert_eq!(watchdog.len(), 1);
    watchdog.stop();
    assert_renewals_match_tracking(&watchdog);
    assert!(watchdog.plan_renewals().is_empty());
}

fn random_key(n: u64) -> WatchKey {
    let keys = Arc::new(LockKeys::new("t", &format!("n{}", n % 7)).unwrap());
    WatchKey::new(&keys, Mode::Write, format!("o{n}").into())
}

fn tracked_ids(watchdog: &Watchdog) -> HashSet<u64> {
    (watchdog.entries.lock().unwrap().values())
        .map(|e| e.id)
        .collect()
}

#[test]
fn random_tracking_and_ticks_renew_exactly_the_tracked_holds() {
    let mut rng = Xorshift(0x2545_f491_4f6c_dd1d);
    let mut rnd = move || rng.next();
    let watchdog = Watchdog::default();
    let mut guards: Vec<Releasing<'_>> = Vec::new();
    let mut in_flight: Vec<pages::Planned> = Vec::new();
    let mut tick_ids: Vec<u64> = Vec::new();
    let mut at_plan: HashSet<u64> = HashSet::new();
    let mut ticks = 0;
    for step in 0..60_000u64 {
        let n = rnd() % 4000;
        let fence = rnd() % 4 + 1;
        match rnd() % 100 {
            0..=39 => {
                watchdog.track_entry(random_key(n), fence, rnd() % 2 == 0);
            }
            40..=49 => guards.push(watchdog.releasing(|| random_key(n))),
            50..=59 if !guards.is_empty() => {
                let g = guards.swap_remove((rnd() as usize) % guards.len());
                let key = g.tracked.as_ref().map_or(random_key(n), |(k, _)| k.clone());
                watchdog.forget_entry(|| key, fence, &g);
            }
            60..=64 => {
                watchdog.untracked_entry(|| random_key(n), fence, rnd() % 2 == 0);
            }
            65..=69 => {
                let g = guards.last();
                watchdog.take_lost_entry(&random_key(n), fence, g);
            }
            70..=72 => {
                let ids: Vec<u64> = tracked_ids(&watchdog).into_iter().take(20).collect();
                let ids: HashSet<u64> = ids.into_iter().filter(|_| rnd() % 2 == 0).collect();
                watchdog.take_renewals_gone(&ids);
            }
            73..=74 if !guards.is_empty() => {
                guards.swap_remove((rnd() as usize) % guards.len());
            }
            _ => {
                if in_flight.is_empty() {
                    if ticks > 0 {
                        let set: HashSet<u64> = tick_ids.iter().copied().collect();
                        assert_eq!(set.len(), tick_ids.len(), "a hold renewed twice");
                        assert_eq!(set, at_plan, "step {step}");
                    }
                    ticks += 1;
                    tick_ids.clear();
                    at_plan = tracked_ids(&watchdog);
                    in_flight = watchdog.plan_renewals();
                    in_flight.reverse();
                } else {
                    let planned = in_flight.pop().unwrap();
                    let (call, ids, built) = planned.into_call(30_000);
                    assert_eq!(call.args_iter().count(), 4 + 4 * ids.len());
                    if let Some(built) = built {
                        watchdog.keep_renewal_call(built, call, ids.clone());
                    }
                    tick_ids.extend(ids);
                }
            }
        }
        if step % 97 == 0 && in_flight.is_empty() {
            assert_renewals_match_tracking(&watchdog);
        }
    }
    drop(guards);
    assert!(ticks > 100, "{ticks}");
    assert_renewals_match_tracking(&watchdog);
    watchdog.stop();
    assert!(watchdog.plan_renewals().is_empty());
}

/// A small deterministic generator for the randomized tests (xorshift64).
pub(super) struct Xorshift(pub(super) u64);

impl Xorshift {
    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}
