//! TLS (`rediss://`) and authentication on the client's own connections: late replies, closed
//! connections, certificates, and passwords changed while the client runs.

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

mod common;

use common::{RedisServer, ms};
use redlock_core::blocking::Client;
use redlock_core::{Error, Owner};

fn hgetall(server: &RedisServer, key: &str) -> String {
    server.command(&["HGETALL", key])
}

fn keys(server: &RedisServer) -> String {
    server.command(&["KEYS", "*"])
}

/// A blocking release over TLS that runs into the command timeout, which Redis runs late: as
/// over plain TCP (blocking.rs' a_direct_release_that_redis_runs_late_is_not_reported_lost),
/// the hold must not be reported lost, and the retry says `NotHeld`.
#[test]
fn a_blocking_release_over_tls_that_redis_runs_late_is_not_reported_lost() {
    let server = RedisServer::start_tls();
    let (client, events) = recording_losses(
        redlock_core::Client::builder(server.url())
            .command_timeout(ms(300))
            .lease(Duration::from_secs(3)),
    );
    let lock = client.lock("tls-late-release").unwrap();
    let me = Owner::random();
    lock.acquire(&me, Some(Duration::ZERO), None).unwrap();
    assert_eq!(lock.release(&me).unwrap(), 0);
    let hold = lock.acquire(&me, Some(Duration::ZERO), None).unwrap();
    let stall = server.stall(ms(1000));
    let result = lock.release(&me);
    assert!(matches!(result, Err(Error::Connection(_))), "{result:?}");
    stall.join().unwrap();
    thread::sleep(ms(300));
    println!("state after the late release: {:?}", keys(&server));
    assert!(!lock.is_locked().unwrap(), "the late release ran");
    let retry = lock.release(&me);
    thread::sleep(ms(1500)); // a renewal tick or two
    let lost = events.lock().unwrap().clone();
    println!(
        "retry: {retry:?}; hold lost: {}, watched: {}; lock-lost events: {lost:?}",
        hold.is_lost(),
        hold.is_watched()
    );
    assert_eq!(retry.unwrap_err(), Error::NotHeld);
    assert_eq!((hold.is_lost(), hold.is_watched()), (false, false));
    assert!(lost.is_empty(), "{lost:?}");
}

/// A blocking re-entry over TLS that times out and runs late: the count it added must
/// be taken back (as over plain TCP: blocking.rs'
/// a_direct_re_entry_that_timed_out_is_taken_back_when_redis_runs_it_late), so that the
/// owner's one release frees the lock.
#[test]
fn a_blocking_re_entry_over_tls_that_timed_out_is_taken_back() {
    let server = RedisServer::start_tls();
    let client = Client::from_builder(
        redlock_core::Client::builder(server.url())
            .command_timeout(ms(300))
            .lease(Duration::from_secs(3)),
    )
    .unwrap();
    let lock = client.lock("tls-late-reentry").unwrap();
    let me = Owner::random();
    lock.acquire(&me, Some(Duration::ZERO), None).unwrap();
    let stall = server.stall(ms(1000));
    let result = lock.acquire(&me, Some(Duration::ZERO), None);
    assert!(matches!(result, Err(Error::Connection(_))), "{result:?}");
    stall.join().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while lock.hold_count(&me).unwrap() != 1 && Instant::now() < deadline {
        thread::sleep(ms(20));
    }
    let count = lock.hold_count(&me).unwrap();
    println!("hold count 5 s after the late re-entry: {count}");
    // The caller was told its re-entry failed: it releases its one hold.
    let released = lock.release(&me);
    println!("release: {released:?}");
    // Past several leases (the watchdog renews the hold the caller thinks it has released).
    thread::sleep(Duration::from_secs(4));
    let info = lock.inspect().unwrap();
    println!("after 4 s more: {info:?}");
    assert_eq!(count, 1);
    assert_eq!(released.unwrap(), 0);
    assert!(!lock.is_locked().unwrap());
}

/// Connections that the server closed (its idle `timeout`, a kill) after blocking calls over
/// TLS: at most one later call fails (before, each idle direct connection failed one).
#[test]
fn blocking_calls_over_tls_after_the_server_closed_the_connections_fail_at_most_once() {
    let server = RedisServer::start_tls();
    let client = Client::connect(&server.url()).unwrap();
    let lock = client.lock("tls-idle").unwrap();
    // Four threads at once: four direct connections, all idle afterwards.
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let lock = client.lock("tls-idle").unwrap();
            thread::spawn(move || {
                let me = Owner::random();
                for _ in 0..20 {
                    lock.acquire(&me, Some(Duration::from_secs(10)), None)
                        .unwrap();
                    thread::sleep(ms(2));
                    lock.release(&me).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let killed = server.command(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"]);
    println!("killed: {killed:?}");
    thread::sleep(ms(200));
    let me = Owner::random();
    let mut failures = Vec::new();
    for i in 0..10 {
        match lock.acquire(&me, Some(Duration::ZERO), None) {
            Ok(_) => {
                assert_eq!(lock.release(&me).unwrap(), 0);
            }
            Err(e) => failures.push((i, e)),
        }
    }
    println!("failed calls: {failures:?}");
    println!("state: {:?}", keys(&server));
    assert!(failures.len() <= 1, "{failures:?}");
}

/// A blocking client of `builder` and the names of the holds it reports lost.
fn recording_losses(builder: redlock_core::ClientBuilder) -> (Client, Arc<Mutex<Vec<String>>>) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let builder = builder.on_lock_lost(move |event| seen.lock().unwrap().push(event.name.clone()));
    (Client::from_builder(builder).unwrap(), events)
}

/// An acquire that times out while Redis stalls for a second (Redis runs it late).
async fn acquire_while_redis_stalls(server: &RedisServer, lock: &redlock_core::Lock, me: &Owner) {
    let stall = server.stall(ms(1000));
    let err = lock
        .acquire(me, Some(Duration::ZERO), None)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Connection(_)), "{err:?}");
    stall.join().unwrap();
}

fn tokio_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn tls_port(server: &RedisServer) -> u16 {
    server.url()["rediss://127.0.0.1:".len()..]
        .split('/')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// A TLS client that logs in as an ACL user whose password changes while the client runs (and
/// whose connections are killed): every new connection (direct sockets, reconnects of the
/// command and pub/sub connections) is refused, as a bounded `Connection` error without the
/// password; when the password is back, the client works again. Blocking and async, exclusive
/// and read/write.
#[test]
fn tls_password_changed_while_the_client_runs() {
    let server = RedisServer::start_tls();
    server.add_user("app", "app-pass");
    let url = format!(
        "rediss://app:app-pass@127.0.0.1:{}/#insecure",
        tls_port(&server)
    );
    let client = Client::from_builder(
        redlock_core::Client::builder(&url)
            .command_timeout(ms(500))
            .connect_timeout(ms(500)),
    )
    .unwrap();
    let runtime = tokio_runtime();
    let lock = client.lock("tls-auth").unwrap();
    let rw = client.read_write_lock("tls-auth-rw").unwrap();
    let me = Owner::random();
    assert_eq!(
        lock.acquire(&me, Some(Duration::ZERO), None)
            .unwrap()
            .hold_count(),
        1
    );
    assert_eq!(lock.release(&me).unwrap(), 0);

    let async_client = runtime
        .block_on(
            redlock_core::Client::builder(&url)
                .command_timeout(ms(500))
                .connect_timeout(ms(500))
                .connect(),
        )
        .unwrap();
    runtime.block_on(async {
        let l = async_client.lock("tls-auth-async").unwrap();
        l.acquire(&me, Some(Duration::ZERO), None).await.unwrap();
        assert_eq!(l.release(&me).await.unwrap(), 0);
    });
    let changed = server.command(&["ACL", "SETUSER", "app", "resetpass", ">new-pass"]);
    assert!(changed.starts_with("+OK"), "{changed}");
    let killed = server.command(&["CLIENT", "KILL", "USER", "app"]);
    println!("killed: {killed:?}");
    thread::sleep(ms(100));
    let mut errors = Vec::new();
    for round in 0..3 {
        let started = Instant::now();
        let got = lock.acquire(&me, Some(Duration::ZERO), None);
        let took = started.elapsed();
        println!(
            "blocking acquire {round}: {:?} in {took:?}",
            got.as_ref().map(|h| h.hold_count())
        );
        assert!(took < Duration::from_secs(3), "{took:?}");
        errors.push(got.err());
        let got = rw.read().acquire(&me, Some(Duration::ZERO), None);
        errors.push(got.err());
        let async_client = async_client.clone();
        let started = Instant::now();
        let got = runtime.block_on(async {
            async_client
                .lock("tls-auth-async")
                .unwrap()
                .acquire(&me, Some(Duration::ZERO), None)
                .await
        });
        println!(
            "async acquire {round}: {:?} in {:?}",
            got.as_ref().map(|h| h.hold_count()),
            started.elapsed()
        );
        errors.push(got.err());
    }
    for e in &errors {
        let e = e.as_ref().expect("refused while the password is wrong");
        assert!(matches!(e, Error::Connection(_)), "{e:?}");
        assert!(!e.to_string().contains("app-pass"), "{e}");
    }
    println!("errors: {errors:?}");
    println!("state: {:?}", keys(&server));
    // Nothing was taken in Redis by the refused calls.
    assert!(!keys(&server).contains("tls-auth"), "{}", keys(&server));

    let back = server.command(&["ACL", "SETUSER", "app", "resetpass", ">app-pass"]);
    assert!(back.starts_with("+OK"), "{back}");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match lock.acquire(&me, Some(Duration::ZERO), None) {
            Ok(hold) => {
                assert_eq!(hold.hold_count(), 1);
                break;
            }
            Err(e) => {
                assert!(Instant::now() < deadline, "never recovered: {e:?}");
                thread::sleep(ms(100));
            }
        }
    }
    assert_eq!(lock.release(&me).unwrap(), 0);
    let hold = rw.write().acquire(&me, Some(Duration::ZERO), None).unwrap();
    assert_eq!(hold.hold_count(), 1);
    assert_eq!(rw.write().release(&me).unwrap(), 0);
    assert!(!lock.is_locked().unwrap());
    runtime.block_on(async {
        let l = async_client.lock("tls-auth-async").unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match l.acquire(&me, Some(Duration::ZERO), None).await {
                Ok(hold) => {
                    assert_eq!(hold.hold_count(), 1);
                    break;
                }
                Err(e) => {
                    assert!(Instant::now() < deadline, "async never recovered: {e:?}");
                    tokio::time::sleep(ms(100)).await;
                }
            }
        }
        assert_eq!(l.release(&me).await.unwrap(), 0);
    });
}

/// Certificates: no `#insecure` and a self-signed certificate, a certificate for another name,
/// and a `rediss://` URL at a plain port: each a clear, bounded `Connection` error at connect,
/// never a silent plain-text connection.
#[test]
fn tls_certificate_checks_fail_clearly() {
    let server = RedisServer::start_tls();
    let port = tls_port(&server);
    let cert = server.command(&["CONFIG", "GET", "tls-cert-file"]);
    let cert = cert.lines().nth(4).unwrap().to_owned();
    let attempt = |url: &str| {
        let started = Instant::now();
        let got = Client::from_builder(
            redlock_core::Client::builder(url)
                .connect_timeout(ms(1000))
                .command_timeout(ms(1000)),
        );
        let took = started.elapsed();
        let result = got.map(|c| {
            let lock = c.lock("tls-cert").unwrap();
            let me = Owner::random();
            let hold = lock
                .acquire(&me, Some(Duration::ZERO), None)
                .map(|h| h.hold_count());
            let _ = lock.release(&me);
            hold
        });
        println!("{url}: {result:?} in {took:?}");
        assert!(took < Duration::from_secs(5), "{took:?}");
        result
    };
    let unverified = attempt(&format!("rediss://127.0.0.1:{port}"));
    assert!(
        matches!(unverified, Err(Error::Connection(_))),
        "{unverified:?}"
    );
    let plain = attempt(&format!("rediss://127.0.0.1:{}/#insecure", server.port()));
    assert!(matches!(plain, Err(Error::Connection(_))), "{plain:?}");
    // Trust the server's certificate (OpenSSL reads SSL_CERT_FILE).
    // SAFETY: this test binary's other tests do not read the environment.
    unsafe { std::env::set_var("SSL_CERT_FILE", &cert) };
    let trusted = attempt(&format!("rediss://127.0.0.1:{port}"));
    assert_eq!(trusted.unwrap().unwrap(), 1);
    let other_name = attempt(&format!("rediss://localhost:{port}"));
    unsafe { std::env::remove_var("SSL_CERT_FILE") };
    assert!(
        matches!(other_name, Err(Error::Connection(_))),
        "{other_name:?}"
    );
}

/// Async API over TLS: an attempt and a release that time out while Redis stalls and run late
/// (the multiplexed connection): the attempt is undone once, the release is not reported lost.
/// (Over plain TCP: resilience.rs.)
#[test]
fn tls_async_late_attempt_and_release() {
    async_late_attempt_and_release(RedisServer::start_tls());
}

fn async_late_attempt_and_release(server: RedisServer) {
    // A runtime of its own (blocking::block_on would make the calls the blocking API's).
    tokio_runtime().block_on(async {
        let events = Arc::new(Mutex::new(Vec::new()));
        let seen = events.clone();
        let client = redlock_core::Client::builder(server.url())
            .command_timeout(ms(300))
            .lease(Duration::from_secs(3))
            .on_lock_lost(move |event| seen.lock().unwrap().push(event.name.clone()))
            .connect()
            .await
            .unwrap();
        for rw in [false, true] {
            let lock = if rw {
                client.read_write_lock("tls-async-rw").unwrap().write()
            } else {
                client.lock("tls-async").unwrap()
            };
            let me = Owner::random();
            lock.acquire(&me, Some(Duration::ZERO), None).await.unwrap();
            // Late re-entry: taken back.
            acquire_while_redis_stalls(&server, &lock, &me).await;
            for _ in 0..10 {
                if lock.hold_count(&me).await.unwrap() == 1 {
                    break;
                }
                tokio::time::sleep(ms(500)).await;
            }
            println!(
                "after the late re-entry (rw {rw}): {}",
                hgetall(
                    &server,
                    &format!(
                        "redlock:{{{}}}",
                        if rw { "tls-async-rw" } else { "tls-async" }
                    )
                )
            );
            println!("keys: {}", keys(&server).replace("\r\n", " "));
            assert_eq!(lock.hold_count(&me).await.unwrap(), 1, "rw {rw}");
            // Late release: heard out.
            let hold = lock.acquire(&me, Some(Duration::ZERO), None).await.unwrap();
            assert_eq!(hold.hold_count(), 2);
            assert_eq!(lock.release(&me).await.unwrap(), 1);
            let stall = server.stall(ms(1000));
            let err = lock.release(&me).await.unwrap_err();
            assert!(matches!(err, Error::Connection(_)), "{err:?}");
            stall.join().unwrap();
            tokio::time::sleep(ms(300)).await;
            assert_eq!(
                lock.release(&me).await.unwrap_err(),
                Error::NotHeld,
                "rw {rw}"
            );
            tokio::time::sleep(ms(1500)).await;
            assert!(!hold.is_lost());
            assert!(
                events.lock().unwrap().is_empty(),
                "{:?}",
                events.lock().unwrap()
            );
            // Late fresh acquire: undone.
            acquire_while_redis_stalls(&server, &lock, &me).await;
            tokio::time::sleep(ms(500)).await;
            assert!(!lock.is_locked().await.unwrap(), "rw {rw}");
        }
        assert_eq!(client.watched_holds(), 0);
        println!("state: {:?}", keys(&server));
    });
}

/// The watchdog renews over TLS while the server kills every connection (command, pub/sub)
/// again and again, and a waiter of another client is woken over its TLS pub/sub connection
/// once the hold is released.
#[test]
fn tls_watchdog_and_waiters_through_connection_kills() {
    let server = RedisServer::start_tls();
    let (client, events) =
        recording_losses(redlock_core::Client::builder(server.url()).lease(ms(1500)));
    let waiter_client = Client::from_builder(
        redlock_core::Client::builder(server.url()).recheck_interval(Duration::from_secs(60)),
    )
    .unwrap();
    let lock = client.lock("tls-watchdog").unwrap();
    let me = Owner::random();
    let hold = lock.acquire(&me, Some(Duration::ZERO), None).unwrap();
    let waiter_lock = waiter_client.lock("tls-watchdog").unwrap();
    let waiting = thread::spawn(move || {
        let them = Owner::random();
        let started = Instant::now();
        // Over TLS, a call on the command connection that the server killed fails once
        // (lib.rs): an attempt the waiter makes after a kill may, so it waits again.
        let mut failed = 0;
        let got = loop {
            match waiter_lock.acquire(&them, Some(Duration::from_secs(30)), None) {
                Err(Error::Connection(_)) if failed < 6 => failed += 1,
                other => break other,
            }
        };
        let took = started.elapsed();
        let count = got.as_ref().map(|h| h.hold_count()).map_err(|e| e.clone());
        if got.is_ok() {
            assert_eq!(waiter_lock.release(&them).unwrap(), 0);
        }
        (count, took)
    });
    for _ in 0..6 {
        thread::sleep(ms(700));
        server.command(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"]);
        server.command(&["CLIENT", "KILL", "TYPE", "pubsub"]);
    }
    thread::sleep(ms(1500)); // the pub/sub connection is back
    assert!(!hold.is_lost(), "{:?}", events.lock().unwrap());
    assert_eq!(lock.hold_count(&me).unwrap(), 1);
    let released_at = Instant::now();
    // The command connection was killed: over TLS one failure is documented (lib.rs).
    let released = match lock.release(&me) {
        Err(Error::Connection(e)) => {
            println!("first release after the kills: {e}");
            lock.release(&me)
        }
        other => other,
    };
    assert_eq!(released.unwrap(), 0);
    let (count, took) = waiting.join().unwrap();
    println!(
        "waiter: {count:?} after {took:?}, {:?} after the release",
        released_at.elapsed()
    );
    assert_eq!(count.unwrap(), 1);
    assert!(released_at.elapsed() < Duration::from_secs(5));
    assert!(events.lock().unwrap().is_empty());
    println!("state: {:?}", keys(&server));
}

/// The async client (command connection) after its user's password changed and its
/// connections were killed, then the password was set back: it must work again.
fn async_client_recovers_after_a_refused_password(server: RedisServer, url: String) {
    server.add_user("app", "app-pass");
    let runtime = tokio_runtime();
    let me = Owner::random();
    runtime.block_on(async {
        let client = redlock_core::Client::builder(&url)
            .command_timeout(ms(500))
            .connect_timeout(ms(500))
            .connect()
            .await
            .unwrap();
        let lock = client.lock("auth-recovery").unwrap();
        lock.acquire(&me, Some(Duration::ZERO), None).await.unwrap();
        assert_eq!(lock.release(&me).await.unwrap(), 0);
        server.command(&["ACL", "SETUSER", "app", "resetpass", ">new-pass"]);
        server.command(&["CLIENT", "KILL", "USER", "app"]);
        tokio::time::sleep(ms(100)).await;
        for _ in 0..3 {
            let err = lock
                .acquire(&me, Some(Duration::ZERO), None)
                .await
                .unwrap_err();
            println!("refused: {err:?}");
            assert!(matches!(err, Error::Connection(_)), "{err:?}");
        }
        server.command(&["ACL", "SETUSER", "app", "resetpass", ">app-pass"]);
        let started = Instant::now();
        let mut last = None;
        while started.elapsed() < Duration::from_secs(15) {
            match lock.acquire(&me, Some(Duration::ZERO), None).await {
                Ok(hold) => {
                    println!("recovered after {:?}", started.elapsed());
                    assert_eq!(hold.hold_count(), 1);
                    assert_eq!(lock.release(&me).await.unwrap(), 0);
                    return;
                }
                Err(e) => last = Some(e),
            }
            tokio::time::sleep(ms(200)).await;
        }
        let info = server.command(&["CLIENT", "LIST"]);
        panic!("not recovered after 15 s: {last:?}\nclients:\n{info}");
    });
}

#[test]
fn tls_async_client_recovers_after_a_refused_password() {
    let server = RedisServer::start_tls();
    let url = format!(
        "rediss://app:app-pass@127.0.0.1:{}/#insecure",
        tls_port(&server)
    );
    async_client_recovers_after_a_refused_password(server, url);
}

#[test]
fn plain_async_client_recovers_after_a_refused_password() {
    let server = RedisServer::start();
    let url = format!("redis://app:app-pass@127.0.0.1:{}", server.port());
    async_client_recovers_after_a_refused_password(server, url);
}

/// Plain TCP, default direct connections: once the command connection's reconnect was refused
/// (password changed, connections killed), setting the password back brings it back: reads
/// work, and a hold taken after (on a direct socket) is renewed, not reported lost. (Before,
/// redis-rs kept the refused reconnect for every later call.)
#[test]
fn the_command_connection_recovers_once_the_password_is_back() {
    let server = RedisServer::start();
    server.add_user("app", "app-pass");
    let url = format!("redis://app:app-pass@127.0.0.1:{}", server.port());
    let runtime = tokio_runtime();
    runtime.block_on(async {
        let (client, events) = {
            let events = Arc::new(Mutex::new(Vec::new()));
            let seen = events.clone();
            let client = redlock_core::Client::builder(&url)
                .command_timeout(ms(500))
                .lease(ms(1500))
                .on_lock_lost(move |e| seen.lock().unwrap().push(e.name.clone()))
                .connect()
                .await
                .unwrap();
            (client, events)
        };
        let lock = client.lock("auth-stuck").unwrap();
        let me = Owner::random();
        assert!(!lock.is_locked().await.unwrap());
        server.command(&["ACL", "SETUSER", "app", "resetpass", ">new-pass"]);
        server.command(&["CLIENT", "KILL", "USER", "app"]);
        tokio::time::sleep(ms(100)).await;
        for _ in 0..3 {
            println!("refused: {:?}", lock.is_locked().await);
        }
        server.command(&["ACL", "SETUSER", "app", "resetpass", ">app-pass"]);
        tokio::time::sleep(ms(1000)).await;
        let hold = lock.acquire(&me, Some(Duration::ZERO), None).await;
        println!(
            "acquire after the password is back: {:?}",
            hold.as_ref().map(|h| h.hold_count())
        );
        let hold = hold.unwrap();
        tokio::time::sleep(ms(3000)).await; // two leases: renewals every 500 ms
        let read = lock.is_locked().await;
        let state = hgetall(&server, "redlock:{auth-stuck}");
        println!(
            "3 s later: is_locked {read:?}; hold lost: {}; events {:?}; HGETALL: {state:?}",
            hold.is_lost(),
            events.lock().unwrap()
        );
        assert!(read.is_ok(), "{read:?}");
        assert!(!hold.is_lost());
        assert_eq!(lock.release(&me).await.unwrap(), 0);
    });
}

/// A reconnect whose `SELECT` (of a URL with a database number, `/1`) is refused while the ACL
/// user lacks the right: once the right is back, the command connection works again (redis-rs
/// keeps a refused set-up for every later call; `after_error` remakes it).
#[test]
fn the_command_connection_recovers_from_a_refused_select() {
    tokio_runtime().block_on(async {
        let server = RedisServer::start();
        server.add_user("app", "app-pass");
        let url = format!("redis://app:app-pass@127.0.0.1:{}/1", server.port());
        let client = redlock_core::Client::builder(&url)
            .command_timeout(ms(500))
            .connect()
            .await
            .unwrap();
        let lock = client.lock("select-stuck").unwrap();
        assert!(!lock.is_locked().await.unwrap());
        server.command(&["ACL", "SETUSER", "app", "-select"]);
        server.command(&["CLIENT", "KILL", "USER", "app"]);
        tokio::time::sleep(ms(100)).await;
        for _ in 0..3 {
            eprintln!("refused: {:?}", lock.is_locked().await);
        }
        server.command(&["ACL", "SETUSER", "app", "+select"]);
        let started = Instant::now();
        let mut last = None;
        while started.elapsed() < ms(10_000) {
            match lock.is_locked().await {
                Ok(locked) => {
                    eprintln!("recovered after {:?}", started.elapsed());
                    assert!(!locked);
                    return;
                }
                Err(e) => last = Some(e),
            }
            tokio::time::sleep(ms(200)).await;
        }
        panic!("the command connection never came back (10 s): {last:?}");
    });
}

/// The blocking API end to end over TLS (rediss://, on the multiplexed connection): a cancelled blocking wait, a pending
/// acquire given up and one that gets the lock, fenced releases; nothing is left in Redis.
#[test]
fn blocking_api_over_tls_end_to_end() {
    use redlock_core::AcquireOptions;
    use redlock_core::blocking::{CancelToken, Started};
    let server = RedisServer::start_tls();
    let client = Client::connect(&server.url()).unwrap();
    let lock = client.lock("tls-blocking").unwrap();
    let holder = Owner::random();
    let held = lock.acquire(&holder, Some(Duration::ZERO), None).unwrap();

    // A blocking wait cancelled from another thread.
    let cancel = CancelToken::new();
    let waiter = Owner::random();
    let canceller = {
        let cancel = cancel.clone();
        std::thread::spawn(move || {
            std::thread::sleep(ms(300));
            cancel.cancel();
        })
    };
    let started = Instant::now();
    let got = lock.acquire_with(
        &waiter,
        AcquireOptions::new(Some(ms(5000)), None),
        Some(&cancel),
    );
    canceller.join().unwrap();
    eprintln!(
        "cancelled wait -> {:?} after {:?}",
        got.as_ref().map(|h| h.fencing_token()),
        started.elapsed()
    );
    assert!(got.is_err() && started.elapsed() < ms(2000));

    // A pending acquire given up, then one that gets the lock.
    let start_waiting = || {
        let options = AcquireOptions::new(Some(ms(5000)), None);
        match lock.start_acquire(&waiter, options, None, ms(0)).unwrap() {
            Started::Waiting(p) => p,
            Started::Acquired(_) => panic!("acquired while held"),
        }
    };
    let pending = start_waiting();
    std::thread::sleep(ms(200));
    pending.cancel();
    drop(pending);
    let pending = start_waiting();
    assert_eq!(
        lock.release_fenced(&holder, held.fencing_token()).unwrap(),
        0
    );
    let hold = pending
        .wait(ms(3000))
        .unwrap()
        .expect("the pending acquire got the lock");
    eprintln!(
        "pending got fence {} count {}",
        hold.fencing_token(),
        hold.hold_count()
    );
    assert_eq!(hold.hold_count(), 1);
    assert_eq!(lock.hold_count(&waiter).unwrap(), 1);
    assert_eq!(
        lock.release_fenced(&waiter, hold.fencing_token()).unwrap(),
        0
    );
    std::thread::sleep(ms(300));
    let info = lock.inspect().unwrap();
    assert!(info.holders.is_empty(), "{info:?}");
    assert_eq!(info.waiting_writers, 0, "{info:?}");
    let keys = server.command(&["KEYS", "redlock:{tls-blocking}*"]);
    eprintln!("keys left: {keys:?}");
    client.close();
}
