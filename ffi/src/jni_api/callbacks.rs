//! Lock-lost and contention callbacks, delivered to a Java `io.redlock.NativeCallbacks` object.
//!
//! The core runs a client's callbacks one at a time, in order, on a thread of its tokio
//! blocking pool. Each such thread is attached to the JVM as a
//! daemon the first time (and stays attached, so later callbacks cost no attach; a daemon thread
//! never keeps the JVM from exiting). Every call runs in its own local frame, so the strings it
//! creates are freed however many callbacks a thread delivers, and an exception thrown by a
//! listener is printed and cleared instead of poisoning the thread. A closed client lets go of
//! its target (a global reference is a GC root: a listener that captured the client would keep
//! both alive, and the client's cleaner would never run).

use std::sync::Mutex;

use jni::objects::{GlobalRef, JObject, JValue};
use jni::{JNIEnv, JavaVM};
use redlock_core::{ContentionAlert, HolderInfo, LockLostEvent, Mode};

/// The Java object that receives this client's callbacks.
pub(crate) struct JavaCallbacks {
    vm: JavaVM,
    /// None once the client is closed.
    target: Mutex<Option<GlobalRef>>,
}

impl JavaCallbacks {
    pub(crate) fn new(env: &mut JNIEnv, target: &JObject) -> jni::errors::Result<Self> {
        Ok(JavaCallbacks {
            vm: env.get_java_vm()?,
            target: Mutex::new(Some(env.new_global_ref(target)?)),
        })
    }

    /// Lets go of the target: no callback is delivered from now on.
    pub(crate) fn let_go(&self) {
        let target = self.target.lock().unwrap().take();
        drop(target); // (outside the lock: deleting the reference calls into the JVM)
    }

    /// `NativeCallbacks.onLockLost(String name, boolean read, String ownerToken)`.
    pub(crate) fn lock_lost(&self, event: &LockLostEvent) {
        self.call(|env, target| {
            let name = env.new_string(&event.name)?;
            let token = env.new_string(&event.owner_token)?;
            env.call_method(
                target,
                "onLockLost",
                "(Ljava/lang/String;ZLjava/lang/String;)V",
                &[
                    JValue::Object(&name),
                    JValue::Bool(u8::from(event.mode == Mode::Read)),
                    JValue::Object(&token),
                ],
            )?;
            Ok(())
        });
    }

    /// `NativeCallbacks.onContention(String name, boolean read, String ownerToken,
    /// long waitedMillis, long failedAttempts, String[] holders)`.
    pub(crate) fn contention(&self, alert: &ContentionAlert) {
        self.call(|env, target| {
            let name = env.new_string(&alert.name)?;
            let token = env.new_string(&alert.owner_token)?;
            let holders = env.new_object_array(
                alert.holders.len() as i32,
                "java/lang/String",
                JObject::null(),
            )?;
            for (index, holder) in alert.holders.iter().enumerate() {
                let text = env.new_string(describe(holder))?;
                env.set_object_array_element(&holders, index as i32, &text)?;
                // Freed at once: an alert may list up to 100 holders.
                env.delete_local_ref(text)?;
            }
            env.call_method(
                target,
                "onContention",
                "(Ljava/lang/String;ZLjava/lang/String;JJ[Ljava/lang/String;)V",
                &[
                    JValue::Object(&name),
                    JValue::Bool(u8::from(alert.mode == Mode::Read)),
                    JValue::Object(&token),
                    JValue::Long(alert.waited.as_millis().min(i64::MAX as u128) as i64),
                    JValue::Long(alert.failed_attempts.min(i64::MAX as u64) as i64),
                    JValue::Object(&holders),
                ],
            )?;
            Ok(())
        });
    }

    fn call(&self, body: impl FnOnce(&mut JNIEnv, &JObject) -> jni::errors::Result<()>) {
        let Some(target) = self.target.lock().unwrap().clone() else {
            return; // the client is closed
        };
        let Ok(mut env) = self.vm.attach_current_thread_as_daemon() else {
            return; // the JVM is shutting down: nobody is left to tell
        };
        let _ = env.with_local_frame(16, |env| body(env, target.as_obj()));
        if env.exception_check().unwrap_or(false) {
            let _ = env.exception_describe();
            let _ = env.exception_clear();
        }
    }
}

/// One holder as the alert shows it: who, where, and for how long.
fn describe(holder: &HolderInfo) -> String {
    let mode = match holder.mode {
        Mode::Read => "read",
        Mode::Write => "write",
    };
    let meta = &holder.metadata;
    let held = holder
        .held_for
        .map(|d| format!(", held {} ms", d.as_millis()))
        .unwrap_or_default();
    format!(
        "{} x{} ({mode}) thread {} on {} pid {}{held}",
        holder.owner_token, holder.hold_count, meta.thread, meta.host, meta.pid
    )
}
