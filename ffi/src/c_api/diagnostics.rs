//! Counts of live objects, so that tests (and operators) can see handle or string leaks.

use super::args::put;
use super::cancel::CANCELS;
use super::client::CLIENTS;
use super::error::rl_error;
use super::guard::guard;
use super::hold::HOLDS;
use super::lock::{LOCKS, RWLOCKS};
use super::options::OPTIONS;
use super::owner::OWNERS;
use super::pending::PENDING;
use super::status::rl_status;
use super::strings;

/// How many handles of every kind (`*out_handles`) and strings handed out (`*out_strings`) are
/// not freed yet, in this process. Either pointer may be NULL. For leak checks: the numbers
/// return to where they were once a piece of code freed everything it made.
///
/// # Safety
/// `out_handles`, `out_strings` and `err` are NULL or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rl_live_objects(
    out_handles: *mut u64,
    out_strings: *mut u64,
    err: *mut rl_error,
) -> rl_status {
    guard(err, || {
        let handles = OPTIONS.len()
            + CLIENTS.len()
            + LOCKS.len()
            + RWLOCKS.len()
            + OWNERS.len()
            + CANCELS.len()
            + HOLDS.len()
            + PENDING.len();
        // SAFETY: per this function's contract.
        unsafe {
            put(out_handles, handles as u64);
            put(out_strings, strings::live() as u64);
        }
        Ok(())
    })
}
