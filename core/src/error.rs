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
    /// Redis could not be reached, did not answer in time, or refused the credentials / TLS
    /// (including a password it started to require while the client was connected).
    #[error("connection error: {0}")]
    Connection(String),
    /// Redis answered with an error; the message is Redis' own line, code first
    /// (`READONLY You can't write against a read only replica.`). Also a reply this library
    /// cannot read, and a name whose keys hold what it did not write (`WRONGTYPE`,
    /// `FOREIGNKEY`).
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

/// Whether Redis refused a call from an unauthenticated connection that was too long to take
/// from one (more than 10 arguments, as every lock script call has; networking.c), closing the
/// connection: a `NOAUTH` in all but name, e.g. `requirepass` set while the client was connected.
fn unauthenticated_call(err: &redis::RedisError) -> bool {
    err.code() == Some("ERR")
        && err
            .detail()
            .is_some_and(|detail| detail.starts_with("Protocol error: unauthenticated"))
}

/// An error reply as Redis sent it, code first (`READONLY You can't write against a read only
/// replica.`): redis-rs' `Display` renames the codes it knows (`ReadOnly`, `NoPerm`,
/// `ResponseError` for `ERR`) and quotes the others, so a caller matching Redis' codes would
/// miss some.
fn server_line(err: &redis::RedisError) -> Option<String> {
    if !matches!(
        err.kind(),
        redis::ErrorKind::Server(_) | redis::ErrorKind::Extension
    ) {
        return None;
    }
    let code = err.code()?;
    Some(match err.detail() {
        Some(detail) => format!("{code} {detail}"),
        None => code.to_owned(),
    })
}

impl From<redis::RedisError> for Error {
    fn from(err: redis::RedisError) -> Self {
        use redis::ErrorKind as K;
        let message = server_line(&err).unwrap_or_else(|| err.to_string());
        if unauthenticated_call(&err) {
            return Error::Connection(format!(
                "{message} (Redis wants a password: none was given)"
            ));
        }
        let connection_like = err.is_io_error()
            || err.is_timeout()
            || err.is_connection_dropped()
            || err.is_connection_refusal()
            || err.is_unrecoverable_error()
            || matches!(err.kind(), K::AuthenticationFailed | K::InvalidClientConfig)
            // A server that wants a password none was given for (or one it no longer takes).
            || matches!(err.code(), Some("NOAUTH" | "WRONGPASS"))
            // Sent in place of any reply by a server at `maxclients`, which then closes the
            // connection: the command never ran (a connection a direct call opened reads it
            // as its call's reply).
            || message.contains("max number of clients reached");
        if connection_like {
            Error::Connection(message)
        } else {
            Error::Redis(message)
        }
    }
}
