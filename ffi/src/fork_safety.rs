//! `fork()` while another thread is inside a call: that thread may hold the lock of one of this
//! library's tables (a handle lookup, an insert), and it does not exist in the child, where the
//! lock would stay taken and the child's first call on that table would wait forever. So the
//! forking thread takes every table's lock just before `fork()` (other threads finish their
//! lookups first) and lets go of them on both sides just after.

use std::any::Any;
use std::cell::Cell;
use std::sync::Once;

unsafe extern "C" {
    fn pthread_atfork(
        prepare: Option<unsafe extern "C" fn()>,
        parent: Option<unsafe extern "C" fn()>,
        child: Option<unsafe extern "C" fn()>,
    ) -> std::ffi::c_int;
}

thread_local! {
    /// The guards the forking thread holds across `fork()` (a leaked box meanwhile). A plain
    /// pointer: no destructor, so it is still usable on a thread whose thread-locals are being
    /// destroyed (a fork from a pthread key destructor; `with` would panic there, an abort).
    static HELD: Cell<*mut Vec<Box<dyn Any>>> = const { Cell::new(std::ptr::null_mut()) };
}

/// Called before a table is used. On Linux the handlers were installed when the library was
/// loaded (below), so this is nothing there; elsewhere they are installed on first use.
#[inline(always)]
pub(crate) fn before_table_use() {
    #[cfg(not(target_os = "linux"))]
    register();
}

/// Installs the handlers (once per process).
fn register() {
    static ONCE: Once = Once::new();
    // SAFETY: the handlers only lock and unlock this library's tables.
    ONCE.call_once(|| unsafe {
        pthread_atfork(Some(prepare), Some(release), Some(in_child));
    });
}

/// Runs when the library is loaded (before `dlopen` returns, so before any thread can call in):
/// registering on first use ran `Once`s that a `fork()` by another thread could copy half-run
/// into a child, whose first call then waited for them forever.
#[cfg(target_os = "linux")]
#[used]
#[unsafe(link_section = ".init_array")]
static REGISTER_AT_LOAD: extern "C" fn() = {
    extern "C" fn at_load() {
        register();
        redlock_core::blocking::prepare_for_fork_at_load();
    }
    at_load
};

unsafe extern "C" fn prepare() {
    #[allow(unused_mut)]
    let mut held = Vec::new();
    #[cfg(feature = "c-api")]
    crate::c_api::lock_every_table(&mut held);
    #[cfg(feature = "python")]
    crate::python::lock_every_registry(&mut held);
    HELD.set(Box::into_raw(Box::new(held)));
}

unsafe extern "C" fn in_child() {
    // SAFETY: as `release`, on the thread that forked (the child's only thread).
    unsafe { release() };
    #[cfg(feature = "python")]
    crate::python::forget_threads_in_python();
}

unsafe extern "C" fn release() {
    let held = HELD.replace(std::ptr::null_mut());
    if !held.is_null() {
        // SAFETY: made by Box::into_raw in `prepare` on this thread, taken out once.
        drop(unsafe { Box::from_raw(held) });
    }
}
