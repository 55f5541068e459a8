//! Connection failures: unreachable or dead Redis is a `Connection` error, never a hang, and the
//! client recovers when Redis is back.

mod common;

use std::time::{Duration, Instant};

use common::*;
use redlock_core::{Client, ErrorKind, Owner};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_redis_is_a_connection_error() {
    let port = redlock_core::testing::free_port();
    let started = Instant::now();
    let err = Client::builder(format!("redis://127.0.0.1:{port}"))
        .connect_timeout(ms(500))
        .connect()
        .await
        .err()
        .expect("nobody listens there");
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passwords_are_checked() {
    let server = RedisServer::start_with_password(Some("s3cret"));
    let good = Client::connect(&server.url()).await.unwrap();
    good.lock("auth")
        .unwrap()
        .acquire(&Owner::random(), NOW, None)
        .await
        .unwrap();
    let bad_url = format!("redis://:wrong@127.0.0.1:{}", server.port());
    let err = Client::connect(&bad_url)
        .await
        .err()
        .expect("wrong password refused");
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
    assert!(
        !err.to_string().contains("wrong"),
        "the password must not leak into errors: {err}"
    );
    // No password at all: the server answers NOAUTH to everything, a connect error as well
    // (it connected, and failed later in three different ways).
    let anonymous = format!("redis://127.0.0.1:{}", server.port());
    let err = Client::connect(&anonymous)
        .await
        .err()
        .expect("a missing password refused");
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
    let err = tokio::task::spawn_blocking(move || {
        redlock_core::blocking::Client::connect(&anonymous).err()
    })
    .await
    .unwrap()
    .expect("a missing password refused");
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_mid_test_then_recovery_after_restart() {
    let mut server = RedisServer::start();
    let client = builder(&server)
        .command_timeout(ms(500))
        .lease(ms(900))
        .connect()
        .await
        .unwrap();
    let lock = client.lock("outage").unwrap();
    let owner = Owner::random();
    let hold = lock.acquire(&owner, NOW, None).await.unwrap();
    server.stop();
    // Every call fails fast with Connection, none hangs.
    for _ in 0..3 {
        let started = Instant::now();
        let err = lock.acquire(&Owner::random(), NOW, None).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
        assert!(started.elapsed() < Duration::from_secs(3));
    }
    // A waiting acquire with a deadline also ends.
    let err = lock
        .acquire(&Owner::random(), Some(ms(700)), None)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
    server.restart();
    // The restarted server is empty: the hold is gone, and the watchdog reports it lost.
    tokio::time::timeout(Duration::from_secs(10), hold.lost())
        .await
        .expect("lost after the outage");
    let mut recovered = false;
    for _ in 0..50 {
        if lock.acquire(&owner, NOW, None).await.is_ok() {
            recovered = true;
            break;
        }
        tokio::time::sleep(ms(100)).await;
    }
    assert!(recovered, "the client reconnects once Redis is back");
    lock.release(&owner).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_recover_when_the_pubsub_connection_drops() {
    let mut server = RedisServer::start();
    let client = builder(&server)
        .recheck_interval(ms(200))
        .connect()
        .await
        .unwrap();
    let lock = client.lock("resubscribe").unwrap();
    let holder = Owner::random();
    lock.acquire(&holder, NOW, Some(Duration::from_secs(30)))
        .await
        .unwrap();
    let _ = lock.acquire(&Owner::random(), Some(ms(300)), None).await; // subscribes
    server.restart();
    // After the restart the lock is free (empty server); a waiter gets it again.
    let mut got = false;
    for _ in 0..50 {
        if lock
            .acquire(&Owner::random(), Some(ms(200)), None)
            .await
            .is_ok()
        {
            got = true;
            break;
        }
    }
    assert!(got);
}

/// A SUBSCRIBE or UNSUBSCRIBE gets the command timeout like any command: the hub gives up a
/// connection that does not answer (a stalled server, a dead peer) and subscribes again on a
/// new one, instead of waiting on it without end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pubsub_connection_that_stops_answering_is_replaced() {
    let server = RedisServer::start();
    // Idle channels are unsubscribed 200 ms after their last waiter leaves.
    let client = builder(&server)
        .command_timeout(ms(300))
        .subscription_linger(ms(200))
        .connect()
        .await
        .unwrap();
    let lock = client.lock("replaced").unwrap();
    let (holder, waiter) = (Owner::random(), Owner::random());
    lock.acquire(&holder, NOW, None).await.unwrap();
    let waiting = {
        let (lock, waiter) = (lock.clone(), waiter.clone());
        tokio::spawn(async move {
            lock.acquire(&waiter, Some(Duration::from_secs(10)), None)
                .await
        })
    };
    let mut hub = connection_ids(&server, Some("pubsub"));
    while hub.is_empty() {
        tokio::time::sleep(ms(10)).await;
        hub = connection_ids(&server, Some("pubsub"));
    }
    assert_eq!(hub.len(), 1);
    tokio::time::sleep(ms(100)).await;
    lock.release(&holder).await.unwrap();
    waiting.await.unwrap().unwrap();
    lock.release(&waiter).await.unwrap();
    // The channel's UNSUBSCRIBE is sent while the server stalls for 2 s.
    let stall = {
        let stall = server.stall(Duration::from_secs(2));
        tokio::task::spawn_blocking(move || stall.join().unwrap())
    };
    stall.await.unwrap();
    // The hub gave its connection up (and reconnects, backoff at most 1 s).
    let deadline = Instant::now() + Duration::from_secs(5);
    while connection_ids(&server, None).contains(&hub[0]) && Instant::now() < deadline {
        tokio::time::sleep(ms(50)).await;
    }
    assert!(
        !connection_ids(&server, None).contains(&hub[0]),
        "the hub still uses the connection that did not answer"
    );
    // And it works: a new waiter is woken by a release.
    let other = Owner::random();
    lock.acquire(&holder, NOW, None).await.unwrap();
    let waiting = {
        let lock = lock.clone();
        tokio::spawn(async move {
            lock.acquire(&other, Some(Duration::from_secs(10)), None)
                .await
        })
    };
    tokio::time::sleep(ms(200)).await;
    lock.release(&holder).await.unwrap();
    waiting.await.unwrap().unwrap();
}

/// A user Redis refuses SUBSCRIBE to (it may still PUBLISH, which the scripts do) still gets
/// the lock: its waiters re-check on their own, from the first refusal on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_of_a_user_who_may_not_subscribe_get_the_lock_by_re_checking() {
    let server = RedisServer::start();
    let acl = "on >quiet-pass ~* &* +@all -subscribe -psubscribe";
    let mut command = vec!["ACL", "SETUSER", "quiet"];
    command.extend(acl.split(' '));
    let reply = server.command(&command);
    assert!(reply.starts_with("+OK"), "{reply}");
    let url = format!("redis://quiet:quiet-pass@127.0.0.1:{}", server.port());
    let client = Client::builder(&url)
        .recheck_interval(ms(50))
        .connect()
        .await
        .unwrap();
    let lock = client.lock("no subscribe").unwrap();
    let holder = Owner::random();
    lock.acquire(&holder, NOW, Some(Duration::from_secs(30)))
        .await
        .unwrap();
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move {
            let me = Owner::random();
            let hold = lock.acquire(&me, Some(Duration::from_secs(5)), None).await;
            (hold.map(|h| h.hold_count()), lock.release(&me).await)
        })
    };
    tokio::time::sleep(ms(300)).await;
    assert_eq!(lock.release(&holder).await.unwrap(), 0);
    let released_at = Instant::now();
    let (held, released) = waiter.await.unwrap();
    assert_eq!((held.unwrap(), released.unwrap()), (1, 0));
    // Re-checking every 50 ms, not held up by a subscribe until its time limit (3 s).
    let took = released_at.elapsed();
    assert!(took < ms(1_000), "got the lock {took:?} after its release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acl_users_with_passwords() {
    let server = RedisServer::start();
    server.add_user("app", "app-pass");
    let url = format!("redis://app:app-pass@127.0.0.1:{}", server.port());
    let client = Client::connect(&url).await.unwrap();
    client
        .lock("acl")
        .unwrap()
        .acquire(&Owner::random(), NOW, None)
        .await
        .unwrap();
    let wrong = format!("redis://app:nope@127.0.0.1:{}", server.port());
    assert_eq!(
        Client::connect(&wrong).await.err().map(|e| e.kind()),
        Some(ErrorKind::Connection)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_connections_with_rediss_urls() {
    let server = RedisServer::start_tls();
    assert!(server.url().starts_with("rediss://"));
    let client = Client::connect(&server.url()).await.unwrap();
    let waiter_client = Client::connect(&server.url()).await.unwrap();
    let lock = client.lock("over-tls").unwrap();
    let owner = Owner::random();
    lock.acquire(&owner, NOW, None).await.unwrap();
    // Waiting works over TLS too (the pub/sub connection uses it as well).
    let waiter = waiter_client.lock("over-tls").unwrap();
    let waiting = tokio::spawn(async move {
        waiter
            .acquire(&Owner::random(), Some(Duration::from_secs(5)), None)
            .await
    });
    tokio::time::sleep(ms(200)).await;
    lock.release(&owner).await.unwrap();
    assert!(waiting.await.unwrap().is_ok());
}

/// A waiter of a client connected with `url` subscribes (it would still get the lock through
/// its re-checks were its pub/sub connection refused), then gets the lock when it is released.
async fn waiter_listens(server: &RedisServer, url: &str, name: &str) {
    let (holder, waiting) = (
        Client::connect(url).await.unwrap(),
        Client::connect(url).await.unwrap(),
    );
    let lock = holder.lock(name).unwrap();
    let owner = Owner::random();
    lock.acquire(&owner, NOW, None).await.unwrap();
    let waiter = waiting.lock(name).unwrap();
    let waits = tokio::spawn(async move {
        waiter
            .acquire(&Owner::random(), Some(Duration::from_secs(10)), None)
            .await
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    // The lock's channel and the waiting client's grant channel.
    while channels_of(server, name) < 2 {
        assert!(
            Instant::now() < deadline,
            "no subscription for {name} at {url}"
        );
        tokio::time::sleep(ms(10)).await;
    }
    lock.release(&owner).await.unwrap();
    assert!(waits.await.unwrap().is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_subscribe_on_servers_that_want_a_password_or_a_user_and_over_tls() {
    let server = RedisServer::start_with_password(Some("s3cret"));
    waiter_listens(&server, &server.url(), "with-password").await;
    server.add_user("app", "app-pass");
    let as_app = format!("redis://app:app-pass@127.0.0.1:{}/3", server.port());
    waiter_listens(&server, &as_app, "as-user").await;
    let tls = RedisServer::start_tls();
    waiter_listens(&tls, &tls.url(), "over-tls").await;
}

/// An attempt that times out is still on the wire: Redis runs it once it is free again. The
/// caller was told `Connection`, so what the late attempt did must be undone — a hold it took,
/// or a waiter it announced (which a release would otherwise grant the lock to).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_that_timed_out_is_undone_when_redis_runs_it_late() {
    let server = RedisServer::start();
    let client = builder(&server)
        .command_timeout(ms(300))
        .connect()
        .await
        .unwrap();
    let holder = connect(&server).await;
    let lock = client.lock("late attempt").unwrap();
    let held = holder.lock("late attempt").unwrap();
    let (me, other) = (Owner::random(), Owner::random());
    // Connected, and the script loaded (a first EVALSHA would fail late with NOSCRIPT).
    lock.acquire(&me, NOW, None).await.unwrap();
    assert_eq!(lock.release(&me).await.unwrap(), 0);

    // A free lock: the late attempt takes it.
    let stall = server.stall(ms(1000));
    let started = Instant::now();
    let err = lock.acquire(&me, NOW, None).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
    assert!(started.elapsed() < ms(900), "the command timeout bounds it");
    stall.join().unwrap();
    tokio::time::sleep(ms(300)).await;
    assert!(
        !lock.is_locked().await.unwrap(),
        "the late acquisition is released"
    );
    assert_eq!(client.watched_holds(), 0);

    // A held lock: the late attempt announces a waiter.
    held.acquire(&other, NOW, Some(Duration::from_secs(30)))
        .await
        .unwrap();
    let stall = server.stall(ms(1000));
    let err = lock
        .acquire(&me, Some(Duration::from_secs(10)), None)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
    stall.join().unwrap();
    tokio::time::sleep(ms(300)).await;
    assert_eq!(
        lock.inspect().await.unwrap().waiting_writers,
        0,
        "withdrawn"
    );
    assert_eq!(held.release(&other).await.unwrap(), 0);
    assert!(!lock.is_locked().await.unwrap(), "nobody to grant it to");
    assert!(lock_keys(&server).is_empty(), "{:?}", lock_keys(&server));
}

/// A release that runs into the command timeout (or whose caller stops waiting) is still on the
/// wire, and Redis runs it late: the hold ends by its owner's release. It was reported lost
/// (its watchdog mark went with the call), and the owner's retry said `LockLost`. Now the late
/// reply is heard out: nothing is reported, and the retry says `NotHeld`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_that_redis_runs_late_is_not_reported_lost() {
    let server = RedisServer::start();
    let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = events.clone();
    let client = builder(&server)
        .command_timeout(ms(300))
        // Longer than the stall, so the hold outlives it: ticks every second.
        .lease(ms(3000))
        .on_lock_lost(move |event| seen.lock().unwrap().push(event.name.clone()))
        .connect()
        .await
        .unwrap();
    let lock = client.lock("late release").unwrap();
    let owner = Owner::random();
    // Connected, and the script loaded (a first EVALSHA would fail late with NOSCRIPT).
    lock.acquire(&owner, NOW, None).await.unwrap();
    assert_eq!(lock.release(&owner).await.unwrap(), 0);

    for cancelled in [false, true] {
        let hold = lock.acquire(&owner, NOW, None).await.unwrap();
        let stall = server.stall(ms(1000));
        if cancelled {
            let release = tokio::time::timeout(ms(100), lock.release(&owner)).await;
            assert!(release.is_err(), "{release:?}");
        } else {
            let err = lock.release(&owner).await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
        }
        stall.join().unwrap();
        assert_eq!(
            lock.release(&owner).await.unwrap_err().kind(),
            ErrorKind::NotHeld
        );
        assert!(!lock.is_locked().await.unwrap(), "the late release ran");
        tokio::time::sleep(ms(1500)).await; // a renewal tick or two
        let state = (hold.is_lost(), hold.is_watched());
        assert_eq!(state, (false, false), "cancelled: {cancelled}");
        assert!(
            events.lock().unwrap().is_empty(),
            "{:?}",
            events.lock().unwrap()
        );
        assert_eq!(client.watched_holds(), 0);
    }
}

// After an outage, redis-rs' connection manager keeps the failed result of the reconnect it
// made while Redis was down and hands it to the next call without trying, however long Redis
// has been back. A hot call that finds no direct connection idle (they failed to open during
// the outage) goes to that connection, so it is sent behind a `PING` while the connection is
// suspect: the first call after an outage must work.

/// Stops `server` for longer than the manager's reconnect tries (three, up to 500 ms apart),
/// with a failed call of `client`'s in the outage, then starts it again (with its data).
async fn outage(server: &mut RedisServer, client: &Client) {
    server.stop();
    let err = client
        .lock("during-the-outage")
        .unwrap()
        .acquire(&Owner::random(), NOW, None)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
    tokio::time::sleep(ms(3_000)).await;
    server.restart();
    // Up and answering for a while (the keepalive's next PING is 30 s away).
    tokio::time::sleep(ms(1_000)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_acquire_after_an_outage_works() {
    limited(60, async {
        let mut server = RedisServer::start();
        let client = connect(&server).await;
        let lock = client.lock("after-the-outage").unwrap();
        let owner = Owner::random();
        lock.acquire(&owner, NOW, None).await.unwrap();
        lock.release(&owner).await.unwrap();
        outage(&mut server, &client).await;
        let hold = lock.acquire(&owner, Some(ms(5_000)), None).await.unwrap();
        assert_eq!(hold.hold_count(), 1);
        lock.release(&owner).await.unwrap();
    })
    .await;
}

/// A hold that outlived the outage (restarted with its data) is released by the first call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_release_after_an_outage_works() {
    limited(60, async {
        let mut server = RedisServer::start();
        let client = connect(&server).await;
        let lock = client.lock("kept-through-the-outage").unwrap();
        let owner = Owner::random();
        lock.acquire(&owner, NOW, Some(ms(30_000))).await.unwrap();
        ok(server.command(&["SAVE"]));
        outage(&mut server, &client).await;
        assert!(
            server
                .command(&["KEYS", "*kept-through*"])
                .contains("kept-through")
        );
        assert_eq!(lock.release(&owner).await.unwrap(), 0);
    })
    .await;
}

/// A client idle through the outage: only its keepalive's `PING` failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_clients_first_acquire_after_an_outage_works() {
    limited(60, async {
        let mut server = RedisServer::start();
        let client = builder(&server)
            .ping_interval(Some(ms(4_000)))
            .connect()
            .await
            .unwrap();
        let lock = client.lock("idle-through-the-outage").unwrap();
        server.stop();
        // The PING at 4 s fails, and so does the reconnect it sets off.
        tokio::time::sleep(ms(6_000)).await;
        server.restart();
        tokio::time::sleep(ms(500)).await; // before the next PING, at 8 s
        let owner = Owner::random();
        lock.acquire(&owner, Some(ms(5_000)), None).await.unwrap();
        lock.release(&owner).await.unwrap();
    })
    .await;
}

/// The calls that are not hot (reads, extend, inspect) may run twice, and do after an I/O
/// error: the kept error of the outage costs them a second try, not a failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_calls_work_soon_after_an_outage() {
    limited(60, async {
        let mut server = RedisServer::start();
        let client = connect(&server).await;
        let lock = client.lock("read-after-the-outage").unwrap();
        let owner = Owner::random();
        lock.acquire(&owner, NOW, Some(ms(30_000))).await.unwrap();
        ok(server.command(&["SAVE"]));
        outage(&mut server, &client).await;
        tokio::time::sleep(ms(1_500)).await;
        assert!(lock.is_locked().await.unwrap());
        lock.extend(&owner, ms(20_000)).await.unwrap();
        assert_eq!(
            client
                .inspect("read-after-the-outage")
                .await
                .unwrap()
                .holders
                .len(),
            1
        );
    })
    .await;
}
