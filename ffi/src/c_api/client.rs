//! Clients: connect, close, and the lock handles made from a client.

use std::ffi::c_char;
use std::ptr;
use std::sync::{Arc, PoisonError};

use redlock_core::blocking;

use super::args::{init_out, put, require_out};
use super::callbacks::CallbackGate;
use super::cancel::CANCELS;
use super::error::rl_error;
use super::guard::guard;
use super::handles::{
    Kind, Table, free_handle, rl_cancel, rl_client, rl_lock, rl_options, rl_rwlock,
};
use super::inspect::info_json;
use super::lock::{LOCKS, LockObj, RWLOCKS};
use super::options::OPTIONS;
use super::status::rl_status;
use super::strings;

/// A connected client and the gate its C callbacks go through.
pub(crate) struct ClientObj {
    client: blocking::Client,
    callbacks: Arc<CallbackGate>,
}

impl ClientObj {
    fn close(&self) {
        self.client.close();
        self.callbacks.close();
    }
}

pub(crate) static CLIENTS: Table<Arc<ClientObj>> = Table::new(Kind::Client);

/// Connects to Redis at `url` (`redis://[user:password@]host[:port][/db]`, `rediss://…` for TLS)
/// with `options` (a zero handle: all defaults). Blocks up to the connect timeout; an
/// unreachable server is `RL_CONNECTION`. Free the client with `rl_client_free`.
///
/// # Safety
/// `url` is NULL or a NUL-terminated string; `out` and `err` are NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_client_connect(
    url: *const c_char,
    options: rl_options,
    out: *mut rl_client,
    err: *mut rl_error,
) -> rl_status {
    // SAFETY: the same contract.
    unsafe { rl_client_connect_ex(url, options, rl_cancel::default(), out, err) }
}

/// `rl_client_connect` that `cancel` (a zero handle: not cancellable) ends from another thread
/// with `RL_CANCELLED` (see `rl_cancel_new`); a connection made meanwhile is dropped.
///
/// # Safety
/// `url` is NULL or a NUL-terminated string; `out` and `err` are NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_client_connect_ex(
    url: *const c_char,
    options: rl_options,
    cancel: rl_cancel,
    out: *mut rl_client,
    err: *mut rl_error,
) -> rl_status {
    guard(err, || {
        // SAFETY: per this function's contract.
        unsafe { init_out(out, "out")? };
        // SAFETY: as above.
        let url = unsafe { strings::read(url, "url") }?;
        let settings = match OPTIONS.get_optional(options.id)? {
            Some(s) => s.lock().unwrap_or_else(PoisonError::into_inner).clone(),
            None => Default::default(),
        };
        let cancel = CANCELS.get_optional(cancel.id)?;
        let callbacks = Arc::new(CallbackGate::default());
        let builder = settings.apply(redlock_core::Client::builder(url), &callbacks);
        let client = blocking::Client::connect_with(builder, cancel.as_ref())?;
        let id = CLIENTS.insert(Arc::new(ClientObj { client, callbacks }));
        // SAFETY: as above.
        unsafe { put(out, rl_client { id }) };
        Ok(())
    })
}

/// Closes the client: the watchdog stops, waiting acquires end with `RL_CLOSED`, and every later
/// call through the client or its locks fails with `RL_CLOSED`. Holds stay in Redis until their
/// lease ends: release them first for a clean exit. Once this returns, no callback of the
/// client runs. Closing twice is harmless. The handle stays valid until `rl_client_free`.
///
/// # Safety
/// `err` is NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_client_close(client: rl_client, err: *mut rl_error) -> rl_status {
    guard(err, || {
        CLIENTS.get(client.id)?.close();
        Ok(())
    })
}

/// Closes the client (as `rl_client_close`) and frees the handle at `*client`, setting it to
/// zero. Lock handles made from it stay valid handles (free them too) but fail with
/// `RL_CLOSED`. A zero handle is a no-op; a handle freed already is `RL_INVALID_HANDLE`.
///
/// # Safety
/// `client` is NULL or points to an `rl_client`; `err` is NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_client_free(client: *mut rl_client, err: *mut rl_error) -> rl_status {
    guard(err, || {
        // SAFETY: rl_client is a repr(C) struct of one u64.
        if let Some(object) = unsafe { free_handle(&CLIENTS, client.cast()) }? {
            object.close();
        }
        Ok(())
    })
}

/// Whether the client was closed (`*out`).
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_client_is_closed(
    client: rl_client,
    out: *mut bool,
    err: *mut rl_error,
) -> rl_status {
    guard(err, || {
        // SAFETY: per this function's contract.
        unsafe { init_out(out, "out")? };
        let closed = CLIENTS.get(client.id)?.client.is_closed();
        // SAFETY: as above.
        unsafe { put(out, closed) };
        Ok(())
    })
}

/// The exclusive reentrant lock `name` (1..=`RL_MAX_NAME_LEN` bytes of UTF-8; any characters).
/// It is the same resource as the write view of `rl_client_read_write_lock(name)`. No Redis
/// call is made. Free with `rl_lock_free`.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string; `out` and `err` are NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_client_lock(
    client: rl_client,
    name: *const c_char,
    out: *mut rl_lock,
    err: *mut rl_error,
) -> rl_status {
    guard(err, || {
        // SAFETY: per this function's contract.
        unsafe { init_out(out, "out")? };
        // SAFETY: as above.
        let name = unsafe { strings::read(name, "name") }?;
        let lock = CLIENTS.get(client.id)?.client.lock(name)?;
        let id = LOCKS.insert(Arc::new(LockObj::Exclusive(lock)));
        // SAFETY: as above.
        unsafe { put(out, rl_lock { id }) };
        Ok(())
    })
}

/// The read/write lock `name` (rules as for `rl_client_lock`). Take its views with
/// `rl_rwlock_read` and `rl_rwlock_write`. Free with `rl_rwlock_free`.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string; `out` and `err` are NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_client_read_write_lock(
    client: rl_client,
    name: *const c_char,
    out: *mut rl_rwlock,
    err: *mut rl_error,
) -> rl_status {
    guard(err, || {
        // SAFETY: per this function's contract.
        unsafe { init_out(out, "out")? };
        // SAFETY: as above.
        let name = unsafe { strings::read(name, "name") }?;
        let rw = CLIENTS.get(client.id)?.client.read_write_lock(name)?;
        let id = RWLOCKS.insert(Arc::new(rw));
        // SAFETY: as above.
        unsafe { put(out, rl_rwlock { id }) };
        Ok(())
    })
}

/// A snapshot of lock `name` as JSON (`*out_json`, free with `rl_string_free`); see
/// `rl_lock_inspect` for its shape.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string; `out_json` and `err` are NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_client_inspect(
    client: rl_client,
    name: *const c_char,
    out_json: *mut *mut c_char,
    err: *mut rl_error,
) -> rl_status {
    guard(err, || {
        require_out(out_json, "out_json")?;
        // SAFETY: per this function's contract.
        unsafe { put(out_json, ptr::null_mut()) };
        // SAFETY: as above.
        let name = unsafe { strings::read(name, "name") }?;
        let info = CLIENTS.get(client.id)?.client.inspect(name)?;
        // SAFETY: as above.
        unsafe { put(out_json, strings::to_c(&info_json(&info))) };
        Ok(())
    })
}

/// Clears lock `name` whoever holds it (both views) and wakes its waiters; `*out_was_held`
/// (may be NULL) tells whether it was held. An admin call: holders find out at their next
/// renewal (watched holds are then reported lost).
///
/// # Safety
/// `name` is NULL or a NUL-terminated string; `out_was_held` and `err` are NULL or valid for
/// writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_client_force_unlock(
    client: rl_client,
    name: *const c_char,
    out_was_held: *mut bool,
    err: *mut rl_error,
) -> rl_status {
    guard(err, || {
        // SAFETY: per this function's contract.
        unsafe { put(out_was_held, false) };
        // SAFETY: as above.
        let name = unsafe { strings::read(name, "name") }?;
        let held = CLIENTS.get(client.id)?.client.force_unlock(name)?;
        // SAFETY: as above.
        unsafe { put(out_was_held, held) };
        Ok(())
    })
}
