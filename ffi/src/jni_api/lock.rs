//! `Native.lock*`: open a view of a lock name, acquire, release and query it.

use std::time::Duration;

use jni::JNIEnv;
use jni::objects::{JClass, JString};
use jni::sys::{jboolean, jint, jlong};
use redlock_core::blocking::{self, CancelToken};
use redlock_core::{AcquireOptions, Error, Owner};

use super::client::JavaClient;
use super::error::{Failure, invalid};
use super::guard::entry;
use super::handles::{borrow, free, into_handle};
use super::strings;

/// The lock view behind a handle.
fn lock_at<'a>(handle: jlong) -> Result<&'a blocking::Lock, Failure> {
    // SAFETY: the Java side passes live lock handles only (see `handles`).
    unsafe { borrow::<blocking::Lock>(handle, "lock") }
}

fn owner(env: &mut JNIEnv, token: &JString) -> Result<Owner, Failure> {
    Ok(Owner::from_token(strings::required(
        env,
        token,
        "owner token",
    )?)?)
}

/// `static native long lockOpen(long client, String name, boolean read)`: the read or the write
/// view of `name` (the exclusive lock is the write view).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_redlock_Native_lockOpen<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    client: jlong,
    name: JString<'local>,
    read: jboolean,
) -> jlong {
    entry(&mut env, 0, |env| {
        // SAFETY: the Java side passes a live client handle (see `handles`).
        let client = unsafe { borrow::<JavaClient>(client, "client")? };
        let name = strings::required(env, &name, "lock name")?;
        let (read_view, write_view) = client.client.read_write_lock(&name)?.into_views();
        Ok(into_handle(if read != 0 { read_view } else { write_view }))
    })
}

/// `static native void lockFree(long lock)`: once, when the Java lock is unreachable.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_redlock_Native_lockFree<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    lock: jlong,
) {
    entry(&mut env, (), |_| {
        // SAFETY: called exactly once per handle by the Java side's cleaner.
        unsafe { free::<blocking::Lock>(lock) };
        Ok(())
    })
}

/// `static native long acquire(long lock, String ownerToken, long waitNanos, long leaseMillis,
/// String label, long cancel) throws InterruptedException`.
///
/// `waitNanos` < 0 waits forever, 0 tries once; `leaseMillis` 0 lets the watchdog keep the hold;
/// `cancel` 0 means not cancellable. Returns a hold handle, or 0 when the wait ended without the
/// lock. A fired cancel handle ends the wait with `InterruptedException`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_redlock_Native_acquire<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    lock: jlong,
    owner_token: JString<'local>,
    wait_nanos: jlong,
    lease_millis: jlong,
    label: JString<'local>,
    cancel: jlong,
) -> jlong {
    entry(&mut env, 0, |env| {
        let lock = lock_at(lock)?;
        let owner = owner(env, &owner_token)?;
        if lease_millis < 0 {
            return Err(invalid("lease must not be negative"));
        }
        let options = AcquireOptions {
            wait: u64::try_from(wait_nanos).ok().map(Duration::from_nanos),
            lease: (lease_millis > 0).then(|| Duration::from_millis(lease_millis as u64)),
            label: strings::descriptive(env, &label)?,
        };
        let cancel = if cancel == 0 {
            None
        } else {
            // SAFETY: the Java side passes a live cancel handle while the call runs.
            Some(unsafe { borrow::<CancelToken>(cancel, "cancel handle")? })
        };
        match lock.acquire_with(&owner, options, cancel) {
            Ok(hold) => Ok(into_handle(hold)),
            Err(Error::Timeout) => Ok(0),
            Err(err) => Err(err.into()),
        }
    })
}

/// `static native int release(long lock, String ownerToken)`: releases one hold; returns how
/// many the owner still has in this mode. Not the owner → `NotHeldException`; a watched hold
/// found gone → `LockLostException`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_redlock_Native_release<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    lock: jlong,
    owner_token: JString<'local>,
) -> jint {
    entry(&mut env, 0, |env| {
        let lock = lock_at(lock)?;
        let owner = owner(env, &owner_token)?;
        Ok(lock.release(&owner)?.min(i32::MAX as u32) as jint)
    })
}

/// `static native void extend(long lock, String ownerToken, long leaseMillis)`: sets the owner's
/// hold to end `leaseMillis` from now. Not held → `NotHeldException`; a watched hold found gone
/// → `LockLostException`; `leaseMillis` ≤ 0 → `IllegalArgumentException`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_redlock_Native_extend<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    lock: jlong,
    owner_token: JString<'local>,
    lease_millis: jlong,
) {
    entry(&mut env, (), |env| {
        let lock = lock_at(lock)?;
        let owner = owner(env, &owner_token)?;
        let lease = u64::try_from(lease_millis)
            .ok()
            .filter(|&ms| ms > 0)
            .ok_or_else(|| invalid("lease must be positive"))?;
        Ok(lock.extend(&owner, Duration::from_millis(lease))?)
    })
}

/// `static native int holdCount(long lock, String ownerToken)`: from Redis, so it also counts
/// holds taken through the token by other instances.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_redlock_Native_holdCount<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    lock: jlong,
    owner_token: JString<'local>,
) -> jint {
    entry(&mut env, 0, |env| {
        let lock = lock_at(lock)?;
        let owner = owner(env, &owner_token)?;
        Ok(lock.hold_count(&owner)?.min(i32::MAX as u32) as jint)
    })
}

/// `static native long fencingToken(long lock, String ownerToken)`: the fencing token of the
/// owner's hold of this view, from Redis; 0 when it holds none (tokens start at 1).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_redlock_Native_fencingToken<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    lock: jlong,
    owner_token: JString<'local>,
) -> jlong {
    entry(&mut env, 0, |env| {
        let lock = lock_at(lock)?;
        let owner = owner(env, &owner_token)?;
        let fence = lock.fencing_token(&owner)?.unwrap_or(0);
        Ok(jlong::try_from(fence).unwrap_or(jlong::MAX))
    })
}

/// `static native boolean isLocked(long lock)`: whether anyone holds this view.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_redlock_Native_isLocked<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    lock: jlong,
) -> jboolean {
    entry(&mut env, 0, |_| Ok(u8::from(lock_at(lock)?.is_locked()?)))
}

/// `static native boolean forceUnlock(long lock)`: clears the name (both views) whoever holds
/// it and wakes its waiters; true when it was held.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_redlock_Native_forceUnlock<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    lock: jlong,
) -> jboolean {
    entry(&mut env, 0, |_| {
        Ok(u8::from(lock_at(lock)?.force_unlock()?))
    })
}
