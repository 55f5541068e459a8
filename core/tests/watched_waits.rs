//! Blocking waiters watch their client's pub/sub socket while they wait (`blocking::watch`):
//! one per client does, the others wait for their waker alone, and over TLS nobody does. Each
//! way they are granted the lock by message, and no two hold it at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

mod common;

use common::{RedisServer, channels_of};
use redlock_core::Owner;
use redlock_core::blocking::Client;

/// Three threads of one client wait for a lock another client holds: one of them watches the
/// pub/sub socket (if the connection has one), the others cannot. Once all three listen, the
/// holder releases; each of them gets the lock in turn, alone.
fn three_waiters_of_one_client(server: &RedisServer, url: &str, name: &str) {
    let holder = Client::connect(url).unwrap();
    let waiting = Client::connect(url).unwrap();
    let first = Owner::random();
    let held = holder.lock(name).unwrap();
    held.acquire(&first, Some(Duration::ZERO), None).unwrap();

    let (inside, sections) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let lock = waiting.lock(name).unwrap();
            let (inside, sections) = (inside.clone(), sections.clone());
            thread::spawn(move || {
                let me = Owner::random();
                lock.acquire(&me, Some(Duration::from_secs(20)), None)
                    .unwrap();
                assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                thread::sleep(Duration::from_millis(20));
                inside.fetch_sub(1, Ordering::SeqCst);
                sections.fetch_add(1, Ordering::SeqCst);
                assert_eq!(lock.release(&me).unwrap(), 0);
            })
        })
        .collect();

    // The waiting client listens on the lock's channel and its own grant channel.
    let deadline = Instant::now() + Duration::from_secs(10);
    while channels_of(server, name) < 2 {
        assert!(Instant::now() < deadline, "the waiters never subscribed");
        thread::sleep(Duration::from_millis(10));
    }
    thread::sleep(Duration::from_millis(100)); // all three asleep in their waits
    assert_eq!(held.release(&first).unwrap(), 0);
    for waiter in waiters {
        waiter.join().unwrap();
    }
    assert_eq!(sections.load(Ordering::SeqCst), 3);
    assert!(!held.is_locked().unwrap());
}

#[test]
fn waiters_watching_the_socket_or_not_are_granted_the_lock_in_turn() {
    let server = RedisServer::start();
    three_waiters_of_one_client(&server, &server.url(), "watched");
}

#[test]
fn the_pub_sub_socket_logs_in_with_a_password_or_a_user() {
    let server = RedisServer::start_with_password(Some("s3cret"));
    three_waiters_of_one_client(&server, &server.url(), "watched-auth");
    server.add_user("app", "app-pass");
    let url = format!("redis://app:app-pass@127.0.0.1:{}/3", server.port());
    three_waiters_of_one_client(&server, &url, "watched-acl");
}

#[test]
fn over_tls_nobody_watches_and_waiters_still_hear_their_grants() {
    let server = RedisServer::start_tls();
    three_waiters_of_one_client(&server, &server.url(), "watched-tls");
}
