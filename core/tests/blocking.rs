//! The blocking API used by the FFI: same semantics, callable from plain threads, cancellable.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use redlock_core::blocking::{CancelToken, Client};
use redlock_core::testing::RedisServer;
use redlock_core::{AcquireOptions, Error, Owner};

/// Triggers `cancel` from another thread after `delay`.
fn cancel_after(cancel: &CancelToken, delay: Duration) -> thread::JoinHandle<()> {
    let trigger = cancel.clone();
    thread::spawn(move || {
        thread::sleep(delay);
        trigger.cancel();
    })
}

#[test]
fn threads_contend_without_lost_updates() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).unwrap();
    let counter = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..5)
        .map(|_| {
            let lock = client.lock("blocking-counter").unwrap();
            let counter = counter.clone();
            thread::spawn(move || {
                let me = Owner::random();
                for _ in 0..100 {
                    lock.acquire(&me, None, None).unwrap();
                    let v = counter.load(Ordering::SeqCst);
                    thread::yield_now();
                    counter.store(v + 1, Ordering::SeqCst);
                    lock.release(&me).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(counter.load(Ordering::SeqCst), 500);
}

#[test]
fn a_wait_is_cancelled_from_another_thread_and_leaves_nothing() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).unwrap();
    let lock = client.lock("cancellable").unwrap();
    lock.acquire(&Owner::random(), Some(Duration::ZERO), None)
        .unwrap();
    let cancel = CancelToken::new();
    let canceller = cancel_after(&cancel, Duration::from_millis(200));
    let started = Instant::now();
    let result = lock.acquire_with(&Owner::random(), AcquireOptions::default(), Some(&cancel));
    assert_eq!(result.unwrap_err(), Error::Cancelled);
    assert!(started.elapsed() < Duration::from_secs(5));
    canceller.join().unwrap();
    thread::sleep(Duration::from_millis(200));
    assert_eq!(lock.inspect().unwrap().waiting_writers, 0);
}

#[test]
fn read_write_and_inspect_through_the_blocking_api() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).unwrap();
    let rw = client.read_write_lock("blocking-rw").unwrap();
    let (a, b) = (Owner::random(), Owner::random());
    rw.read().acquire(&a, Some(Duration::ZERO), None).unwrap();
    rw.read().acquire(&b, Some(Duration::ZERO), None).unwrap();
    assert_eq!(client.inspect("blocking-rw").unwrap().holder_count, 2);
    assert!(rw.write().try_acquire(&a, None).unwrap_err() == Error::UpgradeNotAllowed);
    rw.read().release(&a).unwrap();
    rw.read().release(&b).unwrap();
    assert!(!rw.read().is_locked().unwrap());
    client.close();
    assert_eq!(rw.read().is_locked().unwrap_err(), Error::Closed);
    assert_eq!(client.lock("x").err(), Some(Error::Closed));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocking_calls_inside_an_async_runtime_do_not_panic() {
    let server = RedisServer::start();
    let url = server.url();
    let result = tokio::task::spawn_blocking(move || {
        let client = Client::connect(&url)?;
        client
            .lock("nested")?
            .acquire(&Owner::random(), Some(Duration::ZERO), None)
    })
    .await
    .unwrap();
    assert!(result.is_ok());
    // Directly on an async worker thread too (blocks that worker, but works).
    let client = Client::connect(&server.url()).unwrap();
    assert!(client.lock("nested").unwrap().is_locked().unwrap());
}

// Blocking callers make an acquire's first attempt and a release on their own socket (`direct`).

#[test]
fn direct_calls_reload_scripts_and_reconnect_after_a_restart() {
    let mut server = RedisServer::start();
    let client = Client::connect(&server.url()).unwrap();
    let lock = client.lock("direct-restart").unwrap();
    let me = Owner::random();
    lock.acquire(&me, Some(Duration::ZERO), None).unwrap();
    assert_eq!(lock.release(&me).unwrap(), 0);
    assert!(server.command(&["SCRIPT", "FLUSH"]).starts_with("+OK"));
    assert_eq!(lock.acquire(&me, None, None).unwrap().hold_count(), 1);
    assert_eq!(lock.release(&me).unwrap(), 0);

    server.restart();
    // The idle socket is dead: a call may fail once (Connection), then a new one is opened.
    let mut acquired = false;
    for _ in 0..20 {
        match lock.acquire(&me, Some(Duration::ZERO), None) {
            Ok(hold) => {
                assert_eq!(hold.hold_count(), 1);
                acquired = true;
                break;
            }
            Err(Error::Connection(_)) => thread::sleep(Duration::from_millis(100)),
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
    assert!(acquired);
    assert_eq!(lock.release(&me).unwrap(), 0);
    assert_eq!(lock.release(&me).unwrap_err(), Error::NotHeld);
}

/// A server that closes clients idle past its `timeout` closes the direct sockets too: the
/// calls after the pause succeed (a closed socket is found before it is used, not by a call).
#[test]
fn direct_calls_after_the_server_closed_idle_connections_succeed() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).unwrap();
    let lock = client.lock("direct-idle-timeout").unwrap();
    let me = Owner::random();
    let lease = Some(Duration::from_secs(10));
    lock.acquire(&me, Some(Duration::ZERO), lease).unwrap();
    assert_eq!(lock.release(&me).unwrap(), 0);
    assert!(
        server
            .command(&["CONFIG", "SET", "timeout", "1"])
            .starts_with("+OK")
    );
    let started = Instant::now();
    let normal = || {
        let list = server.command(&["CLIENT", "LIST", "TYPE", "normal"]);
        let others = list
            .lines()
            .filter(|l| l.contains("id=") && !l.contains("cmd=client|list"));
        others.count()
    };
    while normal() > 0 {
        assert!(started.elapsed() < Duration::from_secs(10), "never closed");
        thread::sleep(Duration::from_millis(100));
    }
    for _ in 0..3 {
        assert_eq!(
            lock.acquire(&me, Some(Duration::ZERO), lease)
                .unwrap()
                .hold_count(),
            1
        );
        assert_eq!(lock.release(&me).unwrap(), 0);
    }
}

/// A direct release that runs into the command timeout is run late by Redis: its reply is read
/// on its connection, so the hold is not reported lost and the retry says `NotHeld`. Also for a
/// release sent behind a `PING` (the client's last release granted the lock to another client's
/// waiter): its late reply is the second on the connection. (Before, the `PONG` was read as the
/// release's reply, and the hold was reported lost.)
#[test]
fn a_direct_release_that_redis_runs_late_is_not_reported_lost() {
    late_direct_release_is_heard(false);
    late_direct_release_is_heard(true);
}

fn late_direct_release_is_heard(behind_ping: bool) {
    let server = RedisServer::start();
    let events = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = events.clone();
    let client = Client::from_builder(
        redlock_core::Client::builder(server.url())
            .command_timeout(Duration::from_millis(300))
            .lease(Duration::from_secs(3))
            .on_lock_lost(move |event| seen.lock().unwrap().push(event.name.clone())),
    )
    .unwrap();
    let lock = client.lock("direct-late-release").unwrap();
    let me = Owner::random();
    lock.acquire(&me, Some(Duration::ZERO), None).unwrap();
    let waiting = behind_ping.then(|| {
        let other = Client::connect(&server.url()).unwrap();
        let lock = other.lock("direct-late-release").unwrap();
        thread::spawn(move || {
            let them = Owner::random();
            lock.acquire(&them, Some(Duration::from_secs(10)), None)
                .unwrap();
            assert_eq!(lock.release(&them).unwrap(), 0);
        })
    });
    while behind_ping && lock.inspect().unwrap().waiting_writers == 0 {
        thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(lock.release(&me).unwrap(), 0); // granted to the waiter, if any
    if let Some(waiting) = waiting {
        waiting.join().unwrap();
    }
    let hold = lock.acquire(&me, Some(Duration::ZERO), None).unwrap();
    let stall = server.stall(Duration::from_millis(1000));
    assert!(matches!(lock.release(&me), Err(Error::Connection(_))));
    stall.join().unwrap();
    assert_eq!(
        lock.release(&me).unwrap_err(),
        Error::NotHeld,
        "behind a PING: {behind_ping}"
    );
    assert!(!lock.is_locked().unwrap(), "the late release ran");
    thread::sleep(Duration::from_millis(1500)); // a renewal tick or two
    assert_eq!((hold.is_lost(), hold.is_watched()), (false, false));
    assert!(
        events.lock().unwrap().is_empty(),
        "{:?}",
        events.lock().unwrap()
    );
}

/// A cancel token ends a blocking acquire while its first attempt waits for Redis' reply (a
/// stalled server), not only between attempts: `Cancelled` at once, and the attempt, which Redis
/// runs late, is undone.
#[test]
fn a_cancel_ends_an_acquire_whose_first_attempt_waits_for_redis() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).unwrap();
    let lock = client.lock("direct-cancelled").unwrap();
    let (me, holder) = (Owner::random(), Owner::random());
    lock.acquire(&me, Some(Duration::ZERO), None).unwrap();
    assert_eq!(lock.release(&me).unwrap(), 0);
    let lease = Some(Duration::from_secs(30));
    for held in [false, true] {
        if held {
            lock.acquire(&holder, Some(Duration::ZERO), lease).unwrap();
        }
        let stall = server.stall(Duration::from_millis(1500));
        let cancel = CancelToken::new();
        let trigger = cancel_after(&cancel, Duration::from_millis(200));
        let started = Instant::now();
        let options = AcquireOptions::new(None, None);
        let result = lock.acquire_with(&me, options, Some(&cancel));
        let took = started.elapsed();
        trigger.join().unwrap();
        assert_eq!(result.unwrap_err(), Error::Cancelled, "held: {held}");
        assert!(took < Duration::from_millis(800), "returned after {took:?}");
        stall.join().unwrap();
        thread::sleep(Duration::from_millis(300)); // the late attempt's undo
        let info = client.inspect("direct-cancelled").unwrap();
        assert_eq!(info.holders.len(), usize::from(held), "{info:?}");
        assert_eq!(info.waiting_writers, 0, "{info:?}");
        if held {
            assert_eq!(lock.release(&holder).unwrap(), 0);
        }
    }
    assert!(!lock.is_locked().unwrap());
}

#[test]
fn a_direct_call_that_times_out_never_reads_its_late_reply_later() {
    let server = RedisServer::start();
    let client = Client::from_builder(
        redlock_core::Client::builder(server.url()).command_timeout(Duration::from_millis(300)),
    )
    .unwrap();
    let lock = client.lock("direct-timeout").unwrap();
    let me = Owner::random();
    lock.acquire(&me, Some(Duration::ZERO), None).unwrap();
    // Every other client's commands wait for 1 s: the release is sent, then times out.
    assert!(
        server
            .command(&["CLIENT", "PAUSE", "1000", "ALL"])
            .starts_with("+OK")
    );
    let started = Instant::now();
    assert!(matches!(lock.release(&me), Err(Error::Connection(_))));
    assert!(started.elapsed() < Duration::from_millis(900));
    thread::sleep(Duration::from_millis(1000));
    // A timed-out call's outcome is unknown: the release ran once Redis resumed or, its socket
    // closed first, never. Either way a later call must read its own reply, never the late
    // {1, 0} of that release (which an acquire would reject as unexpected).
    if lock.hold_count(&me).unwrap() == 1 {
        assert_eq!(lock.release(&me).unwrap(), 0);
    }
    assert!(!lock.is_locked().unwrap());
    let hold = lock.acquire(&me, Some(Duration::ZERO), None).unwrap();
    assert_eq!(hold.hold_count(), 1);
    assert_eq!(lock.release(&me).unwrap(), 0);
    client.close();
    assert_eq!(lock.release(&me).unwrap_err(), Error::Closed);
}

#[test]
fn a_direct_release_of_a_lost_hold_reports_it_and_runs_the_callback() {
    let server = RedisServer::start();
    let lost = Arc::new(AtomicU64::new(0));
    let counter = lost.clone();
    let client = Client::from_builder(redlock_core::Client::builder(server.url()).on_lock_lost(
        move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
        },
    ))
    .unwrap();
    let lock = client.lock("direct-lost").unwrap();
    let me = Owner::random();
    lock.acquire(&me, Some(Duration::ZERO), None).unwrap(); // kept by the watchdog
    let admin = Client::connect(&server.url()).unwrap();
    assert!(admin.force_unlock("direct-lost").unwrap());
    // Called from a plain thread, outside any runtime: the callback still runs.
    assert_eq!(lock.release(&me).unwrap_err(), Error::LockLost);
    let deadline = Instant::now() + Duration::from_secs(5);
    while lost.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(lost.load(Ordering::SeqCst), 1);
}

#[test]
fn a_connect_to_a_server_that_never_answers_is_cancelled_from_another_thread() {
    // The kernel accepts connections into the backlog; nobody ever answers them.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("redis://{}", silent.local_addr().unwrap());
    let builder = redlock_core::Client::builder(&url).connect_timeout(Duration::from_secs(20));
    let cancel = CancelToken::new();
    let canceller = cancel_after(&cancel, Duration::from_millis(200));
    let started = Instant::now();
    let result = Client::connect_with(builder, Some(&cancel));
    canceller.join().unwrap();
    assert!(
        matches!(result, Err(Error::Cancelled)),
        "{:?}",
        result.err()
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn a_direct_attempt_that_timed_out_is_undone_when_redis_runs_it_late() {
    late_attempts_are_undone(RedisServer::start());
}

/// Over TLS the late reply cannot be read (redis-rs' connection drops it): the undo goes by
/// what Redis shows once the attempt has run.
#[test]
fn a_direct_attempt_over_tls_that_timed_out_is_undone_when_redis_runs_it_late() {
    late_attempts_are_undone(RedisServer::start_tls());
}

fn late_attempts_are_undone(server: RedisServer) {
    let client = Client::from_builder(
        redlock_core::Client::builder(server.url()).command_timeout(Duration::from_millis(300)),
    )
    .unwrap();
    let lock = client.lock("direct-late-attempt").unwrap();
    let me = Owner::random();
    // A direct connection is open before Redis stalls (a first one would wait in its handshake).
    lock.acquire(&me, Some(Duration::ZERO), None).unwrap();
    assert_eq!(lock.release(&me).unwrap(), 0);
    let stall = server.stall(Duration::from_millis(1000));
    let started = Instant::now();
    let result = lock.acquire(&me, Some(Duration::ZERO), None);
    assert!(matches!(result, Err(Error::Connection(_))), "{result:?}");
    assert!(started.elapsed() < Duration::from_millis(900));
    stall.join().unwrap();
    thread::sleep(Duration::from_millis(300));
    // Redis ran the attempt once it resumed; its caller heard `Connection`, so it is undone.
    assert!(
        !lock.is_locked().unwrap(),
        "the late acquisition is released"
    );
    let hold = lock.acquire(&me, Some(Duration::ZERO), None).unwrap();
    assert_eq!(hold.hold_count(), 1);

    // A held lock: the late attempt of a waiting acquire announces a waiter, which is withdrawn.
    let other = Owner::random();
    let stall = server.stall(Duration::from_millis(1000));
    let result = lock.acquire(&other, Some(Duration::from_secs(10)), None);
    assert!(matches!(result, Err(Error::Connection(_))), "{result:?}");
    stall.join().unwrap();
    thread::sleep(Duration::from_millis(300));
    assert_eq!(lock.inspect().unwrap().waiting_writers, 0, "withdrawn");
    assert_eq!(lock.release(&me).unwrap(), 0);
    assert!(!lock.is_locked().unwrap(), "nobody to grant it to");
}

/// One direct acquire and release (the blocking API's own sockets), then a check of the hold.
fn direct_cycle(client: &Client, name: &str) {
    let lock = client.lock(name).unwrap();
    let me = Owner::random();
    let hold = lock.acquire(&me, Some(Duration::ZERO), None).unwrap();
    assert_eq!(hold.hold_count(), 1);
    assert!(lock.is_held_by(&me).unwrap());
    assert_eq!(lock.release(&me).unwrap(), 0);
    assert_eq!(lock.release(&me).unwrap_err(), Error::NotHeld);
}

#[test]
fn direct_sockets_log_in_with_a_password_or_a_user_and_use_the_url_s_database() {
    let server = RedisServer::start_with_password(Some("s3cret"));
    direct_cycle(&Client::connect(&server.url()).unwrap(), "direct-auth");

    server.add_user("app", "app-pass");
    let port = server.port();
    let as_app = Client::connect(&format!("redis://app:app-pass@127.0.0.1:{port}/3")).unwrap();
    direct_cycle(&as_app, "direct-acl");
    // The hold is in database 3, where the URL says, and not in database 0.
    let in_db3 = as_app.lock("direct-db").unwrap();
    let me = Owner::random();
    in_db3.acquire(&me, Some(Duration::ZERO), None).unwrap();
    let in_db0 = Client::connect(&server.url()).unwrap();
    assert!(!in_db0.lock("direct-db").unwrap().is_locked().unwrap());
    let elsewhere = Client::connect(&format!("redis://:s3cret@127.0.0.1:{port}/3")).unwrap();
    assert!(elsewhere.lock("direct-db").unwrap().is_locked().unwrap());
    assert_eq!(in_db3.release(&me).unwrap(), 0);

    // The password changes after this client connected, before its first direct call: the new
    // direct socket is refused, as `Connection`, and the password is not in the message.
    let late = Client::connect(&format!("redis://app:app-pass@127.0.0.1:{port}/3")).unwrap();
    let changed = server.command(&["ACL", "SETUSER", "app", "resetpass", ">new-pass"]);
    assert!(changed.starts_with("+OK"), "{changed}");
    let refused = late
        .lock("direct-refused")
        .unwrap()
        .acquire(&Owner::random(), Some(Duration::ZERO), None)
        .unwrap_err();
    assert!(matches!(refused, Error::Connection(_)), "{refused:?}");
    assert!(!refused.to_string().contains("app-pass"), "{refused}");
}

#[test]
fn direct_calls_over_tls_use_redis_rs_connection() {
    let server = RedisServer::start_tls();
    let client = Client::connect(&server.url()).unwrap();
    direct_cycle(&client, "direct-tls");
    // Contended, so waiting (pub/sub over TLS) and direct calls mix.
    let counter = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (lock, counter) = (
                client.lock("direct-tls-contended").unwrap(),
                counter.clone(),
            );
            thread::spawn(move || {
                let me = Owner::random();
                for _ in 0..50 {
                    lock.acquire(&me, Some(Duration::from_secs(10)), None)
                        .unwrap();
                    let seen = counter.load(Ordering::SeqCst);
                    counter.store(seen + 1, Ordering::SeqCst);
                    lock.release(&me).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(counter.load(Ordering::SeqCst), 200);
}

#[test]
fn a_direct_re_entry_that_timed_out_is_taken_back_when_redis_runs_it_late() {
    let server = RedisServer::start();
    let client = Client::from_builder(
        redlock_core::Client::builder(server.url()).command_timeout(Duration::from_millis(300)),
    )
    .unwrap();
    let lock = client.lock("direct-late-reentry").unwrap();
    let me = Owner::random();
    lock.acquire(&me, Some(Duration::ZERO), None).unwrap();
    let stall = server.stall(Duration::from_millis(1000));
    let result = lock.acquire(&me, Some(Duration::ZERO), None);
    assert!(matches!(result, Err(Error::Connection(_))), "{result:?}");
    stall.join().unwrap();
    // Its late reply is read on its own socket, so the one count it added is released.
    let deadline = Instant::now() + Duration::from_secs(5);
    while lock.hold_count(&me).unwrap() != 1 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(lock.hold_count(&me).unwrap(), 1);
    assert_eq!(lock.release(&me).unwrap(), 0);
    assert!(!lock.is_locked().unwrap());
}

#[test]
fn direct_calls_with_timeouts_too_long_to_count_still_work() {
    let server = RedisServer::start();
    let builder = redlock_core::Client::builder(server.url())
        .command_timeout(Duration::MAX)
        .connect_timeout(Duration::MAX);
    let client = Client::from_builder(builder).unwrap();
    direct_cycle(&client, "direct-huge-timeouts");
}

#[test]
fn direct_releases_go_behind_a_ping_after_a_grant_to_another_client() {
    direct_release_behind_ping(RedisServer::start());
    direct_release_behind_ping(RedisServer::start_tls());
}

/// Whether some client listens on the lock channel of `name` and on one client's grant channel
/// of it (see common::channels_of).
fn subscribed(server: &RedisServer, name: &str) -> bool {
    let reply = server.command(&["PUBSUB", "CHANNELS", &format!("*{{{name}}}*")]);
    reply.starts_with("*2\r\n")
}

/// As grants.rs' async test, on the direct sockets (plain, or redis-rs' over TLS).
fn direct_release_behind_ping(server: RedisServer) {
    let pings = || {
        let info = server.command(&["INFO", "commandstats"]);
        info.lines()
            .find_map(|l| l.strip_prefix("cmdstat_ping:calls="))
            .and_then(|rest| rest.split(',').next())
            .map_or(0, |n| n.parse::<u64>().unwrap())
    };
    let holder_client = Client::connect(&server.url()).unwrap();
    let waiter_client = Client::connect(&server.url()).unwrap();
    let connected = pings(); // each connect checks its connection with one
    let lock = holder_client.lock("direct-behind-ping").unwrap();
    let holder = Owner::random();
    let lease = Some(Duration::from_secs(30));
    lock.acquire(&holder, Some(Duration::ZERO), lease).unwrap();
    let waiter_lock = waiter_client.lock("direct-behind-ping").unwrap();
    let stats = waiter_client.lock("direct-behind-ping").unwrap();
    let waiting = thread::spawn(move || {
        let me = Owner::random();
        waiter_lock
            .acquire(&me, Some(Duration::from_secs(10)), lease)
            .unwrap();
        waiter_lock.release(&me).unwrap();
    });
    // Its first attempt, and the one it makes once subscribed, found the lock taken; and its
    // client listens for grants. (Its subscribe waits for the confirmation no longer than a
    // re-check: on a loaded machine, over TLS, the second attempt can come before it, and a
    // release then passes over a waiter that announced itself twice without listening.)
    while stats.stats().unwrap().failed_attempts < 2 || !subscribed(&server, "direct-behind-ping") {
        thread::sleep(Duration::from_millis(2));
    }
    lock.release(&holder).unwrap(); // granted to the waiter's client
    waiting.join().unwrap();
    assert_eq!(pings(), connected);

    lock.acquire(&holder, Some(Duration::ZERO), lease).unwrap();
    assert!(server.command(&["SCRIPT", "FLUSH"]).starts_with("+OK"));
    assert_eq!(lock.release(&holder).unwrap(), 0);
    assert!(pings() > connected);

    let before = pings();
    lock.acquire(&holder, Some(Duration::ZERO), lease).unwrap();
    assert_eq!(lock.release(&holder).unwrap(), 0);
    assert_eq!(pings(), before);
}
