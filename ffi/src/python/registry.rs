//! Objects that Python names by number: the hot calls take an id instead of an object, because
//! each object argument costs the generated Python code one more FFI call (a handle clone).
//!
//! A [`Registry`] entry is weak: the Python object keeps its native object alive, and the native
//! object's `Drop` removes its entry. A [`Table`] owns its objects instead, for the ones Python
//! names by id alone and ends explicitly. Ids are never reused within a process.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

pub(crate) struct Registry<T> {
    live: Mutex<BTreeMap<u64, Weak<T>>>,
    next_id: AtomicU64,
}

impl<T> Registry<T> {
    pub(crate) const fn new() -> Self {
        Registry {
            live: Mutex::new(BTreeMap::new()),
            next_id: AtomicU64::new(1),
        }
    }

    /// Makes an object with a fresh id and registers it.
    pub(crate) fn register(&self, make: impl FnOnce(u64) -> T) -> Arc<T> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let object = Arc::new(make(id));
        self.live().insert(id, Arc::downgrade(&object));
        object
    }

    /// The live object with this id.
    pub(crate) fn get(&self, id: u64) -> Option<Arc<T>> {
        self.live().get(&id).and_then(Weak::upgrade)
    }

    /// Called from the object's `Drop`.
    pub(crate) fn forget(&self, id: u64) {
        self.live().remove(&id);
    }

    /// Locked until the box is dropped (see `crate::fork_safety`).
    pub(crate) fn lock_for_fork(&'static self) -> Box<dyn std::any::Any>
    where
        T: 'static,
    {
        Box::new(self.live())
    }

    fn live(&self) -> MutexGuard<'_, BTreeMap<u64, Weak<T>>> {
        crate::fork_safety::before_table_use();
        // Poison-tolerant: a panic elsewhere must not make every later call fail.
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Objects owned by their id: each lives until [`Table::remove`] (or the process ends).
pub(crate) struct Table<T> {
    live: Mutex<BTreeMap<u64, Arc<T>>>,
    next_id: AtomicU64,
}

impl<T> Table<T> {
    pub(crate) const fn new() -> Self {
        Table {
            live: Mutex::new(BTreeMap::new()),
            next_id: AtomicU64::new(1),
        }
    }

    /// Makes an object with a fresh id and keeps it under that id.
    pub(crate) fn insert_with(&self, make: impl FnOnce(u64) -> T) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let object = Arc::new(make(id));
        self.live().insert(id, object);
        id
    }

    pub(crate) fn get(&self, id: u64) -> Option<Arc<T>> {
        self.live().get(&id).cloned()
    }

    /// Takes the object out; it is dropped once no call that is using it still runs.
    pub(crate) fn remove(&self, id: u64) -> Option<Arc<T>> {
        self.live().remove(&id)
    }

    /// Locked until the box is dropped (see `crate::fork_safety`).
    pub(crate) fn lock_for_fork(&'static self) -> Box<dyn std::any::Any>
    where
        T: 'static,
    {
        Box::new(self.live())
    }

    fn live(&self) -> MutexGuard<'_, BTreeMap<u64, Arc<T>>> {
        crate::fork_safety::before_table_use();
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Named {
        id: u64,
    }

    static NAMED: Registry<Named> = Registry::new();

    impl Drop for Named {
        fn drop(&mut self) {
            NAMED.forget(self.id);
        }
    }

    #[test]
    fn an_object_is_found_by_id_while_it_lives() {
        let first = NAMED.register(|id| Named { id });
        let second = NAMED.register(|id| Named { id });
        assert_ne!(first.id, second.id);
        assert!(Arc::ptr_eq(&NAMED.get(first.id).unwrap(), &first));
        let gone = first.id;
        drop(first);
        assert!(NAMED.get(gone).is_none());
        assert!(NAMED.get(second.id).is_some());
        assert!(NAMED.get(0).is_none() && NAMED.get(u64::MAX).is_none());
    }

    #[test]
    fn a_table_keeps_an_object_until_it_is_removed() {
        static TABLE: Table<&str> = Table::new();
        let first = TABLE.insert_with(|_| "first");
        let second = TABLE.insert_with(|_| "second");
        assert_ne!(first, second);
        assert_eq!(*TABLE.get(first).unwrap(), "first");
        assert_eq!(*TABLE.remove(first).unwrap(), "first");
        assert!(TABLE.get(first).is_none() && TABLE.remove(first).is_none());
        assert_eq!(*TABLE.get(second).unwrap(), "second");
    }
}
