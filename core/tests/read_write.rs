//! The read/write lock: shared readers, exclusive writer, downgrade, upgrade refusal,
//! writer preference, and per-reader leases.

mod common;

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use redlock_core::{Error, Mode, Owner};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_share_and_writer_excludes() {
    let server = RedisServer::start();
    let client = connect(&server).await;
    let rw = client.read_write_lock("article").unwrap();
    let (r1, r2, w) = (Owner::random(), Owner::random(), Owner::random());
    rw.read().acquire(&r1, NOW, None).await.unwrap();
    rw.read().acquire(&r2, NOW, None).await.unwrap();
    assert!(rw.read().is_locked().await.unwrap());
    assert!(!rw.write().is_locked().await.unwrap());
    assert!(rw.write().try_acquire(&w, None).await.unwrap().is_none());
    rw.read().release(&r1).await.unwrap();
    assert!(rw.write().try_acquire(&w, None).await.unwrap().is_none());
    rw.read().release(&r2).await.unwrap();
    rw.write().acquire(&w, NOW, None).await.unwrap();
    assert!(rw.read().try_acquire(&r1, None).await.unwrap().is_none());
    let info = rw.read().inspect().await.unwrap();
    assert_eq!(info.mode, Some(Mode::Write));
    assert_eq!(info.holders.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_modes_are_reentrant() {
    let server = RedisServer::start();
    let client = connect(&server).await;
    let rw = client.read_write_lock("re").unwrap();
    let o = Owner::random();
    for expected in 1..=3 {
        assert_eq!(
            rw.read().acquire(&o, NOW, None).await.unwrap().hold_count(),
            expected
        );
    }
    for left in (0..3).rev() {
        assert_eq!(rw.read().release(&o).await.unwrap(), left);
    }
    for expected in 1..=2 {
        assert_eq!(
            rw.write()
                .acquire(&o, NOW, None)
                .await
                .unwrap()
                .hold_count(),
            expected
        );
    }
    assert_eq!(rw.write().hold_count(&o).await.unwrap(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downgrade_keeps_reading_after_the_write_is_released() {
    let server = RedisServer::start();
    let client = connect(&server).await;
    let rw = client.read_write_lock("downgrade").unwrap();
    let (o, other_reader, other_writer) = (Owner::random(), Owner::random(), Owner::random());
    rw.write().acquire(&o, NOW, None).await.unwrap();
    rw.read().acquire(&o, NOW, None).await.unwrap();
    rw.write().release(&o).await.unwrap();
    assert!(rw.read().is_held_by(&o).await.unwrap());
    assert!(!rw.write().is_locked().await.unwrap());
    // Now an ordinary reader: others may read, nobody may write.
    rw.read().acquire(&other_reader, NOW, None).await.unwrap();
    assert!(
        rw.write()
            .try_acquire(&other_writer, None)
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrade_fails_at_once_instead_of_hanging() {
    let server = RedisServer::start();
    let client = connect(&server).await;
    let rw = client.read_write_lock("upgrade").unwrap();
    let o = Owner::random();
    rw.read().acquire(&o, NOW, None).await.unwrap();
    let started = std::time::Instant::now();
    // Even with an unbounded wait, the answer comes at once.
    assert_eq!(
        rw.write().acquire(&o, None, None).await.unwrap_err(),
        Error::UpgradeNotAllowed
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        rw.read().hold_count(&o).await.unwrap(),
        1,
        "the read hold is untouched"
    );
    let info = rw.read().inspect().await.unwrap();
    assert_eq!(
        info.waiting_writers, 0,
        "a refused upgrade does not queue as a writer"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_writer_gets_in_while_readers_keep_arriving() {
    let server = RedisServer::start();
    let readers_client = connect(&server).await;
    let writer_client = connect(&server).await;
    let rw = readers_client.read_write_lock("busy-article").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    // Readers overlap continuously: without writer preference the writer would never get in.
    let mut readers = Vec::new();
    for _ in 0..4 {
        let read = rw.read();
        let stop = stop.clone();
        readers.push(tokio::spawn(async move {
            let mut refused_while_writer_waited = 0u32;
            while !stop.load(Ordering::SeqCst) {
                let me = Owner::random();
                match read.acquire(&me, Some(ms(50)), Some(ms(5_000))).await {
                    Ok(_) => {
                        tokio::time::sleep(ms(30)).await;
                        read.release(&me).await.unwrap();
                    }
                    Err(Error::Timeout) => refused_while_writer_waited += 1,
                    Err(e) => panic!("{e}"),
                }
            }
            refused_while_writer_waited
        }));
    }
    tokio::time::sleep(ms(200)).await;
    let writer = Owner::random();
    let write = writer_client
        .read_write_lock("busy-article")
        .unwrap()
        .write();
    let hold = write
        .acquire(&writer, Some(Duration::from_secs(10)), None)
        .await;
    assert!(hold.is_ok(), "the writer was starved: {hold:?}");
    write.release(&writer).await.unwrap();
    stop.store(true, Ordering::SeqCst);
    for r in readers {
        r.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_readers_share_expires_alone() {
    let server = RedisServer::start();
    let client = connect(&server).await;
    let rw = client.read_write_lock("shares").unwrap();
    let (crashed, alive, writer) = (Owner::random(), Owner::random(), Owner::random());
    // The crashed reader never renews (explicit short lease); the live one is kept by the watchdog.
    rw.read()
        .acquire(&crashed, NOW, Some(ms(300)))
        .await
        .unwrap();
    rw.read().acquire(&alive, NOW, None).await.unwrap();
    tokio::time::sleep(ms(600)).await;
    assert!(!rw.read().is_held_by(&crashed).await.unwrap());
    assert!(rw.read().is_held_by(&alive).await.unwrap());
    assert_eq!(
        rw.read().release(&crashed).await.unwrap_err(),
        Error::NotHeld
    );
    assert!(
        rw.write()
            .try_acquire(&writer, None)
            .await
            .unwrap()
            .is_none(),
        "the live reader still excludes writers"
    );
    let info = rw.read().inspect().await.unwrap();
    assert_eq!(info.holder_count, 1);
    assert_eq!(info.holders[0].owner_token, alive.token());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_and_writers_never_overlap() {
    // Invariant checker: >0 = number of readers inside, -1 = a writer inside.
    let server = RedisServer::start();
    let state = Arc::new(AtomicI64::new(0));
    let mut tasks = Vec::new();
    for c in 0..2 {
        let client = connect(&server).await;
        let rw = client.read_write_lock("checked").unwrap();
        for t in 0..4 {
            let (rw, state) = (rw.clone(), state.clone());
            let writer = (c + t) % 3 == 0;
            tasks.push(tokio::spawn(async move {
                let me = Owner::random();
                for _ in 0..60 {
                    if writer {
                        rw.write()
                            .acquire(&me, None, Some(ms(10_000)))
                            .await
                            .unwrap();
                        assert_eq!(
                            state.compare_exchange(0, -1, Ordering::SeqCst, Ordering::SeqCst),
                            Ok(0),
                            "writer entered while others inside"
                        );
                        tokio::task::yield_now().await;
                        state.store(0, Ordering::SeqCst);
                        rw.write().release(&me).await.unwrap();
                    } else {
                        rw.read()
                            .acquire(&me, None, Some(ms(10_000)))
                            .await
                            .unwrap();
                        let before = state.fetch_add(1, Ordering::SeqCst);
                        assert!(before >= 0, "reader entered while a writer was inside");
                        tokio::task::yield_now().await;
                        state.fetch_sub(1, Ordering::SeqCst);
                        rw.read().release(&me).await.unwrap();
                    }
                }
            }));
        }
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(lock_keys(&server), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_readers_release_without_scanning() {
    // 2 000 readers on one name: acquire and release stay one script each, and the
    // state is cleaned up exactly when the last reader leaves.
    let server = RedisServer::start();
    let client = connect(&server).await;
    let read = client.read_write_lock("crowd").unwrap().read();
    let owners: Vec<Owner> = (0..2000).map(|_| Owner::random()).collect();
    for o in &owners {
        read.acquire(o, NOW, Some(ms(60_000))).await.unwrap();
    }
    assert_eq!(read.inspect().await.unwrap().holder_count, 2000);
    for o in &owners {
        read.release(o).await.unwrap();
    }
    assert_eq!(lock_keys(&server), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdog_keeps_a_downgraded_writer_and_its_read_share() {
    let server = RedisServer::start();
    let client = builder(&server).lease(ms(300)).connect().await.unwrap();
    let rw = client.read_write_lock("downgraded-kept").unwrap();
    let (o, other) = (Owner::random(), Owner::random());
    rw.write().acquire(&o, NOW, None).await.unwrap();
    rw.read().acquire(&o, NOW, None).await.unwrap();
    tokio::time::sleep(ms(1_200)).await;
    assert_eq!(rw.write().hold_count(&o).await.unwrap(), 1);
    assert_eq!(rw.read().hold_count(&o).await.unwrap(), 1);
    assert!(rw.read().try_acquire(&other, None).await.unwrap().is_none());
    rw.write().release(&o).await.unwrap();
    rw.read().acquire(&other, NOW, None).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_downgraded_writers_lease_ends_alone_while_its_read_share_lives_on() {
    let server = RedisServer::start();
    let client = connect(&server).await;
    let rw = client.read_write_lock("downgraded-expiry").unwrap();
    let (o, other) = (Owner::random(), Owner::random());
    rw.write().acquire(&o, NOW, Some(ms(300))).await.unwrap();
    rw.read().acquire(&o, NOW, Some(ms(30_000))).await.unwrap();
    tokio::time::sleep(ms(500)).await;
    assert!(
        !rw.write().is_locked().await.unwrap(),
        "the write lease ended"
    );
    assert!(rw.read().is_held_by(&o).await.unwrap());
    assert_eq!(rw.write().release(&o).await.unwrap_err(), Error::NotHeld);
    // Another reader may join; a writer still waits for the remaining reader.
    rw.read().acquire(&other, NOW, None).await.unwrap();
    let info = rw.read().inspect().await.unwrap();
    assert_eq!((info.mode, info.holder_count), (Some(Mode::Read), 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_whose_share_ran_out_may_wait_to_write() {
    let server = RedisServer::start();
    let client = connect(&server).await;
    let rw = client.read_write_lock("expired-share").unwrap();
    let (o, other) = (Owner::random(), Owner::random());
    rw.read().acquire(&o, NOW, Some(ms(300))).await.unwrap();
    rw.read()
        .acquire(&other, NOW, Some(ms(30_000)))
        .await
        .unwrap();
    tokio::time::sleep(ms(500)).await;
    // Nothing has looked at the lock since o's share ended: the write attempt finds it first,
    // and waits behind the other reader instead of refusing an upgrade of a share that is gone.
    assert_eq!(
        rw.write()
            .acquire(&o, Some(ms(300)), Some(ms(10_000)))
            .await
            .unwrap_err(),
        Error::Timeout
    );
    rw.read().release(&other).await.unwrap();
    rw.write().acquire(&o, NOW, Some(ms(10_000))).await.unwrap();
}

/// A writer and a reader of one client both wait; when another client's write ends, the
/// readers' turn that follows is the reader's to take at once. (In one local queue the writer,
/// at its head and waiting out that turn, kept the reader behind it out of it until the
/// reader's announcement was due: half a second by default, seconds here.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_writer_does_not_keep_its_clients_readers_from_their_turn() {
    let server = RedisServer::start();
    let other = connect(&server).await;
    let client = builder(&server)
        .recheck_interval(Duration::from_secs(3))
        .connect()
        .await
        .unwrap();
    let name = "turn-taking";
    let (holder, writer, reader) = (Owner::random(), Owner::random(), Owner::random());
    let held = other.read_write_lock(name).unwrap().write();
    held.acquire(&holder, NOW, None).await.unwrap();

    let rw = client.read_write_lock(name).unwrap();
    let write = rw.write();
    let writing = tokio::spawn(async move { write.acquire(&writer, None, None).await });
    // The writer waits first (at the head of the client's queue, in the old design).
    let waiting = |writers: u64, readers: u64| {
        let held = held.clone();
        async move {
            for _ in 0..200 {
                let info = held.inspect().await.unwrap();
                if (info.waiting_writers, info.waiting_readers) == (writers, readers) {
                    return;
                }
                tokio::time::sleep(ms(25)).await;
            }
            panic!("never {writers} writer(s) and {readers} reader(s) waiting");
        }
    };
    waiting(1, 0).await;
    let (read, me) = (rw.read(), reader.clone());
    let reading = tokio::spawn(async move {
        let hold = read.acquire(&me, None, None).await;
        (hold, tokio::time::Instant::now())
    });
    waiting(1, 1).await;
    assert!(channels_of(&server, name) > 0, "the client listens");

    held.release(&holder).await.unwrap();
    let released = tokio::time::Instant::now();
    let (hold, at) = tokio::time::timeout(Duration::from_secs(10), reading)
        .await
        .expect("the reader got in")
        .unwrap();
    assert_eq!(hold.unwrap().mode(), Mode::Read);
    let waited = at - released;
    assert!(
        waited < Duration::from_secs(1),
        "the reader waited {waited:?} after the write ended for the readers' turn"
    );
    assert!(!writing.is_finished(), "the writer waits for the reader");
    rw.read().release(&reader).await.unwrap();
    let hold = tokio::time::timeout(Duration::from_secs(10), writing)
        .await
        .expect("the writer got in after the reader")
        .unwrap()
        .unwrap();
    assert_eq!(hold.mode(), Mode::Write);
}

/// inspect.lua never purges, and counted live readers as `ZCOUNT Z (now +inf` minus one whenever
/// Z holds the member 'w' — even when the writer's lease in 'w' has already ended (so ZCOUNT did
/// not count it). A downgraded writer whose write lease ran out while its read share lives on
/// was then reported as no holder at all: mode None, holder_count 0, although the same inspect
/// lists the reader and `is_locked()` of the read view says it is held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_counts_the_read_share_of_a_downgraded_writer_whose_write_lease_ended() {
    let server = RedisServer::start();
    let client = connect(&server).await;
    let rw = client.read_write_lock("inspect-downgraded").unwrap();
    let o = Owner::random();
    // Fixed leases: no watchdog, so no script runs (nothing purges) while we wait.
    rw.write().acquire(&o, NOW, Some(ms(150))).await.unwrap();
    rw.read().acquire(&o, NOW, Some(ms(30_000))).await.unwrap();
    tokio::time::sleep(ms(400)).await; // the write lease has ended, the read share lives on

    assert!(
        rw.read().is_locked().await.unwrap(),
        "state.lua: still read-held"
    );
    assert_eq!(rw.read().hold_count(&o).await.unwrap(), 1);
    let info = rw.read().inspect().await.unwrap();
    assert_eq!(info.holders.len(), 1, "{info:?}");
    assert_eq!(info.holders[0].mode, Mode::Read);
    assert_eq!(
        info.mode,
        Some(Mode::Read),
        "inspect calls a read-held lock free: {info:?}"
    );
    assert_eq!(info.holder_count, 1, "{info:?}");
    assert!(info.lease_left.is_some_and(|l| l > Duration::from_secs(20)));
}

/// The same for waiting readers: inspect.lua subtracted one for WR's 'turn' marker whenever
/// the marker is present, although `ZCOUNT WR (now +inf` did not count it once the turn has ended
/// (nothing purges it before the next acquire or release). State set up with raw commands: the
/// one a reader leaves that announced itself while a writer held, was given its readers' turn
/// when the writer left, and stalled through the whole turn (its announcement, renewed later
/// than the turn began, still runs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_counts_a_waiting_reader_after_a_readers_turn_ended() {
    let server = RedisServer::start();
    let client = connect(&server).await;
    let rw = client.read_write_lock("inspect-turn").unwrap();
    let time = server.command(&["TIME"]);
    let seconds: u64 = time.lines().nth(2).unwrap().parse().unwrap();
    let now_ms = seconds * 1000;
    let (ended, announced_until) = ((now_ms - 2_000).to_string(), (now_ms + 60_000).to_string());
    let key = "redlock:{inspect-turn}:wr";
    let added = server.command(&["ZADD", key, &ended, "turn", &announced_until, "r:stalled"]);
    assert!(added.starts_with(":2"), "{added}");
    assert!(
        server
            .command(&["PEXPIREAT", key, &announced_until])
            .starts_with(":1")
    );

    let info = rw.read().inspect().await.unwrap();
    assert_eq!(
        info.waiting_readers, 1,
        "a live waiting reader is not counted: {info:?}"
    );
}

const THREE_S_LEASE: Option<Duration> = Some(Duration::from_secs(3));

/// One owner waits for read in two calls (two clients: the token is shared, as the contract
/// allows); one call is cancelled. The other still waits through the write, so it must have the
/// readers' turn before the writer that queued after it. (With a different owner cancelled,
/// it does.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_read_wait_does_not_withdraw_the_same_owners_other_wait() {
    let server = RedisServer::start();
    let mut cs = Vec::new();
    for _ in 0..4 {
        cs.push(connect(&server).await);
    }
    let mut failures = 0;
    let runs = 10;
    for run in 0..runs {
        let name = format!("same-owner-read-{run}");
        let writer_lock = cs[0].lock(&name).unwrap();
        let w = Owner::random();
        writer_lock.acquire(&w, NOW, THREE_S_LEASE).await.unwrap();
        let r = Owner::random();
        let t1 = {
            let (rw, r) = (cs[1].read_write_lock(&name).unwrap(), r.clone());
            tokio::spawn(async move { rw.read().acquire(&r, None, THREE_S_LEASE).await })
        };
        tokio::time::sleep(ms(30)).await;
        let order = Arc::new(Mutex::new(Vec::new()));
        let t2 = {
            let (rw, r, order) = (
                cs[2].read_write_lock(&name).unwrap(),
                r.clone(),
                order.clone(),
            );
            tokio::spawn(async move {
                rw.read()
                    .acquire(&r, Some(Duration::from_secs(10)), THREE_S_LEASE)
                    .await
                    .unwrap();
                order.lock().unwrap().push("reader");
                tokio::time::sleep(ms(20)).await;
                rw.read().release(&r).await.unwrap();
            })
        };
        tokio::time::sleep(ms(30)).await;
        let w2_task = {
            let (l, order) = (cs[3].lock(&name).unwrap(), order.clone());
            tokio::spawn(async move {
                let w2 = Owner::random();
                l.acquire(&w2, Some(Duration::from_secs(10)), THREE_S_LEASE)
                    .await
                    .unwrap();
                order.lock().unwrap().push("writer");
                tokio::time::sleep(ms(20)).await;
                l.release(&w2).await.unwrap();
            })
        };
        tokio::time::sleep(ms(30)).await;
        t1.abort(); // the owner's first read wait is cancelled
        let _ = t1.await;
        tokio::time::sleep(ms(20)).await;
        writer_lock.release(&w).await.unwrap();
        t2.await.unwrap();
        w2_task.await.unwrap();
        let order = order.lock().unwrap().clone();
        if order != ["reader", "writer"] {
            eprintln!("run {run}: order {order:?}");
            failures += 1;
        }
    }
    assert_eq!(
        failures, 0,
        "{failures} of {runs} runs let the later writer in first"
    );
    tokio::time::sleep(ms(300)).await;
    assert_eq!(lock_keys(&server), Vec::<String>::new(), "left in Redis");
}
