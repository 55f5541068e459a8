//! Holds, the watchdog and waiters when the Redis server does unusual things: an idle timeout,
//! FLUSHALL, eviction, killed connections, a restart with persistence, CLIENT PAUSE.

mod common;

use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::*;
use redlock_core::{Error, ErrorKind, Lock, Owner};

/// Takes and releases `lock` `times` times (fixed `lease`); the last hold's fencing token.
async fn draw_fences(lock: &Lock, owner: &Owner, times: usize, lease: Duration) -> u64 {
    let mut last = 0;
    for _ in 0..times {
        last = lock
            .acquire(owner, NOW, Some(lease))
            .await
            .unwrap()
            .fencing_token();
        lock.release(owner).await.unwrap();
    }
    last
}

/// A server that closes connections idle for more than a second (its `timeout` setting).
fn closing_idle_clients_after_a_second() -> RedisServer {
    let server = RedisServer::start();
    ok(server.command(&["CONFIG", "SET", "timeout", "1"]));
    server
}

/// A server that closes connections idle for more than a second (`CONFIG SET timeout 1`): a
/// watched hold must stay kept while its client runs and Redis answers. The watchdog renews
/// every lease/3 on the command connection, which sits idle in between; the server closes it,
/// the renewal fails on the dead socket, is "retried next tick" on a connection that has been
/// idle as long again, and so on until the lease ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watched_hold_survives_a_server_idle_timeout_shorter_than_the_renewal_period() {
    limited(60, async {
        let server = closing_idle_clients_after_a_second();
        let (client, events) = recording_losses(&server, ms(7_500)).await;
        let lock = client.lock("idle renewals").unwrap();
        let owner = Owner::random();
        let hold = lock.acquire(&owner, NOW, None).await.unwrap();
        // Two leases' worth: a renewal every 2.5 s, each after 2.5 s of silence.
        tokio::time::sleep(ms(16_000)).await;
        let held = lock.is_held_by(&owner).await.unwrap();
        let events = events.lock().unwrap().clone();
        assert!(
            held,
            "the hold expired while its client ran and Redis answered; reported lost: {} \
             (callback events {events:?}), renewal calls {}",
            hold.is_lost(),
            client.watchdog_calls()
        );
        assert!(!hold.is_lost() && events.is_empty());
        assert_eq!(lock.release(&owner).await.unwrap(), 0);
    })
    .await;
}

/// Calls that may run twice (reads, an extend) after the command connection sat idle past
/// the server's `timeout`: each is sent once more on the connection the manager opens, rather
/// than failing as the first call on a dead connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_and_extends_after_a_server_idle_timeout_succeed() {
    limited(60, async {
        let server = closing_idle_clients_after_a_second();
        let client = connect(&server).await;
        let lock = client.lock("idle reads").unwrap();
        let owner = Owner::random();
        lock.acquire(&owner, NOW, Some(ms(20_000))).await.unwrap();
        for round in 0..2 {
            tokio::time::sleep(ms(2_200)).await;
            let call = match round {
                0 => lock.extend(&owner, ms(20_000)).await,
                _ => lock.is_held_by(&owner).await.map(|held| assert!(held)),
            };
            assert!(call.is_ok(), "round {round}: {call:?}");
            tokio::time::sleep(ms(2_200)).await;
            let info = lock.inspect().await;
            assert!(info.is_ok_and(|i| i.holder_count == 1), "round {round}");
        }
        assert_eq!(lock.release(&owner).await.unwrap(), 0);
    })
    .await;
}

/// Acquires and releases after every connection of the client sat idle past the server's
/// `timeout`: the direct connections are found closed before use, and so is, by that sign, the
/// command connection that a call would fall back to. No call fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquires_and_releases_after_a_server_idle_timeout_succeed() {
    limited(60, async {
        let server = closing_idle_clients_after_a_second();
        let client = connect(&server).await;
        let lock = client.lock("idle cycles").unwrap();
        let owner = Owner::random();
        lock.release(&owner).await.unwrap_err(); // the connections are made and used
        tokio::time::sleep(ms(2_200)).await;
        let taken = lock.acquire(&owner, NOW, Some(ms(20_000))).await;
        assert!(taken.is_ok(), "{taken:?}");
        tokio::time::sleep(ms(2_200)).await;
        let released = lock.release(&owner).await;
        assert!(matches!(released, Ok(0)), "{released:?}");
        // The same from a blocking caller.
        let url = server.url();
        tokio::task::spawn_blocking(move || {
            let client = redlock_core::blocking::Client::connect(&url).unwrap();
            let lock = client.lock("idle blocking cycles").unwrap();
            lock.release(&owner).unwrap_err();
            std::thread::sleep(ms(2_200));
            let taken = lock.acquire(&owner, NOW, Some(ms(20_000)));
            assert!(taken.is_ok(), "blocking: {taken:?}");
            std::thread::sleep(ms(2_200));
            let released = lock.release(&owner);
            assert!(matches!(released, Ok(0)), "blocking: {released:?}");
        })
        .await
        .unwrap();
    })
    .await;
}

/// A waiter cancelled after its client's command connection sat idle past the server's
/// `timeout`: its withdrawal is the first call to meet the dead connection. Left announced, the
/// waiter would be granted the lock at its holder's release, and the lock stay taken by nobody
/// for the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_cancelled_after_a_server_idle_timeout_is_withdrawn() {
    limited(60, async {
        let server = closing_idle_clients_after_a_second();
        // Pinged more often than the server's timeout, as a user of such a server would
        // configure it: its own calls stay on a live connection.
        let holder_client = builder(&server)
            .ping_interval(Some(ms(300)))
            .connect()
            .await
            .unwrap();
        let holder = Owner::random();
        let name = "idle withdrawal";
        let lock = holder_client.lock(name).unwrap();
        lock.acquire(&holder, NOW, Some(ms(20_000))).await.unwrap();
        // Re-checks once a minute: its one attempt announces it, then it only listens.
        let waiting_client = connect_without_rechecks(&server).await;
        let waited = waiting_client.lock(name).unwrap();
        let waiter = Owner::random();
        let waiting = waited.acquire(&waiter, None, Some(ms(20_000)));
        assert!(tokio::time::timeout(ms(2_500), waiting).await.is_err());
        tokio::time::sleep(ms(500)).await; // the withdrawal, in the background
        assert_eq!(lock.inspect().await.unwrap().waiting_writers, 0);
        assert_eq!(lock.release(&holder).await.unwrap(), 0);
        let third = Owner::random();
        let taken = lock.acquire(&third, NOW, Some(ms(5_000))).await;
        assert!(
            taken.is_ok(),
            "the lock went to the cancelled waiter: {taken:?}"
        );
        lock.release(&third).await.unwrap();
    })
    .await;
}

/// FLUSHALL while a watched hold is held and writers of another client (and of the holder's
/// own client) wait: the hold is reported lost exactly once (signal and callback), the release
/// says LockLost, and a waiter gets the lock within about a re-check interval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flushall_while_held_and_waited_for() {
    limited(30, async {
        let server = RedisServer::start();
        let (holder_client, events) = recording_losses(&server, ms(900)).await;
        let other = builder(&server)
            .recheck_interval(ms(200))
            .connect()
            .await
            .unwrap();
        let lock = holder_client.lock("flushed").unwrap();
        let theirs = other.lock("flushed").unwrap();
        let owner = Owner::random();
        let hold = lock.acquire(&owner, NOW, None).await.unwrap();
        let first_fence = hold.fencing_token();
        let (w1, w2) = (Owner::random(), Owner::random());
        let l2 = lock.clone();
        let local_waiter = tokio::spawn(async move {
            let start = Instant::now();
            let r = l2.acquire(&w2, Some(ms(8_000)), Some(ms(300))).await;
            (r.map(|h| h.fencing_token()), start.elapsed(), w2)
        });
        let t2 = theirs.clone();
        let remote_waiter = tokio::spawn(async move {
            let start = Instant::now();
            let r = t2.acquire(&w1, Some(ms(8_000)), Some(ms(300))).await;
            (r.map(|h| h.fencing_token()), start.elapsed(), w1)
        });
        tokio::time::sleep(ms(500)).await;
        ok(server.command(&["FLUSHALL"]));
        let flushed_at = Instant::now();
        tokio::time::timeout(ms(2_000), hold.lost())
            .await
            .expect("lost() resolves after the flush");
        let (a, b) = (local_waiter.await.unwrap(), remote_waiter.await.unwrap());
        println!("local {:?} remote {:?} first fence {first_fence}", a, b);
        assert!(a.0.is_ok() && b.0.is_ok(), "{a:?} {b:?}");
        assert!(flushed_at.elapsed() < ms(3_000));
        assert_eq!(lock.release(&owner).await.unwrap_err(), Error::LockLost);
        tokio::time::sleep(ms(1_000)).await;
        assert_eq!(
            events.lock().unwrap().len(),
            1,
            "{:?}",
            events.lock().unwrap()
        );
        assert_eq!(holder_client.watched_holds(), 0);
    })
    .await;
}

/// CLIENT KILL of the waiters' pub/sub connection, then of their normal connections (command
/// and direct), while writers wait: they still get the lock about a re-check interval after
/// its release, nothing fails, nothing stays in Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_connections_while_waiters_wait() {
    limited(40, async {
        let server = RedisServer::start();
        let holder = connect(&server).await;
        let before = connection_ids(&server, None);
        let waiters = builder(&server)
            .recheck_interval(ms(250))
            .connect()
            .await
            .unwrap();
        for kind in ["pubsub", "normal"] {
            let name = format!("killed {kind}");
            let lock = holder.lock(&name).unwrap();
            let h = Owner::random();
            lock.acquire(&h, NOW, Some(ms(20_000))).await.unwrap();
            let mut tasks = Vec::new();
            for _ in 0..3 {
                let l = waiters.lock(&name).unwrap();
                tasks.push(tokio::spawn(async move {
                    let o = Owner::random();
                    let mut r = l.acquire(&o, Some(ms(10_000)), Some(ms(100))).await;
                    if let Err(Error::Connection(e)) = &r {
                        // Known: a dead connection costs at most one failed call.
                        println!("one failed call: {e}");
                        r = l.acquire(&o, Some(ms(10_000)), Some(ms(100))).await;
                    }
                    (r.map(|h| h.fencing_token()), Instant::now())
                }));
            }
            tokio::time::sleep(ms(300)).await;
            let theirs: Vec<String> = connection_ids(&server, Some(kind))
                .into_iter()
                .filter(|id| !before.contains(id))
                .collect();
            println!("{kind}: killing {theirs:?}");
            for id in &theirs {
                server.command(&["CLIENT", "KILL", "ID", id]);
            }
            tokio::time::sleep(ms(300)).await;
            let released = Instant::now();
            lock.release(&h).await.unwrap();
            for t in tasks {
                let (r, at) = t.await.unwrap();
                println!("{kind}: {r:?} after {:?}", at - released);
                assert!(r.is_ok(), "{kind}: {r:?}");
                assert!(at - released < ms(1_500), "{kind}: {:?}", at - released);
            }
            tokio::time::sleep(ms(1_500)).await;
            assert!(lock_keys(&server).is_empty(), "{:?}", lock_keys(&server));
        }
    })
    .await;
}

/// A lock key evicted under `maxmemory` with `allkeys-random`: the watched hold is reported lost
/// exactly once, a waiter is not stuck; and the fencing counter (no TTL) may go too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evicted_keys() {
    limited(60, async {
        let server = RedisServer::start();
        let (client, events) = recording_losses(&server, ms(900)).await;
        let lock = client.lock("evicted").unwrap();
        let owner = Owner::random();
        let mut last = draw_fences(&lock, &owner, 50, ms(5_000)).await;
        let hold = lock.acquire(&owner, NOW, None).await.unwrap();
        assert!(hold.fencing_token() > last);
        last = hold.fencing_token();
        let waiter = {
            let l = client.lock("evicted").unwrap();
            tokio::spawn(async move {
                l.acquire(&Owner::random(), Some(ms(20_000)), Some(ms(100)))
                    .await
                    .map(|h| h.fencing_token())
            })
        };
        let info = server.command(&["INFO", "memory"]);
        let used: u64 = info
            .lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        ok(server.command(&["CONFIG", "SET", "maxmemory-policy", "allkeys-random"]));
        ok(server.command(&[
            "CONFIG",
            "SET",
            "maxmemory",
            &(used + 2_000_000).to_string(),
        ]));
        let value = "x".repeat(10_000);
        let mut i = 0;
        while server.command(&["EXISTS", "redlock:{evicted}"]).trim() == ":1"
            || server
                .command(&["EXISTS", &format!("redlock:fence:{{{}}}", "x")])
                .is_empty()
        {
            // Filler until the lock's state hash is evicted.
            for _ in 0..100 {
                let _ = server.command(&["SET", &format!("filler:{i}"), &value]);
                i += 1;
            }
            if i > 100_000 {
                panic!("never evicted");
            }
        }
        println!(
            "fillers: {i}, keys: {}",
            server.command(&["KEYS", "redlock*"]).replace("\r\n", " ")
        );
        tokio::time::timeout(ms(3_000), hold.lost())
            .await
            .expect("lost() resolves");
        let got = waiter.await.unwrap();
        println!("waiter: {got:?} (hold's token {last})");
        assert!(got.is_ok());
        assert_eq!(lock.release(&owner).await.unwrap_err(), Error::LockLost);
        tokio::time::sleep(ms(1_000)).await;
        assert_eq!(events.lock().unwrap().len(), 1);
    })
    .await;
}

/// A restart WITH persistence (an RDB snapshot taken while the hold is kept): the fencing
/// counter goes on increasing, the watched hold is kept (not reported lost), waiters still get
/// the lock after its release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_with_persistence() {
    limited(60, async {
        let mut server = RedisServer::start();
        let (client, events) = recording_losses(&server, ms(3_000)).await;
        let other = builder(&server)
            .recheck_interval(ms(200))
            .connect()
            .await
            .unwrap();
        let lock = client.lock("persisted").unwrap();
        let owner = Owner::random();
        let mut last = draw_fences(&lock, &owner, 20, ms(5_000)).await;
        let hold = lock.acquire(&owner, NOW, None).await.unwrap();
        assert!(hold.fencing_token() > last);
        last = hold.fencing_token();
        let theirs = other.lock("persisted").unwrap();
        let waiter = tokio::spawn(async move {
            let o = Owner::random();
            let mut r = theirs.acquire(&o, Some(ms(30_000)), Some(ms(5_000))).await;
            if let Err(Error::Connection(e)) = &r {
                println!("one failed call: {e}");
                r = theirs.acquire(&o, Some(ms(30_000)), Some(ms(5_000))).await;
            }
            r.map(|h| (h.fencing_token(), Instant::now()))
        });
        tokio::time::sleep(ms(300)).await;
        ok(server.command(&["SAVE"]));
        server.restart();
        assert_eq!(
            server.command(&["EXISTS", "redlock:{persisted}"]).trim(),
            ":1",
            "loaded from the snapshot"
        );
        for _ in 0..8 {
            tokio::time::sleep(ms(500)).await; // past the lease: only renewals keep it
            println!(
                "pttl {} calls {} lost {}",
                server.command(&["PTTL", "redlock:{persisted}"]).trim(),
                client.watchdog_calls(),
                hold.is_lost()
            );
        }
        assert!(!hold.is_lost(), "the kept hold survived the restart");
        assert!(lock.is_held_by(&owner).await.unwrap());
        let released = Instant::now();
        assert_eq!(lock.release(&owner).await.unwrap(), 0);
        let (fence, at) = waiter.await.unwrap().unwrap();
        println!(
            "waiter got {fence} after {:?}; hold had {last}",
            at - released
        );
        assert!(fence > last);
        assert!(at - released < ms(1_500));
        assert!(
            events.lock().unwrap().is_empty(),
            "{:?}",
            events.lock().unwrap()
        );
    })
    .await;
}

/// CLIENT PAUSE (all) for longer than the command timeout during a release: the caller gets a
/// Connection error; once the pause ends the lock is not held for ever (the release ran, or
/// its lease ends), and the hold is not reported lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_pause_during_a_release() {
    limited(40, async {
        let server = RedisServer::start();
        let events: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
        let seen = events.clone();
        let client2 = builder(&server)
            .command_timeout(ms(300))
            .lease(ms(3_000))
            .on_lock_lost(move |e| seen.lock().unwrap().push(e.name.clone()))
            .connect()
            .await
            .unwrap();
        let lock = client2.lock("paused").unwrap();
        let owner = Owner::random();
        lock.acquire(&owner, NOW, None).await.unwrap();
        lock.release(&owner).await.unwrap();
        let hold = lock.acquire(&owner, NOW, None).await.unwrap();
        ok(server.command(&["CLIENT", "PAUSE", "1500", "ALL"]));
        let err = lock.release(&owner).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
        tokio::time::sleep(ms(2_000)).await;
        // Either the release ran late, or the caller may retry it.
        let retry = lock.release(&owner).await;
        println!("retry: {retry:?}, lost {}", hold.is_lost());
        tokio::time::sleep(ms(4_000)).await;
        assert!(
            !lock.is_locked().await.unwrap(),
            "still held after the pause and a lease"
        );
        assert!(events.lock().unwrap().is_empty());
    })
    .await;
}

/// Sends `SCRIPT FLUSH` back to back on a connection of its own until `stop` is set; how many.
fn flush_scripts_until(
    server: &RedisServer,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<u64> {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", server.port())).unwrap();
    std::thread::spawn(move || {
        let mut flushes = 0;
        let mut reply = [0u8; 64];
        while !stop.load(Ordering::Relaxed) {
            stream
                .write_all(b"*2\r\n$6\r\nSCRIPT\r\n$5\r\nFLUSH\r\n")
                .unwrap();
            let got = stream.read(&mut reply).unwrap();
            assert!(reply[..got].starts_with(b"+OK"));
            flushes += 1;
        }
        flushes
    })
}

/// After a single `SCRIPT FLUSH`, a call loads its script with `SCRIPT LOAD` (which Redis 7.4+
/// never evicts, unlike scripts cached by `EVAL`), and `EVAL` is kept for a second flush.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forgotten_script_is_loaded_not_evaled() {
    limited(30, async {
        let server = RedisServer::start();
        let client = connect(&server).await;
        let lock = client.lock("loaded again").unwrap();
        let owner = Owner::random();
        lock.acquire(&owner, NOW, None).await.unwrap();
        ok(server.command(&["SCRIPT", "FLUSH"]));
        ok(server.command(&["CONFIG", "RESETSTAT"]));
        assert_eq!(lock.release(&owner).await.unwrap(), 0);
        let stats = server.command(&["INFO", "commandstats"]);
        assert!(stats.contains("cmdstat_script|load:calls=1,"), "{stats}");
        assert!(!stats.contains("cmdstat_eval:"), "{stats}");
    })
    .await;
}

/// `SCRIPT FLUSH` over and over (a server that keeps forgetting scripts; in the audit, one flush
/// every 5 ms): every call must still work. A call answered NOSCRIPT used to load the script and
/// call it by SHA again, which a second flush between the two failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_work_while_scripts_are_flushed_over_and_over() {
    limited(60, async {
        let server = RedisServer::start();
        let client = connect(&server).await;
        let lock = client.lock("flushed scripts").unwrap();
        let blocking = redlock_core::blocking::Client::connect(&server.url()).unwrap();
        let blocking_lock = blocking.read_write_lock("flushed scripts too").unwrap();
        let owner = Owner::random();
        let stop = Arc::new(AtomicBool::new(false));
        let flusher = flush_scripts_until(&server, stop.clone());
        let mut failures = Vec::new();
        let mut note = |what: &str, result: Result<(), Error>| {
            if let Err(e) = result {
                failures.push(format!("{what}: {e}"));
            }
        };
        let until = Instant::now() + ms(3_000);
        let mut rounds = 0;
        while Instant::now() < until {
            rounds += 1;
            note(
                "acquire",
                lock.acquire(&owner, NOW, Some(ms(5_000))).await.map(drop),
            );
            note("extend", lock.extend(&owner, ms(5_000)).await);
            note("hold count", lock.hold_count(&owner).await.map(drop));
            note("inspect", lock.inspect().await.map(drop));
            note("release", lock.release(&owner).await.map(drop));
            let read = blocking_lock.read();
            note(
                "blocking read",
                read.acquire(&owner, NOW, Some(ms(5_000))).map(drop),
            );
            note("blocking release", read.release(&owner).map(drop));
        }
        stop.store(true, Ordering::Relaxed);
        let flushes = flusher.join().unwrap();
        assert!(flushes > 100, "only {flushes} flushes");
        assert!(
            failures.is_empty(),
            "{} of {rounds} rounds' calls failed ({flushes} flushes), e.g. {:?}",
            failures.len(),
            &failures[..failures.len().min(3)]
        );
        assert!(!lock.is_locked().await.unwrap());
    })
    .await;
}
