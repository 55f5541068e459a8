//! The watchdog's renewal calls, kept built from one tick to the next.
//!
//! Guarantees: every tracked hold is in exactly one page, a page holds up to [`BATCH`] holds of
//! one group (one hash slot when holds are grouped by slot, else all), and a page's call renews
//! exactly its holds, in their order. A page's call is built once and sent again every tick
//! until a hold joins or leaves the page: at 100 000 idle holds a tick sends calls built before
//! instead of reading every hold's text from all over the heap (half of a tick's CPU).

use std::collections::HashMap;
use std::sync::Arc;

use super::BATCH;
use super::renewal::Renewal;

/// Pages end up sparse as holds leave them; past this many times the pages their holds need,
/// they are packed again (every page then rebuilt once).
const SPARSE: usize = 2;

#[derive(Default)]
pub(super) struct Pages {
    pages: Vec<Page>,
    /// The page of each hold, by tracking id.
    page_of: HashMap<u64, usize>,
    /// Per group, its holds and the page new ones join while it has room.
    groups: HashMap<u16, Group>,
    /// Emptied pages, to be used again.
    free: Vec<usize>,
    /// Holds are grouped by hash slot, as a client of a Redis Cluster must (a call is valid on
    /// one node only if its keys share a slot); a standalone server takes any keys in one call.
    by_slot: bool,
    next_version: u64,
}

struct Group {
    holds: usize,
    open: usize,
}

#[derive(Default)]
struct Page {
    members: Vec<Renewal>,
    /// The call renewing `members` in their order; `None` once one joined or left since.
    built: Option<Arc<redis::Cmd>>,
    /// Unique among all pages' states ever: a call built from an older state is not kept.
    version: u64,
}

/// One call of a tick: built already, or to be built from a copy of the page's holds.
pub(super) enum Planned {
    Built {
        call: Arc<redis::Cmd>,
        ids: Vec<u64>,
    },
    ToBuild {
        page: usize,
        version: u64,
        members: Vec<Renewal>,
    },
}

impl Planned {
    /// The tracking ids the call renews, in its order.
    pub(super) fn ids(&self) -> Vec<u64> {
        match self {
            Planned::Built { ids, .. } => ids.clone(),
            Planned::ToBuild { members, .. } => members.iter().map(|hold| hold.id).collect(),
        }
    }
}

impl Pages {
    pub(super) fn grouped_by_slot(by_slot: bool) -> Self {
        Pages {
            by_slot,
            ..Pages::default()
        }
    }

    /// Files a newly tracked hold in its group's open page.
    pub(super) fn add(&mut self, hold: Renewal) {
        let group = self.group_of(&hold);
        let open = match self.groups.get(&group) {
            Some(g) if self.pages[g.open].members.len() < BATCH => g.open,
            _ => self.new_page(),
        };
        let g = self.groups.entry(group).or_insert(Group { holds: 0, open });
        g.holds += 1;
        g.open = open;
        self.page_of.insert(hold.id, open);
        self.pages[open].members.push(hold);
        self.changed(open);
    }

    /// Takes the hold with this tracking id out of its page (if it is in one).
    pub(super) fn remove(&mut self, id: u64) {
        let Some(page) = self.page_of.remove(&id) else {
            return;
        };
        let members = &mut self.pages[page].members;
        let at = members.iter().position(|hold| hold.id == id);
        let hold = members.swap_remove(at.expect("a hold is in the page it was filed in"));
        let emptied = members.is_empty();
        self.changed(page);
        let group = self.group_of(&hold);
        let g = self.groups.get_mut(&group).expect("a filed hold's group");
        g.holds -= 1;
        if g.holds == 0 {
            // Its pages are all empty: the others were freed as they emptied.
            let open = g.open;
            self.groups.remove(&group);
            self.free.push(page);
            if open != page {
                self.free.push(open);
            }
        } else if emptied && g.open != page {
            self.free.push(page);
        }
    }

    /// Forgets every hold.
    pub(super) fn clear(&mut self) {
        *self = Pages::grouped_by_slot(self.by_slot);
    }

    /// The calls of a tick, one per page with holds. Packs the pages again first if they are
    /// too sparse.
    pub(super) fn plan(&mut self) -> Vec<Planned> {
        let needed: usize = self.groups.values().map(|g| g.holds.div_ceil(BATCH)).sum();
        if self.pages.len() - self.free.len() > SPARSE * needed + self.groups.len() {
            self.repack();
        }
        let pages = self.pages.iter().enumerate();
        let filled = pages.filter(|(_, page)| !page.members.is_empty());
        filled
            .map(|(i, page)| match &page.built {
                Some(call) => Planned::Built {
                    call: call.clone(),
                    ids: page.members.iter().map(|hold| hold.id).collect(),
                },
                None => Planned::ToBuild {
                    page: i,
                    version: page.version,
                    members: page.members.clone(),
                },
            })
            .collect()
    }

    /// Keeps the call built for a page as it was planned, unless the page changed since.
    pub(super) fn keep(&mut self, page: usize, version: u64, call: Arc<redis::Cmd>) {
        if let Some(page) = self.pages.get_mut(page).filter(|p| p.version == version) {
            page.built = Some(call);
        }
    }

    fn group_of(&self, hold: &Renewal) -> u16 {
        if self.by_slot { hold.slot } else { 0 }
    }

    fn new_page(&mut self) -> usize {
        if let Some(page) = self.free.pop() {
            return page;
        }
        self.pages.push(Page::default());
        self.pages.len() - 1
    }

    fn changed(&mut self, page: usize) {
        self.next_version += 1;
        let page = &mut self.pages[page];
        page.built = None;
        page.version = self.next_version;
    }

    /// Files every hold again, in full pages: moves the holds, reads none of their texts.
    fn repack(&mut self) {
        let mut old = std::mem::take(&mut self.pages);
        let by_slot = self.by_slot;
        let next_version = self.next_version;
        *self = Pages::grouped_by_slot(by_slot);
        self.next_version = next_version;
        for page in &mut old {
            for hold in page.members.drain(..) {
                self.add(hold);
            }
        }
    }

    /// Holds filed.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.page_of.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::LockKeys;
    use crate::lock::Mode;
    use crate::watchdog::WatchKey;
    use crate::watchdog::renewal::renew_call;
    use std::collections::HashSet;

    const LEASE_MS: u64 = 30_000;

    fn hold(id: u64) -> Renewal {
        let keys = Arc::new(LockKeys::new("t", &format!("name:{id}")).unwrap());
        let key = WatchKey::new(&keys, Mode::Write, format!("owner-{id}").into());
        Renewal::new(&key, id, id + 100)
    }

    /// Plans a tick and builds what must be (as the renewal loop does); returns each call's
    /// ids, and the calls that were built before.
    fn tick(pages: &mut Pages) -> (Vec<Vec<u64>>, usize) {
        let mut reused = 0;
        let mut calls = Vec::new();
        for planned in pages.plan() {
            calls.push(planned.ids());
            match planned {
                Planned::Built { call, ids } => {
                    let members: Vec<Renewal> = ids.iter().map(|&id| hold(id)).collect();
                    let fresh = renew_call(&members, LEASE_MS).get_packed_command();
                    assert_eq!(
                        call.get_packed_command(),
                        fresh,
                        "a kept call renews its page"
                    );
                    reused += 1;
                }
                Planned::ToBuild {
                    page,
                    version,
                    members,
                } => {
                    let call = renew_call(&members, LEASE_MS);
                    pages.keep(page, version, Arc::new(call));
                }
            }
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
    }

    #[test]
    fn a_call_built_from_a_page_that_changed_meanwhile_is_not_kept() {
        let mut pages = Pages::default();
        pages.add(hold(1));
        let Some(Planned::ToBuild {
            page,
            version,
            members,
        }) = pages.plan().pop()
        else {
            panic!("a new page is to be built");
        };
        pages.add(hold(2));
        pages.keep(page, version, Arc::new(renew_call(&members, LEASE_MS)));
        let (calls, reused) = tick(&mut pages);
        assert_eq!((covered(&calls), reused), (HashSet::from([1, 2]), 0));
    }

    #[test]
    fn any_joins_and_leaves_keep_every_hold_in_one_call_and_pages_packed() {
        let mut pages = Pages::default();
        let mut live = HashSet::new();
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
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
            let needed = live.len().div_ceil(BATCH);
            assert!(calls.len() <= SPARSE * needed + 1, "{} calls", calls.len());
            assert!(calls.iter().all(|ids| ids.len() <= BATCH));
        }
        for id in live.drain() {
            pages.remove(id);
        }
        assert!(tick(&mut pages).0.is_empty());
    }

    #[test]
    fn grouped_by_slot_a_call_names_one_slot() {
        let mut pages = Pages::grouped_by_slot(true);
        for id in 0..300 {
            pages.add(hold(id));
        }
        for planned in pages.plan() {
            let Planned::ToBuild { members, .. } = planned else {
                panic!("new pages are to be built");
            };
            assert!(members.iter().all(|hold| hold.slot == members[0].slot));
        }
    }
}
