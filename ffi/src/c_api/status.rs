//! Status codes (the contract's error kinds plus the ABI's own) and the lock modes.

#![allow(non_camel_case_types)]

use std::ffi::c_char;

use redlock_core::{ErrorKind, Mode};

/// What every `rl_*` function returns. `RL_OK` is 0; every other value is a failure whose
/// details (a message) go to the `rl_error` out-parameter when one is given.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rl_status {
    /// Success.
    RL_OK = 0,
    /// A NULL pointer, invalid UTF-8, an empty or over-long name or token, or an out-of-range
    /// duration. Nothing was sent to Redis.
    RL_INVALID_ARGUMENT = 1,
    /// The wait ended before the lock could be acquired (also: try-once found it taken).
    RL_TIMEOUT = 2,
    /// The owner does not hold the lock in this mode (never held, released, or expired).
    RL_NOT_HELD = 3,
    /// The watchdog kept the hold alive and Redis no longer has it (expired during an outage, or
    /// force-unlocked).
    RL_LOCK_LOST = 4,
    /// A reader asked for the write lock while still reading; fails at once instead of hanging.
    RL_UPGRADE_NOT_ALLOWED = 5,
    /// Redis could not be reached, did not answer within the command timeout, or refused the
    /// credentials or TLS.
    RL_CONNECTION = 6,
    /// Redis answered with an error, or with a reply the library cannot read (a name's keys
    /// written by something else: `WRONGTYPE`, `FOREIGNKEY`).
    RL_REDIS = 7,
    /// The client was closed (`rl_client_close` or `rl_client_free`).
    RL_CLOSED = 8,
    /// A waiting acquire (or wait) was cancelled through its `rl_cancel`.
    RL_CANCELLED = 9,
    /// A handle that is zero, was freed, belongs to no object of this library, or is of the wrong
    /// kind.
    RL_INVALID_HANDLE = 10,
    /// A bug in the library (a caught panic). The message says where; please report it.
    RL_INTERNAL = 11,
}

impl From<ErrorKind> for rl_status {
    fn from(kind: ErrorKind) -> Self {
        match kind {
            ErrorKind::InvalidArgument => rl_status::RL_INVALID_ARGUMENT,
            ErrorKind::Timeout => rl_status::RL_TIMEOUT,
            ErrorKind::NotHeld => rl_status::RL_NOT_HELD,
            ErrorKind::LockLost => rl_status::RL_LOCK_LOST,
            ErrorKind::UpgradeNotAllowed => rl_status::RL_UPGRADE_NOT_ALLOWED,
            ErrorKind::Connection => rl_status::RL_CONNECTION,
            ErrorKind::Redis => rl_status::RL_REDIS,
            ErrorKind::Closed => rl_status::RL_CLOSED,
            ErrorKind::Cancelled => rl_status::RL_CANCELLED,
        }
    }
}

impl rl_status {
    /// The status' name as a NUL-terminated static string.
    fn name(self) -> &'static [u8] {
        match self {
            rl_status::RL_OK => b"RL_OK\0",
            rl_status::RL_INVALID_ARGUMENT => b"RL_INVALID_ARGUMENT\0",
            rl_status::RL_TIMEOUT => b"RL_TIMEOUT\0",
            rl_status::RL_NOT_HELD => b"RL_NOT_HELD\0",
            rl_status::RL_LOCK_LOST => b"RL_LOCK_LOST\0",
            rl_status::RL_UPGRADE_NOT_ALLOWED => b"RL_UPGRADE_NOT_ALLOWED\0",
            rl_status::RL_CONNECTION => b"RL_CONNECTION\0",
            rl_status::RL_REDIS => b"RL_REDIS\0",
            rl_status::RL_CLOSED => b"RL_CLOSED\0",
            rl_status::RL_CANCELLED => b"RL_CANCELLED\0",
            rl_status::RL_INVALID_HANDLE => b"RL_INVALID_HANDLE\0",
            rl_status::RL_INTERNAL => b"RL_INTERNAL\0",
        }
    }

    /// The status whose number is `code`, if any (C may pass any integer).
    fn from_code(code: i32) -> Option<rl_status> {
        use rl_status::*;
        [
            RL_OK,
            RL_INVALID_ARGUMENT,
            RL_TIMEOUT,
            RL_NOT_HELD,
            RL_LOCK_LOST,
            RL_UPGRADE_NOT_ALLOWED,
            RL_CONNECTION,
            RL_REDIS,
            RL_CLOSED,
            RL_CANCELLED,
            RL_INVALID_HANDLE,
            RL_INTERNAL,
        ]
        .into_iter()
        .find(|s| *s as i32 == code)
    }
}

/// The name of a status code ("RL_TIMEOUT"), or "RL_UNKNOWN_STATUS" for a number that is not
/// one. The string is static: never free it.
// Takes an int, not the enum: C may pass any number, and an out-of-range enum would be UB here.
#[unsafe(no_mangle)]
pub extern "C" fn rl_status_name(status: i32) -> *const c_char {
    let name: &'static [u8] = match rl_status::from_code(status) {
        Some(s) => s.name(),
        None => b"RL_UNKNOWN_STATUS\0",
    };
    name.as_ptr().cast()
}

/// The library version ("0.1.0"). The string is static: never free it.
#[unsafe(no_mangle)]
pub extern "C" fn rl_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// Which view of a lock name: shared (read) or exclusive (write; also the exclusive lock).
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rl_mode {
    RL_MODE_READ = 1,
    RL_MODE_WRITE = 2,
}

impl From<Mode> for rl_mode {
    fn from(mode: Mode) -> Self {
        match mode {
            Mode::Read => rl_mode::RL_MODE_READ,
            Mode::Write => rl_mode::RL_MODE_WRITE,
        }
    }
}

/// "read" or "write", as the JSON documents spell it.
pub(crate) fn mode_word(mode: Mode) -> &'static str {
    match mode {
        Mode::Read => "read",
        Mode::Write => "write",
    }
}
