//! Async acquire attempts and releases run on direct connections of their own once one is open
//! (`direct::hot`): one per sequential caller, a few at most, reused only in step, replaced
//! after a restart, none over TLS or after close, and never a new way for a call to fail.

mod common;

use std::time::{Duration, Instant};

use common::*;
use redlock_core::{Client, ErrorKind, Lock, Owner};

const LEASE: Option<Duration> = Some(Duration::from_secs(10));

/// `n` acquire+release cycles, each checked.
async fn cycles(lock: &Lock, owner: &Owner, n: usize) {
    for _ in 0..n {
        let hold = lock.acquire(owner, NOW, LEASE).await.unwrap();
        assert_eq!(hold.hold_count(), 1);
        assert_eq!(lock.release(owner).await.unwrap(), 0);
    }
}

/// `tasks` tasks at once, each running `n` cycles on a lock of its own.
async fn cycles_in_tasks(client: &Client, name: &str, tasks: usize, n: usize) {
    let mut running = Vec::new();
    for task in 0..tasks {
        let lock = client.lock(&format!("{name}-{task}")).unwrap();
        running.push(tokio::spawn(async move {
            cycles(&lock, &Owner::random(), n).await;
        }));
    }
    for task in running {
        task.await.unwrap();
    }
}

/// Waits up to 5 s for `client` to have `n` idle direct connections.
async fn idle_becomes(client: &Client, n: usize) {
    let started = Instant::now();
    while client.hot_connections_idle() != n {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{} idle direct connections, not {n}",
            client.hot_connections_idle()
        );
        tokio::time::sleep(ms(5)).await;
    }
}

/// Normal (not pub/sub) connections the server has, the one asking left out.
fn normal_connections(server: &RedisServer) -> usize {
    connection_ids(server, Some("normal")).len()
}

/// Connections of `kind` the server has that were not in `before`.
fn ids_since(server: &RedisServer, kind: Option<&str>, before: &[String]) -> Vec<String> {
    let now = connection_ids(server, kind);
    now.into_iter().filter(|id| !before.contains(id)).collect()
}

/// Kills the one direct connection opened since `before` (as the server's idle `timeout` would
/// close it) and returns its id.
fn kill_the_direct_connection(server: &RedisServer, before: &[String]) -> String {
    let direct = ids_since(server, Some("normal"), before);
    assert_eq!(direct.len(), 1, "{direct:?}");
    let killed = server.command(&["CLIENT", "KILL", "ID", &direct[0]]);
    assert!(killed.starts_with(":1"), "{killed}");
    direct[0].clone()
}

/// A client with one direct connection open and idle, and a lock on it.
async fn warmed_up(server: &RedisServer, name: &str) -> (Client, Lock) {
    let client = connect(server).await;
    let lock = client.lock(name).unwrap();
    cycles(&lock, &Owner::random(), 2).await;
    idle_becomes(&client, 1).await;
    (client, lock)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sequential_caller_gets_one_direct_connection() {
    let server = RedisServer::start();
    let client = connect(&server).await;
    let before = normal_connections(&server);
    let lock = client.lock("hot").unwrap();
    let owner = Owner::random();
    // The first call finds none idle: it goes to the multiplexed connection and one is opened.
    cycles(&lock, &owner, 1).await;
    idle_becomes(&client, 1).await;
    cycles(&lock, &owner, 50).await;
    assert_eq!(client.hot_connections_idle(), 1);
    assert_eq!(normal_connections(&server), before + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_callers_share_at_most_four_direct_connections() {
    let server = RedisServer::start();
    let client = connect(&server).await;
    let before = normal_connections(&server);
    cycles_in_tasks(&client, "hot", 16, 100).await;
    let idle = client.hot_connections_idle();
    assert!((1..=4).contains(&idle), "{idle} idle direct connections");
    assert!(normal_connections(&server) <= before + 4);
}

/// `direct_connections(n)` caps them; 0 keeps every call on the multiplexed connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_setting_caps_direct_connections() {
    let server = RedisServer::start();
    for max in [0, 1] {
        let client = builder(&server)
            .direct_connections(max)
            .connect()
            .await
            .unwrap();
        let before = normal_connections(&server);
        cycles_in_tasks(&client, &format!("capped-{max}"), 8, 50).await;
        if max > 0 {
            idle_becomes(&client, max).await;
        }
        assert_eq!(client.hot_connections_idle(), max);
        assert_eq!(normal_connections(&server), before + max);
        client.close();
    }
}

/// A release dropped while its reply is on its way (its caller's timeout) must not leave that
/// reply to the next call on the same connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_cut_off_mid_call_leaves_no_reply_behind() {
    let server = RedisServer::start();
    let (client, lock) = warmed_up(&server, "cut-release").await;
    let (first, next) = (Owner::random(), Owner::random());
    let hold = lock.acquire(&first, NOW, LEASE).await.unwrap();
    let stall = server.stall(ms(400));
    let cut = tokio::time::timeout(ms(100), lock.release(&first)).await;
    assert!(cut.is_err(), "the release waits behind the stall");
    assert_eq!(
        client.hot_connections_idle(),
        0,
        "its connection is not reused"
    );
    stall.join().unwrap();
    // The server still ran the release it had been sent.
    let started = Instant::now();
    while lock.is_locked().await.unwrap() {
        assert!(started.elapsed() < Duration::from_secs(5), "still locked");
        tokio::time::sleep(ms(5)).await;
    }
    // Every later call hears its own reply (a reused connection would hand the next acquire
    // the dropped release's). The first of them has a new connection opened.
    for _ in 0..5 {
        let again = lock.acquire(&next, NOW, LEASE).await.unwrap();
        assert!(again.fencing_token() > hold.fencing_token());
        assert_eq!(again.hold_count(), 1);
        assert!(lock.is_held_by(&next).await.unwrap());
        assert_eq!(lock.release(&next).await.unwrap(), 0);
    }
    idle_becomes(&client, 1).await;
}

/// An acquire dropped mid-call is undone in the background (see `in_flight`), which reads its
/// reply: its connection stays in step and is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_cut_off_mid_call_is_undone_on_its_own_connection() {
    let server = RedisServer::start();
    let (client, lock) = warmed_up(&server, "cut-acquire").await;
    let owner = Owner::random();
    let stall = server.stall(ms(400));
    let cut = tokio::time::timeout(ms(100), lock.acquire(&owner, NOW, LEASE)).await;
    assert!(cut.is_err(), "the acquire waits behind the stall");
    stall.join().unwrap();
    idle_becomes(&client, 1).await;
    assert!(!lock.is_locked().await.unwrap(), "the acquire was undone");
    cycles(&lock, &owner, 5).await;
}

/// After a restart the idle connections are dead: the first call finds one so, the rest are
/// dropped with it, and new ones come; that call goes to the command connection after a `PING`
/// that makes it reconnect, so no call fails. The server's emptied script cache is refilled
/// from whichever connection meets it first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_connections_are_replaced_after_a_restart() {
    let mut server = RedisServer::start();
    let (client, lock) = warmed_up(&server, "restarted").await;
    let owner = Owner::random();
    server.restart();
    let mut failures = 0;
    let started = Instant::now();
    loop {
        match lock.acquire(&owner, NOW, LEASE).await {
            Ok(_) => break,
            Err(err) => {
                assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
                failures += 1;
            }
        }
        assert!(started.elapsed() < Duration::from_secs(10), "no recovery");
        tokio::time::sleep(ms(50)).await;
    }
    assert_eq!(lock.release(&owner).await.unwrap(), 0);
    assert_eq!(failures, 0, "calls failed after the restart");
    idle_becomes(&client, 1).await;
    cycles(&lock, &owner, 5).await;
}

/// One the server closed while idle (its `timeout` setting, a kill) is found dead before it is
/// used: no call fails on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_direct_connection_the_server_closed_fails_no_call() {
    let server = RedisServer::start();
    let client = connect(&server).await;
    let before = connection_ids(&server, Some("normal"));
    let lock = client.lock("killed").unwrap();
    let owner = Owner::random();
    cycles(&lock, &owner, 1).await;
    idle_becomes(&client, 1).await;
    let killed = kill_the_direct_connection(&server, &before);
    tokio::time::sleep(ms(20)).await;
    cycles(&lock, &owner, 5).await;
    idle_becomes(&client, 1).await;
    assert!(!connection_ids(&server, Some("normal")).contains(&killed));
}

/// A server that forgot the scripts answers NOSCRIPT on the direct connection: the script is
/// loaded there and the call sent again, and the connection (in step after an error reply) stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forgotten_script_is_loaded_again_on_a_direct_connection() {
    let server = RedisServer::start();
    let (client, lock) = warmed_up(&server, "flushed").await;
    let owner = Owner::random();
    for _ in 0..3 {
        assert!(server.command(&["SCRIPT", "FLUSH"]).starts_with("+OK"));
        cycles(&lock, &owner, 1).await;
        assert_eq!(client.hot_connections_idle(), 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_client_keeps_no_direct_connections() {
    let server = RedisServer::start();
    let (client, lock) = warmed_up(&server, "closed").await;
    let before = normal_connections(&server);
    client.close();
    assert_eq!(client.hot_connections_idle(), 0);
    let err = lock
        .acquire(&Owner::random(), NOW, LEASE)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Closed);
    assert_eq!(client.hot_connections_idle(), 0);
    let started = Instant::now();
    while normal_connections(&server) != before - 1 {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "still connected"
        );
        tokio::time::sleep(ms(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_hot_calls_stay_on_the_multiplexed_connection() {
    let server = RedisServer::start_tls();
    let client = connect(&server).await;
    let lock = client.lock("tls").unwrap();
    cycles(&lock, &Owner::random(), 20).await;
    tokio::time::sleep(ms(100)).await;
    assert_eq!(client.hot_connections_idle(), 0);
}

/// On a current-thread runtime tokio's I/O driver learns of a socket's readiness only when the
/// thread parks: a connection the server closed while the task went on without parking is
/// still found dead before it is used (the kernel is asked, not tokio's readiness).
#[tokio::test]
async fn a_direct_connection_closed_while_the_task_did_not_park_fails_no_call() {
    let server = RedisServer::start();
    let client = connect(&server).await;
    let before = connection_ids(&server, Some("normal"));
    let lock = client.lock("closed unparked").unwrap();
    let owner = Owner::random();
    cycles(&lock, &owner, 2).await;
    idle_becomes(&client, 1).await;
    cycles(&lock, &owner, 1).await;
    kill_the_direct_connection(&server, &before);
    std::thread::sleep(ms(50)); // the server's FIN is in the socket; the runtime did not run
    cycles(&lock, &owner, 3).await;
}

/// A server that closes clients idle past its `timeout`: the command connection is kept in use
/// by the client's `PING`s, the idle direct connection the server closes is found closed before
/// use, and no call after the quiet spell fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_after_the_server_closed_idle_connections_succeed() {
    let server = RedisServer::start();
    let before = connection_ids(&server, Some("normal"));
    let client = builder(&server)
        .ping_interval(Some(ms(300)))
        .connect()
        .await
        .unwrap();
    let lock = client.lock("idle timeout").unwrap();
    let owner = Owner::random();
    cycles(&lock, &owner, 2).await;
    idle_becomes(&client, 1).await;
    let ours = ids_since(&server, Some("normal"), &before);
    assert_eq!(
        ours.len(),
        2,
        "the command and the direct connection: {ours:?}"
    );
    assert!(
        server
            .command(&["CONFIG", "SET", "timeout", "1"])
            .starts_with("+OK")
    );
    let started = Instant::now();
    while connection_ids(&server, Some("normal")).len() > before.len() + 1 {
        assert!(started.elapsed() < Duration::from_secs(10), "never closed");
        tokio::time::sleep(ms(100)).await;
    }
    cycles(&lock, &owner, 3).await;
    lock.inspect().await.unwrap();
}

/// After a restart, a client that was idle for a `PING` interval fails no call: its command
/// connection was replaced by then, and its idle direct connection is found closed before use.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_idle_through_a_restart_fails_no_call() {
    let mut server = RedisServer::start();
    let client = builder(&server)
        .ping_interval(Some(ms(200)))
        .connect()
        .await
        .unwrap();
    let lock = client.lock("idle restart").unwrap();
    let owner = Owner::random();
    cycles(&lock, &owner, 2).await;
    idle_becomes(&client, 1).await;
    server.restart();
    tokio::time::sleep(ms(1500)).await;
    cycles(&lock, &owner, 3).await;
    lock.inspect().await.unwrap();
}

/// Close closes every connection of the client (command, direct, pub/sub) while its handles
/// live on: the command connection once no tidy-up needs it. (It stayed open until the last handle was dropped: a Go or Java program that
/// connected and closed clients kept one socket per client until the garbage collector ran.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_client_closes_its_connections_while_its_handles_live() {
    let server = RedisServer::start();
    let before = connection_ids(&server, None);
    let client = builder(&server)
        .command_timeout(ms(300))
        .connect()
        .await
        .unwrap();
    let lock = client.lock("closing").unwrap();
    let (holder, waiter) = (Owner::random(), Owner::random());
    cycles(&lock, &holder, 2).await;
    lock.acquire(&holder, NOW, LEASE).await.unwrap();
    // A waiter subscribes (the subscription lingers after its wait).
    let err = lock
        .acquire(&waiter, Some(ms(100)), LEASE)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);
    let ours = || ids_since(&server, None, &before).len();
    assert!(ours() >= 3, "command, direct and pub/sub: {}", ours());
    client.close();
    let started = Instant::now();
    while ours() > 0 {
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{} connections left open",
            ours()
        );
        tokio::time::sleep(ms(20)).await;
    }
    let err = lock.release(&holder).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Closed);
    drop((client, lock));
}

/// The same for a blocking client closed while threads are mid-call on their own direct
/// sockets: a call that comes back after close closes its socket. (Each went back to the idle
/// list of the closed client and stayed open while any handle lived: up to 16 sockets per
/// client in a Go, Java or C program that closes clients under load.)
#[test]
fn a_blocking_client_closed_mid_call_keeps_no_direct_connection() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let server = RedisServer::start();
    let before = connection_ids(&server, None);
    let client = redlock_core::blocking::Client::connect(&server.url()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..4)
        .map(|thread| {
            let lock = client.lock(&format!("busy-{thread}")).unwrap();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let me = Owner::random();
                while !stop.load(Ordering::Relaxed) {
                    let cycle = lock
                        .acquire(&me, NOW, LEASE)
                        .and_then(|_| lock.release(&me));
                    match cycle {
                        Ok(_) => {}
                        Err(err) if err.kind() == ErrorKind::Closed => break,
                        Err(err) => panic!("{err}"),
                    }
                }
                lock
            })
        })
        .collect();
    std::thread::sleep(ms(300));
    client.close();
    stop.store(true, Ordering::Relaxed);
    let locks: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let ours = || ids_since(&server, None, &before).len();
    let started = Instant::now();
    while ours() > 0 {
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{} connections of the closed client left open while its handles live",
            ours()
        );
        std::thread::sleep(ms(20));
    }
    for lock in &locks {
        let err = lock.release(&Owner::random()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Closed);
    }
    drop((client, locks));
}

/// Blocking acquires on the wire (Redis stalled) when the client closes: each ends with
/// `Closed` and the hold its attempt took is given back. (The command connection was closed
/// before their replies came, as nothing counted them as under way: every lock stayed held
/// until its lease ended, by callers told they had nothing.)
#[test]
fn a_blocking_acquire_on_the_wire_at_close_gives_its_hold_back() {
    let server = RedisServer::start();
    let before = connection_ids(&server, None);
    let builder = builder(&server).command_timeout(Duration::from_secs(3));
    let client = redlock_core::blocking::Client::from_builder(builder).unwrap();
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(5));
    let threads: Vec<_> = (0..4)
        .map(|thread| {
            let lock = client.lock(&format!("on-the-wire-{thread}")).unwrap();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let me = Owner::random();
                lock.acquire(&me, NOW, None).unwrap(); // a direct connection of its own
                lock.release(&me).unwrap();
                barrier.wait();
                let lease = if thread % 2 == 0 { None } else { LEASE };
                let result = lock
                    .acquire(&me, NOW, lease)
                    .map(|hold| hold.fencing_token());
                (lock, result)
            })
        })
        .collect();
    std::thread::sleep(ms(200));
    let stall = server.stall(ms(1500)); // every acquire below goes on the wire behind it
    barrier.wait();
    std::thread::sleep(ms(300));
    client.close();
    stall.join().unwrap();
    let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    for (_, result) in &results {
        let err = result.as_ref().unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::Closed | ErrorKind::Connection),
            "{err}"
        );
    }
    let started = Instant::now();
    while !lock_keys(&server).is_empty() || !ids_since(&server, None, &before).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "keys {:?} and connections {:?} left after close",
            lock_keys(&server),
            ids_since(&server, None, &before)
        );
        std::thread::sleep(ms(50));
    }
    drop((client, results));
}
