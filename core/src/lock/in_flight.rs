//! One acquire attempt whose script call survives the cancellation of its caller.
//!
//! Once an `EVALSHA` is on the wire, dropping the future that awaits it does not stop Redis
//! from running it: the attempt may have taken the lock (or announced a waiter) although its
//! caller will never hear so. An [`InFlightAttempt`] dropped before its reply hands the call
//! to a background task that awaits the reply and undoes what it did — one release for an
//! acquisition (which takes back exactly the one hold count the attempt added, reentrant or
//! not), a withdrawal for an announcement. So a cancelled acquire leaves nothing behind in
//! Redis, as the contract says; only an undo that itself fails leaves a hold, until its lease.
//! (A withdrawal that meets a dead connection is sent once more; a release is not, since it must
//! not run twice and whether the first try ran is unknown.)
//!
//! An attempt that runs into the command timeout is handled the same way: its caller hears
//! `Connection`, while the call, still on the wire, is awaited in the background (a Redis that
//! was only slow runs it late) and undone. A blocking caller's direct attempt hands over its
//! connection for the same purpose ([`undo_late_direct`]).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Sleep;

use super::calls::eval_async;
use super::scripts::SCRIPTS;
use super::{AttemptReply, Lock, ReleaseReply};
use crate::direct::DirectConnection;
use crate::error::{Error, Result};
use crate::owner::Owner;
use crate::watchdog::WatchKey;

type Reply = Result<AttemptReply>;
type Call = Pin<Box<dyn Future<Output = Reply> + Send>>;

/// The script arguments of one attempt (see `acquire.lua`).
pub(super) struct AttemptCall {
    pub lease_ms: u64,
    pub meta: String,
    pub announce_ms: u64,
    /// This acquire call's waiter id (see `PubSubHub::waiter_id`).
    pub waiter: String,
}

/// The reply of one acquire script call; undone in the background if dropped before it.
pub(super) struct InFlightAttempt {
    call: Option<Call>,
    /// The command timeout, kept here rather than around the call so the call outlives it.
    deadline: Pin<Box<Sleep>>,
    undo: Undo,
}

/// What is needed to undo one attempt whose caller did not hear its reply.
#[derive(Clone)]
pub(super) struct Undo {
    lock: Lock,
    token: String,
    waiter: String,
    announced: bool,
    /// How long a late reply is worth awaiting: past the lease a hold it made is gone anyway.
    patience: Duration,
}

impl Undo {
    pub fn new(lock: &Lock, token: &str, waiter: &str, announce_ms: u64, lease_ms: u64) -> Self {
        let lease = Duration::from_millis(lease_ms);
        let patience = super::LocalLock::late_reply_patience(&lock.client.config, lease);
        Undo {
            lock: lock.clone(),
            token: token.to_owned(),
            waiter: waiter.to_owned(),
            announced: announce_ms > 0,
            patience,
        }
    }

    /// Undoes what the attempt did, once its (late) reply is known.
    async fn run(self, reply: Reply) {
        let undone = match reply {
            Ok(AttemptReply::Acquired { fence, .. }) => self.take_back_hold(fence).await,
            Ok(_) => self.withdraw().await,
            // No reply: nothing is known, and a hold it may have made ends with its lease.
            Err(e) => Err(e),
        };
        self.report(undone);
    }

    /// Releases the one hold count the attempt added to the hold with `fence` (works after
    /// close, like a withdrawal). Fenced: should that hold have ended meanwhile, the owner's
    /// newer hold stays.
    async fn take_back_hold(&self, fence: u64) -> Result<()> {
        let lock = &self.lock;
        let key = || WatchKey::new(&lock.keys, lock.mode, self.token.as_str().into());
        let releasing = lock.client.watchdog.releasing_fenced(key, Some(fence));
        let call = lock.release_call(&self.token, Some(fence));
        let mut connection = lock.client.command_connection()?;
        let undo = eval_async(&mut connection, SCRIPTS.release(lock.mode), &call, false);
        match super::acquire::tidy(lock, undo).await? {
            ReleaseReply::NotHeld { .. } => Err(Error::NotHeld),
            ReleaseReply::Left(_) => Ok(()),
            // The owner's hold ended here (its other calls released their counts first): the
            // watchdog must not keep it, nor call it lost at its next renewal.
            ReleaseReply::Ended { fence, .. } => {
                lock.client
                    .watchdog
                    .forget(&lock.client, key, fence, &releasing);
                Ok(())
            }
        }
    }

    /// Gives back the one hold count an attempt that its caller cannot keep added.
    pub async fn give_back(&self, fence: u64) {
        self.report(self.take_back_hold(fence).await);
    }

    /// Withdraws the waiter the attempt announced, if it announced one.
    async fn withdraw(&self) -> Result<()> {
        if !self.announced {
            return Ok(());
        }
        super::acquire::withdraw(&self.lock, &self.token, &self.waiter).await
    }

    fn report(&self, undone: Result<()>) {
        if let Err(error) = undone {
            tracing::warn!(
                lock = %crate::logs::OneLine(&self.lock.keys.name),
                %error,
                "an acquire attempt that timed out or was cancelled could not be undone; a hold \
                 it may have made ends with its lease"
            );
        }
    }
}

impl InFlightAttempt {
    /// Starts the call (it is sent on the first poll). Must run inside a tokio runtime.
    pub fn start(lock: &Lock, owner: &Owner, args: AttemptCall) -> Self {
        let undo = Undo::new(
            lock,
            owner.token(),
            &args.waiter,
            args.announce_ms,
            args.lease_ms,
        );
        let (script_lock, script_owner) = (lock.clone(), owner.clone());
        let call: Call = Box::pin(async move {
            let call = script_lock.acquire_call(
                script_owner.token(),
                args.lease_ms,
                &args.meta,
                args.announce_ms,
                &args.waiter,
            );
            script_lock.client.ensure_open()?;
            let mut connection = script_lock.client.hot_connection()?;
            let script = SCRIPTS.acquire(script_lock.mode);
            let reply = eval_async(&mut connection, script, &call, false).await;
            Ok(script_lock.client.noted(reply)?)
        });
        InFlightAttempt {
            call: Some(call),
            deadline: Box::pin(tokio::time::sleep(lock.client.config.command_timeout)),
            undo,
        }
    }

    /// Leaves the call to a background task that awaits its reply and undoes what it did.
    fn abandon(&mut self) {
        let Some(call) = self.call.take() else {
            return;
        };
        let undo = self.undo.clone();
        // Taken now, before the caller hears of the cancellation: the owner's next call waits.
        let ticket = undo.lock.tidy_ticket(&undo.token);
        crate::background::spawn(async move {
            let reply = tokio::time::timeout(undo.patience, call)
                .await
                .unwrap_or_else(|_| Err(Error::Connection("no reply".into())));
            undo.run(reply).await;
            drop(ticket);
        });
    }
}

impl Future for InFlightAttempt {
    type Output = Reply;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Reply> {
        let this = &mut *self;
        let call = this.call.as_mut().expect("polled after completion");
        if let Poll::Ready(reply) = call.as_mut().poll(cx) {
            this.call = None;
            return Poll::Ready(reply);
        }
        std::task::ready!(this.deadline.as_mut().poll(cx));
        this.abandon();
        Poll::Ready(Err(Error::no_answer(
            this.undo.lock.client.config.command_timeout,
        )))
    }
}

impl Drop for InFlightAttempt {
    fn drop(&mut self) {
        self.abandon();
    }
}

/// Undoes a blocking caller's direct attempt that timed out, whose connection nothing else
/// uses any more: its late reply is read there and undone like an async attempt's.
pub(super) fn undo_late_direct(mut connection: DirectConnection, undo: Undo) {
    let ticket = undo.lock.tidy_ticket(&undo.token);
    crate::background::spawn(async move {
        let _ticket = ticket;
        let patience = undo.patience;
        let late = tokio::task::spawn_blocking(move || connection.late(patience)).await;
        if let Ok(reply) = late {
            undo.run(reply.map_err(Error::from)).await;
        }
    });
}
