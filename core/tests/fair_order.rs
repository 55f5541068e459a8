//! Fairness with real waiting acquires from several clients, the async and the blocking API on
//! one lock: a waiting writer goes before readers that come later, waiting writers enter in
//! arrival order, and readers that waited through a write have their turn (from the fairness
//! audit).

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use redlock_core::Owner;

type Log = Arc<Mutex<Vec<(String, u64, Duration)>>>;

async fn wait_until(rw: &redlock_core::ReadWriteLock, writers: u64, readers: u64) {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let info = rw.read().inspect().await.unwrap();
        if info.waiting_writers >= writers && info.waiting_readers >= readers {
            return;
        }
        assert!(
            Instant::now() < until,
            "never saw {writers}/{readers} waiting: {info:?}"
        );
        tokio::time::sleep(ms(2)).await;
    }
}

/// A round's server; an async client and its view of the lock (`rw0`, the holder's), two more
/// async clients and a blocking one; the log of entries and the round's start.
struct Scene {
    server: RedisServer,
    _c0: redlock_core::Client,
    cs: [redlock_core::Client; 2],
    b: redlock_core::blocking::Client,
    rw0: redlock_core::ReadWriteLock,
    start: Instant,
    log: Log,
}

impl Scene {
    async fn new(name: &str) -> Scene {
        let server = RedisServer::start();
        let c0 = connect(&server).await;
        let cs = [connect(&server).await, connect(&server).await];
        let b = redlock_core::blocking::Client::connect(&server.url()).unwrap();
        let rw0 = c0.read_write_lock(name).unwrap();
        Scene {
            server,
            _c0: c0,
            cs,
            b,
            rw0,
            start: Instant::now(),
            log: Arc::default(),
        }
    }
}

/// Every key of the round's lock is gone within 3 s (withdrawals run in the background).
async fn nothing_left(server: &RedisServer) {
    let until = Instant::now() + Duration::from_secs(3);
    while !lock_keys(server).is_empty() && Instant::now() < until {
        tokio::time::sleep(ms(10)).await;
    }
    assert!(lock_keys(server).is_empty(), "{:?}", lock_keys(server));
}

/// A reader holds; a writer waits; readers of three clients (one of them the writer's, one a
/// blocking thread) then wait. The writer goes first, then the readers; nobody waits for a
/// lease (5 s) to run out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_writer_goes_before_readers_that_arrive_after_it() {
    for round in 0..5 {
        let server = RedisServer::start();
        let name = "fair-a";
        let c0 = connect(&server).await;
        let c1 = connect(&server).await;
        let c2 = connect(&server).await;
        let b = redlock_core::blocking::Client::connect(&server.url()).unwrap();
        let rw0 = c0.read_write_lock(name).unwrap();
        let start = Instant::now();
        let log: Log = Arc::default();
        let lease = Some(Duration::from_secs(5));

        let r0 = Owner::random();
        rw0.read().acquire(&r0, NOW, lease).await.unwrap();

        let mut tasks = Vec::new();
        {
            let (w, log) = (c1.read_write_lock(name).unwrap().write(), log.clone());
            tasks.push(tokio::spawn(async move {
                let me = Owner::random();
                let h = w.acquire(&me, None, lease).await.unwrap();
                log.lock()
                    .unwrap()
                    .push(("W".into(), h.fencing_token(), start.elapsed()));
                tokio::time::sleep(ms(50)).await;
                log.lock()
                    .unwrap()
                    .push(("W-out".into(), 0, start.elapsed()));
                w.release(&me).await.unwrap();
            }));
        }
        wait_until(&rw0, 1, 0).await;
        for (i, c) in [&c1, &c2].into_iter().enumerate() {
            let (r, log) = (c.read_write_lock(name).unwrap().read(), log.clone());
            tasks.push(tokio::spawn(async move {
                let me = Owner::random();
                let h = r
                    .acquire(&me, Some(Duration::from_secs(10)), lease)
                    .await
                    .unwrap();
                log.lock()
                    .unwrap()
                    .push((format!("R{i}"), h.fencing_token(), start.elapsed()));
                r.release(&me).await.unwrap();
            }));
            wait_until(&rw0, 1, i as u64 + 1).await;
        }
        let blocking_reader = {
            let rwb = b.read_write_lock(name).unwrap();
            let log = log.clone();
            std::thread::spawn(move || {
                let me = Owner::random();
                let h = rwb
                    .read()
                    .acquire(&me, Some(Duration::from_secs(10)), lease)
                    .unwrap();
                log.lock()
                    .unwrap()
                    .push(("RB".into(), h.fencing_token(), start.elapsed()));
                rwb.read().release(&me).unwrap();
            })
        };
        wait_until(&rw0, 1, 3).await;
        let freed = start.elapsed();
        rw0.read().release(&r0).await.unwrap();
        for t in tasks {
            t.await.unwrap();
        }
        tokio::task::spawn_blocking(move || blocking_reader.join().unwrap())
            .await
            .unwrap();
        let log = log.lock().unwrap().clone();
        assert_eq!(
            log[0].0, "W",
            "round {round}: a reader went before the waiting writer: {log:?}"
        );
        assert_eq!(log[1].0, "W-out", "round {round}: {log:?}");
        for e in &log {
            assert!(
                e.2 - freed < Duration::from_secs(2),
                "round {round}: waited for a lease: {log:?}"
            );
        }
        nothing_left(&server).await;
        b.close();
    }
}

/// A writer holds; writers of three async clients and two blocking threads (one of a client
/// that already has a waiter) queue one after another. They enter in that order, fences rising.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_writers_of_both_apis_enter_in_arrival_order() {
    for round in 0..5 {
        let name = "fair-b";
        let Scene {
            server,
            _c0,
            cs,
            b,
            rw0,
            start,
            log,
        } = Scene::new(name).await;
        let lease = Some(Duration::from_secs(5));
        let holder = Owner::random();
        rw0.write().acquire(&holder, NOW, lease).await.unwrap();

        let mut tasks = Vec::new();
        let mut threads = Vec::new();
        // Arrival order: A0 (c0 async), B0 (blocking), A1 (c1 async), B1 (blocking), A2 (c0 again)
        let plan: [(&str, Option<usize>); 6] = [
            ("A0", Some(0)),
            ("B0", None),
            ("A1", Some(1)),
            ("B1", None),
            ("A2", Some(0)),
            ("A3", Some(1)),
        ];
        for (i, (label, client)) in plan.into_iter().enumerate() {
            let label = label.to_string();
            let log = log.clone();
            match client {
                Some(c) => {
                    let w = cs[c].read_write_lock(name).unwrap().write();
                    tasks.push(tokio::spawn(async move {
                        let me = Owner::random();
                        let h = w.acquire(&me, None, lease).await.unwrap();
                        log.lock()
                            .unwrap()
                            .push((label, h.fencing_token(), start.elapsed()));
                        tokio::time::sleep(ms(5)).await;
                        w.release(&me).await.unwrap();
                    }));
                }
                None => {
                    let rwb = b.read_write_lock(name).unwrap();
                    threads.push(std::thread::spawn(move || {
                        let me = Owner::random();
                        let h = rwb.write().acquire(&me, None, lease).unwrap();
                        log.lock()
                            .unwrap()
                            .push((label, h.fencing_token(), start.elapsed()));
                        std::thread::sleep(ms(5));
                        rwb.write().release(&me).unwrap();
                    }));
                }
            }
            wait_until(&rw0, i as u64 + 1, 0).await;
        }
        let freed = start.elapsed();
        rw0.write().release(&holder).await.unwrap();
        for t in tasks {
            t.await.unwrap();
        }
        for t in threads {
            tokio::task::spawn_blocking(move || t.join().unwrap())
                .await
                .unwrap();
        }
        let log = log.lock().unwrap().clone();
        let order: Vec<&str> = log.iter().map(|e| e.0.as_str()).collect();
        assert_eq!(
            order,
            ["A0", "B0", "A1", "B1", "A2", "A3"],
            "round {round}: {log:?}"
        );
        assert!(log.windows(2).all(|w| w[0].1 < w[1].1), "{log:?}");
        assert!(
            log.last().unwrap().2 - freed < Duration::from_secs(2),
            "{log:?}"
        );
        nothing_left(&server).await;
        b.close();
    }
}

/// Writers and readers alternate arriving while a writer holds: W1, R1, W2, R2, W3. The
/// contract: W1 first (arrived first); readers that waited through W1's write have a turn
/// before the next writer; W2 before W3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alternating_arrivals_keep_writer_order_and_give_readers_their_turn() {
    for round in 0..5 {
        let name = "fair-c";
        let Scene {
            server,
            _c0,
            cs,
            b,
            rw0,
            start,
            log,
        } = Scene::new(name).await;
        let lease = Some(Duration::from_secs(5));
        let holder = Owner::random();
        rw0.write().acquire(&holder, NOW, lease).await.unwrap();
        let mut tasks = Vec::new();
        let mut threads = Vec::new();
        // (label, write?, client: Some(async index) or None = blocking)
        let plan: [(&str, bool, Option<usize>); 6] = [
            ("W1", true, Some(0)),
            ("R1", false, None),
            ("W2", true, None),
            ("R2", false, Some(1)),
            ("W3", true, Some(1)),
            ("R3", false, Some(0)),
        ];
        let (mut nw, mut nr) = (0, 0);
        for (label, write, client) in plan {
            if write {
                nw += 1
            } else {
                nr += 1
            }
            let label = label.to_string();
            let log = log.clone();
            match client {
                Some(c) => {
                    let rw = cs[c].read_write_lock(name).unwrap();
                    tasks.push(tokio::spawn(async move {
                        let me = Owner::random();
                        let l = if write { rw.write() } else { rw.read() };
                        let h = l.acquire(&me, None, lease).await.unwrap();
                        log.lock().unwrap().push((
                            label.clone(),
                            h.fencing_token(),
                            start.elapsed(),
                        ));
                        tokio::time::sleep(ms(20)).await;
                        log.lock()
                            .unwrap()
                            .push((label + "-out", 0, start.elapsed()));
                        l.release(&me).await.unwrap();
                    }));
                }
                None => {
                    let rwb = b.read_write_lock(name).unwrap();
                    threads.push(std::thread::spawn(move || {
                        let me = Owner::random();
                        let l = if write { rwb.write() } else { rwb.read() };
                        let h = l.acquire(&me, None, lease).unwrap();
                        log.lock().unwrap().push((
                            label.clone(),
                            h.fencing_token(),
                            start.elapsed(),
                        ));
                        std::thread::sleep(ms(20));
                        log.lock()
                            .unwrap()
                            .push((label + "-out", 0, start.elapsed()));
                        l.release(&me).unwrap();
                    }));
                }
            }
            wait_until(&rw0, nw, nr).await;
        }
        let freed = start.elapsed();
        rw0.write().release(&holder).await.unwrap();
        for t in tasks {
            t.await.unwrap();
        }
        for t in threads {
            tokio::task::spawn_blocking(move || t.join().unwrap())
                .await
                .unwrap();
        }
        let log = log.lock().unwrap().clone();
        let pos = |l: &str| log.iter().position(|e| e.0 == l).unwrap();
        assert!(
            pos("W1") < pos("W2") && pos("W2") < pos("W3"),
            "round {round}: {log:?}"
        );
        assert!(
            log.last().unwrap().2 - freed < Duration::from_secs(2),
            "round {round}: {log:?}"
        );
        eprintln!(
            "round {round}: {:?}",
            log.iter().map(|e| e.0.as_str()).collect::<Vec<_>>()
        );
        nothing_left(&server).await;
        b.close();
    }
}
