//! The command connection's keeper: a `PING` every `ping_interval` (default 30 s, as Redisson's
//! `pingConnectionInterval`) while the client is open, and the connection closed after close.
//!
//! Servers close clients idle past their `timeout` (managed services do so after minutes), and
//! a restart closes every connection. redis-rs' connection manager notices a closed connection
//! only when a call fails on it (it then reconnects in the background), so without the pings
//! the first call after a quiet spell would be that call. With them, the connection stays in
//! use, and one that a restart closed is replaced within an interval: a client left idle that
//! long fails no call. (The direct connections are looked at before each use instead, and the
//! pub/sub connection has its own check: see `direct` and `pubsub`.)
//!
//! After close, the tidy-ups under way (an abandoned attempt undone once its late reply is in, a
//! waiter's grant given back) may still need the connection: it is closed as soon as none is
//! left, so a program that opens and closes clients does not keep their sockets until the last
//! handle of each is dropped. (Each tidy-up is bounded by its own patience.)

use std::sync::Weak;
use std::time::Duration;

use crate::client::ClientInner;

/// How long after close the tidy-ups it sets off have to begin.
const SETTLE: Duration = Duration::from_millis(50);

pub(crate) async fn run(client: Weak<ClientInner>, interval: Option<Duration>) {
    let Some((shutdown, tidy_ups)) = client
        .upgrade()
        .map(|c| (c.shutdown.clone(), c.tidy_ups.clone()))
    else {
        return;
    };
    loop {
        let tick = async {
            match interval {
                Some(interval) => tokio::time::sleep(interval).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tick => {}
        }
        let Some(inner) = client.upgrade() else {
            return;
        };
        let (Ok(mut connection), timeout) =
            (inner.command_connection(), inner.config.command_timeout)
        else {
            return;
        };
        drop(inner); // the client may go while the PING is out
        // A failure needs nothing more: the manager reconnects on it (or is remade, when its
        // reconnect was refused).
        let ping = redis::cmd("PING");
        let pinged = tokio::time::timeout(timeout, ping.query_async::<()>(&mut connection)).await;
        if let (Ok(reply), Some(inner)) = (pinged, client.upgrade()) {
            let _ = inner.noted(reply);
        }
    }
    // The waiters close woke give up their attempts as they run: let them first.
    tokio::time::sleep(SETTLE).await;
    tidy_ups.none_left().await;
    if let Some(inner) = client.upgrade() {
        inner.drop_command_connection();
    }
}
