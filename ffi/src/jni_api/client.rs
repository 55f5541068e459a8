//! `Native.client*`: connect, close and free a client; new owner tokens.

use std::sync::Arc;
use std::time::Duration;

use jni::JNIEnv;
use jni::objects::{JClass, JObject, JString};
use jni::sys::{jboolean, jlong, jstring};
use redlock_core::{Owner, blocking};

use super::callbacks::JavaCallbacks;
use super::error::invalid;
use super::guard::entry;
use super::handles::{free, into_handle};
use super::strings;

/// `static native long clientConnect(String url, String prefix, long leaseMillis,
/// long contentionAfterMillis, long contentionAttempts, NativeCallbacks callbacks,
/// boolean lockLost, boolean contention)`.
///
/// `prefix` null and `leaseMillis` 0 keep the defaults; `contentionAfterMillis` < 0 keeps the
/// default time threshold and 0 disables it; `contentionAttempts` > 0 alerts after that many
/// failed attempts of one acquire, 0 keeps the default (no limit), < 0 is an invalid argument.
/// The callbacks object is called only for the kinds flagged true.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)] // one JNI signature, documented above
pub extern "system" fn Java_io_redlock_Native_clientConnect<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    url: JString<'local>,
    prefix: JString<'local>,
    lease_millis: jlong,
    contention_after_millis: jlong,
    contention_attempts: jlong,
    callbacks: JObject<'local>,
    lock_lost: jboolean,
    contention: jboolean,
) -> jlong {
    entry(&mut env, 0, |env| {
        let url = strings::required(env, &url, "url")?;
        let mut builder = redlock_core::Client::builder(url);
        if let Some(prefix) = strings::optional(env, &prefix, "keyPrefix")? {
            builder = builder.prefix(prefix);
        }
        if lease_millis > 0 {
            builder = builder.lease(Duration::from_millis(lease_millis as u64));
        }
        match contention_after_millis {
            0 => builder = builder.contention_alert_after(None),
            ms if ms > 0 => {
                builder = builder.contention_alert_after(Some(Duration::from_millis(ms as u64)))
            }
            _ => {}
        }
        match contention_attempts {
            0 => {}
            n if n > 0 => builder = builder.contention_alert_attempts(Some(n as u64)),
            n => {
                return Err(invalid(format!(
                    "contention alert attempts must not be negative, got {n}"
                )));
            }
        }
        let mut java_callbacks = None;
        if !callbacks.is_null() && (lock_lost != 0 || contention != 0) {
            let target = Arc::new(JavaCallbacks::new(env, &callbacks)?);
            java_callbacks = Some(target.clone());
            if lock_lost != 0 {
                let target = target.clone();
                builder = builder.on_lock_lost(move |event| target.lock_lost(event));
            }
            if contention != 0 {
                builder = builder.on_contention(move |alert| target.contention(alert));
            }
        }
        let client = blocking::Client::from_builder(builder)?;
        Ok(into_handle(JavaClient {
            client,
            callbacks: java_callbacks,
        }))
    })
}

/// What a client handle points to: the core client, and the target of its callbacks (let go
/// of on close).
pub(crate) struct JavaClient {
    pub(crate) client: blocking::Client,
    callbacks: Option<Arc<JavaCallbacks>>,
}

/// `static native void clientClose(long client)`: stops the watchdog and wakes every waiter of
/// the client with `ClientClosedException`; the handle stays valid until `clientFree`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_redlock_Native_clientClose<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    client: jlong,
) {
    entry(&mut env, (), |_| {
        // SAFETY: the Java side passes a live client handle (see `handles`).
        let client = unsafe { super::handles::borrow::<JavaClient>(client, "client")? };
        client.client.close();
        if let Some(callbacks) = &client.callbacks {
            callbacks.let_go();
        }
        Ok(())
    })
}

/// `static native void clientFree(long client)`: called once, when the Java client is
/// unreachable. Locks opened from it keep what they need on their own.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_redlock_Native_clientFree<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    client: jlong,
) {
    entry(&mut env, (), |_| {
        // SAFETY: called exactly once per handle by the Java side's cleaner.
        unsafe { free::<JavaClient>(client) };
        Ok(())
    })
}

/// `static native String newOwnerToken()`: a fresh random owner (UUID v4 + process instance id).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_redlock_Native_newOwnerToken<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
) -> jstring {
    entry(&mut env, std::ptr::null_mut(), |env| {
        strings::to_java(env, Owner::random().token())
    })
}
