//! Grants: a release hands the lock to the first waiting writer, in arrival order, and the
//! waiter is in without another round trip.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use redlock_core::Owner;

/// `calls=` of `cmdstat_evalsha` in INFO commandstats.
fn evalsha_calls(server: &RedisServer) -> u64 {
    command_calls(server, "evalsha")
}

/// `calls=` of `cmdstat_<command>` in INFO commandstats.
fn command_calls(server: &RedisServer, command: &str) -> u64 {
    let info = server.command(&["INFO", "commandstats"]);
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_of_different_clients_get_a_freed_lock_in_arrival_order() {
    let server = RedisServer::start();
    let holder_client = connect(&server).await;
    let lock = holder_client.lock("fifo").unwrap();
    let holder = Owner::random();
    lock.acquire(&holder, NOW, Some(ms(30_000))).await.unwrap();

    // Re-checks a minute apart: only grants (and the order of the queue) decide who is next.
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for i in 0..4 {
        let client = connect_without_rechecks(&server).await;
        let (waiter_lock, order) = (client.lock("fifo").unwrap(), order.clone());
        waiters.push(tokio::spawn(async move {
            let me = Owner::random();
            let hold = waiter_lock
                .acquire(&me, Some(Duration::from_secs(20)), Some(ms(30_000)))
                .await
                .unwrap();
            order.lock().unwrap().push((i, hold.fencing_token()));
            waiter_lock.release(&me).await.unwrap();
            drop(client);
        }));
        while lock.inspect().await.unwrap().waiting_writers < i + 1 {
            tokio::time::sleep(ms(2)).await;
        }
    }
    lock.release(&holder).await.unwrap();
    for w in waiters {
        w.await.unwrap();
    }
    let order = order.lock().unwrap().clone();
    let arrivals: Vec<u64> = order.iter().map(|(i, _)| *i).collect();
    assert_eq!(arrivals, [0, 1, 2, 3]);
    assert!(order.windows(2).all(|w| w[0].1 < w[1].1), "{order:?}");
    assert!(lock_keys(&server).is_empty(), "{:?}", lock_keys(&server));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_waiter_is_in_without_another_round_trip() {
    let server = RedisServer::start();
    let holder_client = connect(&server).await;
    let waiter_client = connect_without_rechecks(&server).await;
    let lock = holder_client.lock("one-trip").unwrap();
    let holder = Owner::random();
    // Once before, so that the release script is loaded (a first EVALSHA fails with NOSCRIPT).
    lock.acquire(&holder, NOW, Some(ms(30_000))).await.unwrap();
    lock.release(&holder).await.unwrap();
    lock.acquire(&holder, NOW, Some(ms(30_000))).await.unwrap();
    let waiter_lock = waiter_client.lock("one-trip").unwrap();
    let stats = waiter_lock.clone();
    let waiting = tokio::spawn(async move {
        waiter_lock
            .acquire(
                &Owner::random(),
                Some(Duration::from_secs(10)),
                Some(ms(30_000)),
            )
            .await
    });
    // Its first attempt, and the one it makes once subscribed (a release before it listened
    // would have granted it nothing), both found the lock taken; and it listens (its subscribe
    // waits for the confirmation only so long: on a loaded machine the attempt may come first).
    while stats.stats().failed_attempts < 2 || channels_of(&server, "one-trip") < 2 {
        tokio::time::sleep(ms(2)).await;
    }
    let before = evalsha_calls(&server);
    lock.release(&holder).await.unwrap();
    let hold = waiting.await.unwrap().unwrap();
    // The release was the only script call: the waiter learnt of its grant by pub/sub.
    assert_eq!(evalsha_calls(&server) - before, 1);
    assert_eq!(hold.hold_count(), 1);
    assert_eq!(
        lock.inspect().await.unwrap().last_fencing_token,
        hold.fencing_token()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_writers_are_granted_the_lock_while_queued_behind_the_gate() {
    // Eight tasks of one client: after a release the next holder needs no attempt of its own,
    // so each section costs its first attempt and its release.
    let server = RedisServer::start();
    let client = connect_without_rechecks(&server).await;
    let inside = Arc::new(Mutex::new(0u32));
    let before = evalsha_calls(&server);
    let connected = command_calls(&server, "ping"); // the connect's check
    let mut tasks = Vec::new();
    const SECTIONS: u64 = 50;
    for _ in 0..8 {
        let (lock, inside) = (client.lock("gate").unwrap(), inside.clone());
        tasks.push(tokio::spawn(async move {
            let me = Owner::random();
            for _ in 0..SECTIONS {
                lock.acquire(&me, Some(Duration::from_secs(30)), Some(ms(30_000)))
                    .await
                    .unwrap();
                {
                    let mut n = inside.lock().unwrap();
                    *n += 1;
                    assert_eq!(*n, 1, "two holders at once");
                }
                tokio::task::yield_now().await;
                *inside.lock().unwrap() -= 1;
                lock.release(&me).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let per_section = (evalsha_calls(&server) - before) as f64 / (8 * SECTIONS) as f64;
    assert!(
        per_section <= 2.5,
        "{per_section:.2} script calls per section"
    );
    // Grants to this client's own waiters: no release went behind a PING.
    assert_eq!(command_calls(&server, "ping"), connected);
    assert!(lock_keys(&server).is_empty(), "{:?}", lock_keys(&server));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_after_a_grant_to_another_client_goes_behind_a_ping() {
    // Its grant message is then written before its reply (see calls::behind_ping), and only
    // while this client's releases of the name keep granting it to other clients.
    let server = RedisServer::start();
    let holder_client = connect(&server).await;
    let waiter_client = connect_without_rechecks(&server).await;
    let lock = holder_client.lock("behind-ping").unwrap();
    let holder = Owner::random();
    let lease = Some(ms(30_000));
    lock.acquire(&holder, NOW, lease).await.unwrap();
    let waiter_lock = waiter_client.lock("behind-ping").unwrap();
    let stats = waiter_lock.clone();
    let waiting = tokio::spawn(async move {
        let me = Owner::random();
        let wait = Some(Duration::from_secs(10));
        let hold = waiter_lock.acquire(&me, wait, lease).await.unwrap();
        waiter_lock.release(&me).await.unwrap();
        hold
    });
    while stats.stats().failed_attempts < 2 || channels_of(&server, "behind-ping") < 2 {
        tokio::time::sleep(ms(2)).await;
    }
    // Counted from here: each connect checked its connection with one.
    let connected = command_calls(&server, "ping");
    let pings = || command_calls(&server, "ping") - connected;
    lock.release(&holder).await.unwrap(); // granted to the waiter's client
    let granted = waiting.await.unwrap();
    assert_eq!(pings(), 0, "no grant before it, so no PING");

    // A script the server forgot is loaded and the call made again, PING and all.
    lock.acquire(&holder, NOW, lease).await.unwrap();
    server.command(&["SCRIPT", "FLUSH"]);
    assert_eq!(lock.release(&holder).await.unwrap(), 0);
    assert!(pings() >= 1);
    assert!(!lock.is_locked().await.unwrap());

    // That release granted nothing: the next one goes alone.
    let before = pings();
    let hold = lock.acquire(&holder, NOW, lease).await.unwrap();
    assert!(hold.fencing_token() > granted.fencing_token());
    lock.release(&holder).await.unwrap();
    assert_eq!(pings(), before);
    assert!(lock_keys(&server).is_empty(), "{:?}", lock_keys(&server));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_waiting_in_two_processes_leaves_no_queue_entry_for_a_later_grant() {
    // One token, waiting through two clients (as two processes sharing it would). The first is
    // granted the lock; the second gets in by re-entry and must leave the queue then: its entry,
    // left there, would be granted the lock by the owner's last release, holding it for a whole
    // lease for a call that has ended.
    let server = RedisServer::start();
    let holder_client = connect(&server).await;
    let lock = holder_client.lock("shared-token").unwrap();
    let holder = Owner::random();
    lock.acquire(&holder, NOW, Some(ms(30_000))).await.unwrap();

    let shared = Owner::random();
    let mut waiters = Vec::new();
    for i in 0..2 {
        let client = connect(&server).await;
        let owner = Owner::from_token(shared.token()).unwrap();
        let waiter_lock = client.lock("shared-token").unwrap();
        waiters.push(tokio::spawn(async move {
            let hold = waiter_lock
                .acquire(&owner, Some(Duration::from_secs(20)), Some(ms(30_000)))
                .await
                .unwrap();
            // Keep the client (and its subscription) alive: a grant must find a listener.
            (client, hold.hold_count())
        }));
        while lock.inspect().await.unwrap().waiting_writers < i + 1 {
            tokio::time::sleep(ms(2)).await;
        }
    }
    lock.release(&holder).await.unwrap();
    let mut clients = Vec::new();
    let mut counts = Vec::new();
    for w in waiters {
        let (client, count) = w.await.unwrap();
        clients.push(client);
        counts.push(count);
    }
    counts.sort();
    assert_eq!(counts, [1, 2]);

    // Released twice at once, well within the second call's announcement (1 s by default).
    assert_eq!(lock.release(&shared).await.unwrap(), 1);
    assert_eq!(lock.release(&shared).await.unwrap(), 0);
    let info = lock.inspect().await.unwrap();
    assert!(
        info.holders.is_empty(),
        "held after the last release: {info:?}"
    );
    assert_eq!(info.waiting_writers, 0);
    let newcomer = Owner::random();
    assert!(
        lock.try_acquire(&newcomer, Some(ms(30_000)))
            .await
            .unwrap()
            .is_some()
    );
    lock.release(&newcomer).await.unwrap();
    assert!(lock_keys(&server).is_empty(), "{:?}", lock_keys(&server));
    drop(clients);
}
