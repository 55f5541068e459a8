//! The tracked holds, by key, and the pages of their renewal calls: one lock over both, and
//! every change goes through here, so that the pages always hold exactly the tracked holds.

use std::collections::HashMap;
use std::collections::hash_map;

use std::sync::Arc;

use super::pages::{Built, Pages, Planned};
use super::renewal::Renewal;
use super::{WatchEntry, WatchKey};

#[derive(Default)]
pub(super) struct Tracked {
    entries: HashMap<WatchKey, WatchEntry>,
    pages: Pages,
}

impl Tracked {
    pub(super) fn get(&self, key: &WatchKey) -> Option<&WatchEntry> {
        self.entries.get(key)
    }

    /// For the entry's own fields: its tracking id (and so its renewal) stays.
    pub(super) fn get_mut(&mut self, key: &WatchKey) -> Option<&mut WatchEntry> {
        self.entries.get_mut(key)
    }

    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub(super) fn iter(&self) -> hash_map::Iter<'_, WatchKey, WatchEntry> {
        self.entries.iter()
    }

    pub(super) fn values(&self) -> hash_map::Values<'_, WatchKey, WatchEntry> {
        self.entries.values()
    }

    /// Tracks `entry`, renewed as `renewal` says (the same tracking id); returns the tracking it
    /// replaced.
    pub(super) fn insert(
        &mut self,
        key: WatchKey,
        entry: WatchEntry,
        renewal: Renewal,
    ) -> Option<WatchEntry> {
        debug_assert_eq!(entry.id, renewal.id);
        let old = self.entries.insert(key, entry);
        if let Some(old) = &old {
            self.pages.remove(old.id);
        }
        self.pages.add(renewal);
        old
    }

    pub(super) fn remove(&mut self, key: &WatchKey) -> Option<WatchEntry> {
        let entry = self.entries.remove(key)?;
        self.pages.remove(entry.id);
        Some(entry)
    }

    /// Takes every tracked hold out.
    pub(super) fn take_all(&mut self) -> HashMap<WatchKey, WatchEntry> {
        self.pages.clear();
        std::mem::take(&mut self.entries)
    }

    /// A tick's renewal calls (see [`Pages::plan`]).
    pub(super) fn plan(&mut self) -> Vec<Planned> {
        self.pages.plan()
    }

    /// Keeps a call built for a tick (see [`Pages::keep`]).
    pub(super) fn keep(&mut self, built: Built, call: Arc<redis::Cmd>, ids: Vec<u64>) {
        self.pages.keep(built, call, ids);
    }
}

impl std::ops::Index<&WatchKey> for Tracked {
    type Output = WatchEntry;

    fn index(&self, key: &WatchKey) -> &WatchEntry {
        &self.entries[key]
    }
}
