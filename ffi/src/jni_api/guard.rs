//! The wrapper every entry point runs in: no panic and no error crosses into the JVM unconverted.

use std::panic::{AssertUnwindSafe, catch_unwind};

use jni::JNIEnv;

use super::error::{Failure, throw};

/// Runs `body`; on an error or a panic, throws the matching Java exception and returns
/// `fallback` (which the JVM ignores, since an exception is pending).
pub(crate) fn entry<'local, T>(
    env: &mut JNIEnv<'local>,
    fallback: T,
    body: impl FnOnce(&mut JNIEnv<'local>) -> Result<T, Failure>,
) -> T {
    match catch_unwind(AssertUnwindSafe(|| body(env))) {
        Ok(Ok(value)) => value,
        Ok(Err(failure)) => {
            throw(env, failure);
            fallback
        }
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_owned());
            throw(env, Failure::Internal(format!("panic: {message}")));
            fallback
        }
    }
}
