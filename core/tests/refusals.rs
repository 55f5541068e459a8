//! A Redis that refuses work (OOM, MISCONF, READONLY, an ACL, BUSY): every call answers with a
//! clear error or the right answer, no script is left half done, and everything recovers.

mod common;

use std::time::Instant;

use common::*;
use redlock_core::{Client, ErrorKind, Lock, Owner};

fn raw(server: &RedisServer, args: &[&str]) -> String {
    server.command(args).replace("\r\n", " ")
}

/// Writes refused with -MISCONF: a BGSAVE fails once the server's directory (its cwd; `dir` is a
/// protected config) is removed, and `stop-writes-on-bgsave-error yes` then refuses writes.
/// (Works as root, where a read-only directory would not stop the save.)
fn make_misconf(server: &RedisServer) {
    let reply = server.command(&["CONFIG", "GET", "dir"]);
    let dir = reply
        .lines()
        .find(|l| l.starts_with('/'))
        .expect("dir")
        .to_owned();
    let _ = std::fs::remove_dir_all(&dir);
    ok(server.command(&["CONFIG", "SET", "stop-writes-on-bgsave-error", "yes"]));
    // Only a server with save points refuses writes after a failed save.
    ok(server.command(&["CONFIG", "SET", "save", "3600 1"]));
    let _ = server.command(&["BGSAVE"]);
    let start = Instant::now();
    loop {
        let reply = server.command(&["SET", "audit:probe", "1"]);
        if reply.starts_with("-MISCONF") {
            break;
        }
        assert!(start.elapsed() < ms(5000), "no MISCONF: {reply}");
        std::thread::sleep(ms(50));
        let _ = server.command(&["BGSAVE"]);
    }
}

fn lift_misconf(server: &RedisServer) {
    ok(server.command(&["CONFIG", "SET", "stop-writes-on-bgsave-error", "no"]));
}

/// The URL of a Redis 7 ACL user made the usual way (`~* +@all`), who has no channel rights
/// (`acl-pubsub-default resetchannels`).
fn user_without_channel_rights(server: &RedisServer) -> String {
    let user = [
        "ACL",
        "SETUSER",
        "app",
        "on",
        ">pw",
        "~*",
        "+@all",
        "resetchannels",
    ];
    ok(server.command(&user));
    format!("redis://app:pw@127.0.0.1:{}", server.port())
}

/// A Redis 7 ACL user made the usual way (`+@all ~*`) has no channel permissions
/// (`acl-pubsub-default resetchannels`): PUBLISH inside a script is refused with NOPERM.
/// A release that would grant the lock to a waiter must not leave a half-applied script
/// (the waiter taken out of the queue, a fence drawn) and must not fail for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acl_without_channels_release_with_a_waiter() {
    limited(60, async {
        let server = RedisServer::start();
        let url = user_without_channel_rights(&server);
        let holder_client = Client::connect(&url).await.unwrap();
        let waiter_client = Client::builder(url.clone())
            .recheck_interval(ms(200))
            .connect()
            .await
            .unwrap();
        let lock = holder_client.lock("acl-ch").unwrap();
        let holder = Owner::random();
        lock.acquire(&holder, NOW, Some(ms(20_000))).await.unwrap();

        let wlock = waiter_client.lock("acl-ch").unwrap();
        let waiter = Owner::random();
        let waiting = tokio::spawn(async move {
            let started = Instant::now();
            let r = wlock
                .acquire(&waiter, Some(ms(4000)), Some(ms(10_000)))
                .await;
            (r.map(|h| h.fencing_token()), started.elapsed())
        });
        // Wait until the waiter is announced.
        until_a_writer_waits(&lock).await;
        let fence_before = lock.inspect().await.unwrap().last_fencing_token;
        let released = lock.release(&holder).await;
        let info = lock.inspect().await.unwrap();
        eprintln!(
            "release -> {released:?}; after: holders {:?}, waiting {} fence {} -> {}; ww={}",
            info.holders
                .iter()
                .map(|h| &h.owner_token)
                .collect::<Vec<_>>(),
            info.waiting_writers,
            fence_before,
            info.last_fencing_token,
            raw(&server, &["ZRANGE", "redlock:{acl-ch}:ww", "0", "-1"]),
        );
        let (waited, took) = waiting.await.unwrap();
        eprintln!("waiter -> {waited:?} after {took:?}");
        assert!(
            released.is_ok(),
            "a release refused by an ACL on PUBLISH: {released:?} (holders left {}, fence \
             {fence_before} -> {})",
            info.holder_count,
            info.last_fencing_token
        );
        assert!(waited.is_ok(), "the waiter never got the lock: {waited:?}");
    })
    .await;
}

/// A writer waits on a held lock; `refuse` makes Redis refuse writes, which fails the waiter's
/// next attempt (a clear `Redis` error) and its withdrawal; `recover` ends the refusal. A release
/// must then not hand the lock to the waiter, whose call has ended: nobody would hold the lock
/// (nor release it) for that waiter's whole lease, so a third owner must get it well before.
async fn a_waiter_failed_by_a_refusal_is_not_granted_the_lock<R>(
    server: &RedisServer,
    name: &str,
    refuse: impl FnOnce() -> R,
    recover: impl FnOnce(R),
) {
    let holder_client = connect(server).await;
    // Re-checks every 2 s: announcements live 8 s (4 re-check intervals).
    let waiter_client = builder(server)
        .recheck_interval(ms(2000))
        .connect()
        .await
        .unwrap();
    let lock = holder_client.lock(name).unwrap();
    let holder = Owner::random();
    lock.acquire(&holder, NOW, Some(ms(60_000))).await.unwrap();
    let wlock = waiter_client.lock(name).unwrap();
    let waiter = Owner::random();
    let waiter_token = waiter.token().to_owned();
    let waiting = tokio::spawn(async move {
        let hold = wlock.acquire(&waiter, Some(ms(20_000)), None).await;
        hold.map(|h| h.fencing_token())
    });
    until_a_writer_waits(&lock).await;
    let refusal = refuse();
    let waited = waiting.await.unwrap();
    eprintln!("waiter during the refusal -> {waited:?}");
    assert_eq!(waited.map_err(|e| e.kind()), Err(ErrorKind::Redis));
    // Writes stay refused a little longer: the waiter's withdrawal meets the refusal too.
    tokio::time::sleep(ms(500)).await;
    recover(refusal);
    tokio::time::sleep(ms(300)).await;
    assert_eq!(lock.release(&holder).await, Ok(0));
    let info = lock.inspect().await.unwrap();
    let third = lock
        .acquire(&Owner::random(), Some(ms(6000)), Some(ms(5000)))
        .await;
    assert!(
        third.is_ok(),
        "{third:?}: the lock stayed taken by the waiter whose acquire failed \
         ({waiter_token}); right after the release: holders {:?}",
        info.holders
            .iter()
            .map(|h| (h.owner_token.clone(), h.lease_left))
            .collect::<Vec<_>>()
    );
}

async fn until_a_writer_waits(lock: &Lock) {
    let start = Instant::now();
    while lock.inspect().await.unwrap().waiting_writers == 0 {
        assert!(start.elapsed() < ms(3000), "waiter never announced");
        tokio::time::sleep(ms(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misconf_failed_waiter_is_not_granted_the_lock_afterwards() {
    limited(60, async {
        let server = RedisServer::start();
        let refuse = || make_misconf(&server);
        let recover = |()| lift_misconf(&server);
        a_waiter_failed_by_a_refusal_is_not_granted_the_lock(&server, "misconf-w", refuse, recover)
            .await;
    })
    .await;
}

/// -BUSY: a foreign script past `busy-reply-threshold` (it writes nothing, so SCRIPT KILL
/// ends it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_failed_waiter_is_not_granted_the_lock_afterwards() {
    limited(60, async {
        let server = RedisServer::start();
        ok(server.command(&["CONFIG", "SET", "busy-reply-threshold", "100"]));
        let refuse = || server.stall(ms(4000));
        let recover = |stall: std::thread::JoinHandle<()>| {
            eprintln!("SCRIPT KILL -> {}", server.command(&["SCRIPT", "KILL"]));
            let _ = stall.join();
        };
        a_waiter_failed_by_a_refusal_is_not_granted_the_lock(&server, "busy-w", refuse, recover)
            .await;
    })
    .await;
}

/// force_unlock as an ACL user without channel permissions: the script deletes the keys, then
/// its PUBLISH is refused. The call must not report an error for an unlock it did (and must
/// report this client's own watched hold lost, as its doc says, "at once").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acl_without_channels_force_unlock() {
    limited(30, async {
        let server = RedisServer::start();
        let url = user_without_channel_rights(&server);
        let client = Client::connect(&url).await.unwrap();
        let lock = client.lock("acl-fu").unwrap();
        let owner = Owner::random();
        let hold = lock.acquire(&owner, NOW, None).await.unwrap();
        let forced = lock.force_unlock().await;
        let keys = raw(&server, &["EXISTS", "redlock:{acl-fu}"]);
        eprintln!(
            "force_unlock -> {forced:?}; state key exists: {keys}; lost: {}",
            hold.is_lost()
        );
        assert_eq!(
            forced,
            Ok(true),
            "force_unlock said {forced:?}, yet the state key exists: {keys}; hold lost: {}",
            hold.is_lost()
        );
        assert!(hold.is_lost());
    })
    .await;
}

fn used_memory(server: &RedisServer) -> u64 {
    let info = server.command(&["INFO", "memory"]);
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}

/// Writes refused with -OOM: noeviction, some memory filled, then maxmemory set below the
/// memory in use (a value refused at the limit does not leave Redis over it).
fn make_oom(server: &RedisServer) {
    ok(server.command(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]));
    let big = "x".repeat(256 * 1024);
    for i in 0..8 {
        ok(server.command(&["SET", &format!("fill:{i}"), &big]));
    }
    let limit = (used_memory(server) - 200_000).to_string();
    ok(server.command(&["CONFIG", "SET", "maxmemory", &limit]));
    let reply = server.command(&["SET", "audit:probe", "1"]);
    assert!(reply.starts_with("-OOM"), "{reply}");
}

fn lift_oom(server: &RedisServer) {
    ok(server.command(&["CONFIG", "SET", "maxmemory", "0"]));
}

/// Every operation under -OOM: an error of the contract's kinds or the right answer, never a
/// wrong one, no half-applied script; and everything recovers once the limit is lifted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oom_every_operation() {
    limited(60, async {
        let server = RedisServer::start();
        let (client, events) = recording_losses(&server, ms(1500)).await;
        let a = Owner::random();
        let w1 = client.lock("oom-w1").unwrap();
        let w2 = client.lock("oom-w2").unwrap();
        let rw = client.read_write_lock("oom-r1").unwrap();
        let watched_w = w1.acquire(&a, NOW, None).await.unwrap();
        w2.acquire(&a, NOW, Some(ms(20_000))).await.unwrap();
        w2.acquire(&a, NOW, Some(ms(20_000))).await.unwrap();
        let watched_r = rw.read().acquire(&a, NOW, None).await.unwrap();
        make_oom(&server);

        let fresh = client.lock("oom-new").unwrap();
        let r = fresh.acquire(&a, NOW, Some(ms(5000))).await;
        eprintln!("acquire new: {r:?}");
        assert_eq!(
            r.as_ref().map(|_| ()).map_err(|e| e.kind()),
            Err(ErrorKind::Redis)
        );
        assert_eq!(raw(&server, &["EXISTS", "redlock:{oom-new}"]), ":0 ");
        let r = client
            .read_write_lock("oom-new-r")
            .unwrap()
            .read()
            .acquire(&a, NOW, Some(ms(5000)))
            .await;
        eprintln!("read acquire new: {r:?}");
        assert!(r.is_err());
        let r = w2.acquire(&a, NOW, Some(ms(20_000))).await;
        eprintln!(
            "reentrant acquire: {r:?}; wc={}",
            raw(&server, &["HGET", "redlock:{oom-w2}", "wc"])
        );
        match &r {
            Ok(h) => assert_eq!(h.hold_count(), 3),
            Err(e) => assert_eq!(e.kind(), ErrorKind::Redis),
        }
        let count_before = w2.hold_count(&a).await.unwrap();
        let r = w2.release(&a).await;
        let count_after = w2.hold_count(&a).await.unwrap();
        eprintln!("reentrant release: {r:?}; count {count_before} -> {count_after}");
        match r {
            Ok(left) => assert_eq!((left, count_after), (count_before - 1, count_before - 1)),
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::Redis);
                assert_eq!(count_after, count_before);
            }
        }
        let r = w2.extend(&a, ms(30_000)).await;
        eprintln!(
            "extend write: {r:?}; pttl {}",
            raw(&server, &["PTTL", "redlock:{oom-w2}"])
        );
        let r = rw.read().extend(&a, ms(30_000)).await;
        eprintln!("extend read: {r:?}");
        assert!(
            !matches!(
                r,
                Err(redlock_core::Error::NotHeld) | Err(redlock_core::Error::LockLost)
            ),
            "{r:?}"
        );
        let info = w1.inspect().await;
        eprintln!("inspect: {:?}", info.as_ref().map(|i| i.holder_count));
        assert!(info.is_ok());

        // A waiter on w1 (held by a).
        let b = Owner::random();
        let started = Instant::now();
        let r = w1.acquire(&b, Some(ms(1500)), Some(ms(5000))).await;
        eprintln!(
            "waiting acquire: {:?} after {:?}",
            r.as_ref().map(|_| ()),
            started.elapsed()
        );
        tokio::time::sleep(ms(300)).await;
        eprintln!(
            "waiting sets: ww={} wi={}",
            raw(&server, &["ZRANGE", "redlock:{oom-w1}:ww", "0", "-1"]),
            raw(&server, &["HLEN", "redlock:{oom-w1}:wi"])
        );
        // Two seconds: past the 1.5 s lease of the watched holds.
        tokio::time::sleep(ms(2000)).await;
        eprintln!(
            "after 2 s of OOM: write lost {} (key ttl {}), read lost {} (key ttl {}), events {}",
            watched_w.is_lost(),
            raw(&server, &["PTTL", "redlock:{oom-w1}"]),
            watched_r.is_lost(),
            raw(&server, &["PTTL", "redlock:{oom-r1}"]),
            events.lock().unwrap().len()
        );
        // Lost must mean gone.
        if watched_w.is_lost() {
            assert_eq!(raw(&server, &["EXISTS", "redlock:{oom-w1}"]), ":0 ");
        }
        if watched_r.is_lost() {
            assert!(!rw.read().is_held_by(&a).await.unwrap());
        }
        let fu = client.lock("oom-w2").unwrap().force_unlock().await;
        eprintln!("force_unlock: {fu:?}");
        assert_eq!(fu, Ok(true));

        lift_oom(&server);
        for i in 0..1000 {
            server.command(&["DEL", &format!("fill:{i}")]);
        }
        let h = fresh.acquire(&a, NOW, Some(ms(5000))).await;
        assert!(h.is_ok(), "{h:?}");
        if !watched_w.is_lost() {
            let c = Owner::random();
            let r = w1.acquire(&c, Some(ms(300)), Some(ms(1000))).await;
            assert!(r.is_err(), "a held watched lock was taken: {r:?}");
            assert_eq!(w1.release(&a).await, Ok(0));
        }
    })
    .await;
}

/// A master with a hold, and a replica of it; returns (master, replica) once the hold is there.
fn master_and_replica() -> (RedisServer, RedisServer) {
    let master = RedisServer::start();
    let replica = RedisServer::start();
    let port = master.port().to_string();
    ok(replica.command(&["REPLICAOF", "127.0.0.1", &port]));
    let start = Instant::now();
    while !raw(&replica, &["INFO", "replication"]).contains("master_link_status:up") {
        assert!(start.elapsed() < ms(10_000), "the replica never synced");
        std::thread::sleep(ms(50));
    }
    (master, replica)
}

fn wait_replicated(replica: &RedisServer, key: &str) {
    let start = Instant::now();
    while raw(replica, &["EXISTS", key]) != ":1 " {
        assert!(start.elapsed() < ms(5000), "{key} never replicated");
        std::thread::sleep(ms(20));
    }
}

/// A client pointed at a replica (DNS still naming the old master after a failover): every
/// write fails at once with a clear `Redis` error (READONLY), reads answer, and nothing says
/// NotHeld / LockLost for a hold that is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readonly_replica_async() {
    limited(60, async {
        let (master, replica) = master_and_replica();
        let on_master = connect(&master).await;
        let owner = Owner::random();
        on_master
            .lock("ro")
            .unwrap()
            .acquire(&owner, NOW, Some(ms(30_000)))
            .await
            .unwrap();
        wait_replicated(&replica, "redlock:{ro}");
        let client = connect(&replica).await;
        let lock = client.lock("ro").unwrap();
        let timed = |what: &str, started: Instant| {
            assert!(
                started.elapsed() < ms(1000),
                "{what} took {:?}",
                started.elapsed()
            );
        };
        let t = Instant::now();
        let r = client
            .lock("ro-new")
            .unwrap()
            .acquire(&owner, Some(ms(5000)), None)
            .await;
        eprintln!("acquire new: {:?}", r.as_ref().map(|_| ()));
        timed("acquire", t);
        assert_eq!(r.map(|_| ()).map_err(|e| e.kind()), Err(ErrorKind::Redis));
        let t = Instant::now();
        let other = Owner::random();
        let r = lock.acquire(&other, Some(ms(5000)), None).await;
        eprintln!("waiting acquire: {:?}", r.as_ref().map(|_| ()));
        timed("waiting acquire", t);
        assert_eq!(r.map(|_| ()).map_err(|e| e.kind()), Err(ErrorKind::Redis));
        let t = Instant::now();
        let r = lock.acquire(&owner, NOW, None).await;
        eprintln!("re-entry: {:?}", r.as_ref().map(|_| ()));
        timed("re-entry", t);
        assert_eq!(r.map(|_| ()).map_err(|e| e.kind()), Err(ErrorKind::Redis));
        assert_eq!(lock.hold_count(&owner).await, Ok(1));
        let t = Instant::now();
        let r = lock.extend(&owner, ms(40_000)).await;
        eprintln!("extend: {r:?}");
        timed("extend", t);
        assert_eq!(r.map_err(|e| e.kind()), Err(ErrorKind::Redis));
        let t = Instant::now();
        let r = lock.release(&owner).await;
        eprintln!("release: {r:?}");
        timed("release", t);
        assert_eq!(r.map_err(|e| e.kind()), Err(ErrorKind::Redis));
        assert_eq!(
            lock.release(&other).await,
            Err(redlock_core::Error::NotHeld)
        );
        let r = lock.force_unlock().await;
        eprintln!("force_unlock: {r:?}");
        assert_eq!(r.map_err(|e| e.kind()), Err(ErrorKind::Redis));
        assert_eq!(raw(&master, &["EXISTS", "redlock:{ro}"]), ":1 ");
        assert!(lock.is_locked().await.unwrap());
    })
    .await;
}

/// The same through the blocking API (direct connections for the first attempt and release).
#[test]
fn readonly_replica_blocking() {
    let (master, replica) = master_and_replica();
    let on_master = redlock_core::blocking::Client::connect(&master.url()).unwrap();
    let owner = Owner::random();
    on_master
        .lock("ro")
        .unwrap()
        .acquire(&owner, NOW, Some(ms(30_000)))
        .unwrap();
    wait_replicated(&replica, "redlock:{ro}");
    let client = redlock_core::blocking::Client::connect(&replica.url()).unwrap();
    let lock = client.lock("ro").unwrap();
    let t = Instant::now();
    let r = client
        .lock("ro-new")
        .unwrap()
        .acquire(&owner, Some(ms(5000)), None);
    assert_eq!(r.map(|_| ()).map_err(|e| e.kind()), Err(ErrorKind::Redis));
    let other = Owner::random();
    let r = lock.acquire(&other, Some(ms(5000)), None);
    assert_eq!(r.map(|_| ()).map_err(|e| e.kind()), Err(ErrorKind::Redis));
    let r = lock.acquire(&owner, NOW, None);
    assert_eq!(r.map(|_| ()).map_err(|e| e.kind()), Err(ErrorKind::Redis));
    assert_eq!(lock.hold_count(&owner), Ok(1));
    assert_eq!(
        lock.extend(&owner, ms(40_000)).map_err(|e| e.kind()),
        Err(ErrorKind::Redis)
    );
    assert_eq!(
        lock.release(&owner).map_err(|e| e.kind()),
        Err(ErrorKind::Redis)
    );
    assert_eq!(lock.release(&other), Err(redlock_core::Error::NotHeld));
    assert!(t.elapsed() < ms(2000), "{:?}", t.elapsed());
    assert!(lock.is_locked().unwrap());
}

/// The ACL release with a waiter through the blocking API: the same answer as the async one.
#[test]
fn acl_without_channels_release_with_a_waiter_blocking() {
    let server = RedisServer::start();
    let url = user_without_channel_rights(&server);
    let client = redlock_core::blocking::Client::connect(&url).unwrap();
    let lock = client.lock("acl-b").unwrap();
    let holder = Owner::random();
    lock.acquire(&holder, NOW, Some(ms(20_000))).unwrap();
    let waiter_client = redlock_core::blocking::Client::connect(&url).unwrap();
    let waiting = std::thread::spawn(move || {
        let wlock = waiter_client.lock("acl-b").unwrap();
        wlock
            .acquire(&Owner::random(), Some(ms(4000)), Some(ms(10_000)))
            .map(|h| h.fencing_token())
    });
    let start = Instant::now();
    while lock.inspect().unwrap().waiting_writers == 0 {
        assert!(start.elapsed() < ms(3000), "waiter never announced");
        std::thread::sleep(ms(20));
    }
    let released = lock.release(&holder);
    let waited = waiting.join().unwrap();
    eprintln!("blocking release -> {released:?}; waiter -> {waited:?}");
    assert!(released.is_ok(), "{released:?}");
    assert!(waited.is_ok(), "{waited:?}");
}

/// Watched holds across a short refusal (BUSY, then MISCONF) shorter than the lease: renewals
/// fail meanwhile, resume after, and the holds are neither lost nor reported lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watched_holds_survive_a_short_refusal() {
    limited(60, async {
        let server = RedisServer::start();
        ok(server.command(&["CONFIG", "SET", "busy-reply-threshold", "100"]));
        let (client, events) = recording_losses(&server, ms(3000)).await;
        let owner = Owner::random();
        let w = client
            .lock("wd-w")
            .unwrap()
            .acquire(&owner, NOW, None)
            .await
            .unwrap();
        let rw = client.read_write_lock("wd-r").unwrap();
        let r = rw.read().acquire(&owner, NOW, None).await.unwrap();
        let stall = server.stall(ms(1500));
        tokio::time::sleep(ms(800)).await;
        let _ = server.command(&["SCRIPT", "KILL"]);
        let _ = stall.join();
        make_misconf(&server);
        tokio::time::sleep(ms(1500)).await;
        lift_misconf(&server);
        tokio::time::sleep(ms(4000)).await;
        let events = events.lock().unwrap().clone();
        assert!(!w.is_lost() && !r.is_lost(), "reported lost: {events:?}");
        assert_eq!(client.lock("wd-w").unwrap().hold_count(&owner).await, Ok(1));
        assert_eq!(rw.read().hold_count(&owner).await, Ok(1));
        assert_eq!(client.lock("wd-w").unwrap().release(&owner).await, Ok(0));
        assert_eq!(rw.read().release(&owner).await, Ok(0));
    })
    .await;
}

/// A waiter's withdrawal that Redis refused is retried in the background (acquire.rs
/// `withdraw`), as a tidy-up the owner's next calls wait for. Once Redis takes writes again, a
/// release grants the lock to that ended waiter; the owner's NEXT acquire must not re-enter that
/// grant (before the retry held a tidy ticket, it reported hold count 2, and after the owner
/// released its one hold the lock was still held by it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retried_withdrawal_is_waited_for_by_the_owners_next_acquire() {
    limited(60, async {
        let server = RedisServer::start();
        let holder_client = connect(&server).await;
        // Re-checks (and withdrawal retries) every 2 s.
        let waiter_client = builder(&server)
            .recheck_interval(ms(2000))
            .connect()
            .await
            .unwrap();
        let lock = holder_client.lock("wd-retry").unwrap();
        let holder = Owner::random();
        lock.acquire(&holder, NOW, Some(ms(60_000))).await.unwrap();

        let wlock = waiter_client.lock("wd-retry").unwrap();
        let owner = Owner::random();
        let waiting = {
            let (wlock, owner) = (wlock.clone(), owner.clone());
            tokio::spawn(async move {
                wlock
                    .acquire(&owner, Some(ms(20_000)), Some(ms(30_000)))
                    .await
                    .map(|h| h.fencing_token())
            })
        };
        until_a_writer_waits(&lock).await;
        make_misconf(&server);
        // The waiter's next re-check fails; its withdrawal is refused and retried in 2 s.
        let waited = waiting.await.unwrap();
        eprintln!("first acquire under MISCONF -> {waited:?}");
        assert_eq!(waited.as_ref().map_err(|e| e.kind()), Err(ErrorKind::Redis));
        tokio::time::sleep(ms(300)).await;
        lift_misconf(&server);
        // Before the retry: another holder's release hands the lock to the ended waiter.
        assert_eq!(lock.release(&holder).await, Ok(0));

        // The owner's next acquire: it holds nothing, so this is a new hold of count 1.
        let hold = wlock.acquire(&owner, NOW, Some(ms(30_000))).await.unwrap();
        let count = hold.hold_count();
        let left = wlock.release(&owner).await;
        let other = Owner::random();
        let other_got = lock.acquire(&other, NOW, Some(ms(5000))).await.map(|_| ());
        eprintln!(
            "next acquire: count {count}, fence {}; release -> {left:?}; \
             another owner right after -> {other_got:?}",
            hold.fencing_token()
        );
        assert_eq!(
            count, 1,
            "the owner's next acquire re-entered the withdrawn waiter's grant"
        );
        assert_eq!(
            left,
            Ok(0),
            "the owner released its only hold, yet still holds the lock"
        );
        assert_eq!(
            other_got,
            Ok(()),
            "the lock stayed held after its owner released it"
        );
    })
    .await;
}
