//! The exclusive reentrant lock: ownership by token, reentrancy, release rules, mutual exclusion.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use common::*;
use redlock_core::{Error, Owner};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentrant_holds_count_up_and_down() {
    let server = RedisServer::start();
    let client = connect(&server).await;
    let lock = client.lock("orders:42").unwrap();
    let owner = Owner::random();
    let first = lock.acquire(&owner, NOW, None).await.unwrap();
    let second = lock.acquire(&owner, NOW, None).await.unwrap();
    let third = lock.acquire(&owner, NOW, None).await.unwrap();
    assert_eq!(
        [first.hold_count(), second.hold_count(), third.hold_count()],
        [1, 2, 3]
    );
    assert_eq!(lock.hold_count(&owner).await.unwrap(), 3);
    assert_eq!(lock.release(&owner).await.unwrap(), 2);
    assert_eq!(lock.release(&owner).await.unwrap(), 1);
    assert!(lock.is_locked().await.unwrap());
    assert_eq!(lock.release(&owner).await.unwrap(), 0);
    assert!(!lock.is_locked().await.unwrap());
    assert!(!lock.is_held_by(&owner).await.unwrap());
    assert_eq!(
        lock_keys(&server),
        Vec::<String>::new(),
        "a free lock leaves no keys"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_owner_at_a_time() {
    let server = RedisServer::start();
    let client = connect(&server).await;
    let lock = client.lock("one").unwrap();
    let (a, b) = (Owner::random(), Owner::random());
    lock.acquire(&a, NOW, None).await.unwrap();
    assert!(lock.try_acquire(&b, None).await.unwrap().is_none());
    assert_eq!(
        lock.acquire(&b, SHORT, None).await.unwrap_err(),
        Error::Timeout
    );
    assert!(lock.is_held_by(&a).await.unwrap());
    assert!(!lock.is_held_by(&b).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_by_a_non_owner_fails_and_changes_nothing() {
    let server = RedisServer::start();
    let client = connect(&server).await;
    let lock = client.lock("guarded").unwrap();
    let (a, b) = (Owner::random(), Owner::random());
    lock.acquire(&a, NOW, None).await.unwrap();
    lock.acquire(&a, NOW, None).await.unwrap();
    let before = lock.inspect().await.unwrap();
    assert_eq!(lock.release(&b).await.unwrap_err(), Error::NotHeld);
    assert_eq!(lock.extend(&b, ms(5000)).await.unwrap_err(), Error::NotHeld);
    let after = lock.inspect().await.unwrap();
    assert_eq!(after.holders[0].owner_token, a.token());
    assert_eq!(after.holders[0].hold_count, 2);
    assert_eq!(
        after.holders[0].fencing_token,
        before.holders[0].fencing_token
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn double_release_is_not_held() {
    let server = RedisServer::start();
    let client = connect(&server).await;
    let lock = client.lock("twice").unwrap();
    let owner = Owner::random();
    lock.acquire(&owner, NOW, None).await.unwrap();
    assert_eq!(lock.release(&owner).await.unwrap(), 0);
    assert_eq!(lock.release(&owner).await.unwrap_err(), Error::NotHeld);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_handed_to_another_client_releases_the_lock() {
    // Seed 000: lock and unlock may run on different instances.
    let server = RedisServer::start();
    let taker = connect(&server).await;
    let releaser = connect(&server).await;
    let owner = Owner::random();
    taker
        .lock("article")
        .unwrap()
        .acquire(&owner, NOW, Some(ms(30_000)))
        .await
        .unwrap();
    let handed = Owner::from_token(owner.token()).unwrap();
    let lock = releaser.lock("article").unwrap();
    assert!(lock.is_held_by(&handed).await.unwrap());
    assert_eq!(lock.release(&handed).await.unwrap(), 0);
    assert!(!taker.lock("article").unwrap().is_locked().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exclusive_lock_and_write_view_are_one_resource() {
    let server = RedisServer::start();
    let client = connect(&server).await;
    let (a, b) = (Owner::random(), Owner::random());
    client
        .lock("shared")
        .unwrap()
        .acquire(&a, NOW, None)
        .await
        .unwrap();
    let rw = client.read_write_lock("shared").unwrap();
    assert!(rw.write().try_acquire(&b, None).await.unwrap().is_none());
    assert!(rw.read().try_acquire(&b, None).await.unwrap().is_none());
    assert_eq!(rw.write().hold_count(&a).await.unwrap(), 1);
}

/// Two clients × 8 tasks × 500 sections on a counter updated non-atomically (read, yield, write):
/// any overlap of two sections loses an update or trips the "inside" flag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_lost_update_under_contention() {
    const CLIENTS: usize = 2;
    const TASKS: usize = 8;
    const SECTIONS: u64 = 500;
    let server = RedisServer::start();
    let counter = Arc::new(AtomicU64::new(0));
    let inside = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let client = connect(&server).await;
        for _ in 0..TASKS {
            let lock = client.lock("counter").unwrap();
            let (counter, inside) = (counter.clone(), inside.clone());
            tasks.push(tokio::spawn(async move {
                let owner = Owner::random();
                let mut fences = Vec::new();
                for _ in 0..SECTIONS {
                    let hold = lock.acquire(&owner, None, Some(ms(10_000))).await.unwrap();
                    assert!(
                        !inside.swap(true, Ordering::SeqCst),
                        "two owners inside at once"
                    );
                    let seen = counter.load(Ordering::SeqCst);
                    tokio::task::yield_now().await;
                    counter.store(seen + 1, Ordering::SeqCst);
                    fences.push(hold.fencing_token());
                    inside.store(false, Ordering::SeqCst);
                    lock.release(&owner).await.unwrap();
                }
                fences
            }));
        }
    }
    let mut all_fences = Vec::new();
    for task in tasks {
        all_fences.extend(task.await.unwrap());
    }
    let total = CLIENTS as u64 * TASKS as u64 * SECTIONS;
    assert_eq!(counter.load(Ordering::SeqCst), total, "lost updates");
    all_fences.sort_unstable();
    all_fences.dedup();
    assert_eq!(
        all_fences.len() as u64,
        total,
        "every section had its own fencing token"
    );
}

/// A release of one particular hold (`release_fenced`) leaves the owner's newer hold alone: an
/// owner shared by two tasks whose first hold expired (or was force-unlocked) and who took the
/// lock again must keep it when the first task releases its ended hold. Write holds (on the
/// lone-writer fast path and past it) and read holds; the blocking API too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_of_an_ended_hold_leaves_the_owners_newer_hold() {
    let server = RedisServer::start();
    let client = connect(&server).await;
    for (round, (read, queued)) in [(false, false), (false, true), (true, false)]
        .into_iter()
        .enumerate()
    {
        let rw = client
            .read_write_lock(&format!("fenced release {round}"))
            .unwrap();
        let view = if read { rw.read() } else { rw.write() };
        let owner = Owner::random();
        let old = view.acquire(&owner, NOW, Some(ms(100))).await.unwrap();
        tokio::time::sleep(ms(250)).await;
        let new = view.acquire(&owner, NOW, Some(ms(30_000))).await.unwrap();
        if queued {
            // A waiter's announcement makes the writer's release take the slow path.
            let waiter = Owner::random();
            let w = rw.write();
            assert!(w.acquire(&waiter, SHORT, None).await.is_err());
        }
        assert!(new.fencing_token() > old.fencing_token());
        let stale = view.release_fenced(&owner, old.fencing_token()).await;
        assert!(
            matches!(stale, Err(Error::NotHeld)),
            "round {round}: {stale:?}"
        );
        assert_eq!(view.hold_count(&owner).await.unwrap(), 1, "round {round}");
        // Re-entered, the newer hold is released by its token once per count.
        view.acquire(&owner, NOW, Some(ms(30_000))).await.unwrap();
        assert_eq!(
            view.release_fenced(&owner, new.fencing_token())
                .await
                .unwrap(),
            1
        );
        assert_eq!(
            view.release_fenced(&owner, new.fencing_token())
                .await
                .unwrap(),
            0
        );
        assert!(!view.is_locked().await.unwrap());
    }
    let url = server.url();
    tokio::task::spawn_blocking(move || {
        let client = redlock_core::blocking::Client::connect(&url).unwrap();
        let lock = client.lock("fenced release, blocking").unwrap();
        let owner = Owner::random();
        let old = lock.acquire(&owner, NOW, Some(ms(100))).unwrap();
        std::thread::sleep(ms(250));
        let new = lock.acquire(&owner, NOW, Some(ms(30_000))).unwrap();
        let stale = lock.release_fenced(&owner, old.fencing_token());
        assert!(matches!(stale, Err(Error::NotHeld)), "{stale:?}");
        assert_eq!(lock.release_fenced(&owner, new.fencing_token()).unwrap(), 0);
    })
    .await
    .unwrap();
}
