//! `Native.hold*` and `Native.cancel*`: what an acquire returned, and how a wait is cancelled.

use jni::JNIEnv;
use jni::objects::JClass;
use jni::sys::{jboolean, jlong};
use redlock_core::Hold;
use redlock_core::blocking::CancelToken;

use super::guard::entry;
use super::handles::{borrow, free, into_handle};

/// `static native boolean holdIsLost(long hold)`: whether the watchdog found the hold gone.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_redlock_Native_holdIsLost<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    hold: jlong,
) -> jboolean {
    entry(&mut env, 0, |_| {
        // SAFETY: the Java side passes a live hold handle (see `handles`).
        let hold = unsafe { borrow::<Hold>(hold, "hold")? };
        Ok(u8::from(hold.is_lost()))
    })
}

/// `static native void holdFree(long hold)`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_redlock_Native_holdFree<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    hold: jlong,
) {
    entry(&mut env, (), |_| {
        // SAFETY: the Java side frees each hold handle exactly once.
        unsafe { free::<Hold>(hold) };
        Ok(())
    })
}

/// `static native long cancelNew()`: a cancel handle for one waiting acquire.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_redlock_Native_cancelNew<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
) -> jlong {
    entry(&mut env, 0, |_| Ok(into_handle(CancelToken::new())))
}

/// `static native void cancelFire(long cancel)`: ends the wait using the handle with
/// `InterruptedException` (from any thread; firing twice is harmless).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_redlock_Native_cancelFire<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    cancel: jlong,
) {
    entry(&mut env, (), |_| {
        // SAFETY: the Java side passes a live cancel handle (see `handles`).
        unsafe { borrow::<CancelToken>(cancel, "cancel handle")? }.cancel();
        Ok(())
    })
}

/// `static native void cancelFree(long cancel)`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_redlock_Native_cancelFree<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    cancel: jlong,
) {
    entry(&mut env, (), |_| {
        // SAFETY: the Java side frees each cancel handle exactly once.
        unsafe { free::<CancelToken>(cancel) };
        Ok(())
    })
}
