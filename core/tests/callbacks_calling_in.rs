//! User callbacks that call back into the library: every call from a lost-hold or contention
//! callback answers (a wait is woken by its notification, as outside one), a callback may wait
//! for a lock whose loss is queued behind it, close its own client, raise its own client's next
//! loss, and use the tokio handle it runs under. (From the reentry audit, 2026-11-27.)

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use common::*;
use redlock_core::blocking;
use redlock_core::{Error, Owner};

/// A blocking client whose waiters never re-check within a test: only pub/sub (or a grant) wakes
/// them. Its lost callback gets the client itself.
fn blocking_client_with_lost(
    server: &RedisServer,
    on_lost: impl Fn(&blocking::Client, &redlock_core::LockLostEvent) + Send + Sync + 'static,
) -> blocking::Client {
    let me: Arc<OnceLock<blocking::Client>> = Arc::default();
    let me2 = me.clone();
    let builder = builder(server)
        .lease(ms(900))
        .recheck_interval(Duration::from_secs(60))
        .on_lock_lost(move |event| {
            let client = me2.get().expect("client set").clone();
            on_lost(&client, event)
        });
    let client = blocking::Client::from_builder(builder).unwrap();
    me.set(client.clone()).ok().unwrap();
    client
}

/// Holds `name` for `after`, then releases it (from a plain thread of a separate client).
fn release_later(server: &RedisServer, name: &str, after: Duration) -> std::thread::JoinHandle<()> {
    let other = blocking::Client::connect(&server.url()).unwrap();
    let lock = other.lock(name).unwrap();
    let owner = Owner::random();
    lock.acquire(&owner, NOW, Some(Duration::from_secs(30)))
        .unwrap();
    std::thread::spawn(move || {
        std::thread::sleep(after);
        lock.release(&owner).unwrap();
        other.close();
    })
}

#[test]
fn every_blocking_call_from_a_lost_callback_answers() {
    let server = RedisServer::start();
    let url = server.url();
    let (tx, rx) = mpsc::channel::<String>();
    let tx = Mutex::new(tx);
    let server_url = url.clone();
    let client = blocking_client_with_lost(&server, move |me, event| {
        let say = |s: String| tx.lock().unwrap().send(s).unwrap();
        say(format!("event {}", event.name));
        if event.name != "watched" {
            return;
        }
        // A waiting acquire of another name, released 300 ms from now by another client.
        let other = blocking::Client::connect(&server_url).unwrap();
        let olock = other.lock("busy").unwrap();
        let oowner = Owner::random();
        olock
            .acquire(&oowner, NOW, Some(Duration::from_secs(30)))
            .unwrap();
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(ms(300));
            olock.release(&oowner).unwrap();
            other.close();
        });
        let lock = me.lock("busy").unwrap();
        let owner = Owner::random();
        let start = Instant::now();
        let got = lock.acquire(&owner, Some(Duration::from_secs(5)), None);
        say(format!(
            "waited acquire {:?} in {:?}",
            got.as_ref().map(|h| h.hold_count()),
            start.elapsed()
        ));
        releaser.join().unwrap();
        say(format!(
            "extend {:?}",
            lock.extend(&owner, Duration::from_secs(10))
        ));
        say(format!(
            "inspect holders {:?}",
            lock.inspect().map(|i| i.holders.len())
        ));
        say(format!("release {:?}", lock.release(&owner)));
        say(format!(
            "release again {:?}",
            lock.release(&owner).map_err(|e| e.kind())
        ));
        let fresh = me.lock("fresh").unwrap();
        say(format!(
            "try_acquire fresh {:?}",
            fresh.try_acquire(&owner, None).map(|h| h.is_some())
        ));
        say(format!("force_unlock {:?}", me.force_unlock("fresh")));
        let newc = blocking::Client::connect(&server_url).unwrap();
        let nl = newc.lock("new-client").unwrap();
        say(format!(
            "new client acquire {:?}",
            nl.acquire(&owner, Some(ms(500)), None)
                .map(|h| h.hold_count())
        ));
        say(format!("new client release {:?}", nl.release(&owner)));
        newc.close();
        me.close();
        say(format!(
            "after close {:?}",
            me.inspect("x").map_err(|e| e.kind())
        ));
        say("done".into());
    });
    // Outside a callback first: the same wait.
    let releaser = release_later(&server, "busy", ms(300));
    let owner = Owner::random();
    let lock = client.lock("busy").unwrap();
    let start = Instant::now();
    lock.acquire(&owner, Some(Duration::from_secs(5)), None)
        .unwrap();
    let outside = start.elapsed();
    lock.release(&owner).unwrap();
    releaser.join().unwrap();
    eprintln!("outside a callback: {outside:?}");

    let watched = client.lock("watched").unwrap();
    let hold = watched.acquire(&Owner::random(), NOW, None).unwrap();
    let admin = blocking::Client::connect(&url).unwrap();
    assert!(admin.force_unlock("watched").unwrap());
    let mut seen = Vec::new();
    loop {
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(line) => {
                eprintln!("{line}");
                let done = line == "done";
                seen.push(line);
                if done {
                    break;
                }
            }
            Err(e) => panic!("callback stuck ({e}); so far {seen:#?}"),
        }
    }
    drop(hold);
    admin.close();
    let waited = seen.iter().find(|l| l.starts_with("waited")).unwrap();
    assert!(waited.contains("Ok(1)"), "{waited}");
    let secs: f64 = {
        let t = waited.rsplit(" in ").next().unwrap();
        if let Some(ms) = t.strip_suffix("ms") {
            ms.parse::<f64>().unwrap() / 1000.0
        } else {
            t.strip_suffix('s').unwrap().parse().unwrap()
        }
    };
    // Woken by its notification (~0.3 s), not by a re-check (every 60 s).
    assert!(
        secs < 5.0,
        "in a callback the wait took {secs} s, outside {outside:?}"
    );
    for (prefix, expect) in [
        ("extend", "Ok(())"),
        ("inspect holders", "Ok(1)"),
        ("release ", "Ok(0)"),
        ("release again", "Err(NotHeld)"),
        ("try_acquire fresh", "Ok(true)"),
        ("force_unlock", "Ok(true)"),
        ("new client acquire", "Ok(1)"),
        ("new client release", "Ok(0)"),
        ("after close", "Err(Closed)"),
    ] {
        let line = seen.iter().find(|l| l.starts_with(prefix)).unwrap();
        assert!(line.contains(expect), "{line} (expected {expect})");
    }
}

/// A lost callback waits for a lock held by another owner of the SAME client, watched: the
/// release that frees it is a force_unlock, which raises a lost event of this client, queued
/// behind the running callback. The waiting acquire must still end within its wait.
#[test]
fn a_callback_waiting_for_a_lock_whose_loss_is_queued_behind_it() {
    let server = RedisServer::start();
    let url = server.url();
    let (tx, rx) = mpsc::channel::<String>();
    let tx = Mutex::new(tx);
    let url2 = url.clone();
    let client = blocking_client_with_lost(&server, move |me, event| {
        let say = |s: String| tx.lock().unwrap().send(s).unwrap();
        say(format!("event {}", event.name));
        if event.name != "first" {
            return;
        }
        let url = url2.clone();
        let unlocker = std::thread::spawn(move || {
            std::thread::sleep(ms(300));
            let admin = blocking::Client::connect(&url).unwrap();
            admin.force_unlock("second").unwrap();
            admin.close();
        });
        let start = Instant::now();
        let got = me.lock("second").unwrap().acquire(
            &Owner::random(),
            Some(Duration::from_secs(3)),
            Some(ms(5000)),
        );
        say(format!(
            "second {:?} in {:?}",
            got.map(|h| h.hold_count()),
            start.elapsed()
        ));
        unlocker.join().unwrap();
    });
    let first = client
        .lock("first")
        .unwrap()
        .acquire(&Owner::random(), NOW, None)
        .unwrap();
    let second = client
        .lock("second")
        .unwrap()
        .acquire(&Owner::random(), NOW, None)
        .unwrap();
    let admin = blocking::Client::connect(&url).unwrap();
    admin.force_unlock("first").unwrap();
    let mut seen = Vec::new();
    while seen.len() < 3 {
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(line) => {
                eprintln!("{line}");
                seen.push(line)
            }
            Err(e) => panic!("stuck ({e}): {seen:?}"),
        }
    }
    assert_eq!(seen[0], "event first");
    assert!(seen[1].starts_with("second Ok(1)"), "{seen:?}");
    assert_eq!(seen[2], "event second");
    drop((first, second));
    client.close();
    admin.close();
}

/// A lost callback that force-unlocks another watched hold of its own client, in a chain of
/// 200: every event is delivered in order, one callback at a time.
#[test]
fn a_chain_of_losses_raised_from_the_lost_callback() {
    let server = RedisServer::start();
    let n = 200;
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let (running, overlapped) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (seen2, running2, overlapped2) = (seen.clone(), running.clone(), overlapped.clone());
    let client = blocking_client_with_lost(&server, move |me, event| {
        if running2.swap(true, Ordering::SeqCst) {
            overlapped2.store(true, Ordering::SeqCst);
        }
        seen2.lock().unwrap().push(event.name.clone());
        let i: usize = event.name.strip_prefix("chain:").unwrap().parse().unwrap();
        if i + 1 < n {
            me.force_unlock(&format!("chain:{}", i + 1)).unwrap();
        }
        running2.store(false, Ordering::SeqCst);
    });
    let mut holds = Vec::new();
    for i in 0..n {
        let lock = client.lock(&format!("chain:{i}")).unwrap();
        holds.push(lock.acquire(&Owner::random(), NOW, None).unwrap());
    }
    let admin = blocking::Client::connect(&server.url()).unwrap();
    admin.force_unlock("chain:0").unwrap();
    let start = Instant::now();
    while seen.lock().unwrap().len() < n {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "only {} of {n} events",
            seen.lock().unwrap().len()
        );
        std::thread::sleep(ms(50));
    }
    let names = seen.lock().unwrap().clone();
    let expected: Vec<String> = (0..n).map(|i| format!("chain:{i}")).collect();
    assert_eq!(names, expected);
    assert!(
        !overlapped.load(Ordering::SeqCst),
        "two callbacks of one client ran at once"
    );
    drop(holds);
    client.close();
    admin.close();
}

/// An async user: the callback drives async calls of the library with the handle it finds.
#[test]
fn an_async_callback_uses_the_current_handle() {
    let server = RedisServer::start();
    let url = server.url();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (tx, rx) = mpsc::channel::<String>();
    let tx = Mutex::new(tx);
    let me: Arc<OnceLock<redlock_core::Client>> = Arc::default();
    let me2 = me.clone();
    let client = rt.block_on(async {
        builder(&server)
            .lease(ms(900))
            .recheck_interval(Duration::from_secs(60))
            .on_lock_lost(move |event| {
                let say = |s: String| tx.lock().unwrap().send(s).unwrap();
                if event.name != "watched" {
                    return;
                }
                let client = me2.get().unwrap().clone();
                let handle = tokio::runtime::Handle::current();
                let start = Instant::now();
                let got = handle.block_on(async {
                    let lock = client.lock("busy").unwrap();
                    let owner = Owner::random();
                    let hold = lock
                        .acquire(&owner, Some(Duration::from_secs(5)), None)
                        .await?;
                    let task = tokio::spawn(async move {
                        tokio::time::sleep(ms(10)).await;
                        lock.release(&owner).await
                    });
                    let released = task.await.unwrap()?;
                    Ok::<_, Error>((hold.hold_count(), released))
                });
                say(format!("async {:?} in {:?}", got, start.elapsed()));
                // The blocking API from the same callback.
                let b = blocking::Client::connect(&url).unwrap();
                say(format!(
                    "blocking {:?}",
                    b.lock("y")
                        .unwrap()
                        .try_acquire(&Owner::random(), None)
                        .map(|h| h.is_some())
                ));
                b.close();
                say("done".into());
            })
            .connect()
            .await
            .unwrap()
    });
    me.set(client.clone()).ok().unwrap();
    let holder = rt.block_on(connect(&server));
    let howner = Owner::random();
    let hlock = holder.lock("busy").unwrap();
    rt.block_on(hlock.acquire(&howner, NOW, Some(Duration::from_secs(30))))
        .unwrap();
    let _hold = rt
        .block_on(
            client
                .lock("watched")
                .unwrap()
                .acquire(&Owner::random(), NOW, None),
        )
        .unwrap();
    rt.block_on(holder.force_unlock("watched")).unwrap();
    std::thread::sleep(ms(1500));
    rt.block_on(hlock.release(&howner)).unwrap();
    let mut seen = Vec::new();
    while seen.last().map(String::as_str) != Some("done") {
        match rx.recv_timeout(Duration::from_secs(15)) {
            Ok(l) => {
                eprintln!("{l}");
                seen.push(l)
            }
            Err(e) => panic!("stuck ({e}): {seen:?}"),
        }
    }
    assert!(seen[0].starts_with("async Ok((1, 0))"), "{seen:?}");
    assert!(seen[1].contains("Ok(true)"), "{seen:?}");
    client.close();
    holder.close();
}

/// A contention callback calls the library (a waiting acquire of another name; close).
#[test]
fn a_contention_callback_calls_the_library() {
    let server = RedisServer::start();
    let url = server.url();
    let (tx, rx) = mpsc::channel::<String>();
    let tx = Mutex::new(tx);
    let me: Arc<OnceLock<blocking::Client>> = Arc::default();
    let me2 = me.clone();
    let url2 = url.clone();
    let b = builder(&server)
        .recheck_interval(Duration::from_secs(60))
        .contention_alert_attempts(Some(1))
        .on_contention(move |alert| {
            let say = |s: String| tx.lock().unwrap().send(s).unwrap();
            say(format!("alert {}", alert.name));
            if alert.name != "contended" {
                return;
            }
            let me = me2.get().unwrap();
            let other = blocking::Client::connect(&url2).unwrap();
            let olock = other.lock("busy2").unwrap();
            let oowner = Owner::random();
            olock
                .acquire(&oowner, NOW, Some(Duration::from_secs(30)))
                .unwrap();
            let releaser = std::thread::spawn(move || {
                std::thread::sleep(ms(300));
                olock.release(&oowner).unwrap();
                other.close();
            });
            let start = Instant::now();
            let got = me.lock("busy2").unwrap().acquire(
                &Owner::random(),
                Some(Duration::from_secs(5)),
                Some(ms(2000)),
            );
            say(format!(
                "waited {:?} in {:?}",
                got.map(|h| h.hold_count()),
                start.elapsed()
            ));
            releaser.join().unwrap();
            say("done".into());
        });
    let client = blocking::Client::from_builder(b).unwrap();
    me.set(client.clone()).ok().unwrap();
    let holder = blocking::Client::connect(&url).unwrap();
    let ho = Owner::random();
    holder
        .lock("contended")
        .unwrap()
        .acquire(&ho, NOW, Some(Duration::from_secs(30)))
        .unwrap();
    let waiter = {
        let client = client.clone();
        std::thread::spawn(move || {
            client
                .lock("contended")
                .unwrap()
                .acquire(&Owner::random(), Some(ms(3000)), Some(ms(1000)))
                .map(|h| h.hold_count())
        })
    };
    let mut seen = Vec::new();
    while seen.last().map(String::as_str) != Some("done") {
        match rx.recv_timeout(Duration::from_secs(15)) {
            Ok(l) => {
                eprintln!("{l}");
                seen.push(l)
            }
            Err(e) => panic!("stuck ({e}): {seen:?}"),
        }
    }
    let w = waiter.join().unwrap();
    eprintln!("waiter: {w:?}");
    let waited = seen.iter().find(|l| l.starts_with("waited")).unwrap();
    assert!(waited.starts_with("waited Ok(1)"), "{waited}");
    let t = waited.rsplit(" in ").next().unwrap();
    assert!(
        t.ends_with("ms") || t.starts_with("0.") || t.starts_with("1."),
        "{waited}"
    );
    client.close();
    holder.close();
}

/// Closing the client from inside its own lost callback while 50 more events are queued: no
/// hang, no panic, and the remaining callbacks see a closed client.
#[test]
fn closing_from_the_callback_with_events_queued() {
    let server = RedisServer::start();
    let seen: Arc<Mutex<Vec<(String, bool)>>> = Arc::default();
    let seen2 = seen.clone();
    let client = blocking_client_with_lost(&server, move |me, event| {
        std::thread::sleep(ms(5));
        if seen2.lock().unwrap().is_empty() {
            me.close();
        }
        let r = me.inspect(&event.name);
        seen2
            .lock()
            .unwrap()
            .push((event.name.clone(), matches!(r, Err(Error::Closed))));
    });
    let mut holds = Vec::new();
    for i in 0..50 {
        holds.push(
            client
                .lock(&format!("q:{i}"))
                .unwrap()
                .acquire(&Owner::random(), NOW, None)
                .unwrap(),
        );
    }
    ok(server.command(&["FLUSHALL"]));
    let start = Instant::now();
    while seen.lock().unwrap().is_empty() {
        assert!(start.elapsed() < Duration::from_secs(10));
        std::thread::sleep(ms(20));
    }
    std::thread::sleep(ms(1500));
    let s = seen.lock().unwrap().clone();
    eprintln!("{} callbacks ran after/at close", s.len());
    assert!(s.iter().all(|(_, closed)| *closed), "{s:?}");
    drop(holds);
}
