//! Calls that a foreign event loop polls on its own thread: [`Lock::acquire_polled`] and
//! [`Lock::release_polled`], for bindings whose async callers run on a loop of their own
//! (Python's asyncio).
//!
//! Why: handing a call to the shared runtime costs a thread wake-up to start it and one to hand
//! its outcome back, on top of the socket's. Polled on the loop's thread, the call writes its
//! request there at once, and the runtime only wakes the loop (through the caller's [`Waker`])
//! when the reply, a timer or a notification arrives. The runtime is entered around every poll,
//! so the call's timers and connections belong to it as usual.
//!
//! Guarantees:
//! - [`Polled::poll`] hands the outcome out once; after that it answers `InvalidArgument`;
//! - an acquire given up unfinished ([`Polled::abandon`], or dropped) is cancelled as a dropped
//!   async acquire is: nothing is left in Redis, and a lock it was granted meanwhile is given back;
//! - a release given up unfinished runs to its end on the runtime: a release that was sent is
//!   not taken back;
//! - a forked child's copy neither polls nor gives up anything of its parent's.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use super::{Lock, runtime};
use crate::error::{Error, Result};
use crate::lock::{AcquireOptions, Hold};
use crate::owner::Owner;

type Call<T> = Pin<Box<dyn Future<Output = Result<T>> + Send>>;

/// What giving up an unfinished call does.
#[derive(Clone, Copy)]
enum Unfinished {
    /// Drop it (an acquire: its cancellation leaves nothing behind).
    Cancel,
    /// Let it finish on the runtime (a release).
    Finish,
}

/// One call, polled by its caller's own loop (see the module docs).
pub struct Polled<T: Send + 'static> {
    call: Mutex<Option<Call<T>>>,
    unfinished: Unfinished,
    /// The process that started the call: a forked child's copy must not touch it.
    pid: u32,
}

impl<T: Send + 'static> Polled<T> {
    fn new(call: Call<T>, unfinished: Unfinished) -> Self {
        Polled {
            call: Mutex::new(Some(call)),
            unfinished,
            pid: crate::inspect::process_id(),
        }
    }

    /// Polls the call on this thread, inside the shared runtime. `Pending`: `waker` is woken
    /// (from any thread) when it is worth polling again. `Ready`: the outcome, handed out once.
    pub fn poll(&self, waker: &Waker) -> Poll<Result<T>> {
        if self.pid != crate::inspect::process_id() {
            return Poll::Ready(Err(Error::InvalidArgument(
                "this call was started by another process (before a fork)".into(),
            )));
        }
        let mut call = self.call();
        let Some(running) = call.as_mut() else {
            return Poll::Ready(Err(Error::InvalidArgument(
                "this call's outcome was already taken, or it was given up".into(),
            )));
        };
        let _runtime = runtime().enter();
        let outcome = running.as_mut().poll(&mut Context::from_waker(waker));
        if outcome.is_ready() {
            *call = None;
        }
        outcome
    }

    /// Gives up an unfinished call (see the module's guarantees); harmless once it finished.
    pub fn abandon(&self) {
        if self.pid != crate::inspect::process_id() {
            // The parent's connections and runtime are not this process's to use.
            if let Some(call) = self.call().take() {
                std::mem::forget(call);
            }
            return;
        }
        let Some(call) = self.call().take() else {
            return;
        };
        match self.unfinished {
            Unfinished::Cancel => {
                // Its cancellation may spawn clean-up work, which needs the runtime.
                let _runtime = runtime().enter();
                drop(call);
            }
            Unfinished::Finish => {
                runtime().spawn(async move {
                    let _ = call.await;
                });
            }
        }
    }

    fn call(&self) -> MutexGuard<'_, Option<Call<T>>> {
        self.call.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<T: Send + 'static> Drop for Polled<T> {
    fn drop(&mut self) {
        self.abandon();
    }
}

impl Lock {
    /// An acquire for the caller's own loop to poll (see the module docs); the same options and
    /// outcomes as [`crate::Lock::acquire_with`].
    pub fn acquire_polled(&self, owner: &Owner, options: AcquireOptions) -> Result<Polled<Hold>> {
        let lock = self.current()?;
        let owner = owner.clone();
        let call = Box::pin(async move { lock.acquire_with(&owner, options).await });
        Ok(Polled::new(call, Unfinished::Cancel))
    }

    /// A release of one hold of `owner` for the caller's own loop to poll (see the module
    /// docs); the same outcomes as [`crate::Lock::release`].
    pub fn release_polled(&self, owner: &Owner) -> Result<Polled<u32>> {
        let lock = self.current()?;
        let owner = owner.clone();
        let call = Box::pin(async move { lock.release(&owner).await });
        Ok(Polled::new(call, Unfinished::Finish))
    }
}
