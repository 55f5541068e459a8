//! A value per process: a forked child never locks nor drops its parent's.

use std::sync::Mutex;
use std::sync::atomic::{AtomicPtr, Ordering};

/// A value per process, behind a mutex of that process. A forked child gets a fresh, empty
/// slot of its own instead of its parent's: the parent's mutex may have been locked, at the
/// fork, by a thread that does not exist in the child (and would stay locked there forever),
/// and its value must not be dropped there: its destructor would act on the parent's runtime (a
/// tokio socket deregisters itself from the epoll instance parent and child share, and the
/// parent then never hears its replies). The parent's slot is leaked in the child.
pub struct PerProcess<T> {
    current: AtomicPtr<Slot<T>>,
}

struct Slot<T> {
    pid: u32,
    value: Mutex<Option<T>>,
}

impl<T> PerProcess<T> {
    pub fn new(value: T) -> Self {
        PerProcess {
            current: AtomicPtr::new(Slot::leaked(Some(value))),
        }
    }

    /// A slot with nothing in it yet.
    pub fn empty() -> Self {
        PerProcess {
            current: AtomicPtr::new(Slot::leaked(None)),
        }
    }

    /// This process' slot: `None` in a child until it puts its own value there.
    pub fn slot(&self) -> &Mutex<Option<T>> {
        let pid = crate::inspect::process_id();
        let current = self.current.load(Ordering::Acquire);
        // SAFETY: slots come from Box::into_raw and are freed only when `self` is dropped.
        if unsafe { (*current).pid } == pid {
            return unsafe { &(*current).value };
        }
        let fresh = Slot::leaked(None);
        match self
            .current
            .compare_exchange(current, fresh, Ordering::AcqRel, Ordering::Acquire)
        {
            // The parent's slot is leaked: never locked nor dropped here.
            // SAFETY: just made above; published, so freed only with `self`.
            Ok(_) => unsafe { &(*fresh).value },
            Err(winner) => {
                // SAFETY: `fresh` was never published.
                drop(unsafe { Box::from_raw(fresh) });
                // SAFETY: as above; another thread of this process published it.
                unsafe { &(*winner).value }
            }
        }
    }
}

impl<T> Slot<T> {
    fn leaked(value: Option<T>) -> *mut Slot<T> {
        Box::into_raw(Box::new(Slot {
            pid: crate::inspect::process_id(),
            value: Mutex::new(value),
        }))
    }
}

impl<T> Drop for PerProcess<T> {
    fn drop(&mut self) {
        let current = *self.current.get_mut();
        // SAFETY: from Box::into_raw; dropped once, here, and only by the process that made it.
        if unsafe { (*current).pid } == crate::inspect::process_id() {
            drop(unsafe { Box::from_raw(current) });
        }
    }
}

// SAFETY: a PerProcess is a pointer to a Mutex<Option<T>> it owns.
unsafe impl<T: Send> Send for PerProcess<T> {}
unsafe impl<T: Send> Sync for PerProcess<T> {}
