//! One pub/sub connection per client, shared by every waiter of every lock.
//!
//! Guarantees: a [`Subscription`] returned by [`PubSubHub::subscribe`] is confirmed by Redis unless
//! the connection is down, so a release published after an armed wake-up is never missed while
//! connected. Messages lost to a reconnect are covered by waking every waiter after resubscribing
//! (and, underneath, by the waiters' bounded re-check). Channels stay subscribed for a linger time
//! after their last waiter leaves, so steady contention costs no SUBSCRIBE/UNSUBSCRIBE traffic.
//!
//! A release that grants the lock to a waiting writer publishes `g:FENCE:WAITER` on the lock's
//! *grant channel of the waiter's client* (the lock's channel plus `:CLIENT`, the start of every
//! waiter id of this client), which only this client subscribes to beside the lock's channel.
//! Redis counts who hears it: a grant nobody hears (the client is gone, or its pub/sub
//! connection is down) is not made. The hub keeps grants until the waiter takes them. A blocking
//! waiter may find its grant in the socket before the hub's task reads it there ([`socket`]);
//! each grant is handed out once, whichever reads it first.

use std::collections::HashMap;
use std::fmt::{self, Write};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use tokio::sync::{Notify, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

mod socket;
use socket::SocketWatch;
pub(crate) use socket::WatchedSocket;

pub(crate) struct PubSubHub {
    redis: redis::Client,
    /// Random, so ids never repeat across clients: every waiter id of this client is
    /// `CLIENT-SEQ:TOKEN`, and its grants arrive on a lock's channel plus `:CLIENT`.
    client: Box<str>,
    /// `:CLIENT`: a lock's channel plus this is where grants to this client's waiters arrive.
    grant_suffix: Arc<str>,
    waiter_seq: AtomicU64,
    shared: Arc<Shared>,
    /// The connection task's requests; its task runs on the runtime of the first caller that
    /// waits (see `commands`).
    commands: Mutex<Option<mpsc::UnboundedSender<String>>>,
    shutdown: CancellationToken,
    connect_timeout: Duration,
    command_timeout: Duration,
    linger: Duration,
}

#[derive(Default)]
struct Shared {
    channels: Mutex<HashMap<String, ChannelState>>,
    socket: SocketWatch,
}

/// Wakes a channel's waiters for a release, or hands out a grant to one of this client's
/// waiters. `early` (a waiter read the message in the socket, still unread): grants only.
/// `arrived`: the earliest the message could have come (a grant's hold is about that old).
fn dispatch(
    channels: &HashMap<String, ChannelState>,
    grant_suffix: &str,
    name: &str,
    payload: &[u8],
    early: bool,
    arrived: Instant,
) {
    if let Some(state) = channels.get(name) {
        if !early {
            state.signal.fire();
        }
        return;
    }
    let Some(state) = name
        .strip_suffix(grant_suffix)
        .and_then(|lock_channel| channels.get(lock_channel))
    else {
        return;
    };
    let grant = payload.strip_prefix(b"g:").and_then(|g| {
        let (fence, waiter) = std::str::from_utf8(g).ok()?.split_once(':')?;
        Some((fence.parse::<u64>().ok()?, waiter))
    });
    match grant {
        Some((fence, waiter)) => state.signal.grant(waiter, fence, early, arrived),
        // Not a grant we understand: let the waiters look for themselves.
        None if !early => state.signal.fire(),
        None => {}
    }
}

/// Wake-ups of one channel, how many messages (or reconnects) it has seen, and the grants to
/// this client's waiters that they have not taken yet.
#[derive(Default)]
pub(crate) struct Signal {
    notify: Arc<Notify>,
    messages: AtomicU64,
    reconnects: AtomicU64,
    grants: Mutex<Grants>,
}

/// Grants to this client's waiters: those not taken yet, and those handed out early by a
/// waiter that read them in the socket (see [`WatchedSocket::grant_early`]) before the
/// connection task read them there.
#[derive(Default)]
struct Grants {
    /// With the earliest each could have arrived: the hold's lease ran from about then.
    untaken: HashMap<String, (u64, Instant)>,
    early: HashMap<String, u64>,
}

impl Signal {
    fn fire(&self) {
        self.messages.fetch_add(1, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    /// A grant read by the connection task (`early`: by a waiter in the socket, still unread).
    /// Each grant is handed out once: the task's reading of an early one is dropped.
    fn grant(&self, waiter: &str, fence: u64, early: bool, arrived: Instant) {
        let mut grants = self.grants.lock().unwrap();
        if early {
            // A message still unread may be looked at again.
            if grants.early.get(waiter) == Some(&fence) {
                return;
            }
            if grants.early.len() >= MAX_UNTAKEN_GRANTS {
                grants.early.clear();
            }
            grants.early.insert(waiter.to_owned(), fence);
        } else if grants.early.get(waiter) == Some(&fence) {
            grants.early.remove(waiter);
            return;
        }
        // Grants whose waiter left before taking them are bounded (the waiter also removes its own).
        if grants.untaken.len() >= MAX_UNTAKEN_GRANTS {
            grants.untaken.clear();
        }
        grants.untaken.insert(waiter.to_owned(), (fence, arrived));
        drop(grants);
        self.fire();
    }
}

/// Channels asked for at once in one SUBSCRIBE, at most (two names each with its grant channel).
const SUBSCRIBE_BATCH: usize = 256;

/// Untaken grants kept per channel; a waiter whose grant is dropped finds it at its next attempt.
const MAX_UNTAKEN_GRANTS: usize = 4096;

struct ChannelState {
    signal: Arc<Signal>,
    users: usize,
    confirmed: bool,
    idle_since: Option<Instant>,
    waiting_for_confirmation: Vec<oneshot::Sender<()>>,
}

/// A waiter's interest in one channel; dropping it lets the channel linger, then unsubscribe.
pub(crate) struct Subscription {
    channel: String,
    signal: Arc<Signal>,
    shared: Arc<Shared>,
}

/// A wake-up registered before an attempt, so a release between the attempt and the wait counts.
pub(crate) type WakeUp = Pin<Box<tokio::sync::futures::OwnedNotified>>;

impl Subscription {
    pub(crate) fn arm(&self) -> WakeUp {
        let mut wake = Box::pin(self.signal.notify.clone().notified_owned());
        wake.as_mut().enable();
        wake
    }

    /// Messages seen on the channel so far (reconnects count too: messages may have been lost).
    pub(crate) fn messages(&self) -> u64 {
        self.signal.messages.load(Ordering::SeqCst)
    }

    /// Reconnects of the pub/sub connection so far (a grant may have been lost in each).
    pub(crate) fn reconnects(&self) -> u64 {
        self.signal.reconnects.load(Ordering::SeqCst)
    }

    /// The fencing token of a grant to `waiter`, taken (only once) if it arrived, and the
    /// earliest it could have arrived.
    pub(crate) fn take_grant(&self, waiter: &str) -> Option<(u64, tokio::time::Instant)> {
        let (fence, read) = self.signal.grants.lock().unwrap().untaken.remove(waiter)?;
        Some((fence, tokio::time::Instant::from_std(read)))
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut channels = self.shared.channels.lock().unwrap();
        if let Some(state) = channels.get_mut(&self.channel) {
            state.users -= 1;
            if state.users == 0 {
                state.idle_since = Some(Instant::now());
            }
        }
    }
}

impl PubSubHub {
    pub(crate) fn new(
        redis: redis::Client,
        shutdown: CancellationToken,
        (connect_timeout, command_timeout): (Duration, Duration),
        linger: Duration,
    ) -> Self {
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        PubSubHub {
            redis,
            client: nonce[..12].into(),
            grant_suffix: format!(":{}", &nonce[..12]).into(),
            waiter_seq: AtomicU64::new(0),
            shared: Arc::default(),
            commands: Mutex::default(),
            shutdown,
            connect_timeout,
            command_timeout,
            linger,
        }
    }

    /// This client's id, the first part of its waiter ids.
    pub(crate) fn client_id(&self) -> &str {
        &self.client
    }

    /// A waiter id for one acquire call of `token`: `CLIENT-SEQ:TOKEN`, unique, so that a grant
    /// names exactly one waiting call even when several wait with the same owner token.
    pub(crate) fn waiter_id(&self, token: &str) -> String {
        let seq = self.waiter_seq.fetch_add(1, Ordering::Relaxed);
        let mut id = String::with_capacity(self.client.len() + 22 + token.len());
        let _ = write!(id, "{}-{seq}:", self.client);
        id.push_str(token);
        id
    }

    /// A subscription only if the channel is already confirmed (no Redis traffic, no waiting).
    /// Without any subscription (the uncontended case) the channel's name is not even written.
    pub(crate) fn active(&self, channel: impl fmt::Display) -> Option<Subscription> {
        if self.shared.channels.lock().unwrap().is_empty() {
            return None; // the uncontended case: one lock, nothing else
        }
        // Not under the channels' lock: `commands` takes the two the other way round.
        if self.task_ended() {
            return None;
        }
        let mut channels = self.shared.channels.lock().unwrap();
        let channel = channel.to_string();
        let state = channels.get_mut(&channel).filter(|s| s.confirmed)?;
        state.users += 1;
        state.idle_since = None;
        Some(self.subscription(&channel, state))
    }

    /// Subscribes (or joins an existing subscription) and waits up to `limit` for Redis to confirm.
    /// Past the limit the subscription still works once the connection is back; until then the
    /// waiter relies on its re-check.
    pub(crate) async fn subscribe(&self, channel: &str, limit: Duration) -> Subscription {
        let commands = self.commands();
        let (subscription, confirmation) = {
            let mut channels = self.shared.channels.lock().unwrap();
            let fresh = !channels.contains_key(channel);
            let state = channels
                .entry(channel.to_owned())
                .or_insert_with(|| ChannelState {
                    signal: Arc::default(),
                    users: 0,
                    confirmed: false,
                    idle_since: None,
                    waiting_for_confirmation: Vec::new(),
                });
            state.users += 1;
            state.idle_since = None;
            let confirmation = (!state.confirmed).then(|| {
                let (tx, rx) = oneshot::channel();
                state.waiting_for_confirmation.push(tx);
                rx
            });
            if fresh {
                let _ = commands.send(channel.to_owned());
            }
            (self.subscription(channel, state), confirmation)
        };
        if let Some(rx) = confirmation {
            let _ = tokio::time::timeout(limit, rx).await;
        }
        subscription
    }

    /// The right to watch this client's pub/sub socket, unless another waiter has it.
    pub(crate) fn watch_socket(&self) -> Option<WatchedSocket> {
        let taken = &self.shared.socket.taken;
        (!taken.swap(true, Ordering::AcqRel)).then(|| WatchedSocket {
            shared: self.shared.clone(),
            grant_suffix: self.grant_suffix.clone(),
        })
    }

    fn subscription(&self, channel: &str, state: &ChannelState) -> Subscription {
        Subscription {
            channel: channel.to_owned(),
            signal: state.signal.clone(),
            shared: self.shared.clone(),
        }
    }

    /// Whether the connection task is gone while the client is open: it ran on a caller's
    /// runtime that has ended (dropped with its tasks), and its connection with it.
    fn task_ended(&self) -> bool {
        let commands = self.commands.lock().unwrap();
        commands.as_ref().is_some_and(|tx| tx.is_closed()) && !self.shutdown.is_cancelled()
    }

    /// The connection task's requests, the task started if there is none (or it ended).
    ///
    /// The task runs on the runtime of the caller that waits first, not the library's: a grant
    /// read there wakes a waiter of that runtime without another thread's wake-up (about 25 µs
    /// of a hand-off on this project's bench machine). Should that runtime end, the next wait
    /// starts the task again on its own runtime, and the new connection subscribes every
    /// channel still wanted. (A runtime kept busy, or not driven, delays the wake-ups of the
    /// waiters that rely on it; their re-checks bound the delay.)
    fn commands(&self) -> mpsc::UnboundedSender<String> {
        let mut commands = self.commands.lock().unwrap();
        if let Some(tx) = commands.as_ref() {
            if !tx.is_closed() || self.shutdown.is_cancelled() {
                return tx.clone();
            }
            // Its connection went with it: nothing is confirmed until the new one subscribes.
            for state in self.shared.channels.lock().unwrap().values_mut() {
                state.confirmed = false;
            }
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let task = HubTask {
            redis: self.redis.clone(),
            grant_suffix: self.grant_suffix.clone(),
            shared: self.shared.clone(),
            shutdown: self.shutdown.clone(),
            connect_timeout: self.connect_timeout,
            command_timeout: self.command_timeout,
            linger: self.linger,
            refusal_logged: Default::default(),
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn(task.run(rx))),
            Err(_) => drop(crate::background::spawn(task.run(rx))),
        }
        *commands = Some(tx.clone());
        tx
    }
}

struct HubTask {
    redis: redis::Client,
    /// `:CLIENT`: a lock's channel plus this is where grants to this client's waiters arrive.
    grant_suffix: Arc<str>,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
    connect_timeout: Duration,
    command_timeout: Duration,
    linger: Duration,
    /// Whether a refusal by Redis (not a network failure) was logged as a warning yet.
    refusal_logged: std::sync::atomic::AtomicBool,
}

enum Disconnect {
    Shutdown,
    Lost,
}

impl HubTask {
    async fn run(self, mut subscribe_requests: mpsc::UnboundedReceiver<String>) {
        let mut backoff = Duration::from_millis(50);
        loop {
            let connected = tokio::select! {
                _ = self.shutdown.cancelled() => return,
                c = tokio::time::timeout(self.connect_timeout, socket::connect(&self.redis, &self.shared)) => c,
            };
            match connected {
                Ok(Ok(pubsub)) => {
                    backoff = Duration::from_millis(50);
                    match self.serve(pubsub, &mut subscribe_requests).await {
                        Disconnect::Shutdown => return,
                        Disconnect::Lost => self.mark_unconfirmed(),
                    }
                }
                Ok(Err(err)) => tracing::debug!(%err, "pub/sub connection failed; retrying"),
                Err(_) => tracing::debug!("pub/sub connection timed out; retrying"),
            }
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                _ = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(Duration::from_secs(1));
        }
    }

    async fn serve(
        &self,
        pubsub: redis::aio::PubSub,
        requests: &mut mpsc::UnboundedReceiver<String>,
    ) -> Disconnect {
        let (mut sink, mut stream) = pubsub.split();
        let known: Vec<String> = self
            .shared
            .channels
            .lock()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        if !known.is_empty() {
            if let Err(gone) = self.bounded(sink.subscribe(self.with_grants(&known))).await {
                return gone;
            }
            // Messages may have been missed while disconnected (or while a subscribe's time
            // limit had passed): the waiters already past their subscribe re-check now. Before
            // the confirmation, so that those it lets go on (they attempt next anyway) are not
            // woken into a second attempt that a grant to them would make needless.
            for state in self.shared.channels.lock().unwrap().values() {
                state.signal.reconnects.fetch_add(1, Ordering::SeqCst);
                state.signal.fire();
            }
            self.confirm(&known);
        }
        let mut sweep = tokio::time::interval(self.linger.max(Duration::from_millis(100)) / 2);
        loop {
            tokio::select! {
                _ = self.shutdown.cancelled() => return Disconnect::Shutdown,
                message = stream.next() => match message {
                    Some(msg) => {
                        self.dispatch(&msg);
                        // After the wake-ups: a socket watcher seeing this knows whether it was one.
                        self.shared.socket.dispatched.fetch_add(1, Ordering::AcqRel);
                    }
                    None => return Disconnect::Lost,
                },
                request = requests.recv() => {
                    let Some(first) = request else { return Disconnect::Shutdown };
                    // With those queued behind it, in one SUBSCRIBE: thousands of names waited
                    // on at once cost a few round trips, not one each.
                    let mut wanted = vec![first];
                    while wanted.len() < SUBSCRIBE_BATCH {
                        match requests.try_recv() {
                            Ok(channel) => wanted.push(channel),
                            Err(_) => break,
                        }
                    }
                    // Not those subscribed already (with the channels known at connect), nor
                    // those nobody wants any more: their waiters left while the request queued
                    // and the sweep dropped them; subscribed now, they would stay so for good.
                    // (A channel still wanted that a failure below leaves unsubscribed is
                    // subscribed with the others at the next connect.)
                    let wanted = self.wanted(wanted);
                    if wanted.is_empty() {
                        continue;
                    }
                    if let Err(gone) = self.bounded(sink.subscribe(self.with_grants(&wanted))).await {
                        return gone;
                    }
                    self.confirm(&wanted);
                }
                _ = sweep.tick() => {
                    let idle = self.take_idle();
                    if !idle.is_empty() {
                        if let Err(gone) = self.bounded(sink.unsubscribe(self.with_grants(&idle))).await {
                            return gone;
                        }
                    }
                }
            }
        }
    }

    /// A (un)subscribe, bounded like every command: a connection that does not answer in time
    /// is given up, and a new one subscribes again; and it never holds up a shutdown.
    async fn bounded(
        &self,
        call: impl Future<Output = redis::RedisResult<()>>,
    ) -> Result<(), Disconnect> {
        tokio::select! {
            _ = self.shutdown.cancelled() => Err(Disconnect::Shutdown),
            done = tokio::time::timeout(self.command_timeout, call) => match done {
                Ok(Ok(())) => Ok(()),
                Ok(Err(err)) => {
                    // Refused (an ACL user without pub/sub rights): this will not pass by
                    // itself, so it is said once at warning level. Waiters still get the lock,
                    // by their re-checks alone.
                    let refused = err.code().is_some();
                    if refused && !self.refusal_logged.swap(true, Ordering::Relaxed) {
                        tracing::warn!(%err, "Redis refused a pub/sub command: waiters fall back \
                            to re-checking every recheck interval; retrying");
                    } else {
                        tracing::debug!(%err, "pub/sub command failed; reconnecting");
                    }
                    if refused {
                        // No confirmation is coming: the waiters go on to their re-checks now
                        // rather than at the end of their subscribe's time limit.
                        let mut channels = self.shared.channels.lock().unwrap();
                        for state in channels.values_mut() {
                            state.waiting_for_confirmation.clear();
                        }
                    }
                    Err(Disconnect::Lost)
                }
                Err(_) => {
                    tracing::debug!("pub/sub command got no answer in time; reconnecting");
                    Err(Disconnect::Lost)
                }
            },
        }
    }

    /// Each lock channel followed by its grant channel for this client.
    fn with_grants(&self, channels: &[String]) -> Vec<String> {
        channels
            .iter()
            .flat_map(|c| [c.clone(), format!("{c}{}", self.grant_suffix)])
            .collect()
    }

    fn dispatch(&self, msg: &redis::Msg) {
        let (name, payload) = (msg.get_channel_name(), msg.get_payload_bytes());
        let arrived = self.shared.socket.arrived_after();
        let channels = self.shared.channels.lock().unwrap();
        dispatch(&channels, &self.grant_suffix, name, payload, false, arrived);
    }

    /// Those of `channels` that are wanted and not subscribed yet on this connection, once each.
    fn wanted(&self, mut channels: Vec<String>) -> Vec<String> {
        channels.sort_unstable();
        channels.dedup();
        let map = self.shared.channels.lock().unwrap();
        channels.retain(|c| map.get(c).is_some_and(|state| !state.confirmed));
        channels
    }

    fn confirm(&self, channels: &[String]) {
        let mut map = self.shared.channels.lock().unwrap();
        for channel in channels {
            if let Some(state) = map.get_mut(channel) {
                state.confirmed = true;
                for tx in state.waiting_for_confirmation.drain(..) {
                    let _ = tx.send(());
                }
            }
        }
    }

    fn mark_unconfirmed(&self) {
        for state in self.shared.channels.lock().unwrap().values_mut() {
            state.confirmed = false;
        }
    }

    fn take_idle(&self) -> Vec<String> {
        let mut map = self.shared.channels.lock().unwrap();
        let linger = self.linger;
        let idle: Vec<String> = map
            .iter()
            .filter(|(_, s)| s.users == 0 && s.idle_since.is_some_and(|t| t.elapsed() >= linger))
            .map(|(c, _)| c.clone())
            .collect();
        for channel in &idle {
            map.remove(channel);
        }
        idle
    }
}

#[cfg(test)]
mod tests;
