//! Tidying-up calls still under way for an owner's ended acquires: the undo of an attempt its
//! caller gave up on (`in_flight`), the withdrawal of a cancelled waiter's announcement (which
//! also gives back a grant it did not hear of).
//!
//! Guarantee: an owner's next acquire, release, extend or hold count of the name, through this
//! client, reaches Redis after them. Until they are done Redis may still show what the ended call did:
//! without the wait, a cancelled read made its owner's next write an upgrade
//! (`UpgradeNotAllowed`), and a cancelled write made the next one a re-entry. A tidy-up that
//! takes longer than the command timeout fails that next call with `Connection` (Redis is not
//! answering) rather than let it meet the leftover.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::LocalLock;
use crate::error::{Error, Result};

/// One name's tidy-ups under way, by owner token.
pub(crate) struct Tidying {
    /// All of them, for every owner: the common case (none) costs one load.
    under_way: AtomicUsize,
    by_owner: Mutex<HashMap<String, usize>>,
    /// Both kinds of waiter are told when one ends: async calls and blocking releases.
    ended: Notify,
    ended_blocking: Condvar,
    /// The client's count, which these are part of.
    client: Arc<ClientTidyUps>,
}

impl Tidying {
    pub(crate) fn new(client: Arc<ClientTidyUps>) -> Self {
        Tidying {
            under_way: AtomicUsize::new(0),
            by_owner: Mutex::default(),
            ended: Notify::new(),
            ended_blocking: Condvar::new(),
            client,
        }
    }
}

/// The tidy-ups under way in a whole client: after close, its command connection is closed
/// once none is left (see `keepalive`).
#[derive(Default)]
pub(crate) struct ClientTidyUps {
    under_way: AtomicUsize,
    ended: Notify,
}

impl ClientTidyUps {
    /// Resolves once no tidy-up is under way.
    pub(crate) async fn none_left(&self) {
        loop {
            let ended = self.ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if self.under_way.load(Ordering::SeqCst) == 0 {
                return;
            }
            ended.await;
        }
    }

    /// Counts work that may need the command connection after close (a tidy-up, a blocking
    /// caller's attempt on its own socket) as under way while the guard lives.
    pub(crate) fn under_way(self: &Arc<Self>) -> UnderWay {
        self.under_way.fetch_add(1, Ordering::SeqCst);
        UnderWay(self.clone())
    }
}

/// See [`ClientTidyUps::under_way`].
pub(crate) struct UnderWay(Arc<ClientTidyUps>);

impl Drop for UnderWay {
    fn drop(&mut self) {
        if self.0.under_way.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.ended.notify_waiters();
        }
    }
}

/// Held by one tidy-up while it runs; dropping it ends it.
pub(crate) struct TidyTicket {
    local: Arc<LocalLock>,
    token: String,
    /// The client's count (dropped after the name's, in `Drop`).
    _client: UnderWay,
}

impl TidyTicket {
    pub(crate) fn new(local: &Arc<LocalLock>, token: &str) -> Self {
        let tidying = &local.tidying;
        *tidying
            .by_owner
            .lock()
            .unwrap()
            .entry(token.to_owned())
            .or_default() += 1;
        tidying.under_way.fetch_add(1, Ordering::SeqCst);
        TidyTicket {
            local: local.clone(),
            token: token.to_owned(),
            _client: tidying.client.under_way(),
        }
    }
}

impl Drop for TidyTicket {
    fn drop(&mut self) {
        let tidying = &self.local.tidying;
        {
            let mut by_owner = tidying.by_owner.lock().unwrap();
            if let Some(left) = by_owner.get_mut(&self.token) {
                *left -= 1;
                if *left == 0 {
                    by_owner.remove(&self.token);
                }
            }
            tidying.under_way.fetch_sub(1, Ordering::SeqCst);
        }
        tidying.ended.notify_waiters();
        tidying.ended_blocking.notify_all();
    }
}

impl Tidying {
    fn pending(&self, token: &str) -> bool {
        self.by_owner.lock().unwrap().contains_key(token)
    }

    /// Waits until no tidy-up of `token` is under way, at most `limit`.
    pub(crate) async fn settled(&self, token: &str, limit: Duration) -> Result<()> {
        if self.under_way.load(Ordering::SeqCst) == 0 {
            return Ok(());
        }
        // A limit too long to count waits as long as it takes.
        let deadline = tokio::time::Instant::now().checked_add(limit);
        loop {
            let ended = self.ended.notified();
            tokio::pin!(ended);
            // Registered before the check, so an end in between is not missed.
            ended.as_mut().enable();
            if !self.pending(token) {
                return Ok(());
            }
            let Some(deadline) = deadline else {
                ended.await;
                continue;
            };
            if tokio::time::timeout_at(deadline, ended).await.is_err() {
                return Err(Error::no_answer(limit));
            }
        }
    }

    /// [`settled`](Self::settled) for a blocking caller's thread.
    pub(crate) fn settled_blocking(&self, token: &str, limit: Duration) -> Result<()> {
        if self.under_way.load(Ordering::SeqCst) == 0 {
            return Ok(());
        }
        let deadline = Instant::now().checked_add(limit);
        let mut by_owner = self.by_owner.lock().unwrap();
        while by_owner.contains_key(token) {
            let Some(deadline) = deadline else {
                by_owner = self.ended_blocking.wait(by_owner).unwrap();
                continue;
            };
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::no_answer(limit));
            }
            by_owner = self.ended_blocking.wait_timeout(by_owner, left).unwrap().0;
        }
        Ok(())
    }
}
