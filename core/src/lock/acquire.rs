//! Acquire: one fast attempt, then waiting by notification behind the process-local queue.
//!
//! Guarantees:
//! - one script call per attempt; a free lock costs exactly one round trip;
//! - waiting writers queue in Redis in arrival order, and a release hands the lock straight to
//!   the first of them (a grant, published on the lock's channel): the grantee is in as soon
//!   as the message arrives, without another round trip. A waiter whose client does not
//!   listen yet (it subscribes after its first attempt) keeps its place, and an attempt that
//!   finds the lock free while writers queue ahead of it hands the lock to the first of them;
//! - while waiting, only one waiter per client, name and mode (the head of a FIFO local queue)
//!   makes attempts; waiters behind it talk to Redis only to keep their announcement alive
//!   (every two re-check periods) and after a pub/sub reconnect;
//! - a release is noticed through pub/sub without polling; if a message is lost, the waiter
//!   re-checks after at most `recheck_interval` (at the holder's lease end, when its last
//!   attempt saw that come sooner), and an attempt claims a grant whose message was lost;
//! - dropping the future (cancellation), a timeout or an error leaves nothing in Redis: a
//!   waiter's announcement is withdrawn (and expires on its own regardless), and an attempt
//!   whose script was already sent is undone once its reply arrives (see `in_flight`).

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use super::calls::eval_rerunnable;
use super::in_flight::{AttemptCall, InFlightAttempt, Undo, undo_late_direct};
use super::replies::ExtendReply;
use super::{
    AcquireOptions, Attempt, AttemptReply, Gate, Hold, Lock, Mode, NO_HANDOFF, scripts::SCRIPTS,
    validate_lease,
};
use crate::config::ContentionAlert;
use crate::error::{Error, Result};
use crate::inspect::HolderMetadata;
use crate::owner::Owner;
use crate::pubsub::WakeUp;

impl Lock {
    /// Acquires with all options (see [`AcquireOptions`]).
    pub async fn acquire_with(&self, owner: &Owner, options: AcquireOptions) -> Result<Hold> {
        let deadline = options.wait.and_then(|w| Instant::now().checked_add(w));
        let mut options = options;
        loop {
            if let Some(hold) = self.acquire_or_stale(owner, &options).await? {
                return Ok(hold);
            }
            // The hold it took ended before it could be handed out: again, with the time left.
            options.wait = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        }
    }

    /// One acquire; `None` when the hold it took had ended by the time it was handed out.
    async fn acquire_or_stale(
        &self,
        owner: &Owner,
        options: &AcquireOptions,
    ) -> Result<Option<Hold>> {
        // A blocking caller's first attempt is on its own socket, out of the runtime's sight:
        // counted as under way (before the closed check), so that a close meanwhile keeps the
        // command connection until the hold it may take is given back.
        let direct = crate::blocking::on_blocking_caller() && self.client.direct.usable();
        let _under_way = direct.then(|| self.client.tidy_ups.under_way());
        self.client.ensure_open()?;
        if let Some(label) = &options.label {
            crate::inspect::validate_label(label)?;
        }
        self.tidied(owner).await?;
        let watched = options.lease.is_none() && self.client.config.watchdog;
        let lease_ms = validate_lease(options.lease.unwrap_or(self.client.config.lease))?;
        let wait = options.wait;
        let started = Instant::now();
        // An unrepresentable deadline is "forever".
        let deadline = wait.and_then(|w| started.checked_add(w));
        let will_wait = wait != Some(Duration::ZERO);
        let waiter = if will_wait {
            self.client.pubsub.waiter_id(owner.token())
        } else {
            String::new()
        };
        let attempt = AttemptArgs {
            owner,
            lease_ms,
            label: options.label.as_deref(),
            watched,
            // A waiter announces itself (writers: to queue for a grant, and so new readers queue
            // behind; readers: so they get a turn after the writer); renewed at every attempt,
            // withdrawn when done.
            announce_ms: if will_wait { self.announcement_ms() } else { 0 },
            waiter: &waiter,
        };

        // Fast path. A waiter announces itself at once: a writer takes its place in the queue
        // for grants, a reader will be let in by the readers' turn after the current writer
        // (with every local reader behind the gate, which follows at once). If a subscription
        // is already live, arm the wake-up first so a release that lands right after this
        // attempt is not missed.
        let gate = if will_wait {
            let gate = self.local.gate(self.mode);
            gate.queue.try_lock().ok().map(|g| GateGuard::new(g, gate))
        } else {
            None
        };
        let live = self.client.pubsub.active(self.keys.channel());
        let mut wake: Option<WakeUp> = live.as_ref().map(|s| s.arm());
        let messages_before = live.as_ref().map(|s| s.messages());
        let mut announcement = Announcement::new(self, owner, &waiter);
        // A blocking caller makes this first attempt on its own socket: one write and one read
        // on its thread instead of two thread hand-offs (see `direct`; plain sockets only).
        let mut last = if direct {
            self.attempt_direct(&attempt, &mut announcement)?
        } else {
            self.attempt(&attempt, &mut announcement).await?
        };
        if let Attempt::Acquired { .. } = last {
            if let Some(mut gate) = gate {
                gate.acquired_after(self.mode, messages_before);
            }
        } else {
            if !will_wait {
                self.local.failed_attempts.fetch_add(1, Ordering::Relaxed);
                return Err(Error::Timeout);
            }
            let turn = Turn {
                args: &attempt,
                deadline,
                started,
            };
            let result = self
                .wait_for_turn(turn, gate, live, &mut wake, &mut last, &mut announcement)
                .await;
            let waited = started.elapsed();
            self.local.waits.fetch_add(1, Ordering::Relaxed);
            self.local
                .wait_nanos
                .fetch_add(waited.as_nanos() as u64, Ordering::Relaxed);
            if let Err(err) = result {
                if err == Error::Timeout {
                    announcement.withdraw().await;
                }
                return Err(err);
            }
        }
        // A successful attempt removes the owner's announcement in the same script.
        announcement.disarm();
        let Attempt::Acquired {
            fence,
            count,
            since,
        } = last
        else {
            unreachable!("wait_for_turn returns only once acquired")
        };
        // Handed out late (an asyncio loop polls this future on its own thread, and that thread
        // was busy): the hold's lease ran from `since`, and nothing renewed it meanwhile. Past a
        // watchdog period (and a floor of 100 ms, so that a short lease does not confirm every
        // attempt, but below half the lease, so that no hold is handed out unconfirmed with
        // less than half of it left) it is confirmed, and its lease lengthened, before it is
        // handed out; one that ended meanwhile is not the caller's: it starts over.
        let lease = Duration::from_millis(lease_ms);
        let late = (lease / 3).max(Duration::from_millis(100).min(lease / 2));
        if since.elapsed() >= late {
            // Given back if this errs or the acquire is dropped meanwhile (cancelled).
            let mut unconfirmed = GiveBackOnDrop {
                lock: self,
                owner,
                waiter: &waiter,
                lease_ms,
                fence: Some(fence),
            };
            let held = self.still_held(owner, lease_ms, fence).await?;
            unconfirmed.fence = None;
            if !held {
                return Ok(None);
            }
        }
        if self.client.ensure_open().is_err() {
            // Closed while the attempt that took it was on the wire: the call fails as close()
            // promises its waiters, and the hold is given back (no watchdog would keep it).
            self.give_back_later(owner, &waiter, lease_ms, fence);
            return Err(Error::Closed);
        }
        let (watchdog, made) = (&self.client.watchdog, count == 1);
        let lost = if watched {
            Some(watchdog.track(&self.client, self.watch_key(owner), fence, made))
        } else {
            watchdog.untracked(&self.client, || self.watch_key(owner), fence, made);
            None
        };
        Ok(Some(Hold {
            name: self.keys.name.clone(),
            mode: self.mode,
            owner: owner.clone(),
            fencing_token: fence,
            hold_count: count,
            lease: options.lease,
            lost,
        }))
    }

    /// The waiting part: subscribe, queue locally, attempt on every wake-up or re-check, and
    /// take a grant as soon as one arrives.
    async fn wait_for_turn(
        &self,
        turn: Turn<'_, '_>,
        gate: Option<GateGuard<'_>>,
        live: Option<crate::pubsub::Subscription>,
        wake: &mut Option<WakeUp>,
        last: &mut Attempt,
        announcement: &mut Announcement<'_>,
    ) -> Result<()> {
        let config = &self.client.config;
        let shutdown = self.client.shutdown.clone();
        let waiter = turn.args.waiter;
        let mut failed: u64 = 1;
        let mut alerted = false;
        self.local.failed_attempts.fetch_add(1, Ordering::Relaxed);
        // The last time this waiter looked for a grant and found none (see `take_grant`).
        let mut looked = Instant::now();

        // Subscribe first (a queued waiter's wake-up then covers its whole time in the queue).
        let fresh_subscription = live.is_none();
        let subscription = match live {
            Some(s) => s,
            None => {
                // No longer than a re-check: a confirmation that does not come (no pub/sub
                // connection) must not hold up the waiter's next attempt.
                let limit = config.command_timeout.min(config.recheck_interval);
                let channel = self.keys.channel().to_string();
                let subscribing = self.client.pubsub.subscribe(&channel, limit);
                tokio::select! {
                    s = subscribing => s,
                    _ = sleep_until(turn.deadline) => return Err(Error::Timeout),
                    _ = shutdown.cancelled() => return Err(Error::Closed),
                }
            }
        };
        let _untaken = UntakenGrant {
            subscription: &subscription,
            waiter,
        };
        // The process lock first: one waiter per client, name and mode at a time makes attempts.
        let mut gate = match gate {
            Some(gate) => gate,
            None => {
                let mine = self.local.gate(self.mode);
                let queued = mine.queue.lock();
                tokio::pin!(queued);
                // A release before we listened granted nobody and may have left the lock free
                // for the queue's head: look at once (an attempt behind the head hands it on).
                let mut look = fresh_subscription && self.mode == Mode::Write;
                let mut reconnects = subscription.reconnects();
                let keep_place = Duration::from_millis(self.announcement_ms() / 2);
                let mut renew_at = Instant::now() + keep_place;
                let gate = loop {
                    if look {
                        renew_at = Instant::now() + keep_place;
                        *last = self.attempt(turn.args, announcement).await?;
                        if let Attempt::Acquired { .. } = last {
                            return Ok(());
                        }
                    }
                    let armed = subscription.arm();
                    if let Some((fence, since)) = take_grant(&subscription, waiter, &mut looked) {
                        *last = Attempt::Acquired {
                            fence,
                            count: 1,
                            since,
                        };
                        return Ok(());
                    }
                    tokio::select! {
                        gate = &mut queued => break GateGuard::new(gate, mine),
                        _ = armed => {
                            let now = subscription.reconnects();
                            look = now != reconnects;
                            reconnects = now;
                        }
                        _ = tokio::time::sleep_until(renew_at) => look = true,
                        _ = sleep_until(turn.deadline) => return Err(Error::Timeout),
                        _ = shutdown.cancelled() => return Err(Error::Closed),
                    }
                };
                // Our last attempt is stale now. If nothing was published since the waiter
                // before us took the lock, it still holds it: wait for the release (or our
                // grant) instead of attempting in vain.
                *wake = Some(subscription.arm());
                match gate.previous_acquisition {
                    Some(seen) if seen == subscription.messages() => {
                        *last = Attempt::Busy {
                            retry_after: config.recheck_interval,
                        };
                    }
                    _ => *wake = None,
                }
                gate
            }
        };
        if fresh_subscription {
            *wake = None; // the fast attempt ran before we were subscribed
        }

        loop {
            // A grant to us needs no attempt. (One that arrives during an attempt fires the
            // wake-up armed before it, so the next turn of the loop finds it.)
            if let Some((fence, since)) = take_grant(&subscription, waiter, &mut looked) {
                *last = Attempt::Acquired {
                    fence,
                    count: 1,
                    since,
                };
                gate.acquired_after(self.mode, Some(subscription.messages()));
                return Ok(());
            }
            if wake.is_none() {
                *wake = Some(subscription.arm());
                let messages_before = subscription.messages();
                *last = self.attempt(turn.args, announcement).await?;
                match last {
                    Attempt::Acquired { .. } => {
                        gate.acquired_after(self.mode, Some(messages_before));
                        return Ok(());
                    }
                    Attempt::Busy { .. } => {
                        failed += 1;
                        self.local.failed_attempts.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            let Attempt::Busy { retry_after } = *last else {
                return Ok(());
            };
            let waited = turn.started.elapsed();
            if !alerted && self.passes_alert_threshold(waited, failed) {
                alerted = true;
                self.raise_alert(turn.args.owner, waited, failed);
            }
            let now = Instant::now();
            if turn.deadline.is_some_and(|d| now >= d) {
                return Err(Error::Timeout);
            }
            let mut nap = retry_after.min(config.recheck_interval);
            if let Some(d) = turn.deadline {
                nap = nap.min(d - now);
            }
            let armed = wake.take().expect("armed above");
            tokio::select! {
                _ = armed => {}
                _ = tokio::time::sleep(nap) => {}
                _ = shutdown.cancelled() => return Err(Error::Closed),
            }
        }
    }

    /// Gives back, in the background, the hold with `fence` that an acquire took but does not
    /// hand out.
    fn give_back_later(&self, owner: &Owner, waiter: &str, lease_ms: u64, fence: u64) {
        let undo = Undo::new(self, owner.token(), waiter, 0, lease_ms);
        let ticket = self.tidy_ticket(owner.token());
        crate::background::spawn(async move {
            undo.give_back(fence).await;
            drop(ticket);
        });
    }

    /// Whether `owner` still holds this view with the hold `fence` (not a newer hold of its
    /// own), its lease lengthened to `lease_ms` from now if shorter (never shortened: a
    /// re-entry's hold may have a longer lease).
    async fn still_held(&self, owner: &Owner, lease_ms: u64, fence: u64) -> Result<bool> {
        let reply = self.extend_call(owner, lease_ms, Some(fence)).await?;
        Ok(reply == ExtendReply::Extended)
    }

    async fn attempt(
        &self,
        args: &AttemptArgs<'_>,
        announcement: &mut Announcement<'_>,
    ) -> Result<Attempt> {
        let sent = Instant::now();
        let call = AttemptCall {
            lease_ms: args.lease_ms,
            meta: args.meta(),
            announce_ms: args.announce_ms,
            waiter: args.waiter.to_owned(),
        };
        // Close ends a waiter at once, also while its attempt waits for Redis (dropped, the
        // attempt is undone in the background once its reply is in).
        let reply = tokio::select! {
            biased;
            reply = InFlightAttempt::start(self, args.owner, call) => reply?,
            _ = self.client.shutdown.cancelled() => return Err(Error::Closed),
        };
        Self::attempted(args, reply, announcement, sent)
    }

    /// [`Lock::attempt`] on the calling thread's own connection. The caller's thread waits for
    /// the reply until it is in, the command timeout passes, or the caller's cancel token fires;
    /// in the last two cases the attempt is undone once its late reply is in.
    fn attempt_direct(
        &self,
        args: &AttemptArgs<'_>,
        announcement: &mut Announcement<'_>,
    ) -> Result<Attempt> {
        let sent = Instant::now();
        let meta = args.meta();
        let call = self.acquire_call(
            args.owner.token(),
            args.lease_ms,
            &meta,
            args.announce_ms,
            args.waiter,
        );
        // The blocking call's cancel token, if any, ends the wait for the reply too.
        let cancel = crate::blocking::current_cancel();
        let reply = self.client.direct.run_or_hand_over(
            cancel.as_ref(),
            |c| c.eval(SCRIPTS.acquire(self.mode), &call, false),
            // Timed out or cancelled: Redis may still run it; its caller hears `Connection` or
            // `Cancelled`, so it is undone.
            |late| {
                let token = args.owner.token();
                let undo = Undo::new(self, token, args.waiter, args.announce_ms, args.lease_ms);
                undo_late_direct(late, undo);
            },
        )?;
        Self::attempted(args, reply, announcement, sent)
    }

    /// The acquire script call of one attempt (see acquire.lua for the arguments).
    pub(super) fn acquire_call(
        &self,
        token: &str,
        lease_ms: u64,
        meta: &str,
        announce_ms: u64,
        waiter: &str,
    ) -> redis::Cmd {
        let mut call = self.calls.acquire();
        call.arg(token)
            .arg(lease_ms)
            .arg(meta)
            .arg(announce_ms)
            .arg(waiter);
        call
    }

    fn attempted(
        args: &AttemptArgs<'_>,
        reply: AttemptReply,
        announcement: &mut Announcement<'_>,
        sent: Instant,
    ) -> Result<Attempt> {
        match reply {
            AttemptReply::Acquired { fence, count } => Ok(Attempt::Acquired {
                fence,
                count,
                since: sent,
            }),
            AttemptReply::Busy { retry_ms } => {
                if args.announce_ms > 0 {
                    announcement.armed = true;
                }
                Ok(Attempt::Busy {
                    retry_after: Duration::from_millis(retry_ms),
                })
            }
            AttemptReply::UpgradeRefused => Err(Error::UpgradeNotAllowed),
        }
    }

    fn passes_alert_threshold(&self, waited: Duration, failed: u64) -> bool {
        let config = &self.client.config;
        config.contention_alert_after.is_some_and(|t| waited >= t)
            || config
                .contention_alert_attempts
                .is_some_and(|n| failed >= n)
    }

    /// Logs and reports a contention alert with the current holders, off the waiting path.
    fn raise_alert(&self, owner: &Owner, waited: Duration, failed_attempts: u64) {
        self.local.alerts.fetch_add(1, Ordering::Relaxed);
        let lock = self.clone();
        let owner_token = owner.token().to_owned();
        tokio::spawn(async move {
            let (holders, holder_count, unreadable) = match lock.inspect_counting(false).await {
                Ok(info) => (info.holders, info.holder_count, None),
                Err(error) => (Vec::new(), 0, Some(error)),
            };
            let alert = ContentionAlert {
                name: lock.keys.name.to_string(),
                mode: lock.mode,
                owner_token,
                waited,
                failed_attempts,
                holders,
            };
            let held_by: Vec<String> = alert
                .holders
                .iter()
                .map(|h| {
                    let m = &h.metadata;
                    format!(
                        "{} ({:?}, held {:?}, host {}, pid {}, thread {})",
                        h.owner_token, h.mode, h.held_for, m.host, m.pid, m.thread
                    )
                })
                .collect();
            match unreadable {
                // Not "no holders": who holds it is not known.
                Some(error) => tracing::warn!(
                    lock = %crate::logs::OneLine(&alert.name),
                    waited = ?alert.waited,
                    failed_attempts = alert.failed_attempts,
                    %error,
                    "lock contention: a waiter passed the alert threshold (possible dead lock); \
                     its holders could not be read"
                ),
                None => tracing::warn!(
                    lock = %crate::logs::OneLine(&alert.name),
                    waited = ?alert.waited,
                    failed_attempts = alert.failed_attempts,
                    holder_count,
                    holders = ?held_by,
                    "lock contention: a waiter passed the alert threshold (possible dead lock)"
                ),
            }
            if let Some(callback) = lock.client.config.on_contention.clone() {
                lock.client.callbacks.run(move || callback(&alert));
            }
        });
    }
}

#[derive(Clone, Copy)]
struct AttemptArgs<'a> {
    owner: &'a Owner,
    lease_ms: u64,
    /// The holder label asked for, if any.
    label: Option<&'a str>,
    /// The hold will be kept by the watchdog (its metadata says so, see extend.lua).
    watched: bool,
    announce_ms: u64,
    /// This call's waiter id ("" when it does not wait).
    waiter: &'a str,
}

impl AttemptArgs<'_> {
    /// The holder metadata of one attempt, made anew for each: its acquisition time is when
    /// this attempt runs, not when the call began waiting.
    fn meta(&self) -> String {
        let mut meta = HolderMetadata::current_json(self.label);
        if self.watched {
            HolderMetadata::mark_watched(&mut meta, self.lease_ms);
        }
        meta
    }
}

/// What the waiting part needs besides the attempt itself.
struct Turn<'t, 'a> {
    args: &'t AttemptArgs<'a>,
    deadline: Option<Instant>,
    started: Instant,
}

/// The process-local gate, held while one waiter talks to Redis. On leaving, it tells the next
/// waiter whether the lock was just taken (and the channel's message count at that moment).
struct GateGuard<'a> {
    _guard: tokio::sync::MutexGuard<'a, ()>,
    gate: &'a Gate,
    /// What the previous holder of the gate left: `Some(messages)` if it acquired.
    previous_acquisition: Option<u64>,
    acquired_at: Option<u64>,
}

impl<'a> GateGuard<'a> {
    fn new(guard: tokio::sync::MutexGuard<'a, ()>, gate: &'a Gate) -> Self {
        let left = gate.handoff_messages.load(Ordering::SeqCst);
        GateGuard {
            _guard: guard,
            gate,
            previous_acquisition: (left != NO_HANDOFF).then_some(left),
            acquired_at: None,
        }
    }

    /// The lock was acquired by an attempt sent when the channel had seen `messages` messages
    /// (`None`: not known, the next waiter must attempt at once).
    fn acquired_after(&mut self, mode: Mode, messages: Option<u64>) {
        // After a read hold, a queued reader may get in at once: only a write hold is a reason
        // for the next waiter to wait for a release.
        self.acquired_at = messages.filter(|_| mode == Mode::Write);
    }
}

impl Drop for GateGuard<'_> {
    fn drop(&mut self) {
        let left = self.acquired_at.unwrap_or(NO_HANDOFF);
        self.gate.handoff_messages.store(left, Ordering::SeqCst);
    }
}

/// Drops a grant that arrived for this call but was not taken (the call ended another way).
struct UntakenGrant<'s> {
    subscription: &'s crate::pubsub::Subscription,
    waiter: &'s str,
}

impl Drop for UntakenGrant<'_> {
    fn drop(&mut self) {
        self.subscription.take_grant(self.waiter);
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// A waiter's announcement in Redis, armed once an attempt announced it. Dropped while armed
/// (the acquire future was cancelled, or failed), it is withdrawn in the background.
struct Announcement<'a> {
    lock: &'a Lock,
    owner: &'a Owner,
    waiter: &'a str,
    armed: bool,
}

impl<'a> Announcement<'a> {
    fn new(lock: &'a Lock, owner: &'a Owner, waiter: &'a str) -> Self {
        Announcement {
            lock,
            owner,
            waiter,
            armed: false,
        }
    }

    fn disarm(&mut self) {
        self.armed = false;
    }

    /// Armed until the withdrawal is done: a caller that drops this future meanwhile leaves the
    /// withdrawal to `Drop` (withdrawing twice is harmless).
    async fn withdraw(&mut self) {
        if self.armed {
            let _ = withdraw(self.lock, self.owner.token(), self.waiter).await;
            self.armed = false;
        }
    }
}

impl Drop for Announcement<'_> {
    fn drop(&mut self) {
        if self.armed {
            let lock = self.lock.clone();
            let token = self.owner.token().to_owned();
            let waiter = self.waiter.to_owned();
            // Not on the caller's runtime: this drop may be that runtime's shutdown, which
            // runs no task spawned now (see `background`).
            let ticket = lock.tidy_ticket(&token);
            crate::background::spawn(async move {
                let _ = withdraw(&lock, &token, &waiter).await;
                drop(ticket);
            });
        }
    }
}

/// Withdraws a waiter's announcement (and gives back a lock granted to it meanwhile). Sent
/// twice if need be (a withdrawal may run twice): left in place, an announcement of a waiter that
/// is gone could be granted the lock, which would then stay taken by nobody for the lease.
///
/// A withdrawal Redis refuses (-MISCONF, -READONLY, -OOM, -BUSY ...) is tried again in the
/// background until Redis takes it, for as long as a grant made meanwhile could still hold the
/// lock (the waiter's lease): the announcement stays live up to its end, and a release once
/// Redis takes writes again would grant the lock to this waiter, whose call has ended.
pub(super) async fn withdraw(lock: &Lock, token: &str, waiter: &str) -> Result<()> {
    let first = withdraw_once(lock, token, waiter).await;
    if let Err(Error::Redis(_)) = &first {
        let (lock, token, waiter) = (lock.clone(), token.to_owned(), waiter.to_owned());
        let config = &lock.client.config;
        let patience = super::LocalLock::late_reply_patience(config, config.lease);
        let pause = config.recheck_interval;
        // A tidy-up like the first try: the owner's next calls on the name wait for it, so
        // they never re-enter (or release) a grant made meanwhile to this ended waiter.
        let ticket = lock.tidy_ticket(&token);
        crate::background::spawn(async move {
            let _ticket = ticket;
            let until = Instant::now() + patience;
            while Instant::now() < until {
                tokio::time::sleep(pause).await;
                // Closed: nobody hears a grant to this client's waiters any more (see
                // grant.lua), and close waits for this ticket.
                if lock.client.ensure_open().is_err() {
                    return;
                }
                match withdraw_once(&lock, &token, &waiter).await {
                    Err(Error::Redis(_)) | Err(Error::Connection(_)) => continue,
                    _ => return,
                }
            }
        });
    }
    first
}

async fn withdraw_once(lock: &Lock, token: &str, waiter: &str) -> Result<()> {
    let script = &SCRIPTS.unregister_waiter;
    let mut call = lock.keyed(script);
    call.arg(lock.mode.as_arg())
        .arg(token)
        .arg(lock.keys.channel())
        .arg(waiter)
        .arg(lock.announcement_ms());
    let mut connection = lock.client.command_connection()?;
    tidy::<i64>(lock, eval_rerunnable(&mut connection, script, &call, false))
        .await
        .map(drop)
}

/// Runs a tidying-up script under the command timeout. A closed client still tidies up: this
/// bypasses the closed check on purpose.
pub(super) async fn tidy<T>(
    lock: &Lock,
    call: impl Future<Output = redis::RedisResult<T>>,
) -> Result<T> {
    match tokio::time::timeout(lock.client.config.command_timeout, call).await {
        Ok(Ok(reply)) => Ok(reply),
        Ok(Err(e)) => Err(e.into()),
        Err(_) => Err(Error::Connection(
            "tidying up after a waiter timed out".into(),
        )),
    }
}

/// A grant to `waiter`, with the earliest its hold could have been made: the grant's stamp
/// (when its message could have arrived), or the last time the waiter looked and found none
/// (`looked`), whichever is earlier. The stamp misses a message read late after another read
/// (redis-rs reads ahead), or a read that tokio's cached readiness made look empty; a runtime
/// blocked while the grant came held up this waiter's looks as much. `looked` becomes now when
/// there is none.
fn take_grant(
    subscription: &crate::pubsub::Subscription,
    waiter: &str,
    looked: &mut Instant,
) -> Option<(u64, Instant)> {
    match subscription.take_grant(waiter) {
        Some((fence, stamp)) => Some((fence, stamp.min(*looked))),
        None => {
            *looked = Instant::now();
            None
        }
    }
}

/// A hold an acquire took but has not handed out yet: given back if dropped with `fence` set.
struct GiveBackOnDrop<'a> {
    lock: &'a Lock,
    owner: &'a Owner,
    waiter: &'a str,
    lease_ms: u64,
    fence: Option<u64>,
}

impl Drop for GiveBackOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(fence) = self.fence {
            let (owner, waiter) = (self.owner, self.waiter);
            self.lock
                .give_back_later(owner, waiter, self.lease_ms, fence);
        }
    }
}

#[cfg(all(test, feature = "test-support"))]
mod grant_tests;
