//! `fork()` while another thread is inside a call: that thread may hold the lock of one of this
//! library's tables (a handle lookup, an insert), and it does not exist in the child, where the
//! lock would stay taken and the child's first call on that table would wait forever. So the
//! forking thread takes every table's lock just before `fork()` (other threads finish their
//! lookups first) and lets go of them on both sides just after.

use std::any::Any;
use std::cell::RefCell;
use std::sync::Once;

unsafe extern "C" {
    fn pthread_atfork(
        prepare: Option<unsafe extern "C" fn()>,
        parent: Option<unsafe extern "C" fn()>,
        child: Option<unsafe extern "C" fn()>,
    ) -> std::ffi::c_int;
}

thread_local! {
    /// The guards the forking thread holds across `fork()`.
    static HELD: RefCell<Vec<Box<dyn Any>>> = const { RefCell::new(Vec::new()) };
}

/// Installs the handlers (once per process; called before any table is used).
pub(crate) fn register() {
    static ONCE: Once = Once::new();
    // SAFETY: the handlers only lock and unlock this library's tables.
    ONCE.call_once(|| unsafe {
        pthread_atfork(Some(prepare), Some(release), Some(release));
    });
}

unsafe extern "C" fn prepare() {
    HELD.with(|held| {
        let mut held = held.borrow_mut();
        #[cfg(feature = "c-api")]
        crate::c_api::lock_every_table(&mut held);
        #[cfg(feature = "python")]
        crate::python::lock_every_registry(&mut held);
    });
}

unsafe extern "C" fn release() {
    HELD.with(|held| held.borrow_mut().clear());
}
