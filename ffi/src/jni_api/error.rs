//! The one place where failures become Java exceptions.
//!
//! The Java idioms follow `java.util.concurrent`: an unlock by a non-owner is an
//! `IllegalMonitorStateException` (as with `ReentrantLock`), bad arguments are
//! `IllegalArgumentException`, a cancelled wait is `InterruptedException`. The rest are
//! `io.redlock.RedlockException` subclasses.

use jni::JNIEnv;
use redlock_core::Error;

/// Why an entry point failed.
#[derive(Debug)]
pub(crate) enum Failure {
    /// An error of the core (or an argument check phrased as one).
    Core(Error),
    /// A Java exception is already pending (thrown by a JNI call): leave it as it is.
    JavaPending,
    /// A JNI failure or a panic: a bug, reported rather than crashing the JVM.
    Internal(String),
}

impl From<Error> for Failure {
    fn from(err: Error) -> Self {
        Failure::Core(err)
    }
}

impl From<jni::errors::Error> for Failure {
    fn from(err: jni::errors::Error) -> Self {
        match err {
            jni::errors::Error::JavaException => Failure::JavaPending,
            other => Failure::Internal(format!("JNI call failed: {other}")),
        }
    }
}

/// Shorthand for an `IllegalArgumentException`.
pub(crate) fn invalid(message: impl Into<String>) -> Failure {
    Failure::Core(Error::InvalidArgument(message.into()))
}

/// The Java exception class for each core error kind.
fn exception_class(err: &Error) -> &'static str {
    match err {
        Error::InvalidArgument(_) => "java/lang/IllegalArgumentException",
        Error::NotHeld => "io/redlock/NotHeldException",
        Error::LockLost => "io/redlock/LockLostException",
        Error::UpgradeNotAllowed => "io/redlock/UpgradeNotAllowedException",
        Error::Closed => "io/redlock/ClientClosedException",
        Error::Cancelled => "java/lang/InterruptedException",
        Error::Connection(_) => "io/redlock/RedlockConnectionException",
        Error::Redis(_) => "io/redlock/RedisServerException",
        // Timeouts are reported as `false` / a zero handle by the acquire entry points; one that
        // reaches here is unexpected but still a clean exception.
        Error::Timeout => "io/redlock/RedlockException",
    }
}

/// Throws `failure` as a Java exception (unless one is pending already).
pub(crate) fn throw(env: &mut JNIEnv, failure: Failure) {
    if env.exception_check().unwrap_or(true) {
        return; // a pending exception says more than ours would
    }
    let (class, message) = match failure {
        Failure::JavaPending => return,
        Failure::Core(err) => (exception_class(&err), err.to_string()),
        Failure::Internal(message) => (
            "io/redlock/RedlockException",
            format!("internal error in libredlock: {message}"),
        ),
    };
    if env.throw_new(class, &message).is_err() {
        // The class could not be loaded (a broken jar): fall back to a JDK class.
        let _ = env.throw_new("java/lang/IllegalStateException", &message);
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// Every exception class the mapping names must exist in the Java module (a rename there
    /// would otherwise surface only as a fallback `IllegalStateException` at run time).
    #[test]
    fn every_mapped_class_exists() {
        let java_sources =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../bindings/java/src/main/java");
        let errors = [
            Error::InvalidArgument(String::new()),
            Error::Timeout,
            Error::NotHeld,
            Error::LockLost,
            Error::UpgradeNotAllowed,
            Error::Connection(String::new()),
            Error::Redis(String::new()),
            Error::Closed,
            Error::Cancelled,
        ];
        for err in &errors {
            let class = exception_class(err);
            if let Some(ours) = class.strip_prefix("io/redlock/") {
                let file = java_sources.join(format!("io/redlock/{ours}.java"));
                assert!(
                    file.exists(),
                    "{class} for {err:?} has no {}",
                    file.display()
                );
            } else {
                assert!(class.starts_with("java/lang/"), "{class}");
            }
        }
    }
}
