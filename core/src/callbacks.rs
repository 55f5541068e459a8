//! Where a client's user callbacks (lock lost, contention alerts) run.
//!
//! Guarantees: a callback never runs on an async worker, in a caller's call or on the library's
//! own blocking threads, so a slow, blocking or panicking one delays no renewal, hand-off, call
//! or tidy-up (the undo of a cancelled attempt waits for a blocking thread of the library). A
//! client's callbacks run one at a time, in the order they were raised, on one thread at a time
//! of a blocking pool kept for callbacks: a storm of lost holds (a flushed or failed-over Redis
//! drops thousands at once) takes one thread, not one per hold — tokio would start up to 512,
//! and the other clients' callbacks would wait behind a slow one. A slow callback delays its
//! own client's next callbacks only, however many clients have one running (the pool has no
//! cap: one thread per client whose callback runs).

use std::collections::VecDeque;
use std::sync::{Arc, PoisonError};

use crate::blocking::PerProcess;

type Job = Box<dyn FnOnce() + Send>;

/// One client's callbacks still to run.
pub(crate) struct Callbacks {
    /// Per process: a forked child must not inherit a queue its parent's thread was draining.
    queue: PerProcess<Queue>,
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    /// A thread is running this queue's jobs (or is about to).
    draining: bool,
}

impl Default for Callbacks {
    fn default() -> Self {
        Callbacks {
            queue: PerProcess::empty(),
        }
    }
}

impl Callbacks {
    /// Runs `callback` after the client's earlier callbacks, off the caller's thread.
    pub(crate) fn run(self: &Arc<Self>, callback: impl FnOnce() + Send + 'static) {
        {
            let mut slot = self.lock();
            let queue = slot.get_or_insert_with(Queue::default);
            queue.jobs.push_back(Box::new(callback));
            if queue.draining {
                return;
            }
            queue.draining = true;
        }
        let callbacks = self.clone();
        if !spawn_on_blocking_pool(move || callbacks.drain()) {
            // No runtime at all: the jobs stay queued for the next callback to try again.
            if let Some(queue) = self.lock().as_mut() {
                queue.draining = false;
            }
        }
    }

    fn drain(&self) {
        // The callbacks' runtime has no drivers and nobody drives it: a callback that spawns a
        // task or sleeps in tokio must find the library's runtime as its context, as it did on
        // the library's blocking pool.
        let _context = crate::blocking::try_runtime()
            .ok()
            .map(|runtime| runtime.enter());
        loop {
            let job = {
                let mut slot = self.lock();
                let Some(queue) = slot.as_mut() else { return };
                match queue.jobs.pop_front() {
                    Some(job) => job,
                    None => {
                        queue.draining = false;
                        return;
                    }
                }
            };
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).is_err() {
                tracing::error!("a redlock callback panicked");
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Queue>> {
        self.queue
            .slot()
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Starts `job` on the blocking pool of the callbacks' own runtime (not a caller's runtime,
/// which may end with the job still queued, nor the library's: see `blocking::CALLBACKS`);
/// false if that runtime cannot be had.
fn spawn_on_blocking_pool(job: impl FnOnce() + Send + 'static) -> bool {
    let runtime = match crate::blocking::callback_runtime() {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!(%error, "no thread for redlock callbacks now");
            return false;
        }
    };
    // tokio panics when the OS refuses a thread and no thread of the blocking pool is alive
    // (the job stays queued, for the next thread the pool makes). That panic must not end the
    // caller: the watchdog task, or a user's call.
    let spawn = std::panic::AssertUnwindSafe(|| drop(runtime.spawn_blocking(job)));
    if std::panic::catch_unwind(spawn).is_err() {
        tracing::error!("no thread for a redlock callback now: it runs once one can be made");
        // The job waits in the pool's queue: a thread made later runs it. (The callbacks'
        // runtime has no workers to sleep on: the library's runs the nudges.)
        crate::background::spawn(async move {
            loop {
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                let nudge = std::panic::AssertUnwindSafe(|| drop(runtime.spawn_blocking(|| {})));
                if std::panic::catch_unwind(nudge).is_ok() {
                    return;
                }
            }
        });
    }
    true
}
