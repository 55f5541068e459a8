//! `Native.clientInspect` and `Native.lockInspect`: a snapshot of a lock name as an
//! `io.redlock.LockInfo` with its `io.redlock.HolderInfo`s.
//!
//! The Java objects are made by package-private factories (`LockInfo.fromNative`,
//! `HolderInfo.fromNative`) that take plain values, so the JNI side only copies fields and the
//! Java side owns the shape of its records. Conventions of the values passed: durations in
//! milliseconds; -1 for "unknown" (`heldForMillis`), 0 for "not recorded" (`acquiredAtMillis`)
//! and for "free" (`leaseLeftMillis` of the name); the name's mode as 0 (free), 1 (read) or
//! 2 (write); unsigned counters clamped to the Java type's maximum.

use jni::JNIEnv;
use jni::objects::{JClass, JObject, JString, JValue};
use jni::sys::{jint, jlong, jobject};
use redlock_core::{HolderInfo, LockInfo, Mode, blocking};

use super::client::JavaClient;
use super::error::Failure;
use super::guard::entry;
use super::handles::borrow;
use super::strings;

const LOCK_INFO_CLASS: &str = "io/redlock/LockInfo";
const LOCK_INFO_FACTORY: &str =
    "(Ljava/lang/String;I[Lio/redlock/HolderInfo;JJJJJ)Lio/redlock/LockInfo;";
const HOLDER_INFO_CLASS: &str = "io/redlock/HolderInfo";
const HOLDER_INFO_FACTORY: &str =
    "(ZLjava/lang/String;IJJJLjava/lang/String;JLjava/lang/String;J)Lio/redlock/HolderInfo;";

/// `static native LockInfo clientInspect(long client, String name)`: a snapshot of `name`
/// (the name is checked like a lock's: empty or over 1024 bytes → `IllegalArgumentException`).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_redlock_Native_clientInspect<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    client: jlong,
    name: JString<'local>,
) -> jobject {
    entry(&mut env, std::ptr::null_mut(), |env| {
        // SAFETY: the Java side passes a live client handle (see `handles`).
        let client = unsafe { borrow::<JavaClient>(client, "client")? };
        let name = strings::required(env, &name, "lock name")?;
        let info = client.client.inspect(&name)?;
        to_java(env, &info)
    })
}

/// `static native LockInfo lockInspect(long lock)`: a snapshot of the lock's name (both views
/// of a read/write lock see the same snapshot).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_redlock_Native_lockInspect<'local>(
    mut env: JNIEnv<'local>,
    _class: JClass<'local>,
    lock: jlong,
) -> jobject {
    entry(&mut env, std::ptr::null_mut(), |env| {
        // SAFETY: the Java side passes a live lock handle (see `handles`).
        let lock = unsafe { borrow::<blocking::Lock>(lock, "lock")? };
        let info = lock.inspect()?;
        to_java(env, &info)
    })
}

/// The `LockInfo` of `info`, as a local reference handed back to Java.
fn to_java(env: &mut JNIEnv, info: &LockInfo) -> Result<jobject, Failure> {
    let holder_class = env.find_class(HOLDER_INFO_CLASS)?;
    let holders = env.new_object_array(
        clamp_int(info.holders.len() as u64),
        &holder_class,
        JObject::null(),
    )?;
    for (index, holder) in info.holders.iter().enumerate() {
        // One frame per holder: its strings and object are freed at once (up to 100 holders).
        env.with_local_frame(8, |env| -> Result<(), Failure> {
            let object = holder_to_java(env, &holder_class, holder)?;
            env.set_object_array_element(&holders, index as jint, &object)?;
            Ok(())
        })?;
    }
    let name = env.new_string(&info.name)?;
    let mode = match info.mode {
        None => 0,
        Some(Mode::Read) => 1,
        Some(Mode::Write) => 2,
    };
    let lease_left = info.lease_left.map_or(0, |d| millis(d.as_millis()));
    let object = env
        .call_static_method(
            LOCK_INFO_CLASS,
            "fromNative",
            LOCK_INFO_FACTORY,
            &[
                JValue::Object(&name),
                JValue::Int(mode),
                JValue::Object(&holders),
                JValue::Long(clamp_long(info.holder_count)),
                JValue::Long(clamp_long(info.waiting_writers)),
                JValue::Long(clamp_long(info.waiting_readers)),
                JValue::Long(lease_left),
                JValue::Long(clamp_long(info.last_fencing_token)),
            ],
        )?
        .l()?;
    Ok(object.into_raw())
}

fn holder_to_java<'local>(
    env: &mut JNIEnv<'local>,
    class: &JClass,
    holder: &HolderInfo,
) -> Result<JObject<'local>, Failure> {
    let meta = &holder.metadata;
    let owner_token = env.new_string(&holder.owner_token)?;
    let host = env.new_string(&meta.host)?;
    let thread = env.new_string(&meta.thread)?;
    let held_for = holder.held_for.map_or(-1, |d| millis(d.as_millis()));
    Ok(env
        .call_static_method(
            class,
            "fromNative",
            HOLDER_INFO_FACTORY,
            &[
                JValue::Bool(u8::from(holder.mode == Mode::Read)),
                JValue::Object(&owner_token),
                JValue::Int(clamp_int(u64::from(holder.hold_count))),
                JValue::Long(clamp_long(holder.fencing_token)),
                JValue::Long(millis(holder.lease_left.as_millis())),
                JValue::Long(held_for),
                JValue::Object(&host),
                JValue::Long(i64::from(meta.pid)),
                JValue::Object(&thread),
                JValue::Long(clamp_long(meta.acquired_at_ms)),
            ],
        )?
        .l()?)
}

fn millis(ms: u128) -> jlong {
    ms.min(i64::MAX as u128) as jlong
}

fn clamp_long(value: u64) -> jlong {
    value.min(i64::MAX as u64) as jlong
}

fn clamp_int(value: u64) -> jint {
    value.min(i32::MAX as u64) as jint
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// The Java types of a JNI method descriptor's parameters, as Java source spells them.
    fn java_parameter_types(descriptor: &str) -> Vec<String> {
        let params = &descriptor[1..descriptor.find(')').unwrap()];
        let mut types = Vec::new();
        let mut rest = params;
        while !rest.is_empty() {
            let array = rest.starts_with('[');
            if array {
                rest = &rest[1..];
            }
            let (base, len) = match rest.as_bytes()[0] {
                b'Z' => ("boolean".to_owned(), 1),
                b'I' => ("int".to_owned(), 1),
                b'J' => ("long".to_owned(), 1),
                b'L' => {
                    let end = rest.find(';').unwrap();
                    let class = rest[1..end].rsplit('/').next().unwrap().to_owned();
                    (class, end + 1)
                }
                other => panic!("unexpected descriptor type {}", other as char),
            };
            types.push(if array { format!("{base}[]") } else { base });
            rest = &rest[len..];
        }
        types
    }

    /// The factories' Java declarations must take what the descriptors pass (a mismatch would
    /// surface only at run time, as a `NoSuchMethodError` from inspect).
    #[test]
    fn factory_descriptors_match_the_java_sources() {
        let sources =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../bindings/java/src/main/java/io/redlock");
        for (class, descriptor) in [
            (LOCK_INFO_CLASS, LOCK_INFO_FACTORY),
            (HOLDER_INFO_CLASS, HOLDER_INFO_FACTORY),
        ] {
            let simple = class.rsplit('/').next().unwrap();
            let text = std::fs::read_to_string(sources.join(format!("{simple}.java"))).unwrap();
            let start = format!("static {simple} fromNative(");
            let at = text
                .find(&start)
                .unwrap_or_else(|| panic!("{simple}: no {start}"))
                + start.len();
            let declared: Vec<String> = text[at..at + text[at..].find(')').unwrap()]
                .split(',')
                .map(|param| param.split_whitespace().next().unwrap().to_owned())
                .collect();
            assert_eq!(
                declared,
                java_parameter_types(descriptor),
                "{simple}.fromNative"
            );
            assert!(descriptor.ends_with(&format!(")L{class};")), "{descriptor}");
        }
    }
}
