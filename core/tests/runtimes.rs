//! The async client across tokio runtimes: made in one that ends and used from another (a
//! `static` client made by the first `#[tokio::test]`), used from a runtime kept busy by user
//! code, used from several runtimes at once, and the blocking API inside async contexts. The
//! client's own work (watchdog, pub/sub, tidy-ups) must not depend on any of them.

mod common;

use std::time::{Duration, Instant};

use common::*;
use redlock_core::{Client, Owner};

fn rt_multi() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn rt_current() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Case 1: a client made in runtime A (think: a `static` client made lazily by the first
/// `#[tokio::test]`), runtime A dropped, the client used from runtime B. A hold taken with the
/// watchdog must stay held (renewed) or be reported lost — never silently expire while its
/// owner believes it holds it.
#[test]
fn watchdog_hold_taken_in_runtime_b_after_the_clients_runtime_a_was_dropped() {
    let server = RedisServer::start();
    let url = server.url();
    let a = rt_current();
    let client = a.block_on(async {
        Client::builder(url.clone())
            .lease(ms(300))
            .connect()
            .await
            .unwrap()
    });
    drop(a);

    let b = rt_multi();
    b.block_on(async {
        let lock = client.lock("static-client").unwrap();
        let owner = Owner::random();
        // The first call may fail once with Connection (the command connection's driver
        // task died with runtime A; the manager reconnects): a user retries.
        let mut tries = 0;
        let hold = loop {
            tries += 1;
            match tokio::time::timeout(Duration::from_secs(10), lock.acquire(&owner, NOW, None))
                .await
                .expect("acquire hung")
            {
                Ok(hold) => break hold,
                Err(e) if tries < 5 => eprintln!("acquire try {tries}: {e:?}"),
                Err(e) => panic!("acquire failed: {e:?}"),
            }
        };
        assert!(hold.is_watched());
        // Several leases pass: the watchdog should renew (every 100 ms).
        tokio::time::sleep(ms(1200)).await;
        let other_client = Client::connect(&url).await.unwrap();
        let other = Owner::random();
        let second = other_client
            .lock("static-client")
            .unwrap()
            .try_acquire(&other, Some(Duration::from_secs(5)))
            .await
            .unwrap();
        let lost = hold.is_lost();
        eprintln!(
            "after 4 leases: first hold is_lost={lost}, watched_holds={}, watchdog_calls={}, second owner got it: {}",
            client.watched_holds(),
            client.watchdog_calls(),
            second.is_some()
        );
        assert!(
            second.is_none() || lost,
            "two holders: the first owner's watchdog hold silently expired (is_lost = false) \
             and a second owner acquired the lock"
        );
    });
}

/// Case 1, plain calls: acquire/release/waiting acquire woken by a release, in runtime B.
#[test]
fn plain_calls_in_runtime_b_after_the_clients_runtime_a_was_dropped() {
    let server = RedisServer::start();
    let url = server.url();
    let a = rt_current();
    let client = a.block_on(async { Client::connect(&url).await.unwrap() });
    drop(a);
    let b = rt_multi();
    b.block_on(async {
        let lock = client.lock("plain").unwrap();
        let (x, y) = (Owner::random(), Owner::random());
        let start = Instant::now();
        let r = tokio::time::timeout(
            Duration::from_secs(10),
            lock.acquire(&x, NOW, Some(ms(5000))),
        )
        .await;
        eprintln!(
            "acquire in B: {:?} after {:?}",
            r.as_ref().map(|r| r.as_ref().map(|h| h.fencing_token())),
            start.elapsed()
        );
        let r = tokio::time::timeout(Duration::from_secs(10), lock.release(&x)).await;
        eprintln!("release in B: {:?}", r);
        lock.acquire(&x, NOW, Some(ms(5000))).await.unwrap();
        let lock2 = lock.clone();
        let y2 = y.clone();
        let waiter = tokio::spawn(async move {
            let t = Instant::now();
            let h = lock2
                .acquire(&y2, Some(Duration::from_secs(8)), Some(ms(5000)))
                .await;
            (h.map(|h| h.fencing_token()), t.elapsed())
        });
        tokio::time::sleep(ms(300)).await;
        lock.release(&x).await.unwrap();
        let (h, took) = tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("waiter hung")
            .unwrap();
        eprintln!("waiter: {h:?} after {took:?}");
        h.unwrap();
        client.close();
    });
    eprintln!("keys left: {:?}", lock_keys(&server));
}

/// Case 1: the lost notification. A watchdog hold whose renewals stop (here: its client's
/// runtime A was dropped) must be reported lost once its lease has passed.
#[test]
fn watchdog_hold_of_a_client_whose_runtime_was_dropped_is_reported_lost_or_kept() {
    let server = RedisServer::start();
    let url = server.url();
    let a = rt_multi();
    let (client, hold) = a.block_on(async {
        let client = Client::builder(url.clone())
            .lease(ms(300))
            .connect()
            .await
            .unwrap();
        let hold = client
            .lock("kept")
            .unwrap()
            .acquire(&Owner::random(), NOW, None)
            .await
            .unwrap();
        (client, hold)
    });
    drop(a); // e.g. the #[tokio::test] that made a static client ended
    let b = rt_multi();
    b.block_on(async {
        let lost = tokio::time::timeout(Duration::from_secs(3), hold.lost()).await.is_ok();
        let held_in_redis = client.lock("kept").unwrap().is_locked().await;
        let held_in_redis = match held_in_redis {
            Ok(v) => v,
            Err(_) => client.lock("kept").unwrap().is_locked().await.unwrap(),
        };
        eprintln!("lost fired: {lost}; is_lost: {}; still in Redis: {held_in_redis}; watchdog_calls: {}", hold.is_lost(), client.watchdog_calls());
        assert!(
            held_in_redis || lost,
            "the hold expired in Redis (10 leases) but its owner was never told (lost() did not resolve)"
        );
    });
}

/// Case 1, notifications: the pub/sub task started in runtime A (a waiter there) dies with A;
/// a waiter in runtime B must still be woken by a release (not only by a re-check).
#[test]
fn waiter_in_runtime_b_is_woken_after_the_pubsub_task_of_runtime_a_died() {
    let server = RedisServer::start();
    let url = server.url();
    let a = rt_multi();
    let client = a.block_on(async {
        let client = Client::builder(url.clone())
            .recheck_interval(Duration::from_secs(60))
            .connect()
            .await
            .unwrap();
        // A wait in A starts the client's pub/sub task there.
        let lock = client.lock("notify").unwrap();
        let (x, y) = (Owner::random(), Owner::random());
        lock.acquire(&x, NOW, Some(ms(5000))).await.unwrap();
        let lock2 = lock.clone();
        let w = tokio::spawn(async move {
            lock2
                .acquire(&y, Some(Duration::from_secs(5)), Some(ms(5000)))
                .await
        });
        tokio::time::sleep(ms(200)).await;
        lock.release(&x).await.unwrap();
        let h = w.await.unwrap().unwrap();
        lock.release(h.owner()).await.unwrap();
        client
    });
    drop(a);
    let b = rt_multi();
    b.block_on(async {
        let other = Client::connect(&url).await.unwrap();
        let holder = Owner::random();
        other
            .lock("notify")
            .unwrap()
            .acquire(&holder, NOW, Some(ms(5000)))
            .await
            .unwrap();
        let lock = client.lock("notify").unwrap();
        let waiter = Owner::random();
        let w = tokio::spawn(async move {
            let t = Instant::now();
            let mut r = lock
                .acquire(&waiter, Some(Duration::from_secs(4)), Some(ms(5000)))
                .await;
            if let Err(redlock_core::Error::Connection(_)) = &r {
                // the documented one-time failure after the connection died: retry once
                r = lock
                    .acquire(&waiter, Some(Duration::from_secs(4)), Some(ms(5000)))
                    .await;
            }
            (r.map(|h| h.fencing_token()), t.elapsed())
        });
        tokio::time::sleep(ms(300)).await;
        other
            .lock("notify")
            .unwrap()
            .release(&holder)
            .await
            .unwrap();
        let (r, took) = w.await.unwrap();
        eprintln!("waiter in B: {r:?} after {took:?} (release at ~300 ms)");
        assert!(
            r.is_ok() && took < Duration::from_secs(2),
            "waiter was not woken by the release: {r:?} after {took:?}"
        );
    });
}

/// Every key with its PTTL (fencing counters left out, as in common::lock_keys).
fn keys_with_pttl(server: &RedisServer) -> Vec<(String, i64)> {
    lock_keys(server)
        .into_iter()
        .map(|k| {
            let t = server.command(&["PTTL", &k]);
            let t = t
                .trim()
                .trim_start_matches(':')
                .parse::<i64>()
                .unwrap_or(-99);
            (k, t)
        })
        .collect()
}

/// Case 5: a waiting acquire whose runtime is dropped (its future dropped by the runtime's
/// shutdown), the client living on elsewhere. A later release must not hand the lock to that
/// dead waiter (the lock would stay taken by nobody), and Redis must be left clean.
#[test]
fn waiter_dropped_with_its_runtime_is_not_handed_the_lock() {
    let server = RedisServer::start();
    let url = server.url();
    let main = rt_multi();
    let client = main.block_on(async {
        Client::builder(url.clone())
            .lease(Duration::from_secs(20))
            .connect()
            .await
            .unwrap()
    });
    let holder = Owner::random();
    main.block_on(async {
        // Waits in the main runtime first: the client's pub/sub task starts there and lives on.
        let lock = client.lock("gone").unwrap();
        let x = Owner::random();
        lock.acquire(&x, NOW, Some(ms(300))).await.unwrap();
        let h = lock
            .acquire(
                &holder,
                Some(Duration::from_secs(2)),
                Some(Duration::from_secs(20)),
            )
            .await
            .unwrap();
        assert_eq!(h.hold_count(), 1);
    });

    let a = rt_current();
    let c2 = client.clone();
    a.spawn(async move {
        let _ = c2
            .lock("gone")
            .unwrap()
            .acquire(&Owner::random(), None, None)
            .await;
    });
    a.block_on(async { tokio::time::sleep(ms(300)).await });
    drop(a); // its waiting acquire future is dropped with it
    eprintln!(
        "keys after runtime A dropped: {:?}",
        keys_with_pttl(&server)
    );

    main.block_on(async {
        client.lock("gone").unwrap().release(&holder).await.unwrap();
        let third = Owner::random();
        let t = Instant::now();
        let got = client
            .lock("gone")
            .unwrap()
            .acquire(&third, Some(Duration::from_secs(5)), Some(ms(5000)))
            .await;
        eprintln!(
            "third owner after the release: {:?} after {:?}",
            got.as_ref().map(|h| h.fencing_token()),
            t.elapsed()
        );
        eprintln!("inspect: {:?}", client.inspect("gone").await);
        assert!(
            got.is_ok() && t.elapsed() < Duration::from_secs(2),
            "the lock was handed to the dead waiter: {got:?} after {:?}",
            t.elapsed()
        );
        client.lock("gone").unwrap().release(&third).await.unwrap();
        tokio::time::sleep(ms(100)).await;
    });
    let left = keys_with_pttl(&server);
    eprintln!("keys at the end: {left:?}");
    assert!(
        left.iter().all(|(_, t)| *t > 0),
        "keys without a TTL left: {left:?}"
    );
}

/// Case 5, in flight: an acquire attempt sent but not yet answered when its runtime is dropped
/// (Redis busy). Redis runs it afterwards; the cancelled attempt must be undone, not leave a hold
/// of nobody for its lease.
#[test]
fn attempt_in_flight_when_its_runtime_is_dropped_is_undone() {
    let server = RedisServer::start();
    let main = rt_multi();
    let client = main.block_on(async { Client::connect(&server.url()).await.unwrap() });
    drop_an_attempt_in_flight_with_its_runtime(&server, &main, &client, rt_current(), "flight");
}

/// Sends an acquire of `name` from runtime `a` while Redis stalls, drops `a` with the attempt in
/// flight, and checks from `main` that another owner gets the lock soon after: the attempt was
/// undone, not left holding the lock for its lease.
fn drop_an_attempt_in_flight_with_its_runtime(
    server: &RedisServer,
    main: &tokio::runtime::Runtime,
    client: &Client,
    a: tokio::runtime::Runtime,
    name: &'static str,
) {
    let c2 = client.clone();
    let stall = server.stall(ms(800));
    a.spawn(async move {
        let _ = c2
            .lock(name)
            .unwrap()
            .acquire(&Owner::random(), NOW, Some(Duration::from_secs(20)))
            .await;
    });
    a.block_on(async { tokio::time::sleep(ms(100)).await });
    drop(a); // the attempt, sent, is dropped with its runtime
    stall.join().unwrap();
    main.block_on(async {
        tokio::time::sleep(ms(300)).await;
        let t = Instant::now();
        let got = client
            .lock(name)
            .unwrap()
            .acquire(
                &Owner::random(),
                Some(Duration::from_secs(3)),
                Some(ms(5000)),
            )
            .await;
        eprintln!(
            "next owner: {:?} after {:?}; inspect {:?}",
            got.as_ref().map(|h| h.fencing_token()),
            t.elapsed(),
            client
                .inspect(name)
                .await
                .map(|i| (i.holder_count, i.lease_left))
        );
        assert!(
            got.is_ok(),
            "the dropped attempt's hold was not undone: {got:?}"
        );
    });
}

/// Case 1/5, direct connections: a short-lived runtime A (a request handler's, a test's) uses a
/// client that lives in the main runtime; A is dropped. Calls from the (healthy) main runtime on
/// a healthy Redis must not fail (hot.rs: direct connections are "only ever faster, never a new
/// way to fail").
#[test]
fn calls_from_a_live_runtime_do_not_fail_after_another_runtime_that_used_the_client_ended() {
    let server = RedisServer::start();
    let url = server.url();
    let main = rt_multi();
    let client = main.block_on(async { Client::connect(&url).await.unwrap() });
    let a = rt_multi();
    a.block_on(async {
        let lock = client.lock("pool").unwrap();
        let owner = Owner::random();
        // Concurrent cycles, so that the pool opens its direct connections here, in A.
        let mut tasks = Vec::new();
        for i in 0..8 {
            let lock = client.lock(&format!("pool{i}")).unwrap();
            tasks.push(tokio::spawn(async move {
                let o = Owner::random();
                for _ in 0..50 {
                    lock.acquire(&o, NOW, Some(ms(5000))).await.unwrap();
                    lock.release(&o).await.unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        lock.acquire(&owner, NOW, Some(ms(5000))).await.unwrap();
        lock.release(&owner).await.unwrap();
        eprintln!(
            "idle direct connections made in A: {}",
            client.hot_connections_idle()
        );
    });
    drop(a);
    main.block_on(async {
        let lock = client.lock("pool").unwrap();
        let owner = Owner::random();
        let mut failures = Vec::new();
        for _ in 0..10 {
            match lock.acquire(&owner, NOW, Some(ms(5000))).await {
                Ok(_) => {
                    lock.release(&owner).await.unwrap();
                }
                Err(e) => failures.push(e),
            }
        }
        eprintln!("failures of 10 acquires in the live runtime: {failures:?}");
        assert!(failures.is_empty(), "{failures:?}");
    });
}

/// Case 2: a current_thread runtime (the #[tokio::test] default) whose only thread is busy in
/// user code (a blocking call) for 4 leases: the watchdog must keep renewing (lib.rs: renewed
/// every lease/3 by the client's watchdog task), or the owner must be told it lost the hold.
#[test]
fn watchdog_renews_while_the_owners_current_thread_runtime_is_busy() {
    let server = RedisServer::start();
    let url = server.url();
    let rt = rt_current();
    rt.block_on(async {
        let client = Client::builder(url.clone()).lease(ms(300)).connect().await.unwrap();
        let hold = client.lock("busy").unwrap().acquire(&Owner::random(), NOW, None).await.unwrap();
        // User code blocks the runtime's only thread (a synchronous file write, a CPU loop...).
        let other = std::thread::spawn({
            let url = url.clone();
            move || {
                std::thread::sleep(ms(1200));
                let c = redlock_core::blocking::Client::connect(&url).unwrap();
                c.lock("busy").unwrap().try_acquire(&Owner::random(), Some(Duration::from_secs(5))).unwrap().is_some()
            }
        });
        std::thread::sleep(ms(1500));
        let second_got_it = other.join().unwrap();
        eprintln!("while the owner's runtime was busy: second owner got it: {second_got_it}; first is_lost (checked before the runtime runs again): {}", hold.is_lost());
        assert!(!second_got_it, "two holders: the hold expired while its owner's runtime was busy");
    });
}

/// Case 3: the blocking API from async contexts: inside a current_thread runtime's task, inside
/// spawn_blocking, inside Runtime::block_on; a waiting blocking acquire woken by a release.
#[tokio::test]
async fn blocking_api_inside_async_contexts() {
    let server = RedisServer::start();
    let url = server.url();
    let client = redlock_core::blocking::Client::connect(&url).unwrap();
    let lock = client.lock("blk").unwrap();
    let (x, y) = (Owner::random(), Owner::random());
    lock.acquire(&x, NOW, Some(ms(5000))).unwrap();
    let c2 = client.clone();
    let y2 = y.clone();
    let waiter = tokio::task::spawn_blocking(move || {
        let t = Instant::now();
        let r = c2
            .lock("blk")
            .unwrap()
            .acquire(&y2, Some(Duration::from_secs(5)), None);
        (r.map(|h| h.fencing_token()), t.elapsed())
    });
    tokio::time::sleep(ms(200)).await;
    lock.release(&x).unwrap();
    let (r, took) = waiter.await.unwrap();
    eprintln!("blocking waiter in spawn_blocking: {r:?} after {took:?}");
    r.unwrap();
    lock.release(&y).unwrap();
    // wait_lost from inside the runtime thread
    let h = lock.acquire(&x, NOW, None).unwrap();
    assert!(!redlock_core::blocking::wait_lost(&h, Some(ms(100))));
    lock.release(&x).unwrap();
    client.close();
    assert_eq!(
        lock.acquire(&x, NOW, None).unwrap_err(),
        redlock_core::Error::Closed
    );
}

/// Two live runtimes that take turns with one client (a server with a current_thread runtime
/// per worker thread): calls never fail, and the direct connections of each runtime are kept
/// rather than closed at every switch.
#[test]
fn two_live_runtimes_taking_turns_keep_their_direct_connections() {
    let server = RedisServer::start();
    let url = server.url();
    let (a, b) = (rt_current(), rt_current());
    let client = a.block_on(async { Client::connect(&url).await.unwrap() });
    let before = clients_connected(&server);
    for round in 0..40 {
        let rt = if round % 2 == 0 { &a } else { &b };
        rt.block_on(async {
            let lock = client.lock("turns").unwrap();
            let owner = Owner::random();
            for _ in 0..5 {
                lock.acquire(&owner, NOW, Some(ms(5000))).await.unwrap();
                lock.release(&owner).await.unwrap();
            }
            // Lets a direct connection opened meanwhile join the pool.
            tokio::time::sleep(ms(5)).await;
        });
    }
    let opened = clients_connected(&server) - before;
    assert!(
        client.hot_connections_idle() >= 2,
        "each runtime keeps a direct connection: {} idle",
        client.hot_connections_idle()
    );
    assert!(opened < 10, "{opened} connections opened over 40 switches");
}

/// `total_connections_received` of the server.
fn clients_connected(server: &RedisServer) -> u64 {
    let info = server.command(&["INFO", "stats"]);
    info.lines()
        .find_map(|l| l.strip_prefix("total_connections_received:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("INFO stats has total_connections_received")
}

/// The command connection is lost (a server-side `CLIENT KILL`, an idle timeout, a failover).
/// The first call that notices it runs on a caller's current_thread runtime A, so redis-rs'
/// ConnectionManager spawns its reconnect (and the new connection's driver task) there, with
/// `tokio::spawn`. Then A's only thread is busy in user code. The watchdog (on the library's
/// runtime) renews over that connection: its requests wait for a driver that never runs.
#[test]
fn watchdog_renews_after_the_command_connection_was_reconnected_on_a_busy_runtime() {
    let server = RedisServer::start();
    let url = server.url();
    let b = rt_multi();
    let client = b.block_on(async {
        Client::builder(url.clone())
            .lease(ms(900))
            .command_timeout(ms(1000))
            .connect()
            .await
            .unwrap()
    });
    // The command connection goes (the only `normal` connection of the client so far).
    for id in connection_ids(&server, Some("normal")) {
        server.command(&["CLIENT", "KILL", "ID", &id]);
    }
    let busy = std::thread::spawn({
        let client = client.clone();
        move || {
            let a = rt_current();
            a.block_on(async {
                // Notices the loss: the manager's reconnect is spawned on A.
                let first = client.inspect("elsewhere").await;
                eprintln!("A: first call after the kill: {first:?}");
                // A runs it: the new connection's driver task is A's.
                tokio::time::sleep(ms(300)).await;
                let second = client.inspect("elsewhere").await;
                eprintln!("A: second call: {second:?}");
                // User code keeps A's only thread busy (a synchronous call, a CPU loop).
                std::thread::sleep(Duration::from_secs(8));
            });
        }
    });
    std::thread::sleep(ms(800));

    let (second_got_it, lost) = b.block_on(async {
        let lock = client.lock("busy-reconnect").unwrap();
        let owner = Owner::random();
        let start = Instant::now();
        let hold = loop {
            match lock.acquire(&owner, NOW, None).await {
                Ok(hold) => break hold,
                Err(e) if start.elapsed() < Duration::from_secs(5) => {
                    eprintln!("B: acquire failed, retrying: {e:?}")
                }
                Err(e) => panic!("acquire failed for 5 s: {e:?}"),
            }
        };
        assert!(hold.is_watched());
        // Three leases: the watchdog renews every 300 ms.
        tokio::time::sleep(ms(2700)).await;
        let other = Client::connect(&url).await.unwrap();
        let second = other
            .lock("busy-reconnect")
            .unwrap()
            .try_acquire(&Owner::random(), Some(Duration::from_secs(5)))
            .await
            .unwrap();
        eprintln!(
            "B: after 3 leases: second owner got it: {}, first is_lost: {}, watchdog_calls: {}",
            second.is_some(),
            hold.is_lost(),
            client.watchdog_calls()
        );
        (second.is_some(), hold.is_lost())
    });
    busy.join().unwrap();
    assert!(
        !second_got_it,
        "two holders (first told lost: {lost}): the watched hold expired because the command \
         connection's driver ran on a caller's busy runtime"
    );
}

/// As above, on a runtime that had used the client before, so that the attempt is on a direct
/// socket of the runtime being dropped (as any request handler's or test's runtime has after its
/// first call): its abandonment reads the reply on the library's runtime, without that socket's
/// reactor, and undoes it.
#[test]
fn attempt_in_flight_on_a_direct_socket_when_its_runtime_is_dropped_is_undone() {
    let server = RedisServer::start();
    let url = server.url();
    let main = rt_multi();
    let client = main.block_on(async { Client::connect(&url).await.unwrap() });
    let a = rt_current();
    a.block_on(async {
        let lock = client.lock("flight-direct").unwrap();
        let owner = Owner::random();
        let start = Instant::now();
        while client.hot_connections_idle() == 0 {
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "no direct socket in A"
            );
            lock.acquire(&owner, NOW, Some(ms(5000))).await.unwrap();
            lock.release(&owner).await.unwrap();
            tokio::time::sleep(ms(20)).await;
        }
    });
    eprintln!("A's idle direct sockets: {}", client.hot_connections_idle());
    drop_an_attempt_in_flight_with_its_runtime(&server, &main, &client, a, "flight-direct");
}
