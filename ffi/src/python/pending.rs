//! `PendingAcquire`: an acquire running on the shared runtime, which Python waits for in slices
//! (so Ctrl-C is seen between them), awaits from asyncio, or cancels.
//!
//! A hold is never leaked: if the caller cancels (or drops this object) after the acquire
//! succeeded but before taking the hold, the hold is released in the background.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use redlock_core::blocking::{self, CancelToken};
use redlock_core::{AcquireOptions, Error, Hold, Lock, Owner};
use tokio::sync::watch;

use super::error::{NativeError, seconds};
use super::lock::HoldBook;

/// An acquire in progress. Boxed so that it can start on the caller's thread and, if it has to
/// wait, move to the runtime without losing its place.
pub(crate) type Acquiring = Pin<Box<dyn Future<Output = Result<Hold, Error>> + Send>>;

pub(crate) fn acquiring(lock: Lock, owner: Owner, options: AcquireOptions) -> Acquiring {
    Box::pin(async move { lock.acquire_with(&owner, options).await })
}

enum State {
    Running,
    Finished(Result<Hold, Error>),
    /// The caller took the outcome.
    Taken,
    /// The caller gave up: a hold that arrives (or is waiting) is released, not handed out.
    Abandoned,
}

#[derive(uniffi::Object)]
pub struct PendingAcquire {
    /// The process that started the acquire: a forked child's copy must not release its
    /// parent's hold.
    pid: u32,
    state: Mutex<State>,
    finished: Condvar,
    finished_async: watch::Sender<bool>,
    cancel: CancelToken,
    lock: Lock,
    owner: Owner,
    holds: Arc<HoldBook>,
}

impl PendingAcquire {
    /// Runs `acquiring` (an acquire of `owner` on `lock`) to its end on the shared runtime.
    pub(crate) fn start(
        acquiring: Acquiring,
        lock: Lock,
        owner: Owner,
        holds: Arc<HoldBook>,
    ) -> Arc<Self> {
        let pending = Arc::new(PendingAcquire {
            pid: std::process::id(),
            state: Mutex::new(State::Running),
            finished: Condvar::new(),
            finished_async: watch::Sender::new(false),
            cancel: CancelToken::new(),
            lock,
            owner,
            holds,
        });
        let task = pending.clone();
        blocking::runtime().spawn(async move {
            let cancel = task.cancel.clone();
            let outcome = tokio::select! {
                biased;
                _ = cancel.cancelled() => Err(Error::Cancelled),
                result = acquiring => result,
            };
            task.finish(outcome).await;
        });
        pending
    }

    async fn finish(self: Arc<Self>, outcome: Result<Hold, Error>) {
        let unwanted = {
            let mut state = self.state();
            match *state {
                State::Abandoned => outcome.ok(),
                _ => {
                    *state = State::Finished(outcome);
                    None
                }
            }
        };
        if unwanted.is_some() {
            let _ = self.lock.release(&self.owner).await;
            return;
        }
        self.finished.notify_all();
        if self.finished_async.receiver_count() == 0 {
            self.finished_async.send_replace(true);
        } else {
            // Waking an asyncio waiter takes the GIL: do it off the runtime workers.
            tokio::task::spawn_blocking(move || self.finished_async.send_replace(true));
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands out a finished outcome, once: `true` when the hold is the caller's now.
    fn take(&self, state: &mut State) -> Result<bool, NativeError> {
        match std::mem::replace(state, State::Taken) {
            State::Running => {
                *state = State::Running;
                Ok(false)
            }
            State::Finished(Ok(hold)) => {
                self.holds.record(&hold);
                Ok(true)
            }
            State::Finished(Err(err)) => Err(err.into()),
            other @ (State::Taken | State::Abandoned) => {
                *state = other;
                Err(NativeError::invalid(
                    "this acquire was already taken or cancelled",
                ))
            }
        }
    }

    fn abandon(&self) {
        if self.pid != std::process::id() {
            return;
        }
        let mut state = self.state();
        match *state {
            State::Running => {
                *state = State::Abandoned;
                self.cancel.cancel();
            }
            State::Finished(Ok(_)) => {
                *state = State::Abandoned;
                let lock = self.lock.clone();
                let owner = self.owner.clone();
                blocking::runtime().spawn(async move {
                    let _ = lock.release(&owner).await;
                });
            }
            State::Finished(Err(_)) => *state = State::Abandoned,
            State::Taken | State::Abandoned => {}
        }
    }
}

#[uniffi::export]
impl PendingAcquire {
    /// Waits up to `timeout` seconds: `true` once the hold is the caller's, `false` while the
    /// acquire is still waiting, or the acquire's error (`Timeout` when its own wait ran out).
    pub fn wait(&self, timeout: f64) -> Result<bool, NativeError> {
        let timeout = seconds("timeout", timeout)?.min(Duration::from_secs(3600));
        let state = self.state();
        let (mut state, _) = self
            .finished
            .wait_timeout_while(state, timeout, |s| matches!(s, State::Running))
            .unwrap_or_else(|e| e.into_inner());
        self.take(&mut state)
    }

    /// Resolves once the outcome is ready (then `wait(0)` hands it out). Dropping this future
    /// does not cancel the acquire: call `cancel`.
    pub async fn finished(&self) {
        let mut finished = self.finished_async.subscribe();
        let _ = finished.wait_for(|done| *done).await;
    }

    /// Gives up: a running acquire is cancelled (nothing is left in Redis) and a hold that was
    /// acquired but not taken is released. Harmless after the hold was taken.
    pub fn cancel(&self) {
        self.abandon();
    }
}

impl Drop for PendingAcquire {
    fn drop(&mut self) {
        self.abandon();
    }
}
