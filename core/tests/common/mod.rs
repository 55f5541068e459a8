//! Shared set-up for the integration tests: a throwaway redis-server and clients on it.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use redlock_core::testing::RedisServer;
use redlock_core::{Client, ClientBuilder, LockLostEvent};

pub const SHORT: Option<Duration> = Some(Duration::from_millis(200));
pub const NOW: Option<Duration> = Some(Duration::ZERO);

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Asserts that a raw reply of [`RedisServer::command`] is `+OK`.
pub fn ok(reply: String) {
    assert!(reply.starts_with("+OK"), "{reply}");
}

pub async fn connect(server: &RedisServer) -> Client {
    Client::connect(&server.url()).await.expect("connect")
}

pub fn builder(server: &RedisServer) -> ClientBuilder {
    Client::builder(server.url())
}

/// A client whose waiters re-check only once a minute: within a test, only a grant or a
/// pub/sub message can wake them.
pub async fn connect_without_rechecks(server: &RedisServer) -> Client {
    builder(server)
        .recheck_interval(Duration::from_secs(60))
        .connect()
        .await
        .expect("connect")
}

/// The ids of the server's connections of one type (`normal`, `pubsub`), or of all; the
/// connection asking is left out.
pub fn connection_ids(server: &RedisServer, kind: Option<&str>) -> Vec<String> {
    let list = match kind {
        Some(kind) => server.command(&["CLIENT", "LIST", "TYPE", kind]),
        None => server.command(&["CLIENT", "LIST"]),
    };
    list.lines()
        .filter(|line| !line.contains("cmd=client|list"))
        .filter_map(|line| line.split_whitespace().next()?.strip_prefix("id="))
        .map(str::to_owned)
        .collect()
}

/// Every key the locks left in Redis, except the per-slot fencing counters (which stay by design).
pub fn lock_keys(server: &RedisServer) -> Vec<String> {
    let reply = server.command(&["KEYS", "*"]);
    reply
        .lines()
        .filter(|l| !l.starts_with('*') && !l.starts_with('$'))
        .filter(|k| !k.contains(":fence:"))
        .map(str::to_owned)
        .collect()
}

/// Channels of lock `name` subscribed on the server: its wake-up channel and grant channels.
pub fn channels_of(server: &RedisServer, name: &str) -> usize {
    let reply = server.command(&["PUBSUB", "CHANNELS", &format!("*{{{name}}}*")]);
    let count = reply.strip_prefix('*').and_then(|r| r.split("\r\n").next());
    count.and_then(|c| c.parse().ok()).unwrap_or(0)
}

/// A client with this default (watchdog) lease that records every lock-lost event it reports.
pub async fn recording_losses(
    server: &RedisServer,
    lease: Duration,
) -> (Client, Arc<Mutex<Vec<LockLostEvent>>>) {
    recording_losses_of(builder(server).lease(lease)).await
}

/// The client of `builder`, recording every lock-lost event it reports.
pub async fn recording_losses_of(
    builder: redlock_core::ClientBuilder,
) -> (Client, Arc<Mutex<Vec<LockLostEvent>>>) {
    let events: Arc<Mutex<Vec<LockLostEvent>>> = Arc::default();
    let seen = events.clone();
    let client = builder
        .on_lock_lost(move |e| seen.lock().unwrap().push(e.clone()))
        .connect()
        .await
        .unwrap();
    (client, events)
}

/// Runs a test body with a hard limit of `secs`: a hang is a failure.
pub async fn limited(secs: u64, body: impl std::future::Future<Output = ()>) {
    tokio::time::timeout(Duration::from_secs(secs), body)
        .await
        .expect("the test hung");
}
