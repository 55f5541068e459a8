//! A blocking API over one shared tokio runtime, for threads that are not async (and the FFI).
//!
//! Guarantees:
//! - every call blocks the calling thread only; the runtime is created on first use and shared
//!   by all clients of the process;
//! - fork-safe: a child process never touches the parent's runtime or connections. A client used
//!   after `fork()` reconnects transparently in the child (with the same settings), and the
//!   runtime is re-created there (the parent's threads do not exist in the child);
//! - a waiting acquire can be cancelled from another thread through a [`CancelToken`];
//! - an acquire may also wait without holding a thread: [`Lock::start_acquire`] returns a
//!   [`PendingAcquire`] when the lock is taken (see [`pending`]);
//! - a foreign event loop may poll an acquire or a release on its own thread ([`polled`]).

use std::cell::Cell;
use std::future::Future;
use std::ptr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::time::Duration;

use tokio::runtime::Runtime;

use crate::client::ClientBuilder;
use crate::error::{Error, Result};
use crate::inspect::LockInfo;
use crate::lock::{AcquireOptions, Hold, LockStats, Mode};
use crate::owner::Owner;

pub use tokio_util::sync::CancellationToken as CancelToken;

pub mod pending;
#[doc(hidden)]
pub mod per_process;
pub mod polled;
#[cfg(target_os = "linux")]
mod watch;
pub use pending::{PendingAcquire, Started};
pub use per_process::PerProcess;
pub use polled::Polled;

struct ProcessRuntime {
    pid: u32,
    runtime: Runtime,
}

static RUNTIME: AtomicPtr<ProcessRuntime> = AtomicPtr::new(ptr::null_mut());
/// The runtime whose blocking pool runs users' callbacks (see `callbacks`): apart from the
/// library's, whose blocking pool does the library's own work (the undo of a cancelled attempt,
/// a late reply heard out, a socket opened), which callbacks that block must never hold up.
/// No worker threads: nothing drives it, only its blocking pool is used.
static CALLBACKS: AtomicPtr<ProcessRuntime> = AtomicPtr::new(ptr::null_mut());

/// The runtime of this process (a new one after `fork()`; the old one is leaked, never dropped,
/// because its threads are gone and dropping it would wait for them).
pub fn runtime() -> &'static Runtime {
    runtime_in(&RUNTIME).expect("cannot start the redlock runtime")
}

/// [`runtime`], or a `Connection` error when it cannot be started (no thread can be made).
pub(crate) fn try_runtime() -> Result<&'static Runtime> {
    runtime_in(&RUNTIME)
}

/// The runtime of this process whose blocking pool runs users' callbacks (see [`CALLBACKS`]).
pub(crate) fn callback_runtime() -> Result<&'static Runtime> {
    runtime_in(&CALLBACKS)
}

fn runtime_in(slot: &'static AtomicPtr<ProcessRuntime>) -> Result<&'static Runtime> {
    let pid = crate::inspect::process_id();
    let current = slot.load(Ordering::Acquire);
    // SAFETY: pointers stored in RUNTIME come from Box::into_raw and are freed only when the
    // library is unloaded (shutdown_runtime_for_unload), when nothing can call in any more.
    if let Some(rt) = unsafe { current.as_ref() }
        && rt.pid == pid
    {
        return Ok(&rt.runtime);
    }
    // tokio panics (rather than fail) when it cannot start a worker thread.
    let built = std::panic::catch_unwind(|| {
        if ptr::eq(slot, &CALLBACKS) {
            // A client's callbacks run one at a time, so a client takes one of these threads
            // at most; no cap (tokio's is 512) past which one client's callbacks wait for a
            // thread that another client's slow callback keeps.
            tokio::runtime::Builder::new_current_thread()
                .thread_name("redlock-callback")
                .max_blocking_threads(usize::MAX)
                .build()
        } else {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            // Its threads write to Redis: a closed connection must not raise SIGPIPE there.
            #[cfg(unix)]
            builder.on_thread_start(crate::nosigpipe::block_in_this_thread);
            builder
                .worker_threads(2)
                .thread_name("redlock-runtime")
                .enable_all()
                .build()
        }
    });
    let runtime = match built {
        Ok(Ok(runtime)) => runtime,
        Ok(Err(e)) => {
            return Err(Error::Connection(format!(
                "cannot start the redlock runtime: {e}"
            )));
        }
        Err(_) => {
            return Err(Error::Connection(
                "cannot start the redlock runtime: no thread could be made".into(),
            ));
        }
    };
    let fresh = Box::into_raw(Box::new(ProcessRuntime { pid, runtime }));
    match slot.compare_exchange(current, fresh, Ordering::AcqRel, Ordering::Acquire) {
        // SAFETY: just leaked above.
        Ok(_) => Ok(unsafe { &(*fresh).runtime }),
        Err(winner) => {
            // Another thread installed one first; ours was never used. Shut down without
            // waiting: this thread may be inside another runtime (a blocking call from async
            // code), where dropping a runtime panics.
            // SAFETY: `fresh` came from Box::into_raw and was not published.
            let unused = unsafe { Box::from_raw(fresh) };
            unused.runtime.shutdown_background();
            // SAFETY: published pointers are leaked boxes.
            Ok(unsafe { &(*winner).runtime })
        }
    }
}

/// Registers the library's own `fork()` handler (the process id cache): for a library's load-time
/// constructor, before any thread can call in, so that no fork can copy its `Once` half-run.
#[doc(hidden)]
pub fn prepare_for_fork_at_load() {
    let _ = crate::inspect::process_id();
}

/// Stops this process's runtimes without waiting for its threads (they end once their current
/// task yields) and forgets it; a later call of [`runtime`] would start a new one.
///
/// # Safety
/// For a library being unloaded (JNI's `JNI_OnUnload`): no thread may be inside a call of this
/// library or use a `&'static Runtime` obtained before, now or later.
#[doc(hidden)]
pub unsafe fn shutdown_runtime_for_unload() {
    for slot in [&RUNTIME, &CALLBACKS] {
        // SAFETY: as for this function.
        unsafe { shutdown_for_unload(slot) };
    }
}

/// [`shutdown_runtime_for_unload`] for one runtime.
///
/// # Safety
/// As for [`shutdown_runtime_for_unload`].
unsafe fn shutdown_for_unload(slot: &AtomicPtr<ProcessRuntime>) {
    let current = slot.swap(ptr::null_mut(), Ordering::AcqRel);
    if !current.is_null() {
        // SAFETY: published pointers are leaked boxes; by the contract above nobody uses it.
        let process = unsafe { Box::from_raw(current) };
        if process.pid == crate::inspect::process_id() {
            process.runtime.shutdown_background();
        } else {
            std::mem::forget(process); // a parent's runtime: its threads are not ours to wait for
        }
    }
}

/// Runs a future to completion on the shared runtime from any thread, even one that is
/// itself inside another async runtime. While it runs, this thread counts as a blocking
/// caller: single-round-trip calls go over its own socket (see `direct`).
pub fn block_on<F>(future: F) -> F::Output
where
    F: Future + Send,
    F::Output: Send,
{
    let runtime = runtime();
    let run = || {
        let _caller = BlockingCaller::enter();
        runtime.block_on(future)
    };
    if tokio::runtime::Handle::try_current().is_ok() {
        std::thread::scope(|s| s.spawn(run).join().expect("redlock blocking call panicked"))
    } else {
        run()
    }
}

/// [`block_on`] for an acquire of `lock`: while it waits for the lock, this thread watches the
/// client's pub/sub socket itself where it can (see [`watch`]), so that a grant wakes it at once.
pub(crate) fn block_on_acquire<F>(lock: &crate::Lock, future: F) -> F::Output
where
    F: Future + Send,
    F::Output: Send,
{
    #[cfg(target_os = "linux")]
    if tokio::runtime::Handle::try_current().is_err()
        && let Some(signal) = watch::thread_signal()
    {
        let _caller = BlockingCaller::enter();
        let socket = lock.client.pubsub.watch_socket();
        return watch::run(runtime(), &signal, socket, future);
    }
    let _ = lock;
    block_on(future)
}

/// Runs `work`, which `cancel` (if given), triggered from any thread, ends with `Cancelled`.
pub async fn cancellable<T>(
    cancel: Option<&CancelToken>,
    work: impl Future<Output = Result<T>>,
) -> Result<T> {
    let Some(cancel) = cancel else {
        return work.await;
    };
    // Polled with the token at hand, so a blocking call inside it (a direct attempt on this
    // thread's socket) gives up when it fires instead of running to its command timeout.
    let mut work = std::pin::pin!(work);
    let work = std::future::poll_fn(|cx| {
        let _scope = CancelScope::enter(cancel);
        work.as_mut().poll(cx)
    });
    tokio::select! {
        biased;
        _ = cancel.cancelled() => Err(Error::Cancelled),
        result = work => result,
    }
}

thread_local! {
    static BLOCKING_CALLER: Cell<bool> = const { Cell::new(false) };
    static CURRENT_CANCEL: std::cell::RefCell<Option<CancelToken>> =
        const { std::cell::RefCell::new(None) };
}

/// The cancel token of the [`cancellable`] call this thread is polling, if any.
pub(crate) fn current_cancel() -> Option<CancelToken> {
    CURRENT_CANCEL.with(|c| c.borrow().clone())
}

/// Makes `cancel` this thread's current cancel token until dropped.
struct CancelScope {
    was: Option<CancelToken>,
}

impl CancelScope {
    fn enter(cancel: &CancelToken) -> Self {
        CancelScope {
            was: CURRENT_CANCEL.with(|c| c.replace(Some(cancel.clone()))),
        }
    }
}

impl Drop for CancelScope {
    fn drop(&mut self) {
        CURRENT_CANCEL.with(|c| *c.borrow_mut() = self.was.take());
    }
}

/// Whether this thread is a blocking caller inside [`block_on`] (never a runtime worker): it may
/// do socket I/O itself instead of handing the call to the runtime.
pub(crate) fn on_blocking_caller() -> bool {
    BLOCKING_CALLER.with(Cell::get)
}

/// Marks this thread a blocking caller until dropped.
struct BlockingCaller {
    was: bool,
}

impl BlockingCaller {
    fn enter() -> Self {
        BlockingCaller {
            was: BLOCKING_CALLER.with(|c| c.replace(true)),
        }
    }
}

impl Drop for BlockingCaller {
    fn drop(&mut self) {
        BLOCKING_CALLER.with(|c| c.set(self.was));
    }
}

struct Shared {
    builder: ClientBuilder,
    /// The async client of the process that uses it (a forked child connects its own).
    current: PerProcess<crate::Client>,
    closed: AtomicBool,
}

impl Shared {
    /// The async client for this process, reconnecting after a fork.
    fn client(&self) -> Result<crate::Client> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(Error::Closed);
        }
        // A child's slot starts empty: the parent's client is left to the parent (see
        // `PerProcess`).
        let mut current = self.current.slot().lock().unwrap();
        if let Some(client) = &*current {
            return Ok(client.clone());
        }
        try_runtime()?;
        let client = block_on(self.builder.clone().connect())?;
        *current = Some(client.clone());
        Ok(client)
    }
}

/// Blocking twin of [`crate::Client`]. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
}

impl Client {
    /// Connects with default settings.
    pub fn connect(url: &str) -> Result<Client> {
        Client::from_builder(crate::Client::builder(url))
    }

    /// Connects with the settings of `builder` (see [`crate::Client::builder`]).
    pub fn from_builder(builder: ClientBuilder) -> Result<Client> {
        Client::connect_with(builder, None)
    }

    /// [`Client::from_builder`] that `cancel` (if given) ends from another thread with
    /// `Cancelled`; a connection made meanwhile is dropped.
    pub fn connect_with(builder: ClientBuilder, cancel: Option<&CancelToken>) -> Result<Client> {
        try_runtime()?;
        let client = block_on(cancellable(cancel, builder.clone().connect()))?;
        Ok(Client {
            shared: Arc::new(Shared {
                builder,
                current: PerProcess::new(client),
                closed: AtomicBool::new(false),
            }),
        })
    }

    /// The exclusive reentrant lock `name`.
    pub fn lock(&self, name: &str) -> Result<Lock> {
        self.view(name, Mode::Write)
    }

    /// The read/write lock `name`.
    pub fn read_write_lock(&self, name: &str) -> Result<ReadWriteLock> {
        Ok(ReadWriteLock {
            read: self.view(name, Mode::Read)?,
            write: self.view(name, Mode::Write)?,
        })
    }

    fn view(&self, name: &str, mode: Mode) -> Result<Lock> {
        let rw = self.shared.client()?.read_write_lock(name)?;
        let lock = if mode == Mode::Read {
            rw.read()
        } else {
            rw.write()
        };
        Ok(Lock {
            shared: self.shared.clone(),
            name: name.to_owned(),
            mode,
            cached: PerProcess::new(lock),
        })
    }

    pub fn inspect(&self, name: &str) -> Result<LockInfo> {
        let client = self.shared.client()?;
        block_on(async move { client.inspect(name).await })
    }

    pub fn force_unlock(&self, name: &str) -> Result<bool> {
        let client = self.shared.client()?;
        block_on(async move { client.force_unlock(name).await })
    }

    /// Closes the client (see [`crate::Client::close`]); later calls fail with `Closed`.
    pub fn close(&self) {
        self.shared.closed.store(true, Ordering::SeqCst);
        if let Some(current) = &*self.shared.current.slot().lock().unwrap() {
            current.close();
        }
    }

    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::SeqCst)
    }

    /// The async client underneath (of this process).
    pub fn as_async(&self) -> Result<crate::Client> {
        self.shared.client()
    }
}

/// Blocking twin of [`crate::ReadWriteLock`].
pub struct ReadWriteLock {
    read: Lock,
    write: Lock,
}

impl ReadWriteLock {
    pub fn read(&self) -> &Lock {
        &self.read
    }
    pub fn write(&self) -> &Lock {
        &self.write
    }
    pub fn into_views(self) -> (Lock, Lock) {
        (self.read, self.write)
    }
}

/// Blocking twin of [`crate::Lock`] (one view of a name).
pub struct Lock {
    shared: Arc<Shared>,
    name: String,
    mode: Mode,
    cached: PerProcess<crate::Lock>,
}

impl Lock {
    fn current(&self) -> Result<crate::Lock> {
        let client = self.shared.client()?;
        let mut cached = self.cached.slot().lock().unwrap();
        if let Some(lock) = &*cached {
            return Ok(lock.clone());
        }
        let rw = client.read_write_lock(&self.name)?;
        let fresh = if self.mode == Mode::Read {
            rw.read()
        } else {
            rw.write()
        };
        *cached = Some(fresh.clone());
        Ok(fresh)
    }

    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// See [`crate::Lock::acquire`].
    pub fn acquire(
        &self,
        owner: &Owner,
        wait: Option<Duration>,
        lease: Option<Duration>,
    ) -> Result<Hold> {
        self.acquire_with(owner, AcquireOptions::new(wait, lease), None)
    }

    /// Acquire with all options; `cancel` (if given) ends a wait from another thread with
    /// `Cancelled`, leaving nothing behind in Redis.
    pub fn acquire_with(
        &self,
        owner: &Owner,
        options: AcquireOptions,
        cancel: Option<&CancelToken>,
    ) -> Result<Hold> {
        let lock = self.current()?;
        block_on_acquire(
            &lock,
            cancellable(cancel, lock.acquire_with(owner, options)),
        )
    }

    pub fn try_acquire(&self, owner: &Owner, lease: Option<Duration>) -> Result<Option<Hold>> {
        let lock = self.current()?;
        block_on(async move { lock.try_acquire(owner, lease).await })
    }

    /// One round trip on this thread's own socket (see [`block_on`]; over TLS, on the
    /// multiplexed connection).
    pub fn release(&self, owner: &Owner) -> Result<u32> {
        self.release_meant(owner, None)
    }

    /// See [`crate::Lock::release_fenced`]; one round trip, as [`Self::release`].
    pub fn release_fenced(&self, owner: &Owner, fencing_token: u64) -> Result<u32> {
        self.release_meant(owner, Some(fencing_token))
    }

    fn release_meant(&self, owner: &Owner, meant: Option<u64>) -> Result<u32> {
        let lock = self.current()?;
        if !lock.direct_usable() {
            return block_on(async move { lock.release_meant(owner, meant).await });
        }
        // No future to drive, but a lost hold's callback is spawned on the runtime.
        let _runtime = runtime().enter();
        lock.release_direct(owner, meant)
    }

    pub fn extend(&self, owner: &Owner, lease: Duration) -> Result<()> {
        let lock = self.current()?;
        block_on(async move { lock.extend(owner, lease).await })
    }

    pub fn is_locked(&self) -> Result<bool> {
        let lock = self.current()?;
        block_on(async move { lock.is_locked().await })
    }

    pub fn is_held_by(&self, owner: &Owner) -> Result<bool> {
        let lock = self.current()?;
        block_on(async move { lock.is_held_by(owner).await })
    }

    pub fn hold_count(&self, owner: &Owner) -> Result<u32> {
        let lock = self.current()?;
        block_on(async move { lock.hold_count(owner).await })
    }

    /// See [`crate::Lock::fencing_token`].
    pub fn fencing_token(&self, owner: &Owner) -> Result<Option<u64>> {
        let lock = self.current()?;
        block_on(async move { lock.fencing_token(owner).await })
    }

    pub fn inspect(&self) -> Result<LockInfo> {
        let lock = self.current()?;
        block_on(async move { lock.inspect().await })
    }

    pub fn force_unlock(&self) -> Result<bool> {
        let lock = self.current()?;
        block_on(async move { lock.force_unlock().await })
    }

    pub fn stats(&self) -> Result<LockStats> {
        Ok(self.current()?.stats())
    }
}

/// Blocks until the watchdog finds `hold` lost (true) or `timeout` passes (false).
pub fn wait_lost(hold: &Hold, timeout: Option<Duration>) -> bool {
    let hold = hold.clone();
    block_on(async move {
        match timeout {
            Some(t) => tokio::time::timeout(t, hold.lost()).await.is_ok(),
            None => {
                hold.lost().await;
                true
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Threads inside async code (a blocking call made from a task) race to make the process'
    /// runtime: the losers' unused runtimes must not be dropped there (tokio panics).
    #[test]
    fn threads_inside_runtimes_racing_to_make_the_runtime_all_get_the_winner() {
        static SLOT: AtomicPtr<ProcessRuntime> = AtomicPtr::new(ptr::null_mut());
        let threads = 6;
        let start = Arc::new(std::sync::Barrier::new(threads));
        let racers: Vec<_> = (0..threads)
            .map(|_| {
                let start = start.clone();
                std::thread::spawn(move || {
                    let outer = tokio::runtime::Builder::new_current_thread()
                        .build()
                        .unwrap();
                    outer.block_on(async {
                        start.wait();
                        runtime_in(&SLOT).unwrap() as *const Runtime as usize
                    })
                })
            })
            .collect();
        let got: Vec<usize> = racers.into_iter().map(|t| t.join().unwrap()).collect();
        assert!(got.iter().all(|&r| r == got[0]), "{got:?}");
    }
}
