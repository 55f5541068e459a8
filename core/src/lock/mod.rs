//! The two lock kinds over one data model: an exclusive reentrant lock is the write view of a
//! read/write lock of the same name. Each operation is one script call (one round trip).

mod acquire;
pub(crate) mod calls;
mod hold;
mod in_flight;
mod late_release;
mod replies;
pub(crate) mod scripts;
mod tidying;
pub(crate) use tidying::{ClientTidyUps, TidyTicket};

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::client::{ClientInner, MAX_LEASE};
use crate::error::{Error, Result};
use crate::inspect::{HolderInfo, HolderMetadata, LockInfo};
use crate::keys::LockKeys;
use crate::owner::Owner;
use crate::watchdog::{Releasing, WatchKey};
use scripts::{LuaScript, SCRIPTS};

pub use hold::Hold;
use replies::AttemptReply;
use replies::{ExtendReply, ReleaseReply};

/// Which view of a lock a hold belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Shared: any number of owners at once.
    Read,
    /// Exclusive: one owner, nobody else reading or writing.
    Write,
}

/// How one acquire behaves. `Default` waits forever under the watchdog.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AcquireOptions {
    /// How long to wait: `None` waits forever, zero tries once.
    pub wait: Option<Duration>,
    /// How long Redis keeps the hold without renewal: `None` lets the client's watchdog renew it
    /// until release.
    pub lease: Option<Duration>,
    /// The thread or task label stored with the hold (default: the current OS thread). Longer
    /// than [`MAX_LABEL_LEN`](crate::MAX_LABEL_LEN) bytes it is cut; empty it is an
    /// `InvalidArgument` (see [`validate_label`](crate::validate_label)).
    pub label: Option<String>,
}

impl AcquireOptions {
    pub fn new(wait: Option<Duration>, lease: Option<Duration>) -> Self {
        AcquireOptions {
            wait,
            lease,
            label: None,
        }
    }
}

/// Counters of one name in this client (all handles and views together), kept while any
/// handle to the name exists.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LockStats {
    /// Attempts that found the lock taken.
    pub failed_attempts: u64,
    /// Acquires that had to wait.
    pub waits: u64,
    /// Total time spent waiting, over all acquires.
    pub total_wait: Duration,
    /// Contention alerts raised.
    pub alerts: u64,
}

/// Process-local state of one name: the queues that let one waiter per mode at a time talk to
/// Redis (seed 002's "process lock first") and the contention counters (seed 000).
pub(crate) struct LocalLock {
    /// Readers and writers queue apart: the read and the write view are two locks of one name
    /// (as Redisson's readLock() and writeLock()), each with its one waiter talking to Redis. In
    /// one queue, a writer at its head waiting out a readers' turn kept the readers behind it
    /// from taking that turn, until a reader's announcement was due (half a second by default).
    readers: Gate,
    writers: Gate,
    /// The last release of this name that ended a hold granted the lock to another client.
    grants_elsewhere: AtomicBool,
    failed_attempts: AtomicU64,
    waits: AtomicU64,
    wait_nanos: AtomicU64,
    alerts: AtomicU64,
    /// Tidy-ups of ended acquires under way, which their owner's next calls wait for.
    tidying: tidying::Tidying,
}

/// One mode's queue of a name's local waiters: its head alone makes attempts.
pub(crate) struct Gate {
    pub(crate) queue: tokio::sync::Mutex<()>,
    /// Left by the last holder of the gate: the channel's message count when it acquired the
    /// lock, or [`NO_HANDOFF`].
    handoff_messages: AtomicU64,
}

/// The gate's last holder did not acquire (or it is unknown): the next one must attempt at once.
const NO_HANDOFF: u64 = u64::MAX;

impl Default for Gate {
    fn default() -> Self {
        Gate {
            queue: tokio::sync::Mutex::new(()),
            handoff_messages: AtomicU64::new(NO_HANDOFF),
        }
    }
}

impl LocalLock {
    pub(crate) fn gate(&self, mode: Mode) -> &Gate {
        match mode {
            Mode::Read => &self.readers,
            Mode::Write => &self.writers,
        }
    }
}

impl LocalLock {
    /// The state of one name in a client whose tidy-ups are counted in `tidy_ups`.
    pub(crate) fn new(tidy_ups: Arc<tidying::ClientTidyUps>) -> Self {
        LocalLock {
            readers: Gate::default(),
            writers: Gate::default(),
            grants_elsewhere: AtomicBool::new(false),
            failed_attempts: AtomicU64::new(0),
            waits: AtomicU64::new(0),
            wait_nanos: AtomicU64::new(0),
            alerts: AtomicU64::new(0),
            tidying: tidying::Tidying::new(tidy_ups),
        }
    }

    /// How long a late reply to one of this name's calls is worth awaiting: past `lease` a hold
    /// it made or ended is gone anyway. (Bounded, so a connection that neither answers nor
    /// fails does not keep the tidy-up, and the owner's next calls, waiting for ever.)
    pub(crate) fn late_reply_patience(config: &crate::config::Config, lease: Duration) -> Duration {
        (lease.min(Duration::from_secs(600))).saturating_add(config.command_timeout)
    }
}

/// A read/write lock: [`ReadWriteLock::read`] and [`ReadWriteLock::write`] are two views of one name.
#[derive(Clone)]
pub struct ReadWriteLock {
    read: Lock,
    write: Lock,
}

impl ReadWriteLock {
    pub(crate) fn new(
        client: Arc<ClientInner>,
        keys: Arc<LockKeys>,
        local: Arc<LocalLock>,
    ) -> Self {
        let announcement_ms = announcement_ms(&client.config);
        let view = |mode| Lock {
            client: client.clone(),
            calls: Arc::new(calls::KeyedCalls::new(&keys, mode, announcement_ms)),
            keys: keys.clone(),
            local: local.clone(),
            mode,
        };
        ReadWriteLock {
            read: view(Mode::Read),
            write: view(Mode::Write),
        }
    }
    /// The shared view.
    pub fn read(&self) -> Lock {
        self.read.clone()
    }
    /// The exclusive view (the same resource as `client.lock(name)`).
    pub fn write(&self) -> Lock {
        self.write.clone()
    }
    pub fn name(&self) -> &str {
        &self.read.keys.name
    }
}

/// One view (read or write) of a lock name; `client.lock(name)` is the write view.
/// Cheap to clone; holds no Redis state of its own.
#[derive(Clone)]
pub struct Lock {
    pub(crate) client: Arc<ClientInner>,
    pub(crate) keys: Arc<LockKeys>,
    pub(crate) local: Arc<LocalLock>,
    pub(crate) mode: Mode,
    calls: Arc<calls::KeyedCalls>,
}

/// What one acquire attempt found.
enum Attempt {
    /// `since`: when the script that took it ran, at the earliest (sent, or its grant read).
    Acquired {
        fence: u64,
        count: u32,
        since: tokio::time::Instant,
    },
    Busy {
        retry_after: Duration,
    },
}

/// What the state script reports for one owner.
struct StateView {
    write_held: bool,
    readers: u64,
    owner_writes: u32,
    owner_reads: u32,
    owner_write_fence: Option<u64>,
    owner_read_fence: Option<u64>,
}

impl Lock {
    pub fn name(&self) -> &str {
        &self.keys.name
    }
    pub fn mode(&self) -> Mode {
        self.mode
    }
    /// The Redis keys of this name (for operators).
    pub fn keys(&self) -> &LockKeys {
        &self.keys
    }

    /// Acquires, waiting up to `wait` (`None` = forever, zero = try once), with `lease`
    /// (`None` = kept alive by the watchdog until released). Returns `Timeout` if the wait ends.
    pub async fn acquire(
        &self,
        owner: &Owner,
        wait: Option<Duration>,
        lease: Option<Duration>,
    ) -> Result<Hold> {
        self.acquire_with(owner, AcquireOptions::new(wait, lease))
            .await
    }

    /// One attempt, no waiting: `Ok(None)` when someone else holds the lock.
    pub async fn try_acquire(
        &self,
        owner: &Owner,
        lease: Option<Duration>,
    ) -> Result<Option<Hold>> {
        match self.acquire(owner, Some(Duration::ZERO), lease).await {
            Ok(hold) => Ok(Some(hold)),
            Err(Error::Timeout) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Releases one hold of `owner`; returns how many holds the owner still has in this mode.
    /// `NotHeld` when the owner does not hold it (nothing changes); `LockLost` when this client's
    /// watchdog was keeping the hold alive and Redis no longer has it.
    pub async fn release(&self, owner: &Owner) -> Result<u32> {
        self.release_meant(owner, None).await
    }

    /// [`Lock::release`] of one particular hold: the owner's hold whose fencing token is
    /// `fencing_token` (as [`Hold::fencing_token`] returned it, the same for its re-entries).
    /// When that hold has ended, this is `NotHeld` (or `LockLost`, as for `release`) and the
    /// owner's newer hold of the name, taken after it, stays: an owner shared by several tasks
    /// may have taken one, and a release of the old hold must not end it.
    pub async fn release_fenced(&self, owner: &Owner, fencing_token: u64) -> Result<u32> {
        self.release_meant(owner, Some(fencing_token)).await
    }

    /// [`Lock::release`], or [`Lock::release_fenced`] of the hold `meant`.
    pub(crate) async fn release_meant(&self, owner: &Owner, meant: Option<u64>) -> Result<u32> {
        self.tidied(owner).await?;
        self.release_untidied(owner, meant).await
    }

    /// [`Lock::release_fenced`] without waiting for the owner's tidy-ups: for a tidy-up itself
    /// (the give-back of a hold an acquire got and nobody took), which holds a ticket that the
    /// owner's next calls wait for.
    pub(crate) async fn release_untidied(&self, owner: &Owner, meant: Option<u64>) -> Result<u32> {
        // Marked before the call: a renewal that finds the hold gone meanwhile leaves the
        // verdict to this release (it may be what ended the hold), even when its reply comes
        // after the caller stopped waiting (see `late_release`).
        let releasing = (self.client.watchdog).releasing_fenced(|| self.watch_key(owner), meant);
        let mark = releasing.carry(self.client.clone());
        late_release::InFlightRelease::start(self, owner, meant, mark).await
    }

    /// Whether blocking callers call on their own connections (plain sockets: see `direct`).
    pub(crate) fn direct_usable(&self) -> bool {
        self.client.direct.usable()
    }

    /// [`Lock::release`] (of the hold `meant`, if given) on the calling thread's own connection
    /// (for blocking callers).
    pub(crate) fn release_direct(&self, owner: &Owner, meant: Option<u64>) -> Result<u32> {
        self.client.ensure_open()?;
        let limit = self.client.config.command_timeout;
        (self.local.tidying).settled_blocking(owner.token(), limit)?;
        let releasing = (self.client.watchdog).releasing_fenced(|| self.watch_key(owner), meant);
        let mut mark = Some(releasing.carry(self.client.clone()));
        let call = self.release_call(owner.token(), meant);
        let ping_first = self.pings_first();
        let script = SCRIPTS.release(self.mode);
        let reply = (self.client.direct).run_or_hand_over(
            None,
            |c| c.eval(script, &call, ping_first),
            |late| {
                let mark = mark.take().expect("one call");
                late_release::hear_out_direct(late, self, owner, mark);
            },
        )?;
        let mut mark = mark.expect("not handed over");
        self.released(owner, reply, &mark.resume())
    }

    /// Whether the next release goes behind a `PING` (see `calls::behind_ping`).
    fn pings_first(&self) -> bool {
        self.local.grants_elsewhere.load(Ordering::Relaxed)
    }

    /// Waits for the tidy-ups of the owner's ended acquires of this name (see `tidying`).
    async fn tidied(&self, owner: &Owner) -> Result<()> {
        let limit = self.client.config.command_timeout;
        self.local.tidying.settled(owner.token(), limit).await
    }

    /// A ticket that the owner's next calls on this name wait for, held by one tidy-up.
    pub(crate) fn tidy_ticket(&self, owner_token: &str) -> tidying::TidyTicket {
        tidying::TidyTicket::new(&self.local, owner_token)
    }

    /// The release script call for one hold of the owner with `token`, or for its hold with the
    /// fencing token `meant` alone (see release.lua).
    fn release_call(&self, token: &str, meant: Option<u64>) -> redis::Cmd {
        let mut call = self.calls.release();
        call.arg(token);
        if let Some(fence) = meant {
            call.arg(fence);
        }
        call
    }

    /// What a release's `reply` means for the caller and for the watchdog.
    fn released(&self, owner: &Owner, reply: ReleaseReply, releasing: &Releasing) -> Result<u32> {
        match reply {
            ReleaseReply::Left(left) => Ok(left),
            ReleaseReply::Ended { fence, granted_to } => {
                let watch_key = || self.watch_key(owner);
                (self.client.watchdog).forget(&self.client, watch_key, fence, releasing);
                // The next release of this name goes behind a PING while releases grant the
                // lock to other clients' waiters (see `calls::behind_ping`). A grant to one of
                // this client's own waiters needs none: the reply and the grant both come to
                // this process.
                let elsewhere = granted_to.is_some_and(|id| id != self.client.pubsub.client_id());
                self.local
                    .grants_elsewhere
                    .store(elsewhere, Ordering::Relaxed);
                Ok(0)
            }
            ReleaseReply::NotHeld { upto } => {
                Err(self.not_held(&self.watch_key(owner), upto, Some(releasing)))
            }
        }
    }

    /// Sets the lease of `owner`'s hold to `lease` from now. A watchdog-kept hold stays kept
    /// (its lease is not set below the watchdog's), whichever client extends it: one of
    /// another process or language presenting the token too, since the hold's metadata in Redis
    /// says so. (A hold first taken with a fixed lease and re-entered under the watchdog is not
    /// marked.)
    pub async fn extend(&self, owner: &Owner, lease: Duration) -> Result<()> {
        let mut lease_ms = validate_lease(lease)?;
        self.tidied(owner).await?;
        // Marked as a release marks it: a renewal that finds the hold gone meanwhile leaves the
        // verdict to this call, whose "not held" says lost (even where the server counts fences
        // anew after losing its data).
        let marked = self.client.watchdog.releasing(|| self.watch_key(owner));
        if marked.is_tracked() {
            // A hold the watchdog keeps stays kept: a lease shorter than its renewal's could
            // end between two ticks.
            lease_ms = lease_ms.max(self.client.config.lease.as_millis() as u64);
        }
        match self.extend_call(owner, lease_ms, None).await? {
            ExtendReply::Extended => Ok(()),
            ExtendReply::NotHeld { upto } => {
                Err(self.not_held(&self.watch_key(owner), upto, Some(&marked)))
            }
        }
    }

    /// One extend.lua call for `owner`'s hold of this view (with `fence`: that hold only, its
    /// lease only lengthened). Sent once more on a dead connection: extending twice is
    /// extending once.
    async fn extend_call(
        &self,
        owner: &Owner,
        lease_ms: u64,
        fence: Option<u64>,
    ) -> Result<ExtendReply> {
        let script = &SCRIPTS.extend;
        let mut invocation = self.keyed(script);
        invocation
            .arg(self.mode.as_arg())
            .arg(owner.token())
            .arg(lease_ms);
        if let Some(fence) = fence {
            invocation.arg(fence);
        }
        self.client
            .eval_rerunnable(script, &invocation, false)
            .await
    }

    /// Whether anyone holds this view (write view: a writer; read view: at least one reader).
    pub async fn is_locked(&self) -> Result<bool> {
        let state = self.state("").await?;
        Ok(match self.mode {
            Mode::Write => state.write_held,
            Mode::Read => state.readers > 0,
        })
    }

    /// Whether `owner` holds this view.
    pub async fn is_held_by(&self, owner: &Owner) -> Result<bool> {
        Ok(self.hold_count(owner).await? > 0)
    }

    /// How many times `owner` holds this view (0 when not at all). Like the owner's other
    /// calls, it comes after the tidy-ups of the owner's ended acquires (see `tidying`): a
    /// cancelled acquire that had taken the lock does not show as held.
    pub async fn hold_count(&self, owner: &Owner) -> Result<u32> {
        self.tidied(owner).await?;
        let state = self.state(owner.token()).await?;
        Ok(match self.mode {
            Mode::Write => state.owner_writes,
            Mode::Read => state.owner_reads,
        })
    }

    /// The fencing token of `owner`'s hold of this view, per Redis (`None` when it holds none: it
    /// never did, released it, or the hold expired or was force-unlocked), whichever client took
    /// the hold. Comes after the tidy-ups of the owner's ended acquires, as `hold_count` does.
    pub async fn fencing_token(&self, owner: &Owner) -> Result<Option<u64>> {
        self.tidied(owner).await?;
        let state = self.state(owner.token()).await?;
        Ok(match self.mode {
            Mode::Write => state.owner_write_fence,
            Mode::Read => state.owner_read_fence,
        })
    }

    /// A snapshot of the whole name: mode, holders (up to 100) with counts and metadata, leases,
    /// waiting writers and the last fencing token.
    pub async fn inspect(&self) -> Result<LockInfo> {
        self.inspect_counting(true).await
    }

    /// [`Lock::inspect`] with `waiting_writers` left at 0 when `count_waiters` is false: the
    /// count scans every waiter, which a contention alert (raised by each waiter that waits
    /// long) must not.
    pub(crate) async fn inspect_counting(&self, count_waiters: bool) -> Result<LockInfo> {
        const LISTED: u32 = 100;
        // A read: sent once more on a dead connection.
        let script = &SCRIPTS.inspect;
        let mut invocation = self.keyed(script);
        invocation.arg(LISTED).arg(u8::from(count_waiters));
        type Row = (String, String, u32, u64, String, i64);
        type Reply = (u64, u64, u64, u64, Vec<Row>, u64);
        let (now, last_fence, waiting, live, rows, waiting_readers): Reply = self
            .client
            .eval_rerunnable(script, &invocation, false)
            .await?;
        let holders: Vec<HolderInfo> = rows
            .into_iter()
            .map(|(mode, token, count, fence, meta, left)| {
                let metadata = HolderMetadata::parse(&meta);
                HolderInfo {
                    mode: if mode == "w" { Mode::Write } else { Mode::Read },
                    owner_token: token,
                    hold_count: count,
                    fencing_token: fence,
                    lease_left: Duration::from_millis(left.max(0) as u64),
                    held_for: now
                        .checked_sub(metadata.acquired_at_ms)
                        .filter(|_| metadata.acquired_at_ms > 0)
                        .map(Duration::from_millis),
                    metadata,
                }
            })
            .collect();
        let mode = if holders.iter().any(|h| h.mode == Mode::Write) {
            Some(Mode::Write)
        } else if live > 0 {
            Some(Mode::Read)
        } else {
            None
        };
        Ok(LockInfo {
            name: self.keys.name.to_string(),
            mode,
            lease_left: holders.iter().map(|h| h.lease_left).max(),
            holder_count: live,
            holders,
            waiting_writers: waiting,
            waiting_readers,
            last_fencing_token: last_fence,
        })
    }

    /// Clears the name whoever holds it (both views) and wakes every waiter; true when it was
    /// held. This client's own watched holds of the name are reported lost at once; other clients
    /// find out at their next renewal.
    pub async fn force_unlock(&self) -> Result<bool> {
        let script = &SCRIPTS.force_unlock;
        let mut invocation = self.keyed(script);
        invocation.arg(self.keys.channel());
        let held: i64 = self.client.invoke(script, &invocation).await?;
        self.client
            .watchdog
            .mark_name_lost(&self.client, self.keys.state());
        Ok(held == 1)
    }

    /// This client's counters for the name.
    pub fn stats(&self) -> LockStats {
        let local = &self.local;
        LockStats {
            failed_attempts: local.failed_attempts.load(Ordering::Relaxed),
            waits: local.waits.load(Ordering::Relaxed),
            total_wait: Duration::from_nanos(local.wait_nanos.load(Ordering::Relaxed)),
            alerts: local.alerts.load(Ordering::Relaxed),
        }
    }

    /// A call of `script` with this name's keys, in the order `prelude.lua` names them.
    fn keyed(&self, script: &LuaScript) -> redis::Cmd {
        calls::keyed(script, &self.keys)
    }

    /// See [`announcement_ms`].
    pub(crate) fn announcement_ms(&self) -> u64 {
        announcement_ms(&self.client.config)
    }

    fn watch_key(&self, owner: &Owner) -> WatchKey {
        WatchKey::new(&self.keys, self.mode, owner.shared_token())
    }

    /// The error for "Redis says the owner does not hold this, nor any hold of the name with a
    /// fence up to `upto`": `LockLost` when our watchdog was keeping such a hold alive, or the
    /// hold this release marked (it is reported lost now if the watchdog had not noticed).
    fn not_held(&self, watch_key: &WatchKey, upto: u64, releasing: Option<&Releasing>) -> Error {
        if (self.client.watchdog).take_lost(&self.client, watch_key, upto, releasing) {
            Error::LockLost
        } else {
            Error::NotHeld
        }
    }

    async fn state(&self, token: &str) -> Result<StateView> {
        // A read: sent once more on a dead connection.
        let script = &SCRIPTS.state;
        let mut invocation = self.keyed(script);
        invocation.arg(token);
        type Reply = (u8, u64, u32, u32, Option<u64>, Option<u64>);
        let (write_held, readers, owner_writes, owner_reads, write_fence, read_fence): Reply = self
            .client
            .eval_rerunnable(script, &invocation, false)
            .await?;
        Ok(StateView {
            write_held: write_held == 1,
            readers,
            owner_writes,
            owner_reads,
            owner_write_fence: write_fence,
            owner_read_fence: read_fence,
        })
    }
}

/// How long waiters stay announced without renewing, and how long a readers' turn lasts: a few
/// re-check periods, since waiters renew at every attempt.
fn announcement_ms(config: &crate::config::Config) -> u64 {
    (config.recheck_interval * 4).as_millis() as u64
}

/// Lease in milliseconds, or `InvalidArgument` for zero, sub-millisecond or over-long leases.
pub(crate) fn validate_lease(lease: Duration) -> Result<u64> {
    if lease < Duration::from_millis(1) {
        return Err(Error::invalid("lease must be at least 1 ms"));
    }
    if lease > MAX_LEASE {
        return Err(Error::invalid("lease must be at most ten years"));
    }
    Ok(lease.as_millis() as u64)
}
