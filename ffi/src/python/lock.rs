//! `NativeLock`: one view (read or write) of a lock name, for any owner token.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redlock_core::{AcquireOptions, Mode, blocking};

use super::error::{NativeError, lease_seconds, seconds, wait_seconds};
use super::on_runtime;
use super::owner::NativeOwner;
use super::polled;
use super::records::LockInfoRecord;
use super::registry::Registry;

/// One view of a lock name. Every call names its owner: the Python layer picks it (one per
/// thread, one per asyncio task, or an explicit token).
#[derive(uniffi::Object)]
pub struct NativeLock {
    client: blocking::Client,
    lock: blocking::Lock,
    /// Stored with each hold instead of the owner's label, when given.
    label: Option<String>,
    /// Acquires still waiting after their first slice, by ticket, until their outcome is
    /// handed out or they are given up ([`NativeLock::wait_parked`], `cancel_parked`).
    parked: Mutex<HashMap<u64, Arc<blocking::PendingAcquire>>>,
    id: u64,
}

/// Every live `NativeLock` by id, for the hot calls in `fast`.
pub(crate) static LOCKS: Registry<NativeLock> = Registry::new();

thread_local! {
    /// The ticket of the last sync acquire that handed this thread a hold (0: none).
    static LAST_DELIVERED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Notes that the acquire under `ticket` handed this thread its hold (see `take_delivered`).
pub(super) fn delivered(ticket: u64) {
    LAST_DELIVERED.with(|last| last.set(ticket));
}

impl NativeLock {
    pub(crate) fn register(
        client: blocking::Client,
        lock: blocking::Lock,
        label: Option<String>,
    ) -> Arc<Self> {
        LOCKS.register(|id| NativeLock {
            client,
            lock,
            label,
            parked: Mutex::default(),
            id,
        })
    }

    /// The live lock with this id.
    pub(crate) fn by_id(id: u64) -> Result<Arc<Self>, NativeError> {
        LOCKS
            .get(id)
            .ok_or_else(|| NativeError::invalid(format!("no live lock with id {id}")))
    }

    /// Acquires for the owner with id `owner_id` ([`NativeOwner::id`]), blocking the calling
    /// thread (not the GIL) for at most `first_wait` seconds. `true`: the hold is the caller's.
    /// `false`: still waiting; the acquire goes on in the background, keeping its place, parked
    /// under `ticket` for [`NativeLock::wait_parked`] and [`NativeLock::cancel_parked`].
    /// The caller picks the ticket (unique per process) before the call, so that a Ctrl-C
    /// raised as this call returns, before the caller has its result, can still find and
    /// cancel the parked acquire. Python calls it through `fast` (`redlock_python_acquire`).
    ///
    /// `wait`: seconds, negative = forever, 0 = try once; `lease`: seconds, negative = kept
    /// alive by the watchdog until released. The uncontended case runs on the calling thread
    /// with no task hand-off, over its own socket.
    pub(crate) fn acquire(
        &self,
        owner_id: u64,
        wait: f64,
        lease: f64,
        first_wait: f64,
        ticket: u64,
    ) -> Result<bool, NativeError> {
        let first_wait = seconds("first_wait", first_wait)?;
        let owner = NativeOwner::by_id(owner_id)?;
        let (owner, options) = self.prepare(&owner, wait, lease)?;
        match self.lock.start_acquire(&owner, options, None, first_wait)? {
            blocking::Started::Acquired(_) => {
                delivered(ticket);
                Ok(true)
            }
            blocking::Started::Waiting(pending) => {
                self.parked
                    .lock()
                    .unwrap()
                    .insert(ticket, Arc::new(pending));
                Ok(false)
            }
        }
    }

    /// Releases one hold of the owner with id `owner_id`; returns how many holds it still has
    /// in this mode. Python calls it through `fast` (`redlock_python_release`).
    pub(crate) fn release(&self, owner_id: u64) -> Result<u32, NativeError> {
        let owner = NativeOwner::by_id(owner_id)?.owner.clone();
        Ok(self.lock.release(&owner)?)
    }

    /// Starts an acquire for the owner with id `owner_id` that the caller's asyncio loop polls
    /// on its own thread, woken through the loop's wake-ups `wakeups` (see `polled`); returns
    /// the call's id. The other arguments are [`NativeLock::acquire`]'s. Python calls it
    /// through `fast`.
    pub(crate) fn start_acquire_polled(
        &self,
        owner_id: u64,
        wait: f64,
        lease: f64,
        wakeups: u64,
    ) -> Result<u64, NativeError> {
        let owner = NativeOwner::by_id(owner_id)?;
        let (owner, options) = self.prepare(&owner, wait, lease)?;
        let call = self.lock.acquire_polled(&owner, options)?;
        polled::start_acquire(call, wakeups)
    }

    /// Starts a release of one hold of the owner with id `owner_id` that the caller's asyncio
    /// loop polls (see `polled`); returns the call's id. Python calls it through `fast`.
    pub(crate) fn start_release_polled(
        &self,
        owner_id: u64,
        wakeups: u64,
    ) -> Result<u64, NativeError> {
        let owner = NativeOwner::by_id(owner_id)?.owner.clone();
        let call = self.lock.release_polled(&owner)?;
        polled::start_release(call, wakeups)
    }

    fn prepare(
        &self,
        owner: &NativeOwner,
        wait: f64,
        lease: f64,
    ) -> Result<(redlock_core::Owner, AcquireOptions), NativeError> {
        let options = AcquireOptions {
            wait: wait_seconds(wait)?,
            lease: lease_seconds(lease)?,
            label: Some(self.label.as_ref().unwrap_or(&owner.label).clone()),
        };
        Ok((owner.owner.clone(), options))
    }

    /// The async view of this process (the client reconnects after a fork).
    fn async_view(&self) -> Result<redlock_core::Lock, NativeError> {
        let rw = self.client.as_async()?.read_write_lock(self.lock.name())?;
        Ok(match self.lock.mode() {
            Mode::Read => rw.read(),
            Mode::Write => rw.write(),
        })
    }
}

impl Drop for NativeLock {
    fn drop(&mut self) {
        LOCKS.forget(self.id);
    }
}

#[uniffi::export]
impl NativeLock {
    pub fn name(&self) -> String {
        self.lock.name().to_owned()
    }

    /// The number that names this lock in the hot calls of `fast` (`redlock_python_acquire`,
    /// `redlock_python_release`).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Waits up to `timeout` seconds for the acquire parked under `ticket`: `true` once the
    /// hold is the caller's, `false` while it still waits, or its error (`Timeout` when its own
    /// wait ran out). It stays parked until its outcome is handed out: no object crosses into
    /// Python, so an exception raised as a call returns (Ctrl-C, run inside the generated
    /// wrapper) cannot lose it, and `cancel_parked` finds it.
    pub fn wait_parked(&self, ticket: u64, timeout: f64) -> Result<bool, NativeError> {
        let timeout = seconds("timeout", timeout)?.min(Duration::from_secs(3600));
        let pending = self.parked.lock().unwrap().get(&ticket).cloned();
        let pending =
            pending.ok_or_else(|| NativeError::invalid(format!("no waiting acquire {ticket}")))?;
        let outcome = pending.wait(timeout);
        if !matches!(outcome, Ok(None)) {
            self.parked.lock().unwrap().remove(&ticket);
        }
        match outcome? {
            Some(_) => {
                delivered(ticket);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Gives up the acquire parked under `ticket`: a running acquire is cancelled (nothing is
    /// left in Redis) and a hold it got that nobody took is released. Harmless when there is
    /// none (never parked, or its outcome was handed out).
    pub fn cancel_parked(&self, ticket: u64) {
        let pending = self.parked.lock().unwrap().remove(&ticket);
        if let Some(pending) = pending {
            pending.cancel();
        }
    }

    /// Whether the acquire under `ticket` was the last to hand this thread a hold (forgotten
    /// once asked). Python asks when an exception (Ctrl-C) is raised between the native call's
    /// `true` and the caller: that hold is then its caller's to give back.
    pub fn take_delivered(&self, ticket: u64) -> bool {
        LAST_DELIVERED.with(|last| last.get() == ticket && last.replace(0) == ticket)
    }

    /// Sets the lease of `owner`'s hold to `lease` seconds from now.
    pub fn extend(&self, owner: Arc<NativeOwner>, lease: f64) -> Result<(), NativeError> {
        let owner = owner.owner.clone();
        Ok(self.lock.extend(&owner, seconds("lease", lease)?)?)
    }

    pub async fn extend_async(
        &self,
        owner: Arc<NativeOwner>,
        lease: f64,
    ) -> Result<(), NativeError> {
        let owner = owner.owner.clone();
        let lease = seconds("lease", lease)?;
        let view = self.async_view()?;
        on_runtime(async move { Ok(view.extend(&owner, lease).await?) }).await
    }

    /// Whether anyone holds this view.
    pub fn is_locked(&self) -> Result<bool, NativeError> {
        Ok(self.lock.is_locked()?)
    }

    pub async fn is_locked_async(&self) -> Result<bool, NativeError> {
        let view = self.async_view()?;
        on_runtime(async move { Ok(view.is_locked().await?) }).await
    }

    /// How many times `owner` holds this view (0 when not at all).
    pub fn hold_count(&self, owner: Arc<NativeOwner>) -> Result<u32, NativeError> {
        let owner = owner.owner.clone();
        Ok(self.lock.hold_count(&owner)?)
    }

    pub async fn hold_count_async(&self, owner: Arc<NativeOwner>) -> Result<u32, NativeError> {
        let owner = owner.owner.clone();
        let view = self.async_view()?;
        on_runtime(async move { Ok(view.hold_count(&owner).await?) }).await
    }

    /// The fencing token of `owner`'s hold of this view, `None` when it holds none: asked of
    /// Redis (one round trip), so a hold that expired, was force-unlocked or was released
    /// through another handle reads as `None`.
    pub fn fencing_token(&self, owner: Arc<NativeOwner>) -> Result<Option<u64>, NativeError> {
        Ok(self.lock.fencing_token(&owner.owner)?)
    }

    /// A snapshot of the whole name (both views).
    pub fn inspect(&self) -> Result<LockInfoRecord, NativeError> {
        Ok(self.lock.inspect()?.into())
    }

    /// Clears the name whoever holds it; true when it was held.
    pub fn force_unlock(&self) -> Result<bool, NativeError> {
        Ok(self.lock.force_unlock()?)
    }
}
