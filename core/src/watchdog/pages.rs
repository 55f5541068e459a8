//! The watchdog's renewal calls, kept built from one tick to the next.
//!
//! Guarantees: every tracked hold is in exactly one page, a page holds up to [`BATCH`] holds of
//! one group (one hash slot when holds are grouped by slot, else all), and a page's call renews
//! exactly its holds. A page's call is built once and sent again every tick until a hold joins
//! or leaves the page; then it is built again from the old call's arguments and the texts of the
//! holds that joined. At 100 000 idle holds a tick sends calls built before instead of reading
//! every hold's text from all over the heap (half of a tick's CPU), and a hold in a built call
//! keeps no text of its own.

use std::collections::HashMap;
use std::sync::Arc;

use super::BATCH;
use super::renewal::{Renewal, renew_call};

/// Pages end up sparse as holds leave them; past this many times the pages their holds need,
/// they are packed again (every page then rebuilt once).
const SPARSE: usize = 2;

/// The tracking id at a position of a page's call whose hold left since it was built. (Ids
/// count up from 0, one per tracking: never this far.)
const LEFT: u64 = u64::MAX;

/// The holds still in a call whose tracking id at each position is `in_call`: each one's
/// position in it, and its id.
pub(super) fn still_in(in_call: &[u64]) -> impl Iterator<Item = (usize, u64)> + '_ {
    let positions = in_call.iter().copied().enumerate();
    positions.filter(|&(_, id)| id != LEFT)
}

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
    group: u16,
    /// The call built last, and the tracking id at each of its positions (`LEFT` once that
    /// hold left).
    call: Option<Arc<redis::Cmd>>,
    in_call: Vec<u64>,
    /// `LEFT`s in `in_call`.
    left: usize,
    /// Holds that joined since the call was built.
    joined: Vec<Renewal>,
    /// Unique among all pages' states ever: a call built from an older state is not kept.
    version: u64,
}

impl Page {
    fn holds(&self) -> usize {
        self.in_call.len() - self.left + self.joined.len()
    }
}

/// One call of a tick: built already, or to be built from the page's last call and the holds
/// that joined it.
pub(super) enum Planned {
    Built {
        call: Arc<redis::Cmd>,
        ids: Vec<u64>,
    },
    ToBuild {
        page: usize,
        version: u64,
        last: Option<Arc<redis::Cmd>>,
        in_call: Vec<u64>,
        joined: Vec<Renewal>,
    },
}

/// A call built for a page as planned, to keep for the next ticks.
pub(super) struct Built {
    page: usize,
    version: u64,
}

impl Planned {
    /// The tracking ids the call renews, in its order.
    pub(super) fn ids(&self) -> Vec<u64> {
        match self {
            Planned::Built { ids, .. } => ids.clone(),
            Planned::ToBuild {
                in_call, joined, ..
            } => ids_of(in_call, joined),
        }
    }

    /// The call and the ids it renews; if it was built here (outside the watchdog's lock), what
    /// to tell [`Pages::keep`].
    pub(super) fn into_call(self, lease_ms: u64) -> (Arc<redis::Cmd>, Vec<u64>, Option<Built>) {
        match self {
            Planned::Built { call, ids } => (call, ids, None),
            Planned::ToBuild {
                page,
                version,
                last,
                in_call,
                joined,
            } => {
                let ids = ids_of(&in_call, &joined);
                let last = last.as_deref().map(|call| (call, &in_call[..]));
                let call = Arc::new(renew_call(last, &joined, lease_ms));
                (call, ids, Some(Built { page, version }))
            }
        }
    }
}

/// The ids of a call built from one with `in_call` and the holds that `joined`.
fn ids_of(in_call: &[u64], joined: &[Renewal]) -> Vec<u64> {
    (still_in(in_call).map(|(_, id)| id))
        .chain(joined.iter().map(|hold| hold.id))
        .collect()
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
        let group = if self.by_slot { hold.slot } else { 0 };
        let open = match self.groups.get(&group) {
            Some(g) if self.pages[g.open].holds() < BATCH => g.open,
            _ => self.new_page(group),
        };
        let g = self.groups.entry(group).or_insert(Group { holds: 0, open });
        g.holds += 1;
        g.open = open;
        self.page_of.insert(hold.id, open);
        self.pages[open].joined.push(hold);
        self.changed(open);
    }

    /// Takes the hold with this tracking id out of its page (if it is in one).
    pub(super) fn remove(&mut self, id: u64) {
        let Some(at) = self.page_of.remove(&id) else {
            return;
        };
        let page = &mut self.pages[at];
        if let Some(position) = page.in_call.iter().position(|&held| held == id) {
            page.in_call[position] = LEFT;
            page.left += 1;
        } else if let Some(position) = page.joined.iter().position(|hold| hold.id == id) {
            page.joined.swap_remove(position);
        } else {
            debug_assert!(false, "hold {id} is not in the page it was filed in");
            return;
        }
        let (emptied, group) = (page.holds() == 0, page.group);
        if emptied {
            *page = Page {
                group,
                ..Page::default()
            };
        }
        self.changed(at);
        let g = self.groups.get_mut(&group).expect("a filed hold's group");
        g.holds -= 1;
        if g.holds == 0 {
            // Its pages are all empty: the others were freed as they emptied.
            let open = g.open;
            self.groups.remove(&group);
            self.free.push(at);
            if open != at {
                self.free.push(open);
            }
        } else if emptied && g.open != at {
            self.free.push(at);
        }
    }

    /// Forgets every hold. (Versions go on counting: a call planned before is not kept.)
    pub(super) fn clear(&mut self) {
        let next_version = self.next_version;
        *self = Pages::grouped_by_slot(self.by_slot);
        self.next_version = next_version;
    }

    /// The calls of a tick, one per page with holds. Packs the pages again first if they are
    /// too sparse.
    pub(super) fn plan(&mut self) -> Vec<Planned> {
        let needed: usize = self.groups.values().map(|g| g.holds.div_ceil(BATCH)).sum();
        if self.pages.len() - self.free.len() > SPARSE * needed + self.groups.len() {
            self.repack();
        }
        let pages = self.pages.iter().enumerate();
        let filled = pages.filter(|(_, page)| page.holds() > 0);
        filled
            .map(|(i, page)| match &page.call {
                Some(call) if page.left == 0 && page.joined.is_empty() => Planned::Built {
                    call: call.clone(),
                    ids: page.in_call.clone(),
                },
                last => Planned::ToBuild {
                    page: i,
                    version: page.version,
                    last: last.clone(),
                    in_call: page.in_call.clone(),
                    joined: page.joined.clone(),
                },
            })
            .collect()
    }

    /// Keeps the call built for a page as planned (renewing `ids`, in their order), unless the
    /// page changed since: the holds that joined it then keep their texts no longer.
    pub(super) fn keep(&mut self, built: Built, call: Arc<redis::Cmd>, ids: Vec<u64>) {
        let Some(page) = self.pages.get_mut(built.page) else {
            return;
        };
        if page.version == built.version {
            page.call = Some(call);
            page.in_call = ids;
            page.left = 0;
            page.joined = Vec::new();
        }
    }

    fn new_page(&mut self, group: u16) -> usize {
        let at = self.free.pop().unwrap_or_else(|| {
            self.pages.push(Page::default());
            self.pages.len() - 1
        });
        self.pages[at].group = group;
        at
    }

    fn changed(&mut self, page: usize) {
        self.next_version += 1;
        self.pages[page].version = self.next_version;
    }

    /// Files every hold again, in full pages (each hold in a call gets its text back from it).
    fn repack(&mut self) {
        let old = std::mem::take(&mut self.pages);
        self.clear();
        for page in old {
            if let Some(call) = &page.call {
                for hold in Renewal::all_from_call(call, &page.in_call, page.group) {
                    self.add(hold);
                }
            }
            for hold in page.joined {
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
mod tests;
