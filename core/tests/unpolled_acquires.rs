//! An acquire whose future is not polled for a while after Redis gave it the lock (a busy
//! asyncio loop polls Python's acquires on its own thread; a runtime blocked by user code does
//! the same to Rust's): until it is polled, nothing renews the hold. When it is polled again it
//! must not hand out a hold whose lease ran out meanwhile, which another owner may have taken.
//! (From the event-loop audit, 2026-11-27: it did, and two owners held the lock.)

mod common;

use std::future::Future;
use std::time::Duration;

use common::*;
use redlock_core::{Client, Lock, Owner, blocking};

/// While nobody polls `acquiring` (whose hold has a lease of 1 s), the lease runs out and
/// `intruder`, of `client`, takes the lock. When `acquiring` is handed out, its owner `me` must
/// be the holder.
async fn intruded_then_handed_out(
    client: &Client,
    acquiring: impl Future<Output = redlock_core::Result<redlock_core::Hold>>,
    lock: &Lock,
    me: &Owner,
    intruder: &Owner,
) {
    tokio::time::sleep(ms(1_500)).await; // past the hold's lease of 1 s
    let other = client.lock(lock.name()).unwrap();
    let taken = other
        .acquire(intruder, Some(ms(2_000)), Some(ms(3_000)))
        .await;
    assert!(taken.is_ok(), "the unrenewed hold ran out: {taken:?}");
    let hold = acquiring.await.expect("it gets the lock in the end");
    assert!(
        lock.is_held_by(me).await.unwrap(),
        "handed out a hold that had run out (fence {}); the intruder holds: {}",
        hold.fencing_token(),
        other.is_held_by(intruder).await.unwrap()
    );
    lock.release(me).await.unwrap();
}

/// On a thread of its own: 200 ms from now `holder`'s hold of "granted" (of `other`) is
/// released, which grants the lock to the waiter; `past` later (once that grant's lease ran
/// out) `intruder` takes it for `lease`. The intruder's fence.
fn release_then_intrude(
    other: &blocking::Client,
    holder: Owner,
    intruder: &Owner,
    past: Duration,
    lease: Duration,
) -> std::thread::JoinHandle<redlock_core::Result<u64>> {
    let (held, intruder) = (other.lock("granted").unwrap(), intruder.clone());
    std::thread::spawn(move || {
        std::thread::sleep(ms(200));
        held.release(&holder).unwrap(); // granted to the waiter inside the release
        std::thread::sleep(past);
        held.acquire(&intruder, Some(ms(2_000)), Some(lease))
            .map(|h| h.fencing_token())
    })
}

/// The intruder got in once the grant ran out; when the late acquire is handed out, its owner
/// `me` holds the lock and the intruder does not.
async fn handed_out_only_if_held(
    intruding: std::thread::JoinHandle<redlock_core::Result<u64>>,
    acquiring: impl Future<Output = redlock_core::Result<redlock_core::Hold>>,
    lock: &Lock,
    me: &Owner,
    held: &blocking::Lock,
    intruder: &Owner,
) {
    let taken = intruding.join().unwrap();
    assert!(taken.is_ok(), "the unrenewed grant ran out: {taken:?}");
    let hold = acquiring.await.expect("it gets the lock in the end");
    let mine = lock.is_held_by(me).await.unwrap();
    let theirs = held.is_held_by(intruder).unwrap();
    assert!(
        mine && !theirs,
        "handed out a grant that had run out (fence {}; intruder's {:?}): held by me {mine}, \
         by the intruder {theirs}",
        hold.fencing_token(),
        taken
    );
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
        intruded_then_handed_out(&other, acquiring, &lock, &me, &intruder).await;
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
        intruded_then_handed_out(&other, acquiring, &lock, &me, &intruder).await;
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

// From the review of the confirmation (2026-11-27): it must confirm the hold it took, not a
// newer one of its owner, never shorten a longer lease, and see a grant read late as old.

/// A re-entry whose reply comes late (Redis slow for 0.6 s) is confirmed, and the confirmation
/// never shortens a longer lease, as acquire.lua's re-entry does not: the owner's first hold,
/// taken for 60 s, must not end with the re-entry's 0.9 s (it did).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_reentry_does_not_shorten_the_owners_longer_lease() {
    limited(30, async {
        let server = RedisServer::start();
        let client = connect(&server).await;
        let lock = client.lock("long").unwrap();
        let me = Owner::random();
        let first = lock.acquire(&me, NOW, Some(ms(60_000))).await.unwrap();
        let stall = server.stall(ms(700));
        let again = lock.acquire(&me, NOW, Some(ms(900))).await.unwrap();
        stall.join().unwrap();
        assert_eq!(again.hold_count(), 2);
        tokio::time::sleep(ms(1_500)).await;
        assert!(
            lock.is_held_by(&me).await.unwrap(),
            "the 60 s hold (fence {}) ended after 0.9 s: the confirmation of a late re-entry \
             shortened its lease",
            first.fencing_token()
        );
    })
    .await;
}

/// The confirmation asks whether the owner still holds the hold this acquire took, not just the
/// lock: that one ran out unpolled and the same owner took the lock anew (another task of it),
/// so the late acquire starts over and re-enters the new hold (fence and count of it), whose
/// 30 s lease stays. (It was handed out with the ended hold's fence as a second count-1 hold,
/// and the new hold's lease was cut to 0.5 s.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_acquire_whose_hold_ended_is_not_confirmed_by_a_newer_hold_of_its_owner() {
    limited(30, async {
        let server = RedisServer::start();
        let client = connect(&server).await;
        let lock = client.lock("stale-fence").unwrap();
        let me = Owner::random();
        lock.acquire(&me, NOW, Some(ms(500))).await.unwrap(); // connections and scripts ready
        lock.release(&me).await.unwrap();
        let mut acquiring = Box::pin(lock.acquire(&me, Some(ms(10_000)), Some(ms(500))));
        // Redis answers the attempt ~0.4 s from now, while nobody polls its future.
        let stall = server.stall(ms(500));
        assert!(tokio::time::timeout(ms(50), &mut acquiring).await.is_err());
        stall.join().unwrap();
        tokio::time::sleep(ms(1_500)).await; // past the hold's lease of 0.5 s
        let newer = lock.acquire(&me, NOW, Some(ms(30_000))).await.unwrap();
        let late = acquiring.await.unwrap();
        eprintln!(
            "newer: fence {} count {}; late: fence {} count {}",
            newer.fencing_token(),
            newer.hold_count(),
            late.fencing_token(),
            late.hold_count()
        );
        let problems = [
            (late.fencing_token() != newer.fencing_token())
                .then_some("the late acquire was handed out with its ended hold's fence"),
            (late.hold_count() != 2).then_some("the late acquire was not counted as a re-entry"),
        ];
        tokio::time::sleep(ms(1_000)).await;
        let held = lock.is_held_by(&me).await.unwrap();
        let problems: Vec<_> = problems
            .into_iter()
            .flatten()
            .chain((!held).then_some("the newer 30 s hold ended within 1 s"))
            .collect();
        assert!(problems.is_empty(), "{problems:?}");
    })
    .await;
}

/// The runtime that runs both the waiter and the pub/sub connection task is blocked (user code
/// on a current-thread runtime) while a release grants the lock to the waiter: the grant is
/// read only when the runtime runs again, 3 s later, long after the granted hold's lease of
/// 1 s ran out and another owner took the lock. It must count as old as it is (the socket was
/// last found empty before the block), so it is confirmed and not handed out. (Stamped when
/// read, it looked fresh and was handed out: two holders.)
#[tokio::test(flavor = "current_thread")]
async fn a_grant_read_late_by_a_blocked_runtime_is_not_handed_out_unconfirmed() {
    limited(30, async {
        let server = RedisServer::start();
        let client = builder(&server)
            .lease(ms(1_000))
            .recheck_interval(Duration::from_secs(60))
            .connect()
            .await
            .unwrap();
        let url = server.url();
        let (holder, intruder, me) = (Owner::random(), Owner::random(), Owner::random());
        let other = redlock_core::blocking::Client::connect(&url).unwrap();
        let held = other.lock("granted").unwrap();
        held.acquire(&holder, NOW, Some(ms(30_000))).unwrap();
        let lock = client.lock("granted").unwrap();
        let mut acquiring = Box::pin(lock.acquire(&me, Some(ms(20_000)), None));
        // Polled until it waits (queued and listening).
        assert!(tokio::time::timeout(ms(300), &mut acquiring).await.is_err());
        let elsewhere = release_then_intrude(&other, holder, &intruder, ms(1_500), ms(3_000));
        std::thread::sleep(ms(3_000)); // this runtime's only thread is busy
        handed_out_only_if_held(elsewhere, acquiring, &lock, &me, &held, &intruder).await;
        other.close();
    })
    .await;
}

/// As above, but while the runtime is blocked a *blocking* acquire of the same client (another
/// thread) waits, and so watches the pub/sub socket: it peeks at the unread bytes and hands out
/// the old grant to `me` early. That grant counts from when the socket was last found empty,
/// not from the peek, so it is confirmed and not handed out. (Stamped at the peek, it looked
/// fresh and was handed out while the intruder held the lock; found by the third review.)
#[tokio::test(flavor = "current_thread")]
async fn a_grant_peeked_late_by_a_blocking_watcher_is_not_handed_out_unconfirmed() {
    limited(40, async {
        let server = RedisServer::start();
        let url = server.url();
        // One client, used both async (this runtime: its waiter starts the pub/sub task here)
        // and blocking (another thread). Lease 3 s: "late" is past 1 s.
        let b = builder(&server)
            .lease(ms(3_000))
            .recheck_interval(Duration::from_secs(60));
        let blocking = redlock_core::blocking::Client::from_builder(b).unwrap();
        let client = blocking.as_async().unwrap();
        let (holder, intruder, me, bystander) = (
            Owner::random(),
            Owner::random(),
            Owner::random(),
            Owner::random(),
        );
        let other = redlock_core::blocking::Client::connect(&url).unwrap();
        let held = other.lock("granted").unwrap();
        held.acquire(&holder, NOW, Some(ms(30_000))).unwrap();
        // Something for the blocking watcher to wait on.
        other
            .lock("busy")
            .unwrap()
            .acquire(&holder, NOW, Some(ms(30_000)))
            .unwrap();
        let lock = client.lock("granted").unwrap();
        let mut acquiring = Box::pin(lock.acquire(&me, Some(ms(20_000)), None));
        assert!(tokio::time::timeout(ms(300), &mut acquiring).await.is_err());
        let elsewhere = release_then_intrude(&other, holder, &intruder, ms(3_500), ms(3_000));
        let watcher = std::thread::spawn(move || {
            std::thread::sleep(ms(3_900)); // after the intruder took the lock
            let busy = blocking.lock("busy").unwrap();
            // Waits (the lock is held), watching the socket: the old grant to `me` is unread.
            busy.acquire(&bystander, Some(ms(300)), None).err()
        });
        std::thread::sleep(ms(4_300)); // this runtime's only thread is busy
        eprintln!("watcher: {:?}", watcher.join().unwrap());
        handed_out_only_if_held(elsewhere, acquiring, &lock, &me, &held, &intruder).await;
        other.close();
    })
    .await;
}

/// As the blocked-runtime test above, and meanwhile another thread of the same client starts
/// waiting on another lock: its subscribe request wakes the hub task, which runs (with the
/// redis-rs driver) before the runtime polls its I/O driver, and its read returns Pending from
/// tokio's cached readiness although the grant's bytes have waited in the socket for seconds.
/// The grant must still count as old (the waiter's last look, before the block, bounds it).
/// (Found by the fourth review: it looked fresh and was handed out.)
#[tokio::test(flavor = "current_thread")]
async fn a_grant_read_late_after_a_subscribe_request_woke_the_hub_is_not_handed_out_unconfirmed() {
    limited(40, async {
        let server = RedisServer::start();
        let client = builder(&server)
            .lease(ms(1_000))
            .recheck_interval(Duration::from_secs(60))
            .connect()
            .await
            .unwrap();
        let url = server.url();
        let (holder, intruder, me, bystander) = (
            Owner::random(),
            Owner::random(),
            Owner::random(),
            Owner::random(),
        );
        let other = redlock_core::blocking::Client::connect(&url).unwrap();
        let held = other.lock("granted").unwrap();
        held.acquire(&holder, NOW, Some(ms(30_000))).unwrap();
        other
            .lock("busy")
            .unwrap()
            .acquire(&holder, NOW, Some(ms(30_000)))
            .unwrap();
        let lock = client.lock("granted").unwrap();
        let mut acquiring = Box::pin(lock.acquire(&me, Some(ms(20_000)), None));
        // Polled until it waits (queued and listening: the hub runs on this runtime).
        assert!(tokio::time::timeout(ms(300), &mut acquiring).await.is_err());
        let elsewhere = release_then_intrude(&other, holder, &intruder, ms(1_500), ms(5_000));
        // Another task of this client, on a runtime of its own, starts waiting on "busy".
        let c = client.clone();
        let poker = std::thread::spawn(move || {
            std::thread::sleep(ms(2_200));
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let busy = c.lock("busy").unwrap();
                busy.acquire(&bystander, Some(ms(1_500)), None).await.err()
            })
        });
        std::thread::sleep(ms(3_000)); // this runtime's only thread is busy
        handed_out_only_if_held(elsewhere, acquiring, &lock, &me, &held, &intruder).await;
        eprintln!("poker: {:?}", poker.join().unwrap());
        other.close();
    })
    .await;
}

/// A lease of 20 ms (valid: at least 1 ms): a hold handed out ~85 ms after its attempt was
/// sent, after it ended and another owner took the lock, is confirmed and not handed out: the
/// floor that spares short leases a confirmation stays below half the lease. (Found by the
/// fourth review: the floor was 100 ms whatever the lease.)
#[tokio::test(flavor = "current_thread")]
async fn a_short_lease_handed_out_after_it_ended_is_confirmed() {
    limited(30, async {
        let server = RedisServer::start();
        let client = connect(&server).await;
        let url = server.url();
        let (intruder, me) = (Owner::random(), Owner::random());
        let lock = client.lock("short").unwrap();
        // Connections and scripts ready. (Not with the 20 ms lease: on a loaded machine it
        // ended before the release came, which then failed with NotHeld.)
        lock.acquire(&me, NOW, Some(ms(5_000))).await.unwrap();
        lock.release(&me).await.unwrap();
        let other = redlock_core::blocking::Client::connect(&url).unwrap();
        let o = other.clone();
        let i = intruder.clone();
        let stall = server.stall(ms(130)); // ~30 ms of it left
        let mut acquiring = Box::pin(lock.acquire(&me, Some(ms(10_000)), Some(ms(20))));
        let sent = std::time::Instant::now();
        let elsewhere = std::thread::spawn(move || {
            std::thread::sleep(ms(60)); // Redis ran the attempt at ~30 ms; its lease ended at ~50
            o.lock("short")
                .unwrap()
                // Not 30 ms: on a loaded machine the stall ran long and it gave up first. This
                // thread's wait holds nothing up (the acquire below is not polled until it ends).
                .acquire(&i, Some(ms(2_000)), Some(ms(5_000)))
                .map(|h| h.fencing_token())
        });
        assert!(tokio::time::timeout(ms(3), &mut acquiring).await.is_err());
        std::thread::sleep(ms(80).saturating_sub(sent.elapsed())); // not polled
        let taken = elsewhere.join().unwrap();
        stall.join().unwrap();
        assert!(taken.is_ok(), "the intruder did not get in: {taken:?}");
        let hold = acquiring.await.unwrap();
        let handed = sent.elapsed();
        // The hold handed out is one taken after the intruder's (its fence is larger): the
        // stale one, taken before, ended before the intruder got in. (Whether it is still held
        // when looked at next is no test of that: a 20 ms lease can end before the next call
        // on a loaded machine, and this one waited out the intruder's 5 s lease.)
        let intruders = taken.as_ref().copied().unwrap();
        let mine = lock.is_held_by(&me).await.unwrap();
        assert!(
            hold.fencing_token() > intruders,
            "handed out {handed:?} after sending, fence {} (intruder's {intruders}): held by me \
             {mine}",
            hold.fencing_token()
        );
        other.close();
    })
    .await;
}
