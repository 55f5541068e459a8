//! Java strings in and out.

use jni::JNIEnv;
use jni::objects::JString;
use jni::sys::jstring;

use super::error::{Failure, invalid};

/// The text of a non-null Java string; `what` names the argument in the error.
pub(crate) fn required(env: &mut JNIEnv, value: &JString, what: &str) -> Result<String, Failure> {
    if value.is_null() {
        return Err(invalid(format!("{what} must not be null")));
    }
    let text = env.get_string(value)?;
    match cesu8::from_java_cesu8(text.to_bytes()) {
        Ok(decoded) => Ok(decoded.into_owned()),
        // Not jni's lossy fallback: "a\uD800" and "a\uFFFD\uFFFD\uFFFD" must not be one name.
        Err(_) => Err(invalid(format!(
            "{what} is not valid Unicode (it has an unpaired surrogate)"
        ))),
    }
}

/// The text of a Java string that may be null.
pub(crate) fn optional(
    env: &mut JNIEnv,
    value: &JString,
    what: &str,
) -> Result<Option<String>, Failure> {
    if value.is_null() {
        return Ok(None);
    }
    required(env, value, what).map(Some)
}

/// A new Java string (a local reference handed back to Java).
pub(crate) fn to_java(env: &mut JNIEnv, text: &str) -> Result<jstring, Failure> {
    Ok(env.new_string(text)?.into_raw())
}

/// A descriptive text that may be null (a hold's label): decoded leniently, since it names
/// nothing — a thread name with an unpaired surrogate must not fail a lock call.
pub(crate) fn descriptive(env: &mut JNIEnv, value: &JString) -> Result<Option<String>, Failure> {
    if value.is_null() {
        return Ok(None);
    }
    Ok(Some(env.get_string(value)?.into()))
}
