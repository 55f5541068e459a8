//! `Native.logsForward`: the library's log lines (a lost hold, a failed renewal, a contention
//! alert, ...) handed to `io.redlock.RedlockLogs.log(int level, String target, String message)`,
//! which passes them to `System.Logger` `io.redlock` (java.util.logging, or an SLF4J bridge).
//!
//! A line arrives on the library's log thread (see [`redlock_core::logs`]: one line at a time,
//! in order, a panic caught there), attached to the JVM as a daemon the first time and left
//! attached, as for callbacks ([`super::callbacks`]). Each line runs in its own local frame; an
//! exception thrown by the Java side is printed and cleared.
//!
//! The class is held through a *weak* global reference: a global reference is a GC root, and
//! one to a class of the binding would keep its class loader, and this copy of the library,
//! alive for good (`JNI_OnUnload` would never run). A line that finds the class gone is
//! dropped. The reference is deleted when forwarding stops, and on unload ([`stop_for_unload`]).
//! During JVM shutdown, a thread that cannot attach drops its line.

use std::sync::{Arc, Mutex, MutexGuard};

use jni::objects::{JClass, JStaticMethodID, WeakRef};
use jni::signature::{Primitive, ReturnType};
use jni::sys::{jint, jvalue};
use jni::{JNIEnv, JavaVM};
use redlock_core::logs::{LogRecord, LogSink, forward_logs, level_from_number, level_number};

use super::error::Failure;
use super::guard::entry;

/// The class that receives the lines, found through the binding's own class loader.
const RECEIVER_CLASS: &str = "io/redlock/RedlockLogs";
/// `static void log(int level, String target, String message)`.
const RECEIVER_METHOD: &str = "log";
const RECEIVER_SIGNATURE: &str = "(ILjava/lang/String;Ljava/lang/String;)V";

/// Where the lines go while forwarding is on.
struct Receiver {
    vm: JavaVM,
    /// Weak: see the module's documentation.
    class: WeakRef,
    /// Valid while the class is loaded, which a local reference made from `class` ensures.
    method: JStaticMethodID,
}

/// The receiver, while forwarding is on. A line clones the `Arc` under the lock (no JNI call is
/// made under it); the weak reference is deleted when the last clone goes.
static RECEIVER: Mutex<Option<Arc<Receiver>>> = Mutex::new(None);
/// Serializes the changes of level (Java's `RedlockLogs.setLevel` and `JNI_OnUnload`).
static CHANGING: Mutex<()> = Mutex::new(());

/// `static native void logsForward(int level)`: sends the library's log lines at `level` (1
/// error, 2 warn, 3 info, 4 debug, 5 trace) or more severe to `RedlockLogs.log`; 0 stops them.
/// Applies to every thread of this copy of the library. Throws `IllegalArgumentException` for a
/// level out of range, or when this copy of the library already has a `tracing` subscriber.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_redlock_Native_logsForward<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    level: jint,
) {
    entry(&mut env, (), |env| {
        let level = level_from_number(i64::from(level))?;
        let _changing = lock(&CHANGING);
        let Some(level) = level else {
            stop()?;
            return Ok(());
        };
        let receiver = Arc::new(Receiver::new(env)?);
        let previous = lock(&RECEIVER).replace(receiver);
        drop(previous); // (outside the lock: deleting the reference calls into the JVM)
        if let Err(err) = forward_logs(Some(level), Some(sink())) {
            let receiver = lock(&RECEIVER).take();
            drop(receiver);
            return Err(err.into());
        }
        Ok(())
    })
}

/// Stops the lines and deletes the reference to the class: called by `JNI_OnUnload`, when the
/// class loader of the binding is gone.
pub(super) fn stop_for_unload() {
    let _changing = lock(&CHANGING);
    let _ = stop();
    // Its thread must not outlive this copy of the library.
    redlock_core::logs::end_delivery_thread();
}

/// Forwarding off (when it was on), then the receiver let go of.
fn stop() -> Result<(), Failure> {
    if lock(&RECEIVER).is_none() {
        return Ok(()); // never on, or already off: nothing to install or delete
    }
    let stopped = forward_logs(None, None);
    let receiver = lock(&RECEIVER).take();
    drop(receiver);
    stopped.map_err(Failure::from)
}

impl Receiver {
    /// Called from an entry point: `find_class` uses the class loader of `io.redlock.Native`,
    /// the binding's own (a thread of the library would get the system class loader).
    fn new(env: &mut JNIEnv) -> Result<Self, Failure> {
        let class = env.find_class(RECEIVER_CLASS)?;
        // Also initializes the class (its logger), here rather than on the first line.
        let method = env.get_static_method_id(&class, RECEIVER_METHOD, RECEIVER_SIGNATURE)?;
        let weak = env
            .new_weak_ref(&class)?
            .ok_or_else(|| Failure::Internal(format!("{RECEIVER_CLASS} is gone")))?;
        Ok(Receiver {
            vm: env.get_java_vm()?,
            class: weak,
            method,
        })
    }

    /// `RedlockLogs.log(level, target, message)`, unless the class was unloaded.
    fn call(&self, env: &mut JNIEnv, record: &LogRecord<'_>) -> jni::errors::Result<()> {
        let Some(class) = self.class.upgrade_local(env)? else {
            return Ok(()); // the binding's class loader is gone: so is everyone who would read it
        };
        let class = JClass::from(class);
        let target = env.new_string(record.target)?;
        let message = env.new_string(record.message)?;
        let args = [
            jvalue {
                i: jint::from(level_number(record.level)),
            },
            jvalue { l: target.as_raw() },
            jvalue {
                l: message.as_raw(),
            },
        ];
        // SAFETY: `method` was looked up on this class with RECEIVER_SIGNATURE, which the
        // arguments match; the local reference to the class keeps the method ID valid.
        unsafe {
            env.call_static_method_unchecked(
                &class,
                self.method,
                ReturnType::Primitive(Primitive::Void),
                &args,
            )
        }?;
        Ok(())
    }
}

/// The sink given to the core: whatever receiver is current when a line comes.
fn sink() -> LogSink {
    Arc::new(deliver)
}

fn deliver(record: &LogRecord<'_>) {
    let Some(receiver) = lock(&RECEIVER).clone() else {
        return; // forwarding was stopped meanwhile
    };
    let Ok(mut env) = receiver.vm.attach_current_thread_as_daemon() else {
        return; // the JVM is shutting down: nobody is left to read it
    };
    let _ = env.with_local_frame(8, |env| -> jni::errors::Result<()> {
        let delivered = receiver.call(env, record);
        if env.exception_check().unwrap_or(false) {
            let _ = env.exception_describe();
            let _ = env.exception_clear();
        }
        delivered
    });
}

/// A lock that a panic elsewhere does not poison for good.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
