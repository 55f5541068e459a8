//! Client settings, gathered in an `rl_options` object before `rl_client_connect`.
//!
//! Setters (rather than a struct) keep the ABI stable when settings are added, and let each
//! value be checked where it is given, with a message naming it.

use std::ffi::{c_char, c_void};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redlock_core::ClientBuilder;

use super::args::{init_out, positive, put};
use super::callbacks::{
    CCallback, CallbackGate, ContentionCallback, LostCallback, contention_forwarder,
    lost_forwarder, rl_contention_fn, rl_lock_lost_fn,
};
use super::error::{FfiError, FfiResult, rl_error};
use super::guard::guard;
use super::handles::{Kind, Table, free_handle, rl_options};
use super::status::rl_status;
use super::strings;

/// Settings given so far; `None` keeps the core's default.
#[derive(Clone, Default)]
pub(crate) struct Settings {
    prefix: Option<String>,
    lease: Option<Duration>,
    command_timeout: Option<Duration>,
    connect_timeout: Option<Duration>,
    recheck_interval: Option<Duration>,
    watchdog: Option<bool>,
    alert_after: Option<Option<Duration>>,
    alert_attempts: Option<Option<u64>>,
    on_lock_lost: Option<LostCallback>,
    on_contention: Option<ContentionCallback>,
}

impl Settings {
    /// The builder with these settings; callbacks are routed through `gate`.
    pub(crate) fn apply(
        &self,
        mut builder: ClientBuilder,
        gate: &Arc<CallbackGate>,
    ) -> ClientBuilder {
        if let Some(prefix) = &self.prefix {
            builder = builder.prefix(prefix.clone());
        }
        if let Some(lease) = self.lease {
            builder = builder.lease(lease);
        }
        if let Some(timeout) = self.command_timeout {
            builder = builder.command_timeout(timeout);
        }
        if let Some(timeout) = self.connect_timeout {
            builder = builder.connect_timeout(timeout);
        }
        if let Some(interval) = self.recheck_interval {
            builder = builder.recheck_interval(interval);
        }
        if let Some(on) = self.watchdog {
            builder = builder.watchdog(on);
        }
        if let Some(after) = self.alert_after {
            builder = builder.contention_alert_after(after);
        }
        if let Some(attempts) = self.alert_attempts {
            builder = builder.contention_alert_attempts(attempts);
        }
        if let Some(callback) = self.on_lock_lost {
            builder = builder.on_lock_lost(lost_forwarder(callback, gate.clone()));
        }
        if let Some(callback) = self.on_contention {
            builder = builder.on_contention(contention_forwarder(callback, gate.clone()));
        }
        builder
    }
}

pub(crate) static OPTIONS: Table<Arc<Mutex<Settings>>> = Table::new(Kind::Options);

/// Changes the settings of `options` under its lock.
fn update(
    options: rl_options,
    change: impl FnOnce(&mut Settings) -> FfiResult<()>,
) -> FfiResult<()> {
    let settings = OPTIONS.get(options.id)?;
    let mut settings = settings.lock().unwrap_or_else(PoisonError::into_inner);
    change(&mut settings)
}

/// Creates client settings, all at their defaults (prefix "redlock", lease 30 s, command
/// timeout 3 s, connect timeout 5 s, watchdog on, re-check every 250 ms, contention alert after
/// 30 s of waiting). Free with `rl_options_free` (the client keeps its own copy).
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_options_new(out: *mut rl_options, err: *mut rl_error) -> rl_status {
    guard(err, || {
        // SAFETY: per this function's contract.
        unsafe { init_out(out, "out")? };
        let id = OPTIONS.insert(Arc::default());
        // SAFETY: as above.
        unsafe { put(out, rl_options { id }) };
        Ok(())
    })
}

/// Sets the prefix of every Redis key and channel (1..=128 bytes, no '{' or '}', not ending in
/// ":fence"; checked by `rl_client_connect`).
///
/// # Safety
/// `prefix` is NULL or a NUL-terminated string; `err` is NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_options_set_prefix(
    options: rl_options,
    prefix: *const c_char,
    err: *mut rl_error,
) -> rl_status {
    guard(err, || {
        // SAFETY: per this function's contract.
        let prefix = unsafe { strings::read(prefix, "prefix") }?.to_owned();
        update(options, |s| {
            s.prefix = Some(prefix);
            Ok(())
        })
    })
}

/// Sets the default lease in milliseconds (> 0), which is also the watchdog's renewal lease
/// (renewed every lease/3).
///
/// # Safety
/// `err` is NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_options_set_lease_ms(
    options: rl_options,
    lease_ms: i64,
    err: *mut rl_error,
) -> rl_status {
    guard(err, || {
        let lease = positive(lease_ms, "lease_ms")?;
        update(options, |s| {
            s.lease = Some(lease);
            Ok(())
        })
    })
}

/// Sets the limit on each Redis call in milliseconds (> 0). A Redis that does not answer in
/// time is `RL_CONNECTION`.
///
/// # Safety
/// `err` is NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_options_set_command_timeout_ms(
    options: rl_options,
    timeout_ms: i64,
    err: *mut rl_error,
) -> rl_status {
    guard(err, || {
        let timeout = positive(timeout_ms, "timeout_ms")?;
        update(options, |s| {
            s.command_timeout = Some(timeout);
            Ok(())
        })
    })
}

/// Sets the limit on establishing a connection in milliseconds (> 0).
///
/// # Safety
/// `err` is NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_options_set_connect_timeout_ms(
    options: rl_options,
    timeout_ms: i64,
    err: *mut rl_error,
) -> rl_status {
    guard(err, || {
        let timeout = positive(timeout_ms, "timeout_ms")?;
        update(options, |s| {
            s.connect_timeout = Some(timeout);
            Ok(())
        })
    })
}

/// Sets the longest sleep of a waiter between attempts when no notification arrives, in
/// milliseconds (> 0): what a lost pub/sub message can cost at most.
///
/// # Safety
/// `err` is NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_options_set_recheck_interval_ms(
    options: rl_options,
    interval_ms: i64,
    err: *mut rl_error,
) -> rl_status {
    guard(err, || {
        let interval = positive(interval_ms, "interval_ms")?;
        update(options, |s| {
            s.recheck_interval = Some(interval);
            Ok(())
        })
    })
}

/// Turns the watchdog on (default) or off. Off: holds taken with `RL_LEASE_WATCHDOG` simply get
/// the default lease and are not renewed.
///
/// # Safety
/// `err` is NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_options_set_watchdog(
    options: rl_options,
    on: bool,
    err: *mut rl_error,
) -> rl_status {
    guard(err, || {
        update(options, |s| {
            s.watchdog = Some(on);
            Ok(())
        })
    })
}

/// Sets when a waiting acquire raises a contention alert (log line and `on_contention`
/// callback): after waiting `after_ms` milliseconds (-1: never by time; default 30000), or after
/// `attempts` failed attempts (-1: no limit, the default). 0 is rejected for both.
///
/// # Safety
/// `err` is NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_options_set_contention_alert(
    options: rl_options,
    after_ms: i64,
    attempts: i64,
    err: *mut rl_error,
) -> rl_status {
    guard(err, || {
        let after = match after_ms {
            -1 => None,
            ms => Some(positive(ms, "after_ms (or -1 for never)")?),
        };
        let attempts = match attempts {
            -1 => None,
            n if n > 0 => Some(n as u64),
            n => {
                return Err(FfiError::invalid(format!(
                    "attempts must be positive, or -1 for no limit; got {n}"
                )));
            }
        };
        update(options, |s| {
            s.alert_after = Some(after);
            s.alert_attempts = Some(attempts);
            Ok(())
        })
    })
}

/// Sets the function called (on a library thread) when a hold kept alive by the watchdog is
/// found gone; NULL removes it. `user_data` is passed back as is and must stay valid until the
/// client is closed: after `rl_client_close` or `rl_client_free` returns, no callback runs.
///
/// # Safety
/// `callback` is NULL or a function with this signature, safe to call from any thread with
/// `user_data`; `err` is NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_options_set_on_lock_lost(
    options: rl_options,
    callback: rl_lock_lost_fn,
    user_data: *mut c_void,
    err: *mut rl_error,
) -> rl_status {
    guard(err, || {
        update(options, |s| {
            s.on_lock_lost = callback.map(|function| CCallback {
                function,
                user_data: user_data as usize,
            });
            Ok(())
        })
    })
}

/// Sets the function called (on a library thread) with each contention alert; NULL removes
/// it. `user_data` as for `rl_options_set_on_lock_lost`.
///
/// # Safety
/// As for `rl_options_set_on_lock_lost`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_options_set_on_contention(
    options: rl_options,
    callback: rl_contention_fn,
    user_data: *mut c_void,
    err: *mut rl_error,
) -> rl_status {
    guard(err, || {
        update(options, |s| {
            s.on_contention = callback.map(|function| CCallback {
                function,
                user_data: user_data as usize,
            });
            Ok(())
        })
    })
}

/// Frees the settings at `*options` and sets the handle to zero. Clients made with them are
/// not affected. A zero handle is a no-op.
///
/// # Safety
/// `options` is NULL or points to an `rl_options`; `err` is NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_options_free(
    options: *mut rl_options,
    err: *mut rl_error,
) -> rl_status {
    // SAFETY: rl_options is a repr(C) struct of one u64.
    guard(err, || {
        unsafe { free_handle(&OPTIONS, options.cast()) }.map(drop)
    })
}
