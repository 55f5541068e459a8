//! Leases, the watchdog, lost holds and force unlock.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::*;
use redlock_core::{Error, LockLostEvent, Mode, Owner};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_expiry_frees_the_lock_and_release_after_it_is_not_held() {
    let server = RedisServer::start();
    let client = connect(&server).await;
    let lock = client.lock("leased").unwrap();
    let (a, b) = (Owner::random(), Owner::random());
    lock.acquire(&a, NOW, Some(ms(300))).await.unwrap();
    assert!(lock.try_acquire(&b, None).await.unwrap().is_none());
    tokio::time::sleep(ms(450)).await;
    assert!(!lock.is_locked().await.unwrap());
    assert_eq!(lock.release(&a).await.unwrap_err(), Error::NotHeld);
    lock.acquire(&b, NOW, Some(ms(300))).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiter_gets_an_expired_lock_without_a_release_message() {
    // Nobody publishes when a lease ends: the waiter's re-check must find out by itself.
    let server = RedisServer::start();
    let client = connect(&server).await;
    let lock = client.lock("abandoned").unwrap();
    let (crashed, waiter) = (Owner::random(), Owner::random());
    lock.acquire(&crashed, NOW, Some(ms(400))).await.unwrap();
    let hold = lock
        .acquire(&waiter, Some(Duration::from_secs(5)), None)
        .await
        .unwrap();
    assert_eq!(hold.hold_count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_sets_a_new_lease() {
    let server = RedisServer::start();
    let client = connect(&server).await;
    let lock = client.lock("extended").unwrap();
    let a = Owner::random();
    lock.acquire(&a, NOW, Some(ms(300))).await.unwrap();
    lock.extend(&a, ms(5_000)).await.unwrap();
    tokio::time::sleep(ms(500)).await;
    assert!(lock.is_held_by(&a).await.unwrap());
    let left = lock.inspect().await.unwrap().lease_left.unwrap();
    assert!(left > ms(3_000) && left <= ms(5_000), "{left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdog_keeps_a_hold_past_three_leases() {
    let server = RedisServer::start();
    let client = builder(&server).lease(ms(300)).connect().await.unwrap();
    let lock = client.lock("kept").unwrap();
    let (a, b) = (Owner::random(), Owner::random());
    let hold = lock.acquire(&a, NOW, None).await.unwrap();
    assert_eq!(hold.lease(), None);
    assert_eq!(client.watched_holds(), 1);
    tokio::time::sleep(ms(1_200)).await;
    assert!(lock.is_held_by(&a).await.unwrap());
    assert!(lock.try_acquire(&b, None).await.unwrap().is_none());
    assert!(!hold.is_lost());
    assert!(client.watchdog_calls() >= 3);
    lock.release(&a).await.unwrap();
    assert_eq!(client.watched_holds(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdog_renews_after_the_server_forgot_its_scripts() {
    // A restarted or failed-over server knows no scripts: the renewal loads its script again.
    let server = RedisServer::start();
    let client = builder(&server).lease(ms(300)).connect().await.unwrap();
    let lock = client.lock("flushed").unwrap();
    let a = Owner::random();
    let hold = lock.acquire(&a, NOW, None).await.unwrap();
    tokio::time::sleep(ms(250)).await; // at least one renewal with the script loaded
    assert!(server.command(&["SCRIPT", "FLUSH"]).starts_with("+OK"));
    let calls = client.watchdog_calls();
    tokio::time::sleep(ms(900)).await;
    assert!(client.watchdog_calls() >= calls + 2);
    assert!(lock.is_held_by(&a).await.unwrap());
    assert!(!hold.is_lost());
    lock.release(&a).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdog_keeps_reader_shares_too() {
    let server = RedisServer::start();
    let client = builder(&server).lease(ms(300)).connect().await.unwrap();
    let rw = client.read_write_lock("kept-readers").unwrap();
    let owners: Vec<Owner> = (0..3).map(|_| Owner::random()).collect();
    for o in &owners {
        rw.read().acquire(o, NOW, None).await.unwrap();
    }
    tokio::time::sleep(ms(1_000)).await;
    for o in &owners {
        assert!(rw.read().is_held_by(o).await.unwrap());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_makes_the_holder_lose_its_hold_and_signals_it() {
    let server = RedisServer::start();
    let (holder_client, events) = recording_losses(&server, ms(600)).await;
    let admin = connect(&server).await;
    let lock = holder_client.lock("stuck").unwrap();
    let owner = Owner::random();
    let hold = lock.acquire(&owner, NOW, None).await.unwrap();
    assert!(admin.force_unlock("stuck").await.unwrap());
    // The holder's watchdog notices at its next renewal (lease/3).
    tokio::time::timeout(Duration::from_secs(5), hold.lost())
        .await
        .expect("lost() resolves");
    assert!(hold.is_lost());
    assert_eq!(
        lock.release(&owner).await.unwrap_err(),
        Error::LockLost,
        "the watchdog noticed first; the release still says lost"
    );
    assert_eq!(
        lock.release(&owner).await.unwrap_err(),
        Error::NotHeld,
        "a second release has nothing to report"
    );
    tokio::time::sleep(ms(100)).await; // the callback runs on the blocking pool
    let events = events.lock().unwrap().clone();
    assert_eq!(
        events,
        vec![LockLostEvent {
            name: "stuck".into(),
            mode: Mode::Write,
            owner_token: owner.token().into()
        }]
    );
    assert!(
        !admin.force_unlock("stuck").await.unwrap(),
        "nothing left to clear"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_of_a_lost_watched_hold_reports_lock_lost() {
    let server = RedisServer::start();
    // A long lease: the watchdog will not have noticed yet when release finds the hold gone.
    let client = builder(&server)
        .lease(Duration::from_secs(60))
        .connect()
        .await
        .unwrap();
    let other = connect(&server).await;
    let lock = client.lock("gone").unwrap();
    let owner = Owner::random();
    let hold = lock.acquire(&owner, NOW, None).await.unwrap();
    other.force_unlock("gone").await.unwrap();
    assert_eq!(lock.release(&owner).await.unwrap_err(), Error::LockLost);
    assert!(hold.is_lost());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_from_the_same_client_reports_its_own_holds_lost_at_once() {
    let server = RedisServer::start();
    let client = connect(&server).await;
    let rw = client.read_write_lock("cleared").unwrap();
    let (w, r) = (Owner::random(), Owner::random());
    let write_hold = rw.write().acquire(&w, NOW, None).await.unwrap();
    let read_hold = rw.read().acquire(&w, NOW, None).await.unwrap();
    assert!(client.force_unlock("cleared").await.unwrap());
    assert!(write_hold.is_lost() && read_hold.is_lost());
    assert_eq!(client.watched_holds(), 0);
    assert_eq!(rw.write().release(&w).await.unwrap_err(), Error::LockLost);
    assert_eq!(rw.read().release(&w).await.unwrap_err(), Error::LockLost);
    assert_eq!(rw.read().release(&w).await.unwrap_err(), Error::NotHeld);
    // A new hold of the same owner is not the lost one: its failures are plain NotHeld.
    rw.write().acquire(&w, NOW, Some(ms(100))).await.unwrap();
    client.force_unlock("cleared").await.unwrap();
    assert_eq!(rw.write().release(&w).await.unwrap_err(), Error::NotHeld);
    let _ = r;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holder_metadata_is_stored_and_inspected() {
    let server = RedisServer::start();
    let client = connect(&server).await;
    let lock = client.lock("described").unwrap();
    let owner = Owner::random();
    let options = redlock_core::AcquireOptions {
        label: Some("worker-7".into()),
        ..Default::default()
    };
    lock.acquire_with(&owner, options).await.unwrap();
    let info = lock.inspect().await.unwrap();
    let holder = &info.holders[0];
    assert_eq!(holder.metadata.thread, "worker-7");
    assert_eq!(holder.metadata.pid, std::process::id());
    assert!(!holder.metadata.host.is_empty());
    assert!(holder.held_for.is_some());
    assert_eq!(info.mode, Some(Mode::Write));
    assert!(info.last_fencing_token >= holder.fencing_token);
    lock.release(&owner).await.unwrap();

    // An empty label says nothing: refused, and nothing is taken. A long one is cut.
    let empty = redlock_core::AcquireOptions {
        label: Some(String::new()),
        ..Default::default()
    };
    let err = lock.acquire_with(&owner, empty).await.unwrap_err();
    assert_eq!(err.kind(), redlock_core::ErrorKind::InvalidArgument);
    assert!(!lock.is_locked().await.unwrap());
    let long = redlock_core::AcquireOptions {
        label: Some("l".repeat(10_000)),
        ..Default::default()
    };
    lock.acquire_with(&owner, long).await.unwrap();
    let thread = &lock.inspect().await.unwrap().holders[0].metadata.thread;
    assert_eq!(thread.len(), redlock_core::MAX_LABEL_LEN);
}

/// A hold that waited is dated when it was acquired, not when its call began waiting: the
/// metadata's time and `held_for` (what inspect and contention alerts show). A writer gets the
/// lock by a grant made in the release (dated by Redis' clock, its label kept), a reader by its
/// own next attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_taken_after_a_wait_is_dated_when_it_was_acquired() {
    let server = RedisServer::start();
    let (holding, waiting) = (connect(&server).await, connect(&server).await);
    for reads in [false, true] {
        let name = format!("dated-{reads}");
        let (a, b) = (Owner::random(), Owner::random());
        let held = holding.read_write_lock(&name).unwrap().write();
        held.acquire(&a, NOW, Some(ms(10_000))).await.unwrap();
        let rw = waiting.read_write_lock(&name).unwrap();
        let view = if reads { rw.read() } else { rw.write() };
        let options = redlock_core::AcquireOptions {
            wait: Some(ms(10_000)),
            label: Some("waited".into()),
            ..Default::default()
        };
        let waits = tokio::spawn(async move { view.acquire_with(&b, options).await });
        tokio::time::sleep(ms(1000)).await;
        let freed_at = unix_ms();
        held.release(&a).await.unwrap();
        waits.await.unwrap().unwrap();

        let info = held.inspect().await.unwrap();
        let holder = &info.holders[0];
        assert_eq!(holder.metadata.thread, "waited");
        assert!(
            holder.metadata.acquired_at_ms + 50 >= freed_at,
            "reads {reads}: dated {}, the lock was freed at {freed_at}",
            holder.metadata.acquired_at_ms
        );
        let held_for = holder.held_for.unwrap();
        assert!(held_for < ms(500), "reads {reads}: held for {held_for:?}");
    }
}

fn unix_ms() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    now.unwrap().as_millis() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_watchdog_a_leaseless_hold_gets_the_default_lease_and_expires() {
    let server = RedisServer::start();
    let client = builder(&server)
        .watchdog(false)
        .lease(ms(300))
        .connect()
        .await
        .unwrap();
    let lock = client.lock("unwatched").unwrap();
    let owner = Owner::random();
    let hold = lock.acquire(&owner, NOW, None).await.unwrap();
    assert_eq!(client.watched_holds(), 0);
    tokio::time::sleep(ms(500)).await;
    assert!(!lock.is_locked().await.unwrap());
    assert!(
        !hold.is_lost(),
        "nothing watched it, so nothing reports it lost"
    );
    assert_eq!(lock.release(&owner).await.unwrap_err(), Error::NotHeld);
}

/// Calls of one owner finish in another order than Redis ran them: a release heard after the
/// owner's next acquire must not stop the watchdog keeping that new hold, and a renewal that
/// runs between a release and the client hearing of it must not call the hold lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_owner_releasing_and_acquiring_at_once_keeps_every_hold_kept() {
    let server = RedisServer::start();
    // A short lease: the watchdog renews every 100 ms, many times during the run.
    let (client, events) = recording_losses(&server, ms(300)).await;
    let lock = client.lock("shared-owner").unwrap();
    let owner = Owner::random();
    let untracked = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let (lock, owner) = (lock.clone(), owner.clone());
        let (client, untracked) = (client.clone(), untracked.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..3000 {
                lock.acquire(&owner, None, None).await.unwrap();
                // Held (this task's count is in it), so it must be kept.
                if client.watched_holds() != 1 {
                    untracked.fetch_add(1, Ordering::SeqCst);
                }
                lock.release(&owner).await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(untracked.load(Ordering::SeqCst), 0, "holds left unkept");
    assert_eq!(client.watched_holds(), 0);
    tokio::time::sleep(ms(100)).await; // a callback runs on the blocking pool
    assert_eq!(*events.lock().unwrap(), vec![], "no hold was lost");
}

/// A server that lost its data (a restart without persistence, a failover) counts fences from 1
/// again: the watchdog keeps the owner's new hold and forgets it at its release all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_taken_after_the_server_lost_its_data_is_kept_and_released_cleanly() {
    let mut server = RedisServer::start();
    let (client, events) = recording_losses(&server, ms(900)).await;
    let lock = client.lock("reset").unwrap();
    let owner = Owner::random();
    for _ in 0..5 {
        lock.acquire(&owner, NOW, None).await.unwrap();
        lock.release(&owner).await.unwrap();
    }
    let before = lock.acquire(&owner, NOW, None).await.unwrap();
    assert_eq!(before.fencing_token(), 6);
    server.restart();
    let after = loop {
        match lock.acquire(&owner, NOW, None).await {
            Ok(hold) => break hold,
            Err(Error::Connection(_)) => tokio::time::sleep(ms(50)).await,
            Err(other) => panic!("{other:?}"),
        }
    };
    assert_eq!(after.fencing_token(), 1, "the server counts fences anew");
    assert_eq!(client.watched_holds(), 1);
    tokio::time::sleep(ms(1200)).await; // four renewals: the new hold is kept
    assert!(lock.is_held_by(&owner).await.unwrap());
    assert!(!after.is_lost());
    assert_eq!(lock.release(&owner).await.unwrap(), 0);
    assert_eq!(client.watched_holds(), 0);
    tokio::time::sleep(ms(700)).await; // two more renewals
    // The hold from before the restart is lost, whichever noticed first: a renewal, or the new
    // acquire (which replaced its tracking).
    assert!(before.is_lost());
    let events = events.lock().unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].name, "reset");
}

/// A watched hold that vanished from Redis (here another client's force unlock) and is then
/// taken again by its owner before a renewal looked: the earlier hold is reported lost then, as
/// a renewal would have, and the new one is kept and released normally.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_earlier_hold_that_a_new_acquire_finds_gone_is_reported_lost() {
    let server = RedisServer::start();
    // A long lease: no renewal runs during the test.
    let (client, events) = recording_losses(&server, Duration::from_secs(60)).await;
    let other = connect(&server).await;
    let lock = client.lock("vanished").unwrap();
    let owner = Owner::random();
    let first = lock.acquire(&owner, NOW, None).await.unwrap();
    assert!(other.force_unlock("vanished").await.unwrap());
    let second = lock.acquire(&owner, NOW, None).await.unwrap();
    assert_eq!(
        second.hold_count(),
        1,
        "not a re-entry: the first hold is gone"
    );
    assert!(second.fencing_token() > first.fencing_token());
    assert!(first.is_lost(), "the first hold is lost");
    tokio::time::timeout(ms(1000), first.lost())
        .await
        .expect("its lost() resolves");
    assert!(!second.is_lost());
    assert_eq!(client.watched_holds(), 1);
    tokio::time::sleep(ms(100)).await; // a callback runs on the blocking pool
    {
        let events = events.lock().unwrap();
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0].name, "vanished");
        assert_eq!(events[0].owner_token, owner.token());
    }
    // The key is the new hold's too: its release is a normal one.
    assert_eq!(lock.release(&owner).await.unwrap(), 0);
    assert_eq!(client.watched_holds(), 0);
    assert_eq!(lock.release(&owner).await.unwrap_err(), Error::NotHeld);
    assert_eq!(events.lock().unwrap().len(), 1);
}

/// One owner's release and new acquire race after its hold vanished: in whatever order Redis
/// runs them and this client hears their replies, the vanished hold is reported lost exactly
/// once, and the new hold is kept exactly while Redis has it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_racing_a_new_acquire_after_the_hold_vanished_reports_it_lost_once() {
    const ROUNDS: usize = 60;
    let server = RedisServer::start();
    let (client, events) = recording_losses(&server, Duration::from_secs(60)).await;
    let other = connect(&server).await;
    let lock = client.lock("raced").unwrap();
    let (mut lock_lost, mut ended_new) = (0, 0);
    for round in 0..ROUNDS {
        let owner = Owner::random();
        let first = lock.acquire(&owner, NOW, None).await.unwrap();
        assert!(other.force_unlock("raced").await.unwrap());
        let release = tokio::spawn({
            let (lock, owner) = (lock.clone(), owner.clone());
            async move { lock.release(&owner).await }
        });
        let acquire = tokio::spawn({
            let (lock, owner) = (lock.clone(), owner.clone());
            async move { lock.acquire(&owner, NOW, None).await }
        });
        let (released, second) = (release.await.unwrap(), acquire.await.unwrap().unwrap());
        assert!(
            first.is_lost() && !first.is_watched(),
            "round {round}: {released:?}, first {} watched {}, second {} x{} watched {}",
            first.fencing_token(),
            first.is_watched(),
            second.fencing_token(),
            second.hold_count(),
            second.is_watched()
        );
        match released {
            // Redis ran the release first: it found the hold gone.
            Err(Error::LockLost) => {
                lock_lost += 1;
                assert!(second.is_watched(), "round {round}: the new hold is kept");
                assert_eq!(lock.release(&owner).await.unwrap(), 0);
            }
            // The acquire first: the release ended the new hold.
            Ok(0) => {
                ended_new += 1;
                assert!(!second.is_watched() && !second.is_lost(), "round {round}");
                assert!(!lock.is_locked().await.unwrap());
            }
            other => panic!("round {round}: the release said {other:?}"),
        }
        assert!(!second.is_lost(), "round {round}");
        assert_eq!(client.watched_holds(), 0, "round {round}");
    }
    tokio::time::sleep(ms(200)).await; // callbacks run on the blocking pool
    assert_eq!(events.lock().unwrap().len(), ROUNDS);
    eprintln!("release first: {lock_lost}, acquire first: {ended_new}");
}
