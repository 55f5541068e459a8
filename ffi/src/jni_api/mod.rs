//! JNI entry points for the Java module `bindings/java` (issue 5, artifact `io.redlock:redlock-sdk`).
//!
//! Every function here is a `native` method of the package-private class `io.redlock.Native`;
//! the public Java API (`RedlockClient`, `DistributedLock`, …) is written in Java on top of it.
//! No lock logic lives here: each entry point converts its arguments, calls the blocking API of
//! [`redlock_core`] and converts the result.
//!
//! Rules every entry point follows (see [`guard::entry`]):
//! - the body runs under `catch_unwind`: a panic becomes a Java `RedlockException`, never an
//!   unwind into the JVM;
//! - core errors become Java exceptions in one place ([`error`]);
//! - objects cross as opaque `long` handles (`Box` pointers) owned by the Java side, which frees
//!   each exactly once (a `java.lang.ref.Cleaner` or an explicit release) and never while a call
//!   on it is running (`Reference.reachabilityFence`). Handles never leave the Java package;
//! - calls block the calling Java thread; every Redis call inside is bounded by the client's
//!   command timeout, and a waiting acquire is cancelled through a cancel handle, which the Java
//!   side fires when the waiting thread is interrupted;
//! - callbacks (lock lost, contention) arrive on the core's blocking-pool threads, which are
//!   attached to the JVM as daemons ([`callbacks`]);
//! - the library's log lines go to `io.redlock.RedlockLogs` from the library's log thread,
//!   through a weak reference to the class ([`logs`]).

mod callbacks;
mod client;
mod error;
mod guard;
mod handles;
mod hold;
mod inspect;
mod lock;
mod logs;
mod strings;

/// Called by the JVM when the class loader that loaded this copy of the library is collected (a
/// redeployed application, an isolated test class loader; each loader loads its own extracted
/// copy): nothing of that loader can call in any more, so the copy's log lines stop (and its
/// reference to the class that received them is deleted) and its runtime threads are stopped
/// instead of being left running for the JVM's life.
#[unsafe(no_mangle)]
pub extern "system" fn JNI_OnUnload(_vm: *mut jni::sys::JavaVM, _reserved: *mut std::ffi::c_void) {
    let _ = std::panic::catch_unwind(|| {
        logs::stop_for_unload();
        // SAFETY: the JVM unloads the library only once its class loader is unreachable, so no
        // Java thread is inside an entry point and none will enter one.
        unsafe { redlock_core::blocking::shutdown_runtime_for_unload() };
    });
}
