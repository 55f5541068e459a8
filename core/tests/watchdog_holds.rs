//! The watchdog keeps exactly the holds it tracks, and says when one is gone: a later hold of
//! the same owner (a fixed lease here, or another instance's) is left to its own lease; a
//! restart that counts fences anew; extend on a kept hold. (Each of these failed before the
//! renewal checked the fence, 2026-11-26.)

mod common;

use std::sync::Mutex;
use std::time::Duration;

use common::*;
use redlock_core::{Client, Error, Hold, Lock, LockLostEvent, Owner};

/// Returns right after a renewal tick finished, so the next one is a whole period away.
async fn just_after_a_tick(client: &Client) {
    let calls = client.watchdog_calls();
    while client.watchdog_calls() == calls {
        tokio::time::sleep(ms(2)).await;
    }
    tokio::time::sleep(ms(30)).await;
}

async fn acquire_retrying(
    lock: &redlock_core::Lock,
    owner: &Owner,
    lease: Option<Duration>,
) -> redlock_core::Hold {
    loop {
        match lock.acquire(owner, NOW, lease).await {
            Ok(hold) => break hold,
            Err(Error::Connection(_)) => tokio::time::sleep(ms(50)).await,
            Err(other) => panic!("{other:?}"),
        }
    }
}

/// A watched hold vanished (another client's force unlock) and its owner takes the lock
/// again with a fixed lease before the next tick. The stale tracking of the vanished hold keeps
/// renewing the new fixed-lease hold (renew.lua checked the owner token only, not the fence):
/// the fixed lease never ended while this client ran, and the vanished hold was never reported
/// lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_lease_hold_is_not_kept_alive_by_the_stale_tracking_of_a_vanished_watched_hold() {
    limited(30, async {
        let server = RedisServer::start();
        let (client, events) = recording_losses(&server, ms(900)).await;
        let admin = connect(&server).await;
        let lock = client.lock("stale-tracking").unwrap();
        let owner = Owner::random();
        let watched = lock.acquire(&owner, NOW, None).await.unwrap();
        just_after_a_tick(&client).await;
        assert!(admin.force_unlock("stale-tracking").await.unwrap());
        let fixed = lock.acquire(&owner, NOW, Some(ms(300))).await.unwrap();
        assert_eq!(fixed.hold_count(), 1, "a new hold, not a re-entry");
        assert!(fixed.fencing_token() > watched.fencing_token());
        // Five lease ends of the fixed hold, five renewal periods.
        tokio::time::sleep(ms(1_500)).await;
        let held = lock.is_held_by(&owner).await.unwrap();
        let lease_left = lock.inspect().await.unwrap().lease_left;
        tokio::time::sleep(ms(100)).await;
        let events = events.lock().unwrap().len();
        assert!(
            !held && watched.is_lost() && client.watched_holds() == 0 && events == 1,
            "the 300 ms hold is still held after 1.5 s: {held} (lease left {lease_left:?}); \
             the vanished watched hold lost: {} (watched {}), watched holds {}, lost events {events}",
            watched.is_lost(),
            watched.is_watched(),
            client.watched_holds(),
        );
    })
    .await;
}

/// The same across clients: the contract lets another instance release with the owner's token and
/// take the lock again; this client's watchdog must not keep that other instance's fixed lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_instance_s_fixed_lease_hold_of_the_same_owner_is_not_renewed_by_this_watchdog() {
    limited(30, async {
        let server = RedisServer::start();
        let (client, _events) = recording_losses(&server, ms(900)).await;
        let other = connect(&server).await;
        let owner = Owner::random();
        let here = client.lock("handed-over").unwrap();
        let there = other.lock("handed-over").unwrap();
        let watched = here.acquire(&owner, NOW, None).await.unwrap();
        just_after_a_tick(&client).await;
        // The other instance releases (it presents the token: it is the owner), then locks
        // again with a 300 ms lease.
        assert_eq!(there.release(&owner).await.unwrap(), 0);
        let fixed = there.acquire(&owner, NOW, Some(ms(300))).await.unwrap();
        assert!(fixed.fencing_token() > watched.fencing_token());
        tokio::time::sleep(ms(1_500)).await;
        let held = there.is_held_by(&owner).await.unwrap();
        assert!(
            !held,
            "the other instance's 300 ms hold is still held after 1.5 s (renewed by this \
             client's watchdog for a hold that was released); this client's hold lost: {}",
            watched.is_lost()
        );
    })
    .await;
}

/// A release remembered an "ended" hold (key, fence) for an acquire it expected to hear
/// later; when that acquire was a fixed-lease one, heard before, the record stayed. After a
/// restart without persistence the server counts fences anew, and a later watched hold of the
/// owner that drew the same fence was not tracked at all: nothing renewed it, and it expired
/// while its owner held it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watched_hold_after_a_restart_is_renewed_even_if_an_old_release_ended_the_same_fence() {
    limited(30, async {
        let mut server = RedisServer::start();
        let (client, _events) = recording_losses(&server, ms(900)).await;
        let admin = connect(&server).await;
        let lock = client.lock("reused-fence").unwrap();
        let owner = Owner::random();
        let first = lock.acquire(&owner, NOW, None).await.unwrap();
        just_after_a_tick(&client).await;
        assert!(admin.force_unlock("reused-fence").await.unwrap());
        let fixed = lock.acquire(&owner, NOW, Some(ms(5_000))).await.unwrap();
        let ended_fence = fixed.fencing_token();
        assert_eq!(lock.release(&owner).await.unwrap(), 0);
        assert!(first.is_lost());

        server.restart(); // data lost: fences count from 1 again
        // Spend fences up to just below the one the release ended.
        let mut hold = acquire_retrying(&lock, &owner, Some(ms(5_000))).await;
        while hold.fencing_token() + 1 < ended_fence {
            lock.release(&owner).await.unwrap();
            hold = acquire_retrying(&lock, &owner, Some(ms(5_000))).await;
        }
        lock.release(&owner).await.unwrap();
        let watched = lock.acquire(&owner, NOW, None).await.unwrap();
        assert_eq!(watched.fencing_token(), ended_fence);
        let tracked = (watched.is_watched(), client.watched_holds());
        tokio::time::sleep(ms(1_500)).await;
        let held = lock.is_held_by(&owner).await.unwrap();
        assert!(
            held && tracked == (true, 1),
            "a watched hold, never released: held after 1.5 s {held}, \
             (is_watched, watched_holds) right after the acquire {tracked:?}"
        );
    })
    .await;
}

/// extend() on a watched hold: "A watchdog-kept hold stays kept" (Lock::extend's doc). A
/// short extend made the hold expire before the next tick, which then reported it lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watched_hold_stays_kept_after_a_short_extend() {
    limited(30, async {
        let server = RedisServer::start();
        let (client, events) = recording_losses(&server, ms(900)).await;
        let lock = client.lock("short-extend").unwrap();
        let owner = Owner::random();
        let hold = lock.acquire(&owner, NOW, None).await.unwrap();
        just_after_a_tick(&client).await;
        lock.extend(&owner, ms(50)).await.unwrap();
        tokio::time::sleep(ms(1_000)).await;
        let held = lock.is_held_by(&owner).await.unwrap();
        tokio::time::sleep(ms(100)).await;
        assert!(
            held && !hold.is_lost(),
            "never released: held {held}, reported lost {} (events {})",
            hold.is_lost(),
            events.lock().unwrap().len()
        );
        assert_eq!(lock.release(&owner).await.unwrap(), 0);
    })
    .await;
}

/// The same through another client presenting the token (another process or language, which
/// cannot know the hold is watched): a short extend made a watched hold (write or read) expire
/// between two renewals, and another owner took the lock while the holder was not told.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watched_hold_stays_kept_after_a_short_extend_through_another_client() {
    limited(30, async {
        let server = RedisServer::start();
        let (holding, events) = recording_losses(&server, ms(3_000)).await;
        let elsewhere = connect(&server).await;
        for (round, read) in [(0, false), (1, true)] {
            let name = format!("short-extend-elsewhere-{round}");
            let view = |client: &Client| {
                let rw = client.read_write_lock(&name).unwrap();
                if read { rw.read() } else { rw.write() }
            };
            let owner = Owner::random();
            let hold = view(&holding).acquire(&owner, NOW, None).await.unwrap();
            let handed = Owner::from_token(owner.token()).unwrap();
            view(&elsewhere).extend(&handed, ms(50)).await.unwrap();
            tokio::time::sleep(ms(400)).await;
            let writer = Owner::random();
            let taken = elsewhere.read_write_lock(&name).unwrap().write();
            let intruded = taken.acquire(&writer, NOW, Some(ms(5_000))).await.is_ok();
            let held = view(&holding).is_held_by(&owner).await.unwrap();
            assert!(
                held && !intruded && !hold.is_lost(),
                "{name}: held {held}, another owner got in {intruded}, events {}",
                events.lock().unwrap().len()
            );
            assert_eq!(view(&holding).release(&owner).await.unwrap(), 0);
        }
    })
    .await;
}

/// After a restart without persistence, extend of a watched hold finds it gone: it should
/// say LockLost (and report it) as a release does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_of_a_watched_hold_the_restarted_server_lost_says_lock_lost() {
    limited(30, async {
        let mut server = RedisServer::start();
        let (client, _events) = recording_losses(&server, Duration::from_secs(60)).await;
        // The same loss through another client's force unlock: extend says LockLost.
        let admin = connect(&server).await;
        let unlocked = client.lock("unlocked-extend").unwrap();
        let someone = Owner::random();
        let gone = unlocked.acquire(&someone, NOW, None).await.unwrap();
        assert!(admin.force_unlock("unlocked-extend").await.unwrap());
        assert_eq!(
            unlocked.extend(&someone, ms(5_000)).await,
            Err(Error::LockLost)
        );
        assert!(gone.is_lost());
        drop(admin);

        let lock = client.lock("restarted-extend").unwrap();
        let owner = Owner::random();
        // Some fences spent first, so the tracked hold's fence is above the new counter.
        for _ in 0..3 {
            lock.acquire(&owner, NOW, None).await.unwrap();
            lock.release(&owner).await.unwrap();
        }
        let hold = lock.acquire(&owner, NOW, None).await.unwrap();
        server.restart();
        let extended = loop {
            match lock.extend(&owner, ms(5_000)).await {
                Err(Error::Connection(_)) => tokio::time::sleep(ms(50)).await,
                other => break other,
            }
        };
        let lost_after_extend = hold.is_lost();
        let release = lock.release(&owner).await;
        assert!(
            extended == Err(Error::LockLost) && lost_after_extend,
            "extend said {extended:?} (reported lost by it: {lost_after_extend}); \
             the release right after it says {release:?}"
        );
    })
    .await;
}

/// A restart without persistence loses the kept hold, and the server draws fence 1 again: the
/// owner's next hold, taken before the next tick, has the lost one's fence. Its acquire was
/// taken for a re-entry of the lost hold (same fence), so the loss was never reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_a_restart_lost_is_reported_even_if_the_next_hold_draws_its_fence() {
    limited(30, async {
        let mut server = RedisServer::start();
        let (client, events) = recording_losses(&server, ms(900)).await;
        let lock = client.lock("restart-same-fence").unwrap();
        let owner = Owner::random();
        let first = lock.acquire(&owner, NOW, None).await.unwrap();
        assert_eq!(first.fencing_token(), 1, "a fresh server's first fence");
        just_after_a_tick(&client).await;
        server.restart(); // empty: the hold is gone
        let second = acquire_retrying(&lock, &owner, None).await;
        assert_eq!((second.fencing_token(), second.hold_count()), (1, 1));
        tokio::time::sleep(ms(1_000)).await;
        assert!(
            first.is_lost(),
            "the hold the restart lost was not reported"
        );
        assert!(second.is_watched() && !second.is_lost());
        assert_eq!(events.lock().unwrap().len(), 1, "one lock-lost event");
        assert!(lock.is_held_by(&owner).await.unwrap());
    })
    .await;
}

/// The same restart, then the owner takes the lock with a fixed lease and draws the lost hold's
/// fence: the stale tracking renewed the new hold on every tick (renew.lua matches owner and
/// fence), so its lease never ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_lease_hold_that_draws_the_fence_of_a_hold_a_restart_lost_is_not_renewed() {
    limited(30, async {
        let mut server = RedisServer::start();
        let (client, events) = recording_losses(&server, ms(900)).await;
        let lock = client.lock("restart-fixed-same-fence").unwrap();
        let owner = Owner::random();
        let first = lock.acquire(&owner, NOW, None).await.unwrap();
        just_after_a_tick(&client).await;
        server.restart();
        let fixed = acquire_retrying(&lock, &owner, Some(ms(1_000))).await;
        assert_eq!(fixed.fencing_token(), first.fencing_token());
        assert!(
            first.is_lost(),
            "the hold the restart lost was not reported"
        );
        tokio::time::sleep(ms(2_000)).await;
        assert!(
            !lock.is_locked().await.unwrap(),
            "the 1 s lease was renewed"
        );
        assert_eq!(events.lock().unwrap().len(), 1, "one lock-lost event");
    })
    .await;
}

/// Redis gone (killed, not restarted): no renewal works, so once a whole lease has passed since
/// the last one that did, Redis has let the hold expire (were it reachable, anyone could take
/// the lock). The hold is reported lost then, once, rather than kept as held for as long as
/// Redis stays away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watched_hold_is_reported_lost_once_its_lease_passes_without_a_working_renewal() {
    limited(30, async {
        let mut server = RedisServer::start();
        let lease = ms(1_500);
        let (client, events) = recording_losses(&server, lease).await;
        let lock = client.lock("unrenewable").unwrap();
        let owner = Owner::random();
        let hold = lock.acquire(&owner, NOW, None).await.unwrap();
        just_after_a_tick(&client).await;
        let stopped = std::time::Instant::now();
        server.stop();
        // The last renewal that worked was at most a tick (lease/3) before the stop.
        let deadline = lease + lease / 3 + ms(1_000);
        while !hold.is_lost() && stopped.elapsed() < deadline + ms(2_000) {
            tokio::time::sleep(ms(20)).await;
        }
        let after = stopped.elapsed();
        assert!(
            hold.is_lost(),
            "not reported lost {after:?} after Redis went away"
        );
        assert!(
            after <= deadline,
            "reported lost only {after:?} after Redis went away"
        );
        // Not before the lease set by the last renewal that worked (just before the stop).
        assert!(
            after >= lease - ms(200),
            "reported lost {after:?} after Redis went away: too soon"
        );
        tokio::time::sleep(ms(600)).await;
        assert_eq!(events.lock().unwrap().len(), 1, "reported once");
        assert_eq!(client.watched_holds(), 0);
    })
    .await;
}

/// As above with a Redis that does not answer (busy, as behind a slow command): a renewal call
/// still waiting when the lease it renews has passed is given up then, and the hold reported
/// lost, not once the command timeout (longer here than the lease) ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watched_hold_is_reported_lost_when_its_lease_passes_while_redis_is_silent() {
    limited(30, async {
        let server = RedisServer::start();
        let lease = ms(900);
        let silent_longer = builder(&server).lease(lease).command_timeout(ms(5_000));
        let (client, events) = recording_losses_of(silent_longer).await;
        let lock = client.lock("silent").unwrap();
        let hold = lock.acquire(&Owner::random(), NOW, None).await.unwrap();
        just_after_a_tick(&client).await;
        let silent = std::time::Instant::now();
        let stall = server.stall(ms(3_500));
        while !hold.is_lost() && silent.elapsed() < ms(3_000) {
            tokio::time::sleep(ms(20)).await;
        }
        let after = silent.elapsed();
        // The last renewal that worked was at most a tick (lease/3) before the stall.
        let deadline = lease + lease / 3 + ms(500);
        assert!(
            after <= deadline,
            "reported lost {after:?} after Redis fell silent"
        );
        assert!(
            after >= lease - ms(300),
            "reported lost too soon: {after:?}"
        );
        tokio::task::spawn_blocking(move || stall.join().unwrap())
            .await
            .unwrap();
        tokio::time::sleep(ms(600)).await;
        assert_eq!(events.lock().unwrap().len(), 1, "reported once");
        assert_eq!(client.watched_holds(), 0);
    })
    .await;
}

/// Releases `view`'s hold of `owner` with the fence `stale`, which is not the owner's hold
/// `kept`'s (a watched one): the release is `NotHeld`, and `kept` is neither reported lost nor
/// left to expire (still held past several leases).
async fn a_stale_fenced_release_leaves_kept(
    view: &Lock,
    owner: &Owner,
    stale: u64,
    kept: &Hold,
    events: &Mutex<Vec<LockLostEvent>>,
) {
    let what = format!("{} ({:?})", view.name(), view.mode());
    let released = view.release_fenced(owner, stale).await;
    assert!(
        matches!(released, Err(Error::NotHeld)),
        "{what}: the stale release said {released:?}"
    );
    assert!(!kept.is_lost(), "{what}: the live hold is reported lost");
    let seen = events.lock().unwrap().clone();
    assert!(seen.is_empty(), "{what}: lock-lost callback ran: {seen:?}");
    tokio::time::sleep(ms(1_500)).await;
    let count = view.hold_count(owner).await.unwrap();
    assert!(
        count >= 1,
        "{what}: the watchdog stopped keeping the hold: it expired"
    );
}

/// A release of an ended hold by its fence (`release_fenced`, Go's `Hold.Release`) leaves the
/// owner's newer hold alone also when the watchdog keeps it: it used to mark that hold as the one
/// released, report it lost and stop renewing it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_fenced_release_does_not_lose_a_watched_newer_hold() {
    limited(30, async {
        let server = RedisServer::start();
        let (client, events) = recording_losses(&server, ms(600)).await;
        for read in [false, true] {
            let rw = client
                .read_write_lock(&format!("stale fenced {read}"))
                .unwrap();
            let view = if read { rw.read() } else { rw.write() };
            let owner = Owner::random();
            // The first task's hold, with a fixed lease, ends.
            let old = view.acquire(&owner, NOW, Some(ms(100))).await.unwrap();
            tokio::time::sleep(ms(250)).await;
            // The second task (same owner) takes it again, kept by the watchdog.
            let new = view.acquire(&owner, NOW, None).await.unwrap();
            assert!(new.fencing_token() > old.fencing_token());
            // The first task releases its ended hold.
            a_stale_fenced_release_leaves_kept(&view, &owner, old.fencing_token(), &new, &events)
                .await;
            assert_eq!(
                view.release_fenced(&owner, new.fencing_token())
                    .await
                    .unwrap(),
                0
            );
        }
    })
    .await;
}

/// A fenced release naming a fence larger than the owner's current hold's (the read view's fence
/// given to the write view of a writer that also reads) changes nothing in Redis; it must not
/// make the client report the owner's live, watched hold lost and stop renewing it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_release_with_a_larger_fence_leaves_the_watched_hold_kept() {
    limited(30, async {
        let server = RedisServer::start();
        let (client, events) = recording_losses(&server, ms(600)).await;
        let rw = client.read_write_lock("larger fence").unwrap();
        let owner = Owner::random();
        let write = rw.write().acquire(&owner, NOW, None).await.unwrap();
        let read = rw.read().acquire(&owner, NOW, None).await.unwrap(); // a writer that reads
        assert!(read.fencing_token() > write.fencing_token());
        let fence = read.fencing_token();
        a_stale_fenced_release_leaves_kept(&rw.write(), &owner, fence, &write, &events).await;
        assert_eq!(rw.write().hold_count(&owner).await.unwrap(), 1);
    })
    .await;
}

/// After Redis lost its data (fences count from 1 again), the owner's new watched hold has a
/// smaller fence than its ended one; the ended hold's fenced release must leave it kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_release_of_a_hold_from_before_a_data_loss_leaves_the_new_hold_kept() {
    limited(30, async {
        let server = RedisServer::start();
        let (client, events) = recording_losses(&server, ms(600)).await;
        let lock = client.lock("data loss").unwrap();
        let owner = Owner::random();
        for _ in 0..4 {
            lock.acquire(&owner, NOW, None).await.unwrap();
            lock.release(&owner).await.unwrap();
        }
        let old = lock.acquire(&owner, NOW, Some(ms(30_000))).await.unwrap();
        server.command(&["FLUSHALL"]); // a restart without persistence
        let new = lock.acquire(&owner, NOW, None).await.unwrap();
        assert!(new.fencing_token() < old.fencing_token());
        a_stale_fenced_release_leaves_kept(&lock, &owner, old.fencing_token(), &new, &events).await;
    })
    .await;
}

/// (Holds with and without the fix.) A watched hold that another client force-unlocked: its
/// fenced release says LockLost; a re-entered watched hold released by its fence counts down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_release_of_a_lost_watched_hold_is_lock_lost() {
    limited(30, async {
        let server = RedisServer::start();
        let (client, _events) = recording_losses(&server, ms(600)).await;
        let admin = connect(&server).await;
        for read in [false, true] {
            let rw = client.read_write_lock(&format!("lost {read}")).unwrap();
            let view = if read { rw.read() } else { rw.write() };
            let owner = Owner::random();
            let hold = view.acquire(&owner, NOW, None).await.unwrap();
            view.acquire(&owner, NOW, None).await.unwrap();
            assert_eq!(
                view.release_fenced(&owner, hold.fencing_token())
                    .await
                    .unwrap(),
                1
            );
            assert!(admin.force_unlock(&format!("lost {read}")).await.unwrap());
            let gone = view.release_fenced(&owner, hold.fencing_token()).await;
            assert!(
                matches!(gone, Err(Error::LockLost)),
                "read={read}: {gone:?}"
            );
            assert!(hold.is_lost());
        }
    })
    .await;
}

/// Two releases of one watched hold at once (two threads of its owner): one ends it, the other
/// finds it not held, as a second release in turn does. It was released, so it is never
/// reported lost. (Before, the second release's "not held" could be handled first and report
/// it lost: LockLost, the callback, `is_lost`.) A hold that really was lost (force-unlocked
/// through another client) is still reported once by such a pair.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_releases_of_one_watched_hold_at_once_never_report_it_lost() {
    limited(60, async {
        let server = RedisServer::start();
        let (client, events) = recording_losses(&server, ms(30_000)).await;
        let admin = connect(&server).await;
        let lock = client.lock("released twice").unwrap();
        let owner = Owner::random();
        for round in 0..300 {
            let force_unlocked = round % 3 == 2;
            let hold = lock.acquire(&owner, NOW, None).await.unwrap();
            if force_unlocked {
                assert!(admin.force_unlock("released twice").await.unwrap());
            }
            let release = || {
                let (lock, owner) = (lock.clone(), owner.clone());
                tokio::spawn(async move { lock.release(&owner).await })
            };
            let (a, b) = (release(), release());
            let outcomes = [a.await.unwrap(), b.await.unwrap()];
            let count = |want: Result<u32, Error>| outcomes.iter().filter(|o| **o == want).count();
            let ended = if force_unlocked {
                Err(Error::LockLost)
            } else {
                Ok(0)
            };
            assert_eq!(
                (count(ended), count(Err(Error::NotHeld)), hold.is_lost()),
                (1, 1, force_unlocked),
                "round {round}: {outcomes:?}"
            );
        }
        tokio::time::sleep(ms(100)).await;
        assert_eq!(
            events.lock().unwrap().len(),
            100,
            "one event per force-unlocked hold"
        );
    })
    .await;
}

/// One renewal call renews up to 500 holds. A key of another type planted where one lock's
/// state was (its hold really ends) makes Redis refuse that hold's commands: only that hold is
/// reported lost, once; the others of its call, exclusive and read holds, stay kept. (Before,
/// the refusal failed the whole call, and every hold after the bad one in it expired.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_of_another_type_loses_its_own_hold_alone() {
    limited(60, async {
        let server = RedisServer::start();
        let lease = ms(600);
        let (client, events) = recording_losses(&server, lease).await;
        let mut holds = Vec::new();
        for i in 0..300 {
            let (name, owner) = (format!("x{i}"), Owner::random());
            let lock = client.lock(&name).unwrap();
            let hold = lock.acquire(&owner, NOW, None).await.unwrap();
            holds.push((name, false, owner, hold));
        }
        for i in 0..150 {
            let name = format!("r{i}");
            let read = client.read_write_lock(&name).unwrap().read();
            for _ in 0..2 {
                let owner = Owner::random();
                let hold = read.acquire(&owner, NOW, None).await.unwrap();
                holds.push((name.clone(), true, owner, hold));
            }
        }
        // x7 comes early in the first call's 500 holds.
        server.command(&["DEL", "redlock:{x7}"]);
        server.command(&["SET", "redlock:{x7}", "planted"]);
        tokio::time::sleep(lease * 4).await; // every hold would have expired unrenewed
        let mut dropped = Vec::new();
        for (name, read, owner, hold) in holds.iter().filter(|h| h.0 != "x7") {
            let rw = client.read_write_lock(name).unwrap();
            let view = if *read { rw.read() } else { rw.write() };
            if hold.is_lost() || !view.is_held_by(owner).await.unwrap() {
                dropped.push(name.clone());
            }
        }
        assert!(dropped.is_empty(), "{} live holds dropped", dropped.len());
        let reported: Vec<String> = events
            .lock()
            .unwrap()
            .iter()
            .map(|e| e.name.clone())
            .collect();
        assert_eq!(reported, ["x7"]);
    })
    .await;
}

/// A tick sends again the calls it built before, for the pages of holds that did not change:
/// holds that come and go between ticks (in full pages and in the last, with room) leave every
/// other hold kept, and the new ones are kept from the next tick on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_that_come_and_go_between_ticks_leave_the_others_kept() {
    limited(90, async {
        let server = RedisServer::start();
        let lease = ms(900);
        let (client, events) = recording_losses(&server, lease).await;
        let mut held: Vec<(Lock, Owner, Hold)> = Vec::new();
        let mut next = 0;
        let mut take = async |held: &mut Vec<(Lock, Owner, Hold)>, count: usize| {
            for _ in 0..count {
                let lock = client.lock(&format!("churn:{next}")).unwrap();
                let owner = Owner::random();
                let hold = lock.acquire(&owner, NOW, None).await.unwrap();
                held.push((lock, owner, hold));
                next += 1;
            }
        };
        take(&mut held, 1_100).await; // two full pages and one with room
        for round in 0..6 {
            just_after_a_tick(&client).await;
            // Every 9th hold leaves (from every page), and new ones join.
            let mut kept = Vec::new();
            for (i, (lock, owner, hold)) in held.into_iter().enumerate() {
                if i % 9 == round % 9 {
                    lock.release(&owner).await.unwrap();
                    assert!(hold.is_lost() || !lock.is_held_by(&owner).await.unwrap());
                } else {
                    kept.push((lock, owner, hold));
                }
            }
            held = kept;
            take(&mut held, 130).await;
        }
        // Only joins: the page with room, its call built at the last tick, takes them.
        just_after_a_tick(&client).await;
        take(&mut held, 40).await;
        assert_eq!(client.watched_holds(), held.len());
        tokio::time::sleep(lease * 3).await; // a hold left out of the calls would have expired
        let mut dropped = 0;
        for (lock, owner, hold) in &held {
            if hold.is_lost() || !lock.is_held_by(owner).await.unwrap() {
                dropped += 1;
            }
        }
        assert_eq!(dropped, 0, "of {} holds", held.len());
        assert!(events.lock().unwrap().is_empty());
    })
    .await;
}
