//! The error kinds of the contract (`LOCK-SEMANTICS.md`), the same in every language.

use std::fmt;

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Every failure a lock operation can report.
///
/// The variants are the contract's error kinds; bindings map each to their language's idiom
/// (see [`ErrorKind`] for a field-less copy that crosses FFI boundaries easily).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A name, token, duration or option is out of range. Nothing was sent to Redis.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The wait ended before the lock could be acquired.
    #[error("timed out waiting for the lock")]
    Timeout,
    /// The caller's owner does not hold the lock in this mode (never held, released, or expired).
    #[error("the lock is not held by this owner")]
    NotHeld,
    /// The hold was kept alive by this client's watchdog and Redis no longer has it
    /// (expired during an outage, or removed by `force_unlock`).
    #[error("the lock was lost: the hold is gone from Redis")]
    LockLost,
    /// A reader asked for the write lock while still reading; this would deadlock, so it fails at once.
    #[error("cannot upgrade a read hold to a write hold; release the read hold first")]
    UpgradeNotAllowed,
    /// Redis could not be reached, did not answer in time, or refused the credentials / TLS.
    #[error("connection error: {0}")]
    Connection(String),
    /// Redis answered with an error.
    #[error("redis error: {0}")]
    Redis(String),
    /// The client was closed.
    #[error("the client is closed")]
    Closed,
    /// A waiting acquire was cancelled by its caller (a cancel token, an interrupt, a context).
    #[error("the wait was cancelled")]
    Cancelled,
}

/// A field-less copy of [`Error`]'s variant, for status codes and exception mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    InvalidArgument,
    Timeout,
    NotHeld,
    LockLost,
    UpgradeNotAllowed,
    Connection,
    Redis,
    Closed,
    Cancelled,
}

impl Error {
    /// The kind of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
            Error::Timeout => ErrorKind::Timeout,
            Error::NotHeld => ErrorKind::NotHeld,
            Error::LockLost => ErrorKind::LockLost,
            Error::UpgradeNotAllowed => ErrorKind::UpgradeNotAllowed,
            Error::Connection(_) => ErrorKind::Connection,
            Error::Redis(_) => ErrorKind::Redis,
            Error::Closed => ErrorKind::Closed,
            Error::Cancelled => ErrorKind::Cancelled,
        }
    }

    pub(crate) fn invalid(msg: impl fmt::Display) -> Self {
        Error::InvalidArgument(msg.to_string())
    }

    /// Redis did not answer a call within the command timeout.
    pub(crate) fn no_answer(command_timeout: std::time::Duration) -> Self {
        Error::Connection(format!("Redis did not answer within {command_timeout:?}"))
    }
}

impl From<redis::RedisError> for Error {
    fn from(err: redis::RedisError) -> Self {
        use redis::ErrorKind as K;
        let connection_like = err.is_io_error()
            || err.is_timeout()
            || err.is_connection_dropped()
            || err.is_connection_refusal()
            || err.is_unrecoverable_error()
            || matches!(err.kind(), K::AuthenticationFailed | K::InvalidClientConfig)
            // A server that wants a password none was given for (or one it no longer takes).
            || matches!(err.code(), Some("NOAUTH" | "WRONGPASS"));
        if connection_like {
            Error::Connection(err.to_string())
        } else {
            Error::Redis(err.to_string())
        }
    }
}
