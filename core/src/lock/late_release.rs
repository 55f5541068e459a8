//! A release whose caller stops waiting for it is heard out in the background.
//!
//! Once the script is on the wire, Redis may run it whatever becomes of the caller: the command
//! timeout ran out (a Redis that was only slow runs it late), or the caller's future was
//! dropped. Until its reply is in (or its patience ends), the release's mark stays on the
//! watchdog's tracking, so a renewal that finds the hold gone leaves the verdict to it, and
//! the owner's next calls on the name wait for it (`tidying`); the reply then counts as it
//! would have for the caller ([`Lock::released`]). Without this, a hold released late was
//! reported lost, and the owner's retry said `LockLost` instead of `NotHeld`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Sleep;

use super::calls::eval_async;
use super::scripts::SCRIPTS;
use super::{Lock, ReleaseReply};
use crate::direct::DirectConnection;
use crate::error::{Error, Result};
use crate::owner::Owner;
use crate::watchdog::CarriedMark;

type Reply = Result<ReleaseReply>;
type Call = Pin<Box<dyn Future<Output = Reply> + Send>>;

/// One release script call, heard out in the background if its caller stops waiting.
pub(super) struct InFlightRelease {
    call: Option<Call>,
    /// The command timeout, kept here rather than around the call so the call outlives it.
    deadline: Pin<Box<Sleep>>,
    timeout: Duration,
    hearing: Option<Hearing>,
}

/// What the reply's verdict needs once the caller has gone.
struct Hearing {
    lock: Lock,
    owner: Owner,
    mark: CarriedMark,
}

impl Hearing {
    /// How long a late reply is worth awaiting (the hold's lease is at most the watchdog's).
    fn patience(&self) -> Duration {
        let config = &self.lock.client.config;
        super::LocalLock::late_reply_patience(config, config.lease)
    }

    /// Takes the late reply as the caller would have; a release that never answered leaves
    /// the verdict to the watchdog, as before it started.
    fn hear(mut self, reply: Reply) {
        if let Ok(reply) = reply {
            let _ = self.lock.released(&self.owner, reply, &self.mark.resume());
        }
    }
}

impl InFlightRelease {
    /// Starts the call (sent on the first poll); `mark` is the release's watchdog mark.
    pub fn start(lock: &Lock, owner: &Owner, meant: Option<u64>, mark: CarriedMark) -> Self {
        let call = lock.release_call(owner.token(), meant);
        let ping_first = lock.pings_first();
        let client = lock.client.clone();
        let script = SCRIPTS.release(lock.mode);
        let call: Call = Box::pin(async move {
            client.ensure_open()?;
            let mut connection = client.hot_connection()?;
            let reply = eval_async(&mut connection, script, &call, ping_first).await;
            Ok(client.noted(reply)?)
        });
        let timeout = lock.client.config.command_timeout;
        InFlightRelease {
            call: Some(call),
            deadline: Box::pin(tokio::time::sleep(timeout)),
            timeout,
            hearing: Some(Hearing {
                lock: lock.clone(),
                owner: owner.clone(),
                mark,
            }),
        }
    }

    /// Leaves the call to a background task that awaits its reply and takes its verdict.
    fn abandon(&mut self) {
        let (Some(call), Some(hearing)) = (self.call.take(), self.hearing.take()) else {
            return;
        };
        // Taken now, before the caller hears of it: the owner's next call waits.
        let ticket = hearing.lock.tidy_ticket(hearing.owner.token());
        crate::background::spawn(async move {
            let reply = tokio::time::timeout(hearing.patience(), call).await;
            hearing.hear(reply.unwrap_or_else(|_| Err(Error::Connection("no reply".into()))));
            drop(ticket);
        });
    }
}

impl Future for InFlightRelease {
    type Output = Result<u32>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<u32>> {
        let this = &mut *self;
        let call = this.call.as_mut().expect("polled after completion");
        if let Poll::Ready(reply) = call.as_mut().poll(cx) {
            this.call = None;
            let mut hearing = this.hearing.take().expect("heard once");
            return Poll::Ready(reply.and_then(|reply| {
                (hearing.lock).released(&hearing.owner, reply, &hearing.mark.resume())
            }));
        }
        std::task::ready!(this.deadline.as_mut().poll(cx));
        this.abandon();
        Poll::Ready(Err(Error::no_answer(this.timeout)))
    }
}

impl Drop for InFlightRelease {
    fn drop(&mut self) {
        self.abandon();
    }
}

/// Hears out a blocking caller's direct release that timed out, on its connection, which
/// nothing else uses any more: its late reply is read there.
pub(super) fn hear_out_direct(
    mut connection: DirectConnection,
    lock: &Lock,
    owner: &Owner,
    mark: CarriedMark,
) {
    let hearing = Hearing {
        lock: lock.clone(),
        owner: owner.clone(),
        mark,
    };
    let ticket = lock.tidy_ticket(owner.token());
    crate::background::spawn(async move {
        let _ticket = ticket;
        let patience = hearing.patience();
        let late = tokio::task::spawn_blocking(move || connection.late(patience)).await;
        if let Ok(reply) = late {
            hearing.hear(reply.map_err(Error::from));
        }
    });
}
