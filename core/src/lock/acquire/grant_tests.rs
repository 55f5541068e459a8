//! Grants to waiters whose client listens but which never take them: claimed by a later
//! attempt, given back by a withdrawal; waiters whose client is gone, which get none; and a
//! readers' turn, which no grant cuts short.
//! (A live waiter's grant is covered by `tests/grants.rs`.)
use super::*;
use crate::Client;
use crate::testing::RedisServer;

mod scale;

/// A pub/sub connection on the grant channel of the waiter ids `CLIENT-…` of `lock`: a
/// client that is alive (Redis counts it as hearing its grants) but does not act on them.
async fn listening(server: &RedisServer, lock: &Lock, client: &str) -> redis::aio::PubSub {
    let mut pubsub = redis::Client::open(server.url())
        .unwrap()
        .get_async_pubsub()
        .await
        .unwrap();
    let channel = format!("{}:{client}", lock.keys.channel());
    pubsub.subscribe(channel).await.unwrap();
    pubsub
}

/// A throwaway server and a client's lock `name`, with the client "gone" alive on the
/// lock's grant channel (see `listening`).
struct Fixture {
    lock: Lock,
    _alive: redis::aio::PubSub,
    client: Client,
    server: RedisServer, // last: dropped after the connections to it
}

impl Fixture {
    async fn new(name: &str) -> Fixture {
        let server = RedisServer::start();
        let client = Client::connect(&server.url()).await.unwrap();
        let lock = client.lock(name).unwrap();
        let alive = listening(&server, &lock, "gone").await;
        Fixture {
            lock,
            _alive: alive,
            client,
            server,
        }
    }

    /// The read view of the same lock.
    fn read_view(&self) -> Lock {
        let name = self.lock.keys.name.clone();
        self.client.read_write_lock(&name).unwrap().read()
    }
}

fn announced_attempt<'a>(owner: &'a Owner, waiter: &'a str) -> AttemptArgs<'a> {
    AttemptArgs {
        owner,
        lease_ms: 10_000,
        label: None,
        watched: false,
        announce_ms: 10_000,
        waiter,
    }
}

/// An attempt of `waiter` (owner `token`) that finds the lock held and announces it, made
/// as by a process that then never looks again.
async fn announce(lock: &Lock, token: &str, waiter: &str, announce_ms: u64) {
    let attempt = attempt_for(lock, &owner(token), waiter, announce_ms).await;
    assert!(matches!(attempt, Attempt::Busy { .. }));
}

/// An attempt of `owner`'s waiter `waiter`, announced for `announce_ms`; the waiter stays
/// announced (it is not withdrawn when this returns).
async fn attempt_for(lock: &Lock, owner: &Owner, waiter: &str, announce_ms: u64) -> Attempt {
    let mut announcement = Announcement::new(lock, owner, waiter);
    let args = AttemptArgs {
        announce_ms,
        ..announced_attempt(owner, waiter)
    };
    let attempt = lock.attempt(&args, &mut announcement).await.unwrap();
    announcement.disarm();
    attempt
}

/// The owner of `token`.
fn owner(token: &str) -> Owner {
    Owner::from_token(token).unwrap()
}

/// `owner` takes `lock` at once, for 10 s.
async fn hold_now(lock: &Lock, owner: &Owner) {
    lock.acquire(owner, Some(Duration::ZERO), Some(Duration::from_secs(10)))
        .await
        .unwrap();
}

/// An attempt of `owner`'s waiter `waiter`, announced for 10 s (see `attempt_for`).
async fn attempt_as(lock: &Lock, owner: &Owner, waiter: &str) -> Attempt {
    attempt_for(lock, owner, waiter, 10_000).await
}

/// A holder takes `lock` at once for 50 ms (let it run out with `until_free`).
async fn hold_briefly(lock: &Lock) {
    let lease = Some(Duration::from_millis(50));
    lock.acquire(&Owner::random(), Some(Duration::ZERO), lease)
        .await
        .unwrap();
}

/// Until nobody holds `lock`.
async fn until_free(lock: &Lock) {
    while lock.is_locked().await.unwrap() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A waiter of this client acquiring `lock` in a task, returned once Redis shows it queued
/// behind `ahead` other waiting writers.
async fn live_waiter(lock: &Lock, ahead: u64) -> (Owner, tokio::task::JoinHandle<Result<Hold>>) {
    let next = Owner::random();
    let waiting = {
        let (lock, next) = (lock.clone(), next.clone());
        let wait = Some(Duration::from_secs(10));
        tokio::spawn(async move { lock.acquire(&next, wait, wait).await })
    };
    while lock.inspect().await.unwrap().waiting_writers < ahead + 1 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    (next, waiting)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_is_claimed_once_and_given_back_by_a_waiter_that_left() {
    let fixture = Fixture::new("grants").await;
    let (server, lock) = (&fixture.server, fixture.lock.clone());
    let holder = Owner::random();
    hold_now(&lock, &holder).await;

    // Two waiters (of a live process that will not take their grants) queue in this order.
    let (x, y) = (owner("x"), owner("y"));
    announce(&lock, "x", "gone-1:x", 10_000).await;
    announce(&lock, "y", "gone-2:y", 10_000).await;
    assert_eq!(lock.inspect().await.unwrap().waiting_writers, 2);

    // The release grants the lock to the first waiter, with a new fencing token.
    lock.release(&holder).await.unwrap();
    assert_eq!(lock.hold_count(&x).await.unwrap(), 1);
    let info = lock.inspect().await.unwrap();
    assert_eq!(info.waiting_writers, 1);
    assert_eq!(info.holders[0].owner_token, "x");

    // Its next attempt claims the grant: the same single hold, not a re-entry.
    let claimed = attempt_as(&lock, &x, "gone-1:x").await;
    assert!(matches!(claimed, Attempt::Acquired { count: 1, .. }));
    assert_eq!(lock.hold_count(&x).await.unwrap(), 1);
    // A claimed grant is a hold like any other: withdrawing the (finished) waiter keeps it.
    withdraw(&lock, "x", "gone-1:x").await.unwrap();
    assert_eq!(lock.hold_count(&x).await.unwrap(), 1);

    // Released, it goes to the second waiter, which gave up before hearing: its withdrawal
    // gives the lock back, and with nobody else waiting the name leaves no key behind.
    lock.release(&x).await.unwrap();
    assert_eq!(lock.hold_count(&y).await.unwrap(), 1);
    withdraw(&lock, "y", "gone-2:y").await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
    let keys = server.command(&["KEYS", "*"]);
    assert!(
        !keys.contains("grants"),
        "keys left behind after the last waiter left: {keys}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_waiter_that_left_passes_the_lock_to_the_next() {
    let fixture = Fixture::new("grants").await;
    let lock = fixture.lock.clone();
    let holder = Owner::random();
    hold_now(&lock, &holder).await;
    announce(&lock, "gone", "gone-1:gone", 10_000).await;
    // A live waiter of this client queues behind it.
    let (next, waiting) = live_waiter(&lock, 1).await;
    lock.release(&holder).await.unwrap();
    let gone = owner("gone");
    assert_eq!(lock.hold_count(&gone).await.unwrap(), 1);
    withdraw(&lock, "gone", "gone-1:gone").await.unwrap();
    let hold = waiting.await.unwrap().unwrap();
    assert_eq!(hold.hold_count(), 1);
    assert!(lock.is_held_by(&next).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_whose_announcement_ran_out_is_not_granted_the_lock() {
    let fixture = Fixture::new("grants").await;
    let (server, lock) = (&fixture.server, fixture.lock.clone());
    let holder = Owner::random();
    hold_now(&lock, &holder).await;
    // Long enough to be seen live by the next call on a loaded machine (20 ms was not).
    announce(&lock, "gone", "gone-1:gone", 400).await;
    assert_eq!(lock.inspect().await.unwrap().waiting_writers, 1);
    tokio::time::sleep(Duration::from_millis(450)).await;
    // Run out, it no longer counts as waiting, although it is still in the queue.
    assert_eq!(lock.inspect().await.unwrap().waiting_writers, 0);
    lock.release(&holder).await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
    let keys = server.command(&["KEYS", "*"]);
    assert!(!keys.contains("grants"), "keys left behind: {keys}");
}

/// Announcements that ran out hold nobody back: a lock that became free by expiry, whose
/// queue still exists but holds only a stale announcement, is taken at once by a newcomer's
/// single attempt, and the stale entry goes with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_of_run_out_announcements_does_not_hold_back_a_newcomer() {
    let fixture = Fixture::new("stale").await;
    let (server, lock) = (&fixture.server, fixture.lock.clone());
    let holder = Owner::random();
    lock.acquire(
        &holder,
        Some(Duration::ZERO),
        Some(Duration::from_millis(80)),
    )
    .await
    .unwrap();
    announce(&lock, "gone", "gone-1:gone", 20).await;
    // A longer announcement, withdrawn: the queue lives on with only the short one in it.
    announce(&lock, "later", "gone-2:later", 10_000).await;
    withdraw(&lock, "later", "gone-2:later").await.unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    let queue = lock.keys.waiting_writers().to_string();
    assert_eq!(server.command(&["ZCARD", &queue]).trim(), ":1");
    assert!(!lock.is_locked().await.unwrap());

    let newcomer = Owner::random();
    let hold = lock
        .acquire(
            &newcomer,
            Some(Duration::ZERO),
            Some(Duration::from_secs(10)),
        )
        .await
        .unwrap();
    assert_eq!(hold.hold_count(), 1);
    assert_eq!(server.command(&["EXISTS", &queue]).trim(), ":0");
    assert_eq!(lock.inspect().await.unwrap().waiting_writers, 0);
}

/// A readers' turn is not cut short: when the first of its readers is in and out before
/// the second comes, the lock waits for that reader instead of going to the writer queued
/// behind them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_reader_out_does_not_end_the_readers_turn_with_a_grant() {
    let fixture = Fixture::new("turn").await;
    let (write, read) = (fixture.lock.clone(), fixture.read_view());
    let holder = Owner::random();
    hold_now(&write, &holder).await;
    announce(&read, "r1", "gone-1:r1", 10_000).await;
    announce(&read, "r2", "gone-2:r2", 10_000).await;
    announce(&write, "w", "gone-3:w", 10_000).await;
    let (r1, r2, w) = (owner("r1"), owner("r2"), owner("w"));

    // The writer's release gives the readers that waited their turn; each comes back as the
    // call that waited (a reader is announced per call, not per owner).
    write.release(&holder).await.unwrap();
    let attempt = attempt_as(&read, &r1, "gone-1:r1").await;
    assert!(matches!(attempt, Attempt::Acquired { .. }));
    read.release(&r1).await.unwrap();
    assert_eq!(write.hold_count(&w).await.unwrap(), 0);
    assert!(!write.is_locked().await.unwrap());

    // The turn ends with its last reader in; its release grants the lock to the writer.
    let attempt = attempt_as(&read, &r2, "gone-2:r2").await;
    assert!(matches!(attempt, Attempt::Acquired { .. }));
    read.release(&r2).await.unwrap();
    assert_eq!(write.hold_count(&w).await.unwrap(), 1);
}

/// A grant given back (its waiter gave up before hearing) is handed on as the write's release
/// would have been: readers that waited through it have their turn before the next writer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_given_back_while_readers_wait_gives_them_their_turn() {
    let fixture = Fixture::new("give-back").await;
    let (write, read) = (fixture.lock.clone(), fixture.read_view());
    let holder = Owner::random();
    hold_now(&write, &holder).await;
    announce(&write, "x", "gone-1:x", 10_000).await;
    announce(&write, "y", "gone-2:y", 10_000).await;
    let (x, y, r) = (owner("x"), owner("y"), owner("r"));

    // Granted to x, which has not heard yet; a reader comes and waits behind it.
    write.release(&holder).await.unwrap();
    assert_eq!(write.hold_count(&x).await.unwrap(), 1);
    announce(&read, "r", "gone-3:r", 10_000).await;

    // x gives up: the reader's turn, not y's grant.
    withdraw(&write, "x", "gone-1:x").await.unwrap();
    assert_eq!(write.hold_count(&y).await.unwrap(), 0);
    let attempt = attempt_as(&read, &r, "gone-3:r").await;
    assert!(matches!(attempt, Attempt::Acquired { .. }));
    read.release(&r).await.unwrap();
    assert_eq!(write.hold_count(&y).await.unwrap(), 1);
}

/// A process that crashed while announced as waiting must not be handed the lock for a
/// whole lease: its client no longer listens, so the grant goes to the next waiter, or
/// nobody. (Each waiter here announced itself twice: it had been waiting, so listening.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_whose_client_is_gone_is_not_granted_the_lock() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let lock = client.lock("grants").unwrap();
    let holder = Owner::random();

    // Alone in the queue: the release leaves the lock free and the queue empty.
    hold_now(&lock, &holder).await;
    announce(&lock, "gone", "crashed-1:gone", 10_000).await;
    announce(&lock, "gone", "crashed-1:gone", 10_000).await;
    lock.release(&holder).await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
    assert_eq!(lock.inspect().await.unwrap().waiting_writers, 0);

    // Ahead of a live waiter of this client: the live one gets it, by grant.
    hold_now(&lock, &holder).await;
    announce(&lock, "gone", "crashed-2:gone", 10_000).await;
    announce(&lock, "gone", "crashed-2:gone", 10_000).await;
    let (next, waiting) = live_waiter(&lock, 1).await;
    lock.release(&holder).await.unwrap();
    let gone = owner("gone");
    assert_eq!(lock.hold_count(&gone).await.unwrap(), 0);
    let hold = waiting.await.unwrap().unwrap();
    assert_eq!(hold.hold_count(), 1);
    assert!(lock.is_held_by(&next).await.unwrap());
    assert_eq!(lock.inspect().await.unwrap().waiting_writers, 0);
}

/// A writer's release skips the waiting sets only when its hold was taken by acquire.lua's
/// fast path and nobody queued since (H's flag 'q'): holds made any other way while others
/// wait must hand the lock on down the queue. Here a grant after the last reader left, and a
/// queue head that took a lock freed by expiry; each time the next writer must hold the lock
/// as soon as the release returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_that_got_in_while_others_queued_hand_the_lock_down_the_queue() {
    let fixture = Fixture::new("queue").await;
    let (write, read) = (fixture.lock.clone(), fixture.read_view());
    let (reader, a, b, c) = (Owner::random(), owner("a"), owner("b"), owner("c"));

    // Granted when the last reader leaves: nobody held the lock as a writer while they queued.
    hold_now(&read, &reader).await;
    announce(&write, "a", "gone-1:a", 10_000).await;
    announce(&write, "b", "gone-2:b", 10_000).await;
    read.release(&reader).await.unwrap();
    assert_eq!(write.hold_count(&a).await.unwrap(), 1);
    write.release(&a).await.unwrap();
    assert_eq!(write.hold_count(&b).await.unwrap(), 1);
    write.release(&b).await.unwrap();
    assert!(!write.is_locked().await.unwrap());

    // Taken by the queue's head itself, from a lock freed by its lease running out.
    hold_briefly(&write).await;
    announce(&write, "a", "gone-3:a", 10_000).await;
    announce(&write, "c", "gone-4:c", 10_000).await;
    until_free(&write).await;
    let taken = attempt_as(&write, &a, "gone-3:a").await;
    assert!(matches!(taken, Attempt::Acquired { count: 1, .. }));
    write.release(&a).await.unwrap();
    assert_eq!(write.hold_count(&c).await.unwrap(), 1);
}

/// A waiter subscribes after its first attempt, so a release may come before its client
/// listens. Announced only once, it keeps its place: the lock stays free for it (a newcomer
/// queues behind), and a queued waiter that finds the lock free hands it to the first in the
/// queue instead of taking it out of turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_not_listening_yet_keeps_its_place_in_the_queue() {
    let fixture = Fixture::new("not-yet").await;
    let (server, lock) = (&fixture.server, fixture.lock.clone());
    let holder = Owner::random();
    hold_now(&lock, &holder).await;
    announce(&lock, "a", "late-1:a", 10_000).await;
    announce(&lock, "b", "late-2:b", 10_000).await;
    let (a, b) = (owner("a"), owner("b"));

    // Nobody listens: no grant, the queue as it was.
    lock.release(&holder).await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
    assert_eq!(lock.inspect().await.unwrap().waiting_writers, 2);
    let newcomer = Owner::random();
    let refused = lock
        .acquire(
            &newcomer,
            Some(Duration::ZERO),
            Some(Duration::from_secs(10)),
        )
        .await;
    assert_eq!(refused.unwrap_err(), Error::Timeout);

    // Listening now, the second waiter looks first: the first is handed the lock.
    let _late = listening(server, &lock, "late").await;
    let looked = attempt_as(&lock, &b, "late-2:b").await;
    assert!(matches!(looked, Attempt::Busy { .. }));
    assert_eq!(lock.hold_count(&a).await.unwrap(), 1);
    assert_eq!(lock.hold_count(&b).await.unwrap(), 0);

    // The first claims its grant; its release grants the lock to the second.
    let claimed = attempt_as(&lock, &a, "late-1:a").await;
    assert!(matches!(claimed, Attempt::Acquired { count: 1, .. }));
    lock.release(&a).await.unwrap();
    assert_eq!(lock.hold_count(&b).await.unwrap(), 1);
}

/// `PUBLISH` calls the server has run so far (inside scripts too).
fn publishes(server: &RedisServer) -> u64 {
    let stats = server.command(&["INFO", "commandstats"]);
    stats
        .lines()
        .find_map(|line| line.strip_prefix("cmdstat_publish:calls="))
        .map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
}

/// A queued writer that finds the lock free while the queue's head does not listen yet is
/// handed the lock in its own attempt's reply: held at once, whether its client listens or
/// not, and no grant message is published to it (the one `PUBLISH` is the head's, unheard).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_writer_that_hands_the_lock_to_itself_holds_it_without_a_message() {
    let fixture = Fixture::new("to-itself").await;
    let (server, lock) = (&fixture.server, fixture.lock.clone());
    let holder = Owner::random();
    hold_now(&lock, &holder).await;
    announce(&lock, "a", "late-1:a", 10_000).await;
    announce(&lock, "b", "quiet-2:b", 10_000).await;
    let (a, b) = (owner("a"), owner("b"));
    // Nobody listens: the lock is left free, both keep their places.
    lock.release(&holder).await.unwrap();
    assert!(!lock.is_locked().await.unwrap());

    // Its client not listening either, the second takes the lock passed over by the first.
    let before = publishes(server);
    let taken = attempt_as(&lock, &b, "quiet-2:b").await;
    assert!(matches!(taken, Attempt::Acquired { count: 1, .. }));
    assert_eq!(publishes(server), before + 1, "the head's grant only");
    assert_eq!(lock.inspect().await.unwrap().waiting_writers, 1);
    // Its release finds nobody listening; the first, the queue's head, then takes it itself.
    lock.release(&b).await.unwrap();
    let taken = attempt_as(&lock, &a, "late-1:a").await;
    assert!(matches!(taken, Attempt::Acquired { count: 1, .. }));
    lock.release(&a).await.unwrap();

    // A listening client ("gone") is not sent its own grant either: the lease runs out.
    hold_briefly(&lock).await;
    announce(&lock, "a", "late-3:a", 10_000).await;
    announce(&lock, "c", "gone-4:c", 10_000).await;
    let c = owner("c");
    until_free(&lock).await;
    let before = publishes(server);
    let taken = attempt_as(&lock, &c, "gone-4:c").await;
    assert!(matches!(taken, Attempt::Acquired { count: 1, .. }));
    assert_eq!(publishes(server), before + 1, "the head's grant only");
    lock.release(&c).await.unwrap();
}

/// A waiter that never listens holds nobody back for longer than its first announcement:
/// passed over by every grant meanwhile, then dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_that_never_listens_is_passed_over_then_dropped() {
    let fixture = Fixture::new("never").await;
    let (server, lock) = (&fixture.server, fixture.lock.clone());
    let holder = Owner::random();
    hold_now(&lock, &holder).await;
    announce(&lock, "mute", "mute-1:mute", 300).await;
    announce(&lock, "x", "gone-2:x", 10_000).await;
    announce(&lock, "y", "gone-3:y", 10_000).await;
    let (x, y) = (owner("x"), owner("y"));

    // Passed over: the grant goes to the next, and the mute waiter keeps its place.
    lock.release(&holder).await.unwrap();
    assert_eq!(lock.hold_count(&x).await.unwrap(), 1);
    assert_eq!(lock.inspect().await.unwrap().waiting_writers, 2);
    withdraw(&lock, "x", "gone-2:x").await.unwrap();
    assert_eq!(lock.hold_count(&y).await.unwrap(), 1);
    assert_eq!(lock.inspect().await.unwrap().waiting_writers, 1);
    withdraw(&lock, "y", "gone-3:y").await.unwrap();

    // Its announcement over, it is gone, and so is every key of the name.
    assert!(!lock.is_locked().await.unwrap());
    tokio::time::sleep(Duration::from_millis(400)).await;
    let newcomer = Owner::random();
    hold_now(&lock, &newcomer).await;
    lock.release(&newcomer).await.unwrap();
    let keys = server.command(&["KEYS", "*"]);
    assert!(!keys.contains("never"), "keys left behind: {keys}");
}

/// A lock freed by its lease running out, found by a writer behind the queue's head: it goes
/// to the head (whose client listens), as a release would have handed it on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_that_finds_an_expired_lock_hands_it_to_the_first_in_the_queue() {
    let fixture = Fixture::new("expired").await;
    let lock = fixture.lock.clone();
    hold_briefly(&lock).await;
    announce(&lock, "a", "gone-1:a", 10_000).await;
    announce(&lock, "a", "gone-1:a", 10_000).await;
    announce(&lock, "c", "gone-2:c", 10_000).await;
    let (a, c) = (owner("a"), owner("c"));
    until_free(&lock).await;
    let found = attempt_as(&lock, &c, "gone-2:c").await;
    assert!(matches!(found, Attempt::Busy { .. }));
    assert_eq!(lock.hold_count(&a).await.unwrap(), 1);
    assert_eq!(lock.hold_count(&c).await.unwrap(), 0);
    withdraw(&lock, "a", "gone-1:a").await.unwrap();
    assert_eq!(lock.hold_count(&c).await.unwrap(), 1);
}

/// The same for a reader: it queues behind the waiting writer, which is handed the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_finds_an_expired_lock_hands_it_to_the_waiting_writer() {
    let fixture = Fixture::new("expired-read").await;
    let (write, read) = (fixture.lock.clone(), fixture.read_view());
    hold_briefly(&write).await;
    announce(&write, "w", "gone-1:w", 10_000).await;
    until_free(&write).await;
    let r = owner("r");
    let found = attempt_as(&read, &r, "gone-2:r").await;
    assert!(matches!(found, Attempt::Busy { .. }));
    assert_eq!(write.hold_count(&owner("w")).await.unwrap(), 1);
    assert_eq!(read.hold_count(&r).await.unwrap(), 0);
}

/// A long run of waiters passed over (read a hundred at a time): those not listening yet keep
/// their places and order, those whose client is gone leave, and the first that listens after
/// them gets the lock: from the release when it is among the first 200 passed over, else (a
/// script blocks the whole server: no script walks them all) by its own attempts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_run_of_waiters_passed_over_keeps_its_order() {
    let fixture = Fixture::new("long-run").await;
    let (server, lock) = (&fixture.server, fixture.lock.clone());
    let holder = Owner::random();
    hold_now(&lock, &holder).await;
    let mut kept = Vec::new();
    for i in 0..250 {
        let (token, waiter) = (format!("t{i}"), format!("deaf-{i}:t{i}"));
        announce(&lock, &token, &waiter, 10_000).await;
        if i % 3 == 1 {
            // Announced again: it had subscribed, so its client is gone.
            announce(&lock, &token, &waiter, 10_000).await;
        } else {
            kept.push(waiter);
        }
    }
    announce(&lock, "x", "gone-1:x", 10_000).await;

    lock.release(&holder).await.unwrap();
    let x = owner("x");
    assert_eq!(
        lock.hold_count(&x).await.unwrap(),
        0,
        "passed over 200, no more"
    );
    let mut attempts = 0;
    while lock.hold_count(&x).await.unwrap() == 0 {
        attempts += 1;
        assert!(attempts <= 2, "x's attempts pass over 200 waiters each");
        let _ = attempt_as(&lock, &x, "gone-1:x").await;
    }
    let queue = lock.keys.waiting_writers().to_string();
    let order = server.command(&["ZRANGE", &queue, "0", "-1"]);
    let order: Vec<&str> = order
        .lines()
        .filter(|l| !l.starts_with(['*', '$']))
        .collect();
    assert_eq!(order, kept);
    assert_eq!(
        lock.inspect().await.unwrap().waiting_writers,
        kept.len() as u64
    );
}
