//! The C ABI of libredlock (issue 3), used by C programs and the Go module.
//!
//! Rules every exported function follows, so that no mistake on the C side is undefined
//! behaviour on ours:
//! - it returns an [`rl_status`]; results go to out-parameters, error details to an optional
//!   [`rl_error`] out-parameter (not thread-local state: Go goroutines move between OS threads);
//! - objects are *checked handles* (a 64-bit id looked up in a table), never raw pointers: a
//!   zero, freed, double-freed or wrong-kind handle is `RL_INVALID_HANDLE` with a message;
//! - NULL pointers, invalid UTF-8 and out-of-range numbers are `RL_INVALID_ARGUMENT`;
//! - the body runs under `catch_unwind`: a panic becomes `RL_INTERNAL`, never an unwind into C;
//! - calls block the calling thread; every Redis call inside is bounded by the client's command
//!   timeout, and a waiting acquire can be cancelled from another thread with an [`rl_cancel`];
//!   `rl_lock_acquire_start` waits without blocking it (an [`rl_pending`] calls back when done).
//!
//! The header `bindings/c/include/redlock.h` is generated from these files by cbindgen
//! (`bindings/c/cbindgen.toml`); `ffi/tests/c_header.rs` fails when it is stale.

// The order of these declarations is the order of the generated header (cbindgen reads them
// in turn): from the basics to the objects. Blank lines keep rustfmt from sorting them.

// Basics: status codes, errors, strings, argument checks, handles.
mod status;

mod error;

mod strings;

mod args;
mod guard;
mod handles;

// Objects, in the order a program meets them.
mod options;

mod callbacks;

mod client;

mod owner;

mod lock;

mod hold;

mod cancel;

mod pending;

mod diagnostics;
mod inspect;

// Process-wide: the library's log lines.
mod logs;

/// Every table and string registry, locked in one order (see `crate::fork_safety`).
pub(crate) fn lock_every_table(held: &mut Vec<Box<dyn std::any::Any>>) {
    held.push(options::OPTIONS.lock_for_fork());
    held.push(client::CLIENTS.lock_for_fork());
    held.push(owner::OWNERS.lock_for_fork());
    held.push(lock::RWLOCKS.lock_for_fork());
    held.push(lock::LOCKS.lock_for_fork());
    held.push(hold::HOLDS.lock_for_fork());
    held.push(cancel::CANCELS.lock_for_fork());
    held.push(pending::PENDING.lock_for_fork());
    held.extend(strings::lock_for_fork());
}

pub use args::{RL_LEASE_WATCHDOG, RL_MAX_NAME_LEN, RL_MAX_TOKEN_LEN, RL_WAIT_FOREVER};
pub use callbacks::{rl_contention_alert, rl_contention_fn, rl_lock_lost_event, rl_lock_lost_fn};
pub use cancel::*;
pub use client::*;
pub use diagnostics::rl_live_objects;
pub use error::{rl_error, rl_error_free};
pub use handles::{
    rl_cancel, rl_client, rl_hold, rl_lock, rl_options, rl_owner, rl_pending, rl_rwlock,
};
pub use hold::*;
pub use lock::*;
pub use options::*;
pub use owner::*;
pub use pending::*;
pub use status::{rl_mode, rl_status, rl_status_name, rl_version};
pub use strings::rl_string_free;
