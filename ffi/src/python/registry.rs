//! Objects that Python names by number: the hot calls take an id instead of an object, because
//! each object argument costs the generated Python code one more FFI call (a handle clone).
//!
//! An entry is weak: the Python object keeps its native object alive, and the native object's
//! `Drop` removes its entry. Ids are never reused within a process.

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

    fn live(&self) -> MutexGuard<'_, BTreeMap<u64, Weak<T>>> {
        // Poison-tolerant: a panic elsewhere must not make every later call fail.
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
}
