//! One acquire attempt whose script call survives the cancellation of its caller.
//!
//! Once an `EVALSHA` is on the wire, dropping the future that awaits it does not stop Redis
//! from running it: the attempt may have taken the lock (or announced a waiter) although its
//! caller will never hear so. An [`InFlightAttempt`] dropped before its reply hands the call
//! to a background task that awaits the reply and undoes what it did — one release for an
//! acquisition (which takes back exactly the one hold count the attempt added, reentrant or
//! not), a withdrawal for an announcement. So a cancelled acquire leaves nothing behind in
//! Redis, as the contract says; only an undo that itself fails leaves a hold, until its lease.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::calls::eval_async;
use super::scripts::SCRIPTS;
use super::{AttemptReply, Lock};
use crate::error::{Error, Result};
use crate::owner::Owner;

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
    lock: Lock,
    owner: Owner,
    waiter: String,
    announced: bool,
    runtime: tokio::runtime::Handle,
}

impl InFlightAttempt {
    /// Starts the call (it is sent on the first poll). Must run inside a tokio runtime.
    pub fn start(lock: &Lock, owner: &Owner, args: AttemptCall) -> Self {
        let announced = args.announce_ms > 0;
        let waiter = args.waiter.clone();
        let (script_lock, script_owner) = (lock.clone(), owner.clone());
        let call: Call = Box::pin(async move {
            let call = script_lock.acquire_call(
                script_owner.token(),
                args.lease_ms,
                &args.meta,
                args.announce_ms,
                &args.waiter,
            );
            script_lock.client.eval_cmd(&SCRIPTS.acquire, &call).await
        });
        InFlightAttempt {
            call: Some(call),
            lock: lock.clone(),
            owner: owner.clone(),
            waiter,
            announced,
            runtime: tokio::runtime::Handle::current(),
        }
    }
}

impl Future for InFlightAttempt {
    type Output = Reply;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Reply> {
        let call = self.call.as_mut().expect("polled after completion");
        let reply = std::task::ready!(call.as_mut().poll(cx));
        self.call = None;
        Poll::Ready(reply)
    }
}

impl Drop for InFlightAttempt {
    fn drop(&mut self) {
        let Some(call) = self.call.take() else {
            return;
        };
        let lock = self.lock.clone();
        let token = self.owner.token().to_owned();
        let waiter = std::mem::take(&mut self.waiter);
        let announced = self.announced;
        self.runtime.spawn(async move {
            let undone = match call.await {
                Ok(AttemptReply::Acquired { .. }) => undo_acquisition(&lock, &token).await,
                Ok(_) if announced => super::acquire::withdraw(&lock, &token, &waiter).await,
                Ok(_) => Ok(()),
                // No reply: nothing is known, and a hold it may have made ends with its lease.
                Err(e) => Err(e),
            };
            if let Err(error) = undone {
                tracing::warn!(
                    lock = %lock.keys.name,
                    %error,
                    "a cancelled acquire could not be undone; a hold it made ends with its lease"
                );
            }
        });
    }
}

/// Releases the one hold count a cancelled attempt added (works after close, like a withdrawal).
async fn undo_acquisition(lock: &Lock, token: &str) -> Result<()> {
    let call = lock.release_call(token);
    let mut connection = lock.client.connection_for_cleanup();
    let undo = eval_async(&mut connection, &SCRIPTS.release, &call);
    let left: i64 = super::acquire::tidy(lock, undo).await?;
    if left >= 0 {
        Ok(())
    } else {
        Err(Error::NotHeld)
    }
}
