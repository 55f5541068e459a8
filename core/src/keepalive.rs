//! A `PING` on the command connection every `ping_interval` (default 30 s, as Redisson's
//! `pingConnectionInterval`).
//!
//! Servers close clients idle past their `timeout` (managed services do so after minutes), and
//! a restart closes every connection. redis-rs' connection manager notices a closed connection
//! only when a call fails on it (it then reconnects in the background), so without this the
//! first call after a quiet spell would be that call. With it, the connection stays in use, and
//! one that a restart closed is replaced within an interval: a client left idle that long
//! fails no call. (The direct connections are looked at before each use instead, and the
//! pub/sub connection has its own check: see `direct` and `pubsub`.)

use std::sync::Weak;
use std::time::Duration;

use crate::client::ClientInner;

pub(crate) async fn run(client: Weak<ClientInner>, interval: Duration) {
    let Some(shutdown) = client.upgrade().map(|c| c.shutdown.clone()) else {
        return;
    };
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
        let Some(inner) = client.upgrade() else {
            return;
        };
        let (mut connection, timeout) = (inner.command_connection(), inner.config.command_timeout);
        drop(inner); // the client may go while the PING is out
        // A failure needs nothing more: the manager reconnects on it.
        let ping = redis::cmd("PING");
        let _ = tokio::time::timeout(timeout, ping.query_async::<()>(&mut connection)).await;
    }
}
