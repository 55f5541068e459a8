//! Checking arguments: durations in milliseconds with their sentinels, and out-pointers.

use std::time::Duration;

use super::error::{FfiError, FfiResult};

/// `wait_ms` sentinel: wait as long as it takes (until acquired, cancelled, or the client closes).
pub const RL_WAIT_FOREVER: i64 = -1;
/// `lease_ms` sentinel: no fixed lease; the client's watchdog renews the hold until it is
/// released (a renewal that finds it gone reports it lost).
pub const RL_LEASE_WATCHDOG: i64 = -1;
/// Longest lock name, in bytes of UTF-8 (names are 1..=1024 bytes).
pub const RL_MAX_NAME_LEN: usize = 1024;
/// Longest owner token, in bytes of UTF-8.
pub const RL_MAX_TOKEN_LEN: usize = 512;

// Literals above because cbindgen cannot evaluate paths; these keep them equal to the core's.
const _: () = assert!(RL_MAX_NAME_LEN == redlock_core::MAX_NAME_LEN);
const _: () = assert!(RL_MAX_TOKEN_LEN == redlock_core::MAX_TOKEN_LEN);

/// A wait: `RL_WAIT_FOREVER` (-1) → `None`, 0 → try once, > 0 → that many milliseconds.
pub(crate) fn wait(ms: i64, what: &str) -> FfiResult<Option<Duration>> {
    match ms {
        RL_WAIT_FOREVER => Ok(None),
        0.. => Ok(Some(Duration::from_millis(ms as u64))),
        _ => Err(FfiError::invalid(format!(
            "{what} must be 0 (try once), a positive number of milliseconds, or \
             RL_WAIT_FOREVER (-1); got {ms}"
        ))),
    }
}

/// A lease: `RL_LEASE_WATCHDOG` (-1) → `None`, > 0 → that many milliseconds.
pub(crate) fn lease(ms: i64) -> FfiResult<Option<Duration>> {
    match ms {
        RL_LEASE_WATCHDOG => Ok(None),
        1.. => Ok(Some(Duration::from_millis(ms as u64))),
        _ => Err(FfiError::invalid(format!(
            "lease_ms must be a positive number of milliseconds or RL_LEASE_WATCHDOG (-1); got {ms}"
        ))),
    }
}

/// A strictly positive duration (no sentinel).
pub(crate) fn positive(ms: i64, what: &str) -> FfiResult<Duration> {
    if ms > 0 {
        Ok(Duration::from_millis(ms as u64))
    } else {
        Err(FfiError::invalid(format!(
            "{what} must be a positive number of milliseconds; got {ms}"
        )))
    }
}

/// Fails when a required out-pointer is NULL. Called before any work, so a call never does
/// something (like taking a lock) that it then cannot report.
pub(crate) fn require_out<T>(out: *mut T, what: &str) -> FfiResult<()> {
    if out.is_null() {
        Err(FfiError::invalid(format!("{what} must not be NULL")))
    } else {
        Ok(())
    }
}

/// [`require_out`], then sets the target to its empty value (a zero handle, 0, false), so that
/// on failure the caller never finds a stale or uninitialised value there.
///
/// # Safety
/// `out` is NULL or valid for writes of a `T`.
pub(crate) unsafe fn init_out<T: Default>(out: *mut T, what: &str) -> FfiResult<()> {
    require_out(out, what)?;
    // SAFETY: checked non-NULL; valid for writes per the caller.
    unsafe { out.write(T::default()) };
    Ok(())
}

/// Writes through an out-pointer that may be NULL (then the value is not wanted).
///
/// # Safety
/// `out` is NULL or valid for writes of a `T`.
pub(crate) unsafe fn put<T>(out: *mut T, value: T) {
    if !out.is_null() {
        // SAFETY: non-NULL, and valid for writes per the caller.
        unsafe { out.write(value) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentinels_and_ranges() {
        assert_eq!(wait(-1, "wait_ms"), Ok(None));
        assert_eq!(wait(0, "wait_ms"), Ok(Some(Duration::ZERO)));
        assert!(wait(-2, "wait_ms").unwrap_err().message.contains("got -2"));
        assert_eq!(lease(-1), Ok(None));
        assert!(lease(0).is_err());
        assert!(lease(i64::MIN).is_err());
        assert_eq!(lease(1), Ok(Some(Duration::from_millis(1))));
        assert!(positive(0, "x").is_err());
        assert!(positive(-5, "x").is_err());
    }
}
