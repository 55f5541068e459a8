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
    Ok(env.get_string(value)?.into())
}

/// The text of a Java string that may be null.
pub(crate) fn optional(env: &mut JNIEnv, value: &JString) -> Result<Option<String>, Failure> {
    if value.is_null() {
        return Ok(None);
    }
    Ok(Some(env.get_string(value)?.into()))
}

/// A new Java string (a local reference handed back to Java).
pub(crate) fn to_java(env: &mut JNIEnv, text: &str) -> Result<jstring, Failure> {
    Ok(env.new_string(text)?.into_raw())
}
