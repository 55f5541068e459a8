//! A value made in one process that a forked child must never drop.

use std::mem::ManuallyDrop;
use std::ops::Deref;

/// A value bound to the process that made it. A child made by `fork()` inherits a copy whose
/// destructor would act on the parent's runtime (a tokio socket deregisters itself from the
/// epoll instance parent and child share, and the parent then never hears its replies): in any
/// other process than its maker's, dropping it leaks it instead.
pub(super) struct ProcessBound<T> {
    pid: u32,
    value: ManuallyDrop<T>,
}

impl<T> ProcessBound<T> {
    pub(super) fn new(value: T) -> Self {
        ProcessBound {
            pid: crate::inspect::process_id(),
            value: ManuallyDrop::new(value),
        }
    }

    /// Whether this process made it.
    pub(super) fn is_ours(&self) -> bool {
        self.pid == crate::inspect::process_id()
    }
}

impl<T> Deref for ProcessBound<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> Drop for ProcessBound<T> {
    fn drop(&mut self) {
        if self.is_ours() {
            // SAFETY: dropped once, here, and never used again.
            unsafe { ManuallyDrop::drop(&mut self.value) }
        }
    }
}
