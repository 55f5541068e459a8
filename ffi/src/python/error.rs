//! The error that crosses into Python; the Python layer maps each variant to its exception class.

use std::time::Duration;

use redlock_core::Error;

/// One variant per error kind of the contract, plus `Internal` for a bug in this adapter.
#[derive(Debug, thiserror::Error, uniffi::Error)]
#[uniffi(flat_error)]
pub enum NativeError {
    #[error("{0}")]
    InvalidArgument(String),
    #[error("{0}")]
    Timeout(String),
    #[error("{0}")]
    NotHeld(String),
    #[error("{0}")]
    LockLost(String),
    #[error("{0}")]
    UpgradeNotAllowed(String),
    #[error("{0}")]
    Connection(String),
    #[error("{0}")]
    Redis(String),
    #[error("{0}")]
    Closed(String),
    #[error("{0}")]
    Cancelled(String),
    #[error("{0}")]
    Internal(String),
}

impl NativeError {
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        NativeError::InvalidArgument(message.into())
    }

    pub(crate) fn internal(message: impl Into<String>) -> Self {
        NativeError::Internal(message.into())
    }
}

impl From<Error> for NativeError {
    fn from(err: Error) -> Self {
        let message = err.to_string();
        match err {
            Error::InvalidArgument(_) => NativeError::InvalidArgument(message),
            Error::Timeout => NativeError::Timeout(message),
            Error::NotHeld => NativeError::NotHeld(message),
            Error::LockLost => NativeError::LockLost(message),
            Error::UpgradeNotAllowed => NativeError::UpgradeNotAllowed(message),
            Error::Connection(_) => NativeError::Connection(message),
            Error::Redis(_) => NativeError::Redis(message),
            Error::Closed => NativeError::Closed(message),
            Error::Cancelled => NativeError::Cancelled(message),
        }
    }
}

/// Seconds from Python as a duration: finite and not negative.
pub(crate) fn seconds(what: &str, value: f64) -> Result<Duration, NativeError> {
    Duration::try_from_secs_f64(value).map_err(|_| {
        NativeError::invalid(format!(
            "{what} must be a finite number of seconds >= 0, got {value}"
        ))
    })
}

/// A wait in seconds, passed as a plain float because every `Option` costs the Python side an
/// extra buffer allocation per call: negative or infinite waits forever (`None`).
pub(crate) fn wait_seconds(value: f64) -> Result<Option<Duration>, NativeError> {
    if value < 0.0 || value == f64::INFINITY {
        return Ok(None);
    }
    seconds("timeout", value).map(Some)
}

/// A lease in seconds, as a plain float like [`wait_seconds`]: negative means none (the
/// watchdog keeps the hold alive).
pub(crate) fn lease_seconds(value: f64) -> Result<Option<Duration>, NativeError> {
    if value < 0.0 {
        return Ok(None);
    }
    seconds("lease", value).map(Some)
}
