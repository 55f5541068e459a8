//! Acquires that wait without holding a thread: [`Lock::start_acquire`] makes the first attempt
//! on the calling thread (over its own socket, like every blocking call) and, when the lock is
//! taken, lets the acquire go on waiting on the shared runtime as a [`PendingAcquire`], keeping
//! its place in the queue. For bindings whose callers must not park an OS thread per waiter
//! (Go's goroutines, Python's Ctrl-C; asyncio polls its calls instead, see [`super::polled`]).
//!
//! Guarantees:
//! - the outcome is handed out once ([`PendingAcquire::wait`]); the notification
//!   ([`PendingAcquire::on_finished`]) fires once, also when the acquire fails or is cancelled;
//! - no hold is leaked: cancelling or dropping a `PendingAcquire` whose acquire succeeded but
//!   whose hold was not taken releases that hold in the background, and a running acquire is
//!   cancelled, leaving nothing in Redis;
//! - a forked child's copy never cancels or releases anything of its parent's.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::Poll;
use std::time::Duration;

use super::{CancelToken, Lock, block_on_acquire, cancellable, runtime};
use crate::error::{Error, Result};
use crate::lock::{AcquireOptions, Hold, TidyTicket};
use crate::owner::Owner;

/// How [`Lock::start_acquire`] ended.
pub enum Started {
    /// Acquired within the first wait: the hold is the caller's.
    Acquired(Hold),
    /// Still waiting, on the runtime now.
    Waiting(PendingAcquire),
}

type Acquiring = Pin<Box<dyn Future<Output = Result<Hold>> + Send>>;

type Notify = Box<dyn FnOnce() + Send>;

impl Lock {
    /// Starts an acquire: the first attempt runs on this thread, which then waits at most
    /// `first_wait` for the lock (zero: not at all). An acquire still waiting after that goes on
    /// on the shared runtime without losing its place. `cancel`, triggered from anywhere, ends it
    /// with `Cancelled` (through [`PendingAcquire::wait`] once it waits in the background).
    pub fn start_acquire(
        &self,
        owner: &Owner,
        options: AcquireOptions,
        cancel: Option<&CancelToken>,
        first_wait: Duration,
    ) -> Result<Started> {
        let lock = self.current()?;
        // A child token: the caller's cancels the acquire, and abandoning it cancels only it.
        let cancel = cancel.map(CancelToken::child_token).unwrap_or_default();
        let mut acquiring = acquiring(lock.clone(), owner.clone(), options, cancel.clone());
        // The first poll makes the first attempt on this thread (see `direct`); only an acquire
        // still waiting after it needs a timer, which must be made inside the runtime.
        let first = block_on_acquire(&lock, async {
            let first = std::future::poll_fn(|cx| Poll::Ready(acquiring.as_mut().poll(cx))).await;
            match first {
                Poll::Ready(result) => Some(result),
                Poll::Pending if first_wait.is_zero() => None,
                Poll::Pending => tokio::time::timeout(first_wait, &mut acquiring).await.ok(),
            }
        });
        match first {
            Some(result) => result.map(Started::Acquired),
            None => Ok(Started::Waiting(PendingAcquire::spawn(
                acquiring,
                lock,
                owner.clone(),
                cancel,
            ))),
        }
    }
}

fn acquiring(
    lock: crate::Lock,
    owner: Owner,
    options: AcquireOptions,
    cancel: CancelToken,
) -> Acquiring {
    Box::pin(async move { cancellable(Some(&cancel), lock.acquire_with(&owner, options)).await })
}

enum State {
    Running,
    Finished(Result<Hold>),
    /// The caller took the outcome.
    Taken,
    /// The caller gave up: a hold that arrives (or is waiting) is released, not handed out.
    /// Given up while running, it holds a tidy ticket until what the acquire got is given
    /// back: the owner's next calls on the name wait for it (see `lock::tidying`), so they
    /// never re-enter the hold given up.
    Abandoned(Option<TidyTicket>),
}

struct Shared {
    /// The process that started the acquire: a forked child's copy must not touch its parent's.
    pid: u32,
    state: Mutex<State>,
    finished: Condvar,
    notify: Mutex<Option<Notify>>,
    cancel: CancelToken,
    lock: crate::Lock,
    owner: Owner,
}

/// An acquire waiting on the shared runtime (see the module's guarantees). Dropping it gives up
/// as [`PendingAcquire::cancel`] does.
pub struct PendingAcquire {
    shared: Arc<Shared>,
}

impl PendingAcquire {
    fn spawn(acquiring: Acquiring, lock: crate::Lock, owner: Owner, cancel: CancelToken) -> Self {
        let shared = Arc::new(Shared {
            pid: crate::inspect::process_id(),
            state: Mutex::new(State::Running),
            finished: Condvar::new(),
            notify: Mutex::new(None),
            cancel,
            lock,
            owner,
        });
        let task = shared.clone();
        runtime().spawn(async move {
            let outcome = acquiring.await;
            task.finish(outcome).await;
        });
        PendingAcquire { shared }
    }

    /// Waits up to `timeout` (zero: only looks): `Some(hold)` once the lock is the caller's,
    /// `None` while the acquire still waits, or the acquire's error (`Timeout` when its own wait
    /// ran out, `Cancelled`, also once it was given up). The outcome is handed out once: asking
    /// again is `InvalidArgument`.
    pub fn wait(&self, timeout: Duration) -> Result<Option<Hold>> {
        let state = self.shared.state();
        let (mut state, _) = self
            .shared
            .finished
            .wait_timeout_while(state, timeout, |s| matches!(s, State::Running))
            .unwrap_or_else(|e| e.into_inner());
        match std::mem::replace(&mut *state, State::Taken) {
            State::Running => {
                *state = State::Running;
                Ok(None)
            }
            State::Finished(outcome) => outcome.map(Some),
            // Given up (from another thread, maybe while this one waited): it was cancelled.
            State::Abandoned(ticket) => {
                *state = State::Abandoned(ticket);
                Err(Error::Cancelled)
            }
            State::Taken => {
                *state = State::Taken;
                Err(Error::InvalidArgument(
                    "this acquire's outcome was already taken".into(),
                ))
            }
        }
    }

    /// Calls `notify` once the outcome is ready: at once on this thread when it already is,
    /// else on a runtime thread (so it must be brief and must not block). Replaces a `notify`
    /// given before that has not run.
    pub fn on_finished(&self, notify: impl FnOnce() + Send + 'static) {
        let state = self.shared.state();
        if matches!(*state, State::Running) {
            // Set under the state's lock: `finish` looks for it after changing the state.
            *self.shared.notify() = Some(Box::new(notify));
            return;
        }
        drop(state);
        notify();
    }

    /// Gives up: a running acquire is cancelled (nothing is left in Redis) and a hold acquired
    /// but not taken is released in the background. Harmless once the hold was taken.
    pub fn cancel(&self) {
        self.shared.abandon();
    }
}

impl Drop for PendingAcquire {
    fn drop(&mut self) {
        self.shared.abandon();
    }
}

impl Shared {
    async fn finish(&self, outcome: Result<Hold>) {
        let (unwanted, giving_back) = {
            let mut state = self.state();
            if let State::Abandoned(ticket) = &mut *state {
                (outcome.ok(), ticket.take())
            } else {
                *state = State::Finished(outcome);
                (None, None)
            }
        };
        // By the hold's fence: should that hold have ended meanwhile, the owner's newer hold
        // (taken by another thread sharing the owner) stays.
        if let Some(hold) = unwanted {
            let _ = self
                .lock
                .release_untidied(&self.owner, Some(hold.fencing_token()))
                .await;
        }
        // Given up while running: the owner's next calls waited for this end.
        drop(giving_back);
        self.finished.notify_all();
        let notify = self.notify().take();
        if let Some(notify) = notify {
            notify();
        }
    }

    fn abandon(&self) {
        if self.pid != crate::inspect::process_id() {
            return;
        }
        let mut state = self.state();
        match *state {
            State::Running => {
                // Before the caller goes on: an acquire that gets the lock now gives it back
                // in `finish`, and the owner's next calls wait for that.
                let ticket = self.lock.tidy_ticket(self.owner.token());
                *state = State::Abandoned(Some(ticket));
                self.cancel.cancel();
            }
            State::Finished(Ok(ref hold)) => {
                let fence = hold.fencing_token();
                *state = State::Abandoned(None);
                let (lock, owner) = (self.lock.clone(), self.owner.clone());
                // Taken now, before the caller goes on: its next acquire of the name must not
                // re-enter the hold given up before the release below has run.
                let ticket = lock.tidy_ticket(owner.token());
                runtime().spawn(async move {
                    let _ = lock.release_untidied(&owner, Some(fence)).await;
                    drop(ticket);
                });
            }
            State::Finished(Err(_)) => *state = State::Abandoned(None),
            State::Taken | State::Abandoned(_) => {}
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn notify(&self) -> MutexGuard<'_, Option<Notify>> {
        self.notify.lock().unwrap_or_else(|e| e.into_inner())
    }
}
