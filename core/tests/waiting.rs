//! Waiting: notification, cancellation, the local queue and contention alerts.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use redlock_core::{ContentionAlert, Error, Owner};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_the_waiter_without_polling() {
    // Re-check and lease are both a minute: only the pub/sub notification can wake the waiter
    // within the 5 s wait.
    let server = RedisServer::start();
    let holder_client = connect(&server).await;
    let waiter_client = connect_without_rechecks(&server).await;
    let holder = Owner::random();
    holder_client
        .lock("notify")
        .unwrap()
        .acquire(&holder, NOW, Some(Duration::from_secs(60)))
        .await
        .unwrap();
    let waiter_lock = waiter_client.lock("notify").unwrap();
    let waiting = tokio::spawn(async move {
        waiter_lock
            .acquire(&Owner::random(), Some(Duration::from_secs(5)), None)
            .await
    });
    tokio::time::sleep(ms(300)).await;
    holder_client
        .lock("notify")
        .unwrap()
        .release(&holder)
        .await
        .unwrap();
    assert!(waiting.await.unwrap().is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_waiting_acquire_leaves_no_trace() {
    let server = RedisServer::start();
    let client = connect(&server).await;
    let rw = client.read_write_lock("cancel-me").unwrap();
    let (reader, writer, late_reader) = (Owner::random(), Owner::random(), Owner::random());
    rw.read()
        .acquire(&reader, NOW, Some(Duration::from_secs(30)))
        .await
        .unwrap();
    // A writer waits (and announces itself), then its future is dropped.
    let write = rw.write();
    let w = writer.clone();
    let pending = tokio::spawn(async move { write.acquire(&w, None, None).await });
    tokio::time::sleep(ms(300)).await;
    assert_eq!(rw.read().inspect().await.unwrap().waiting_writers, 1);
    pending.abort();
    let _ = pending.await;
    tokio::time::sleep(ms(200)).await;
    let info = rw.read().inspect().await.unwrap();
    assert_eq!(
        info.waiting_writers, 0,
        "the cancelled writer's announcement was withdrawn"
    );
    // New readers are no longer held back by a writer that is gone.
    rw.read().acquire(&late_reader, NOW, None).await.unwrap();
    rw.read().release(&late_reader).await.unwrap();
    rw.read().release(&reader).await.unwrap();
    assert_eq!(
        lock_keys(&server),
        Vec::<String>::new(),
        "nothing left in Redis"
    );
}

/// Yields to the runtime `n` times.
async fn yields(n: u64) {
    for _ in 0..n {
        tokio::task::yield_now().await;
    }
}

/// Cancels acquires of a free lock at moments spread over one round trip, so that some are
/// dropped after their script was sent: each must be undone, for new and reentrant holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_cancelled_while_its_script_runs_is_undone() {
    let server = RedisServer::start();
    let client = connect(&server).await;
    let lock = client.lock("mid-flight").unwrap();
    let (owner, outer) = (Owner::random(), Owner::random());
    let long = Some(Duration::from_secs(60));
    // Load the scripts first: a first EVALSHA fails with NOSCRIPT and is sent again after
    // SCRIPT LOAD, so a state query could overtake it and see the lock before it is taken.
    lock.acquire(&owner, NOW, long).await.unwrap();
    lock.release(&owner).await.unwrap();
    let mut cancelled = 0;
    for step in 0..300u64 {
        let reentrant = step % 2 == 1;
        let who = if reentrant { &outer } else { &owner };
        if reentrant {
            lock.acquire(&outer, NOW, long).await.unwrap();
        }
        // Cut after a number of yields, not a timeout: tokio's timer counts whole
        // milliseconds, longer than a round trip on a direct connection.
        tokio::select! {
            biased;
            hold = lock.acquire(who, None, long) => {
                hold.unwrap();
                lock.release(who).await.unwrap();
            }
            _ = yields(step / 2) => cancelled += 1,
        }
        let expected = u32::from(reentrant);
        // Settled: the expected count seen twice, 20 ms apart. A look made on another
        // connection can overtake a cancelled script that is still on its way; the script then
        // takes its hold after the look, and its undo gives it back a round trip later.
        let mut looks_in_a_row = 0;
        for _ in 0..200 {
            if lock.hold_count(who).await.unwrap() == expected {
                looks_in_a_row += 1;
                if looks_in_a_row == 2 {
                    break;
                }
                tokio::time::sleep(ms(20)).await;
            } else {
                looks_in_a_row = 0;
                tokio::time::sleep(ms(5)).await;
            }
        }
        assert!(
            looks_in_a_row == 2,
            "step {step}: a cancelled acquire left hold count {} (expected {expected})",
            lock.hold_count(who).await.unwrap()
        );
        if reentrant {
            lock.release(&outer).await.unwrap();
        }
        assert!(
            !lock.is_locked().await.unwrap(),
            "step {step}: lock still held: {:?}",
            lock.inspect().await.unwrap()
        );
    }
    assert!(
        cancelled > 0,
        "no acquire was cancelled: the test proved nothing"
    );
    assert_eq!(
        lock_keys(&server),
        Vec::<String>::new(),
        "nothing left in Redis"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_acquire_leaves_no_trace() {
    let server = RedisServer::start();
    let client = connect(&server).await;
    let rw = client.read_write_lock("timeout").unwrap();
    let (holder, writer, reader) = (Owner::random(), Owner::random(), Owner::random());
    rw.write().acquire(&holder, NOW, None).await.unwrap();
    assert_eq!(
        rw.write()
            .acquire(&writer, Some(ms(300)), None)
            .await
            .unwrap_err(),
        Error::Timeout
    );
    assert_eq!(
        rw.read()
            .acquire(&reader, Some(ms(300)), None)
            .await
            .unwrap_err(),
        Error::Timeout
    );
    let info = rw.read().inspect().await.unwrap();
    assert_eq!((info.waiting_writers, info.waiting_readers), (0, 0));
    rw.write().release(&holder).await.unwrap();
    assert_eq!(lock_keys(&server), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_local_waiters_all_get_their_turn() {
    // 20 tasks of one client queue locally; only one at a time talks to Redis, all get in.
    let server = RedisServer::start();
    let client = connect(&server).await;
    let probe = client.lock("queue").unwrap();
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let lock = client.lock("queue").unwrap();
        tasks.push(tokio::spawn(async move {
            let me = Owner::random();
            for _ in 0..10 {
                lock.acquire(&me, Some(Duration::from_secs(30)), None)
                    .await
                    .unwrap();
                tokio::task::yield_now().await;
                lock.release(&me).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let stats = probe.stats();
    assert!(stats.waits > 0, "{stats:?}");
    // With the local queue a wait costs about one failed attempt, not one per task per release.
    assert!(stats.failed_attempts < 200 * 3, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_alert_names_the_lock_and_its_holders() {
    let server = RedisServer::start();
    let alerts: Arc<Mutex<Vec<ContentionAlert>>> = Arc::default();
    let seen = alerts.clone();
    let client = builder(&server)
        .contention_alert_after(Some(ms(200)))
        .on_contention(move |a| seen.lock().unwrap().push(a.clone()))
        .connect()
        .await
        .unwrap();
    let lock = client.lock("hot").unwrap();
    let (holder, waiter) = (Owner::random(), Owner::random());
    lock.acquire(&holder, NOW, None).await.unwrap();
    assert_eq!(
        lock.acquire(&waiter, Some(ms(600)), None)
            .await
            .unwrap_err(),
        Error::Timeout
    );
    tokio::time::sleep(ms(300)).await;
    let alerts = alerts.lock().unwrap().clone();
    assert_eq!(alerts.len(), 1, "one alert per wait");
    let alert = &alerts[0];
    assert_eq!(alert.name, "hot");
    assert_eq!(alert.owner_token, waiter.token());
    assert!(alert.waited >= ms(200));
    assert_eq!(alert.holders.len(), 1);
    assert_eq!(alert.holders[0].owner_token, holder.token());
    assert!(alert.holders[0].held_for.is_some());
    assert_eq!(lock.stats().alerts, 1);
}

/// The alert says how long the holders have held the lock: a holder that got it after a long
/// wait of its own is not reported as holding it all that while.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_alert_does_not_count_the_holders_own_wait() {
    let server = RedisServer::start();
    let alerts: Arc<Mutex<Vec<ContentionAlert>>> = Arc::default();
    let seen = alerts.clone();
    let alerting = builder(&server)
        .contention_alert_after(Some(ms(200)))
        .on_contention(move |a| seen.lock().unwrap().push(a.clone()))
        .connect()
        .await
        .unwrap();
    let (first, second) = (connect(&server).await, connect(&server).await);
    let (a, b, c) = (Owner::random(), Owner::random(), Owner::random());
    let lock_a = first.lock("held after waiting").unwrap();
    lock_a.acquire(&a, NOW, Some(ms(10_000))).await.unwrap();
    let lock_b = second.lock("held after waiting").unwrap();
    let b_waits = tokio::spawn(async move { lock_b.acquire(&b, Some(ms(10_000)), None).await });
    tokio::time::sleep(ms(1500)).await;
    lock_a.release(&a).await.unwrap();
    b_waits.await.unwrap().unwrap();
    let started = Instant::now();
    let lock_c = alerting.lock("held after waiting").unwrap();
    let timed_out = lock_c.acquire(&c, Some(ms(400)), None).await;
    assert_eq!(timed_out.unwrap_err(), Error::Timeout);
    let alerts = alerts.lock().unwrap().clone();
    assert_eq!(alerts.len(), 1, "one alert per wait");
    let held_for = alerts[0].holders[0].held_for.unwrap();
    assert!(
        held_for <= started.elapsed() + ms(100),
        "b has held the lock for {:?} at most, the alert says {held_for:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alert_after_failed_attempts_like_seed_000() {
    let server = RedisServer::start();
    let alerts: Arc<Mutex<u32>> = Arc::default();
    let seen = alerts.clone();
    let client = builder(&server)
        .recheck_interval(ms(20))
        .contention_alert_after(None)
        .contention_alert_attempts(Some(5))
        .on_contention(move |_| *seen.lock().unwrap() += 1)
        .connect()
        .await
        .unwrap();
    let lock = client.lock("deadlocked").unwrap();
    lock.acquire(&Owner::random(), NOW, Some(Duration::from_secs(30)))
        .await
        .unwrap();
    let _ = lock.acquire(&Owner::random(), Some(ms(400)), None).await;
    tokio::time::sleep(ms(200)).await;
    assert_eq!(*alerts.lock().unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_client_ends_waits_with_closed() {
    let server = RedisServer::start();
    let holder_client = connect(&server).await;
    let client = connect(&server).await;
    holder_client
        .lock("busy")
        .unwrap()
        .acquire(&Owner::random(), NOW, None)
        .await
        .unwrap();
    let lock = client.lock("busy").unwrap();
    let waiting = tokio::spawn(async move { lock.acquire(&Owner::random(), None, None).await });
    tokio::time::sleep(ms(200)).await;
    client.close();
    let result = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("wait ended")
        .unwrap();
    assert_eq!(result.unwrap_err(), Error::Closed);
}

/// A waiter whose attempt is on the wire when the client closes, and takes the lock when Redis
/// runs it, fails with `Closed` as close() promises its waiters, and gives the lock back (no
/// watchdog would keep it). It used to return a "watched" hold that nothing renewed and nothing
/// reported lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_whose_attempt_wins_as_the_client_closes_fails_and_gives_the_lock_back() {
    let server = RedisServer::start();
    let holder_client = connect(&server).await;
    let client = connect(&server).await; // the watchdog's lease: 30 s
    let name = "close-race";
    let holder_lock = holder_client.lock(name).unwrap();
    holder_lock
        .acquire(&Owner::random(), NOW, Some(ms(1000)))
        .await
        .unwrap();
    // The waiter tries again every re-check (250 ms) until the holder's lease ends (1 s).
    let lock = client.lock(name).unwrap();
    let waiting = tokio::spawn(async move {
        lock.acquire(&Owner::random(), Some(Duration::from_secs(10)), None)
            .await
    });
    tokio::time::sleep(ms(400)).await;
    // Redis stalls 1.5 s: the waiter's next attempt stays on the wire. The client closes
    // meanwhile, and the attempt runs when the stall ends, after the holder's lease did.
    let stall = server.stall(ms(1500));
    tokio::time::sleep(ms(400)).await;
    client.close();
    tokio::task::spawn_blocking(move || stall.join().unwrap())
        .await
        .unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the acquire ends")
        .unwrap();
    assert_eq!(
        outcome.map(|h| h.fencing_token()).unwrap_err(),
        Error::Closed
    );
    // Given back, long before a 30 s lease could lapse.
    let free = async {
        while !lock_keys(&server).is_empty() {
            tokio::time::sleep(ms(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(3), free)
        .await
        .unwrap_or_else(|_| panic!("still held: {:?}", lock_keys(&server)));
}

/// An owner's next call after its cancelled acquire does not meet what the cancelled call's
/// last attempt did (it waits for that attempt's undo). Here the attempt, on the wire when its
/// read acquire was cancelled, took a read hold; the owner's write, sent on the same
/// connection right after, used to reach Redis before the undo and be refused as an upgrade.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owners_call_after_its_cancelled_acquire_waits_for_the_undo() {
    let server = RedisServer::start();
    let holder_client = connect(&server).await;
    // Every call on the multiplexed connection: they reach Redis in the order they are sent.
    let client = builder(&server)
        .direct_connections(0)
        .connect()
        .await
        .unwrap();
    let name = "undo-order";
    let rw = client.read_write_lock(name).unwrap();
    let me = Owner::random();
    // Scripts loaded on both connections.
    rw.write().acquire(&me, NOW, Some(ms(1000))).await.unwrap();
    rw.write().release(&me).await.unwrap();
    let holder_lock = holder_client.lock(name).unwrap();
    holder_lock
        .acquire(&Owner::random(), NOW, Some(ms(1000)))
        .await
        .unwrap();

    let reading = {
        let (read, me) = (rw.read(), me.clone());
        tokio::spawn(async move { read.acquire(&me, Some(Duration::from_secs(10)), None).await })
    };
    tokio::time::sleep(ms(500)).await;
    // Redis stalls: the reader's next attempt (at most 250 ms later) stays on the wire, and
    // runs when the stall ends, after the holder's lease has ended.
    let stall = server.stall(ms(1200));
    tokio::time::sleep(ms(350)).await;
    reading.abort();
    assert!(reading.await.unwrap_err().is_cancelled());

    let write = rw.write().acquire(&me, NOW, Some(ms(5000))).await;
    tokio::task::spawn_blocking(move || stall.join().unwrap())
        .await
        .unwrap();
    let hold = write.expect("the owner's write after its cancelled read");
    assert_eq!(hold.hold_count(), 1);
    let info = rw.read().inspect().await.unwrap();
    assert_eq!(info.holders.len(), 1, "{info:?}");
}

/// Close ends a waiter whose re-check attempt is on the wire to a Redis that does not answer:
/// at once with `Closed`, not after the command timeout with `Connection`. The attempt, which
/// Redis runs late, is undone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_ends_a_waiter_whose_attempt_waits_for_redis() {
    let server = RedisServer::start();
    let client = builder(&server)
        .command_timeout(ms(2_000))
        .recheck_interval(ms(50))
        .connect()
        .await
        .unwrap();
    let holder = connect(&server).await;
    let held = holder.lock("close mid-attempt").unwrap();
    let other = Owner::random();
    held.acquire(&other, NOW, Some(Duration::from_secs(30)))
        .await
        .unwrap();
    let lock = client.lock("close mid-attempt").unwrap();
    let waiter = tokio::spawn(async move { lock.acquire(&Owner::random(), None, None).await });
    tokio::time::sleep(ms(300)).await; // waiting, re-checking every 50 ms
    let stall = server.stall(ms(1_500));
    tokio::time::sleep(ms(200)).await; // a re-check is on the wire
    client.close();
    let ended = tokio::time::timeout(ms(500), waiter).await;
    let result = ended.expect("close did not end the wait").unwrap();
    assert_eq!(result.unwrap_err(), Error::Closed);
    stall.join().unwrap();
    tokio::time::sleep(ms(300)).await; // the late attempt's undo
    let info = held.inspect().await.unwrap();
    assert_eq!(
        (info.holders.len(), info.waiting_writers),
        (1, 0),
        "{info:?}"
    );
    assert_eq!(held.release(&other).await.unwrap(), 0);
}

const THREE_S_LEASE: Option<Duration> = Some(Duration::from_secs(3));

/// A waiting acquire future polled on a runtime and dropped by a thread outside it (here the
/// plain test thread, after `Runtime::block_on` returned): the drop must still withdraw the
/// waiter and give back a lock granted to it meanwhile, not leave it held for the lease.
#[test]
fn a_waiting_acquire_dropped_outside_the_runtime_leaves_nothing() {
    let server = RedisServer::start();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (holder_client, client) =
        rt.block_on(async { (connect(&server).await, connect(&server).await) });
    let name = "dropped-off-runtime";
    let holder_lock = holder_client.lock(name).unwrap();
    let lock = client.lock(name).unwrap();
    let (holder, x, y) = (Owner::random(), Owner::random(), Owner::random());
    rt.block_on(holder_lock.acquire(&holder, NOW, THREE_S_LEASE))
        .unwrap();

    // X waits (announced, subscribed); its future is owned by this plain thread.
    let mut x_acquire = Box::pin(lock.acquire(&x, None, THREE_S_LEASE));
    rt.block_on(async {
        assert!(tokio::time::timeout(ms(300), &mut x_acquire).await.is_err());
    });
    // Y waits behind X, on the other client.
    let y_lock = holder_client.lock(name).unwrap();
    let y_task = rt.spawn({
        let (l, o) = (y_lock.clone(), y.clone());
        async move {
            let h = l
                .acquire(&o, Some(Duration::from_secs(10)), THREE_S_LEASE)
                .await;
            (h, Instant::now())
        }
    });
    std::thread::sleep(ms(100));
    // The release grants the lock to X, whose future nobody polls any more.
    let released_at = Instant::now();
    rt.block_on(holder_lock.release(&holder)).unwrap();
    std::thread::sleep(ms(50));
    drop(x_acquire); // outside any runtime context

    let (hold, got_at) = rt.block_on(y_task).unwrap();
    hold.unwrap();
    let waited = got_at - released_at;
    rt.block_on(y_lock.release(&y)).unwrap();
    assert!(
        waited < ms(1000),
        "Y waited {waited:?} for the lock granted to the dropped X (lease {THREE_S_LEASE:?})"
    );
    assert_eq!(lock_keys(&server), Vec::<String>::new(), "left in Redis");
}
