//! URLs other than `redis://127.0.0.1:PORT`: a Unix socket whose query carries the password,
//! database and RESP3, and a TCP URL with a database index. Every connection a client opens
//! (command, direct and hot sockets, pub/sub, keepalive) must use the address and database
//! given, a Unix socket connect must be bounded like a TCP one, and a password in a query must
//! stay out of errors and debug text as one in the user info does.

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::*;
use redlock_core::{Client, ClientBuilder, ErrorKind, Hold, Owner};

/// Clients whose waiters re-check once a minute (only a pub/sub message wakes them in time),
/// whose watchdog renews every 150 ms and whose keepalive pings every 100 ms.
fn quick(url: &str) -> ClientBuilder {
    Client::builder(url)
        .recheck_interval(Duration::from_secs(60))
        .lease(ms(450))
        .ping_interval(Some(ms(100)))
}

/// The keys of lock `name` in database `db`.
fn keys_in(server: &RedisServer, db: u8, name: &str) -> Vec<String> {
    let admin = redis::Client::open(format!("{}/{db}", server.url())).unwrap();
    let mut admin = admin.get_connection().unwrap();
    let pattern = format!("*{{{name}}}*");
    let keys: Vec<String> = redis::cmd("KEYS").arg(pattern).query(&mut admin).unwrap();
    keys.into_iter()
        .filter(|k| !k.contains(":fence:"))
        .collect()
}

/// Every connection but the asking one is on the Unix socket (or not) and in database `db`.
fn connections_are(server: &RedisServer, unix: bool, db: u8) {
    let list = server.command(&["CLIENT", "LIST"]);
    let theirs: Vec<&str> = list
        .lines()
        .filter(|line| line.contains("id=") && !line.contains("cmd=client|list"))
        .collect();
    assert!(theirs.len() >= 3, "command, direct, pub/sub: {list}");
    for line in theirs {
        assert_eq!(line.contains(" addr=/"), unix, "{line}");
        assert!(line.contains(&format!(" db={db} ")), "{line}");
    }
}

/// A waiter's `hold`, taken at `acquired`, is newer than `first` and came within a second of
/// the release (its client re-checks once a minute: a pub/sub message woke it).
fn handed_on(hold: redlock_core::Result<Hold>, acquired: Instant, released: Instant, first: &Hold) {
    assert!(hold.unwrap().fencing_token() > first.fencing_token());
    let woken = acquired.saturating_duration_since(released);
    assert!(
        woken < ms(1000),
        "the waiter had the lock {woken:?} after the release"
    );
}

/// The async API on `url`, whose keys must land in database `db`.
async fn walk_async(server: &RedisServer, url: &str, unix: bool, db: u8) {
    let a = quick(url).connect().await.unwrap();
    let b = quick(url).connect().await.unwrap();
    let (lock_a, lock_b) = (a.lock("walk").unwrap(), b.lock("walk").unwrap());
    let (alice, bob) = (Owner::random(), Owner::random());
    for _ in 0..3 {
        lock_a.acquire(&alice, NOW, None).await.unwrap();
        assert_eq!(lock_a.release(&alice).await.unwrap(), 0);
    }
    let first = lock_a.acquire(&alice, NOW, None).await.unwrap();
    assert_eq!(
        lock_a
            .acquire(&alice, NOW, None)
            .await
            .unwrap()
            .hold_count(),
        2
    );
    assert_eq!(keys_in(server, db, "walk").len(), 1);
    if db != 0 {
        assert!(keys_in(server, 0, "walk").is_empty());
    }
    // The watchdog keeps the hold past its lease several times over.
    tokio::time::sleep(ms(1000)).await;
    assert!(!first.is_lost());
    assert_eq!(lock_a.hold_count(&alice).await.unwrap(), 2);

    // A waiter of the other client has the lock as soon as it is released.
    let waiter = {
        let (lock_b, bob) = (lock_b.clone(), bob.clone());
        tokio::spawn(async move {
            let hold = lock_b
                .acquire(&bob, Some(Duration::from_secs(10)), None)
                .await;
            (hold, Instant::now())
        })
    };
    tokio::time::sleep(ms(200)).await;
    lock_a.release(&alice).await.unwrap();
    let released = Instant::now();
    lock_a.release(&alice).await.unwrap();
    let (hold, acquired) = waiter.await.unwrap();
    handed_on(hold, acquired, released, &first);
    connections_are(server, unix, db);

    lock_a.extend(&alice, ms(100)).await.unwrap_err();
    lock_b.extend(&bob, Duration::from_secs(5)).await.unwrap();
    let info = a.inspect("walk").await.unwrap();
    assert_eq!(info.holders[0].owner_token, bob.token());
    assert!(a.force_unlock("walk").await.unwrap());
    let read_write = a.read_write_lock("walk").unwrap();
    read_write.read().acquire(&alice, NOW, None).await.unwrap();
    read_write.read().acquire(&bob, NOW, None).await.unwrap();
    assert_eq!(read_write.read().release(&alice).await.unwrap(), 0);
    a.close();
    b.close();
    assert_eq!(
        lock_a.acquire(&alice, NOW, None).await.unwrap_err().kind(),
        ErrorKind::Closed
    );
}

/// The blocking API on `url` (its own direct sockets, its socket-watching wait).
fn walk_blocking(server: &RedisServer, url: &str, unix: bool, db: u8) {
    use redlock_core::blocking::Client;
    let a = Client::from_builder(quick(url)).unwrap();
    let b = Client::from_builder(quick(url)).unwrap();
    let lock_a = a.lock("blocking-walk").unwrap();
    let (alice, bob) = (Owner::random(), Owner::random());
    for _ in 0..3 {
        lock_a.acquire(&alice, NOW, None).unwrap();
        assert_eq!(lock_a.release(&alice).unwrap(), 0);
    }
    let first = lock_a.acquire(&alice, NOW, None).unwrap();
    assert_eq!(keys_in(server, db, "blocking-walk").len(), 1);
    let waiter = {
        let lock_b = b.lock("blocking-walk").unwrap();
        thread::spawn(move || {
            let hold = lock_b.acquire(&bob, Some(Duration::from_secs(10)), None);
            (hold, Instant::now())
        })
    };
    thread::sleep(ms(200));
    lock_a.release(&alice).unwrap();
    let released = Instant::now();
    let (hold, acquired) = waiter.join().unwrap();
    handed_on(hold, acquired, released, &first);
    connections_are(server, unix, db);
    a.close();
    b.close();
}

fn walk(server: &RedisServer, url: &str, unix: bool, db: u8) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(walk_async(server, url, unix, db));
    drop(runtime);
    walk_blocking(server, url, unix, db);
}

#[test]
fn a_unix_socket_url_with_password_database_and_resp3_serves_every_path() {
    let server = RedisServer::start_with_password(Some("pw"));
    let socket = server.unix_socket();
    let url = format!("unix://{}?pass=pw&db=4&protocol=resp3", socket.display());
    walk(&server, &url, true, 4);
}

#[test]
fn a_tcp_url_with_a_database_index_serves_every_path() {
    let server = RedisServer::start();
    walk(&server, &format!("{}/3", server.url()), false, 3);
}

/// redis-rs reads a Unix socket URL's password from its query (`?pass=`).
#[tokio::test]
async fn a_password_in_a_unix_url_stays_out_of_errors_and_debug_text() {
    let server = RedisServer::start_with_password(Some("right"));
    let socket = server.unix_socket().display().to_string();
    for url in [
        format!("unix://{socket}?pass=SeCrEt"),
        format!("redis+unix://{socket}?db=1&user=default&pass=SeCrEt"),
    ] {
        let err = Client::connect(&url).await.err().unwrap();
        assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
        assert!(!err.to_string().contains("SeCrEt"), "{err}");
        let err = tokio::task::spawn_blocking(move || {
            redlock_core::blocking::Client::connect(&url).err().unwrap()
        })
        .await
        .unwrap();
        assert!(!err.to_string().contains("SeCrEt"), "{err}");
    }
    let err = Client::connect(&format!("unix://{socket}?pass=SeCrEt&db=x"))
        .await
        .err()
        .unwrap();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(!err.to_string().contains("SeCrEt"), "{err}");
    let builder = Client::builder(format!("unix://{socket}?pass=SeCrEt"));
    let debug = format!("{:?}", builder.config());
    assert!(!debug.contains("SeCrEt"), "{debug}");
}

/// A Unix socket's connect waits with no limit while the server's backlog is full (a stalled
/// Redis accepts nobody): a blocking caller's new direct connection must give up at the
/// connect timeout, as over TCP, not wait for Redis.
#[test]
fn a_direct_connect_to_a_unix_socket_is_bounded_by_the_connect_timeout() {
    let server = RedisServer::start_with_args(&["--tcp-backlog", "2"]);
    let url = format!("unix://{}", server.unix_socket().display());
    let builder = Client::builder(&url)
        .command_timeout(ms(300))
        .connect_timeout(ms(300));
    let client = redlock_core::blocking::Client::from_builder(builder).unwrap();
    let lock = client.lock("backlog").unwrap();
    let stall = server.stall(Duration::from_secs(3));
    // Others fill the backlog (their connects wait, as ours would).
    for _ in 0..6 {
        let socket = server.unix_socket();
        thread::spawn(move || {
            let _kept = std::os::unix::net::UnixStream::connect(socket);
            thread::sleep(Duration::from_secs(5));
        });
    }
    thread::sleep(ms(200));
    let started = Instant::now();
    let result = lock.acquire(&Owner::random(), NOW, None);
    let took = started.elapsed();
    stall.join().unwrap();
    assert!(
        took < ms(1500),
        "the acquire waited {took:?} for a stalled Redis"
    );
    assert_eq!(result.unwrap_err().kind(), ErrorKind::Connection);
    client.close();
}
