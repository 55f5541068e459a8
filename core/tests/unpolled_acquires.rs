//! An acquire whose future is not polled for a while after Redis gave it the lock (a busy
//! asyncio loop polls Python's acquires on its own thread; a runtime blocked by user code does
//! the same to Rust's): until it is polled, nothing renews the hold. When it is polled again it
//! must not hand out a hold whose lease ran out meanwhile, which another owner may have taken.
//! (From the event-loop audit, 2026-11-27: it did, and two owners held the lock.)

mod common;

use std::future::Future;

use common::*;
use redlock_core::{Client, Lock, Owner};

/// The holder of `name` at the moment the acquire is handed out must be its owner: the first
/// owner's grant (or reply) ran out unrenewed and `intruder` took the lock.
async fn hand_out(
    client: &Client,
    acquiring: impl Future<Output = redlock_core::Result<redlock_core::Hold>>,
    lock: &Lock,
    me: &Owner,
    intruder: &Owner,
) {
    let hold = acquiring.await.expect("it gets the lock in the end");
    let other = client.lock(lock.name()).unwrap();
    assert!(
        lock.is_held_by(me).await.unwrap(),
        "handed out a hold that had run out (fence {}); the intruder holds: {}",
        hold.fencing_token(),
        other.is_held_by(intruder).await.unwrap()
    );
    lock.release(me).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_that_ran_out_before_its_acquire_was_polled_is_not_handed_out() {
    limited(30, async {
        let server = RedisServer::start();
        let client = builder(&server).lease(ms(1_000)).connect().await.unwrap();
        let other = connect(&server).await;
        let (holder, intruder, me) = (Owner::random(), Owner::random(), Owner::random());
        let held = other.lock("granted").unwrap();
        held.acquire(&holder, NOW, Some(ms(30_000))).await.unwrap();
        let lock = client.lock("granted").unwrap();
        let mut acquiring = Box::pin(lock.acquire(&me, Some(ms(10_000)), None));
        // Polled until it waits (queued and listening), then left alone.
        assert!(tokio::time::timeout(ms(300), &mut acquiring).await.is_err());
        held.release(&holder).await.unwrap(); // handed to `me` inside the release
        tokio::time::sleep(ms(1_500)).await; // past the granted hold's lease of 1 s
        let taken = held
            .acquire(&intruder, Some(ms(2_000)), Some(ms(3_000)))
            .await;
        assert!(taken.is_ok(), "the unrenewed grant ran out: {taken:?}");
        hand_out(&other, acquiring, &lock, &me, &intruder).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_that_ran_out_before_its_acquire_was_polled_is_not_handed_out() {
    limited(30, async {
        let server = RedisServer::start();
        let client = builder(&server).lease(ms(1_000)).connect().await.unwrap();
        let other = connect(&server).await;
        let (intruder, me) = (Owner::random(), Owner::random());
        let lock = client.lock("answered").unwrap();
        lock.acquire(&me, NOW, None).await.unwrap(); // connections and scripts ready
        lock.release(&me).await.unwrap();
        let mut acquiring = Box::pin(lock.acquire(&me, Some(ms(10_000)), None));
        // Redis answers the attempt 0.3 s from now, while nobody polls its future.
        let stall = server.stall(ms(400));
        assert!(tokio::time::timeout(ms(50), &mut acquiring).await.is_err());
        stall.join().unwrap();
        tokio::time::sleep(ms(1_500)).await; // past the hold's lease of 1 s
        let intruding = other.lock("answered").unwrap();
        let taken = intruding
            .acquire(&intruder, Some(ms(2_000)), Some(ms(3_000)))
            .await;
        assert!(taken.is_ok(), "the unrenewed hold ran out: {taken:?}");
        hand_out(&other, acquiring, &lock, &me, &intruder).await;
    })
    .await;
}

/// Cancelled while its late hold is being confirmed: the hold is given back, not left until
/// its lease ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_dropped_while_its_late_hold_is_confirmed_leaves_nothing_behind() {
    limited(30, async {
        let server = RedisServer::start();
        let client = builder(&server).lease(ms(6_000)).connect().await.unwrap();
        let other = connect(&server).await;
        let (holder, me) = (Owner::random(), Owner::random());
        let held = other.lock("dropped").unwrap();
        held.acquire(&holder, NOW, Some(ms(30_000))).await.unwrap();
        let lock = client.lock("dropped").unwrap();
        let mut acquiring = Box::pin(lock.acquire(&me, Some(ms(10_000)), None));
        assert!(tokio::time::timeout(ms(300), &mut acquiring).await.is_err());
        held.release(&holder).await.unwrap(); // granted, nobody polls
        tokio::time::sleep(ms(2_200)).await; // late (past a third of its 6 s lease), still held
        let stall = server.stall(ms(600));
        // Polled again: it confirms the hold, which waits for the stalled Redis; dropped then.
        assert!(tokio::time::timeout(ms(150), &mut acquiring).await.is_err());
        drop(acquiring);
        stall.join().unwrap();
        let start = std::time::Instant::now();
        while lock.is_locked().await.unwrap() {
            assert!(
                start.elapsed() < ms(1_500),
                "the hold of the dropped acquire was left to its lease"
            );
            tokio::time::sleep(ms(50)).await;
        }
    })
    .await;
}
