//! The pages' unit tests: every tracked hold in exactly one call a tick, whatever joins and
//! leaves when; calls kept and rebuilt right; pages packed and their bookkeeping sound.

use super::*;
use crate::keys::LockKeys;
use crate::lock::Mode;
use crate::watchdog::WatchKey;
use crate::watchdog::tests::Xorshift;
use std::collections::HashSet;

const LEASE_MS: u64 = 30_000;

fn hold(id: u64) -> Renewal {
    let keys = Arc::new(LockKeys::new("t", &format!("name:{id}")).unwrap());
    let key = WatchKey::new(&keys, Mode::Write, format!("owner-{id}").into());
    Renewal::new(&key, id, id + 100)
}

/// Plans a tick and builds what must be (as the renewal loop does), checking each call
/// against one built afresh from its holds' texts; returns each call's ids, and how many
/// calls were sent as built before.
fn tick(pages: &mut Pages) -> (Vec<Vec<u64>>, usize) {
    let mut reused = 0;
    let mut calls = Vec::new();
    for planned in pages.plan() {
        let (call, ids, built) = planned.into_call(LEASE_MS);
        let holds: Vec<Renewal> = ids.iter().map(|&id| hold(id)).collect();
        let fresh = renew_call(None, &holds, LEASE_MS);
        assert!(
            call.get_packed_command() == fresh.get_packed_command(),
            "a call renews its page's holds, in order"
        );
        match built {
            Some(built) => pages.keep(built, call, ids.clone()),
            None => reused += 1,
        }
        calls.push(ids);
    }
    (calls, reused)
}

fn covered(calls: &[Vec<u64>]) -> HashSet<u64> {
    let all: Vec<u64> = calls.iter().flatten().copied().collect();
    let set: HashSet<u64> = all.iter().copied().collect();
    assert_eq!(set.len(), all.len(), "a hold is renewed once a tick");
    set
}

#[test]
fn an_idle_tick_sends_the_calls_built_before() {
    let mut pages = Pages::default();
    for id in 0..1200 {
        pages.add(hold(id));
    }
    let (first, reused) = tick(&mut pages);
    assert_eq!((first.len(), reused), (3, 0));
    let (second, reused) = tick(&mut pages);
    assert_eq!((second, reused), (first, 3));
}

#[test]
fn only_the_pages_a_hold_joined_or_left_are_built_again() {
    let mut pages = Pages::default();
    for id in 0..1200 {
        pages.add(hold(id));
    }
    tick(&mut pages);
    pages.remove(7); // the first page
    pages.add(hold(5000)); // the last one, which has room
    let (calls, reused) = tick(&mut pages);
    assert_eq!(reused, 1);
    let expected: HashSet<u64> = (0..1200).filter(|&id| id != 7).chain([5000]).collect();
    assert_eq!(covered(&calls), expected);
    assert_eq!(tick(&mut pages).1, 3);
}

#[test]
fn a_call_built_from_a_page_that_changed_meanwhile_is_not_kept() {
    let mut pages = Pages::default();
    pages.add(hold(1));
    let planned = pages.plan().pop().expect("a page");
    let (call, ids, built) = planned.into_call(LEASE_MS);
    pages.add(hold(2));
    pages.remove(1);
    pages.keep(built.expect("a new page's call is built"), call, ids);
    let (calls, reused) = tick(&mut pages);
    assert_eq!((covered(&calls), reused), (HashSet::from([2]), 0));
}

fn churn(by_slot: bool) {
    let mut pages = Pages::grouped_by_slot(by_slot);
    let mut live = HashSet::new();
    let mut rng = Xorshift(0x2545_f491_4f6c_dd1d);
    let mut next = move || rng.next();
    for round in 0..40 {
        // Grow to ~3 000, then shrink to a few: pages empty and go sparse.
        let joining = round < 20;
        for _ in 0..400 {
            let id = next() % 4000;
            if joining == live.contains(&id) {
                continue;
            }
            if joining {
                pages.add(hold(id));
                live.insert(id);
            } else {
                pages.remove(id);
                live.remove(&id);
            }
        }
        let (calls, _) = tick(&mut pages);
        assert_eq!(covered(&calls), live, "round {round}");
        assert_eq!(pages.len(), live.len());
        assert!(calls.iter().all(|ids| ids.len() <= BATCH));
        let slots = |ids: &Vec<u64>| ids.iter().map(|&id| hold(id).slot).collect::<HashSet<_>>();
        let groups: HashSet<u16> = calls.iter().flat_map(slots).collect();
        if by_slot {
            assert!(calls.iter().all(|ids| slots(ids).len() == 1));
        }
        let groups = if by_slot { groups.len() } else { 1 };
        let needed = live.len().div_ceil(BATCH);
        assert!(
            calls.len() <= SPARSE * needed + groups,
            "{} calls",
            calls.len()
        );
    }
    for id in live.drain() {
        pages.remove(id);
    }
    assert!(tick(&mut pages).0.is_empty());
}

#[test]
fn any_joins_and_leaves_keep_every_hold_in_one_call_and_pages_packed() {
    churn(false);
}

#[test]
fn grouped_by_slot_a_call_names_one_slot() {
    churn(true);
}

pub(super) fn check_structure(pages: &Pages) {
    let free: HashSet<usize> = pages.free.iter().copied().collect();
    assert_eq!(free.len(), pages.free.len(), "a page freed twice");
    let opens: HashSet<usize> = pages.groups.values().map(|g| g.open).collect();
    for (i, page) in pages.pages.iter().enumerate() {
        if free.contains(&i) {
            assert_eq!(page.holds(), 0, "a freed page with holds");
            assert!(!opens.contains(&i), "an open page freed");
        } else if page.holds() == 0 {
            assert!(opens.contains(&i), "an empty page {i} never freed");
        }
        if page.call.is_none() {
            assert!(page.in_call.is_empty());
        }
    }
    for (group, g) in &pages.groups {
        let n: usize = (pages.pages.iter().enumerate())
            .filter(|(i, p)| p.group == *group && !free.contains(i))
            .map(|(_, p)| p.holds())
            .sum();
        assert_eq!(n, g.holds);
    }
}

struct Model {
    live: Vec<u64>,
    next_id: u64,
    seed: Xorshift,
}

impl Model {
    fn rnd(&mut self) -> u64 {
        self.seed.next()
    }
    fn churn(&mut self, pages: &mut Pages, n: u64, grow: bool) {
        for _ in 0..n {
            let r = self.rnd() % 100;
            if (grow && r < 60) || (!grow && r < 35) || self.live.is_empty() {
                pages.add(hold(self.next_id));
                self.live.push(self.next_id);
                self.next_id += 1;
            } else {
                let at = (self.rnd() as usize) % self.live.len();
                let id = self.live.swap_remove(at);
                pages.remove(id);
            }
        }
    }
}

fn run(by_slot: bool, seed: u64) {
    let mut pages = Pages::grouped_by_slot(by_slot);
    let mut m = Model {
        live: Vec::new(),
        next_id: 0,
        seed: Xorshift(seed),
    };
    for round in 0..60 {
        let grow = (round / 10) % 2 == 0;
        let planned = pages.plan();
        check_structure(&pages);
        let at_plan: HashSet<u64> = m.live.iter().copied().collect();
        let mut all = Vec::new();
        let per = 300 / (planned.len() as u64 + 1) + 1;
        for p in planned {
            let n = m.rnd() % (2 * per);
            m.churn(&mut pages, n, grow);
            let (call, ids, built) = p.into_call(LEASE_MS);
            let args = call.args_iter().count();
            assert_eq!(args, 4 + 4 * ids.len());
            if let Some(b) = built {
                pages.keep(b, call, ids.clone());
            }
            all.extend(ids);
        }
        check_structure(&pages);
        let set: HashSet<u64> = all.iter().copied().collect();
        assert_eq!(set.len(), all.len(), "renewed twice");
        assert_eq!(set, at_plan, "round {round}");
        let n = m.rnd() % 1500;
        m.churn(&mut pages, n, grow);
        check_structure(&pages);
        assert_eq!(pages.len(), m.live.len());
    }
    // The calls still name the right holds, in order (checked against fresh ones).
    for p in pages.plan() {
        let (call, ids, _) = p.into_call(LEASE_MS);
        let holds: Vec<Renewal> = ids.iter().map(|&id| hold(id)).collect();
        let fresh = renew_call(None, &holds, LEASE_MS);
        assert!(call.get_packed_command() == fresh.get_packed_command());
    }
}

#[test]
fn holds_joining_and_leaving_mid_tick_are_renewed_exactly_once_and_pages_stay_sound() {
    for s in 1..4u64 {
        run(false, 0x9E37_79B9_7F4A_7C15 ^ s);
        run(true, 0x1234_5678_9ABC_DEF1 ^ s);
    }
}

/// Latent only: `clear` is called by `stop` alone, after which nothing is added.
#[test]
fn a_call_planned_before_clear_is_not_kept_for_a_page_filled_after() {
    let mut pages = Pages::default();
    pages.add(hold(1));
    let planned = pages.plan().pop().unwrap();
    let (call, ids, built) = planned.into_call(30_000);
    pages.clear();
    pages.add(hold(2));
    pages.keep(built.unwrap(), call, ids);
    let renewed: Vec<u64> = pages.plan().iter().flat_map(|p| p.ids()).collect();
    assert_eq!(renewed, vec![2]);
}
