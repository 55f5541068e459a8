//! Acquires that wait on the runtime instead of a thread (`blocking::Lock::start_acquire`).

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redlock_core::blocking::{CancelToken, Client, Lock, PendingAcquire, Started};
use redlock_core::testing::RedisServer;
use redlock_core::{AcquireOptions, Error, Owner};

const LONG: Duration = Duration::from_secs(10);

fn wait_up_to(wait: Duration) -> AcquireOptions {
    AcquireOptions::new(Some(wait), None)
}

/// A pending acquire of a lock that `holder` holds.
fn pending(lock: &Lock, owner: &Owner, options: AcquireOptions) -> PendingAcquire {
    match lock.start_acquire(owner, options, None, Duration::ZERO) {
        Ok(Started::Waiting(pending)) => pending,
        Ok(Started::Acquired(_)) => panic!("acquired a held lock"),
        Err(e) => panic!("start_acquire failed: {e}"),
    }
}

/// Waits (bounded) until the lock's name has no waiting writer left in Redis.
/// A pending acquire of `waiter` that got `lock` (held by another owner, then released) and
/// whose hold nobody has taken yet.
fn granted_untaken(lock: &Lock, waiter: &Owner) -> PendingAcquire {
    let holder = Owner::random();
    lock.acquire(&holder, None, None).unwrap();
    let (tx, rx) = mpsc::channel();
    let pending = pending(lock, waiter, wait_up_to(LONG));
    pending.on_finished(move || tx.send(()).unwrap());
    lock.release(&holder).unwrap();
    rx.recv_timeout(LONG).expect("no notification");
    pending
}

fn assert_no_waiters_left(lock: &Lock) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while lock.inspect().unwrap().waiting_writers != 0 {
        assert!(Instant::now() < deadline, "a waiter stayed in Redis");
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn an_uncontended_start_acquires_on_the_calling_thread() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).unwrap();
    let lock = client.lock("pending-free").unwrap();
    let me = Owner::random();
    let Started::Acquired(hold) = lock
        .start_acquire(&me, wait_up_to(LONG), None, Duration::ZERO)
        .unwrap()
    else {
        panic!("a free lock was not acquired at once");
    };
    assert_eq!(hold.hold_count(), 1);
    assert!(lock.is_held_by(&me).unwrap());
    assert_eq!(lock.release(&me).unwrap(), 0);
}

#[test]
fn a_waiting_acquire_is_notified_once_and_hands_out_its_hold_once() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).unwrap();
    let lock = client.lock("pending-handoff").unwrap();
    let (holder, waiter) = (Owner::random(), Owner::random());
    lock.acquire(&holder, None, None).unwrap();
    let pending = pending(&lock, &waiter, wait_up_to(LONG));
    let (tx, rx) = mpsc::channel();
    pending.on_finished(move || tx.send(()).unwrap());
    assert_eq!(pending.wait(Duration::ZERO).unwrap().map(|_| ()), None);
    assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
    assert_eq!(lock.inspect().unwrap().waiting_writers, 1);

    lock.release(&holder).unwrap();
    rx.recv_timeout(LONG).expect("no notification");
    let hold = pending.wait(Duration::ZERO).unwrap().expect("no hold");
    assert!(hold.fencing_token() > 0);
    assert!(lock.is_held_by(&waiter).unwrap());
    assert!(matches!(
        pending.wait(Duration::ZERO),
        Err(Error::InvalidArgument(_))
    ));
    // Nothing more fires, and dropping it now leaves the hold with its owner.
    drop(pending);
    assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
    assert!(lock.is_held_by(&waiter).unwrap());
    lock.release(&waiter).unwrap();
}

#[test]
fn a_notification_asked_for_after_the_end_runs_at_once() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).unwrap();
    let lock = client.lock("pending-late-notify").unwrap();
    lock.acquire(&Owner::random(), None, None).unwrap();
    let pending = pending(
        &lock,
        &Owner::random(),
        wait_up_to(Duration::from_millis(100)),
    );
    let outcome = pending.wait(LONG);
    assert_eq!(outcome.map(|_| ()).unwrap_err(), Error::Timeout);
    let (tx, rx) = mpsc::channel();
    pending.on_finished(move || tx.send(thread::current().id()).unwrap());
    assert_eq!(rx.try_recv().unwrap(), thread::current().id());
}

#[test]
fn the_caller_s_cancel_token_ends_a_pending_wait_and_leaves_nothing() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).unwrap();
    let lock = client.lock("pending-cancel").unwrap();
    lock.acquire(&Owner::random(), None, None).unwrap();
    let cancel = CancelToken::new();
    let Started::Waiting(pending) = lock
        .start_acquire(
            &Owner::random(),
            wait_up_to(LONG),
            Some(&cancel),
            Duration::ZERO,
        )
        .unwrap()
    else {
        panic!("acquired a held lock");
    };
    cancel.cancel();
    let outcome = pending.wait(LONG);
    assert_eq!(outcome.map(|_| ()).unwrap_err(), Error::Cancelled);
    assert_no_waiters_left(&lock);
    // A token triggered before the start: no attempt at all.
    let result = lock.start_acquire(&Owner::random(), wait_up_to(LONG), Some(&cancel), LONG);
    assert_eq!(result.map(|_| ()).unwrap_err(), Error::Cancelled);
}

#[test]
fn dropping_a_pending_acquire_cancels_it_and_leaves_nothing() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).unwrap();
    let lock = client.lock("pending-drop").unwrap();
    let holder = Owner::random();
    lock.acquire(&holder, None, None).unwrap();
    let (tx, rx) = mpsc::channel();
    let pending = pending(&lock, &Owner::random(), wait_up_to(LONG));
    pending.on_finished(move || tx.send(()).unwrap());
    drop(pending);
    rx.recv_timeout(LONG)
        .expect("no notification of the cancelled acquire");
    assert_no_waiters_left(&lock);
    assert!(lock.is_held_by(&holder).unwrap());
}

#[test]
fn a_hold_acquired_but_never_taken_is_released_when_the_acquire_is_dropped() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).unwrap();
    let lock = client.lock("pending-untaken").unwrap();
    let waiter = Owner::random();
    let pending = granted_untaken(&lock, &waiter);
    assert!(lock.is_held_by(&waiter).unwrap());
    pending.cancel();
    let deadline = Instant::now() + Duration::from_secs(5);
    while lock.is_locked().unwrap() {
        assert!(Instant::now() < deadline, "the untaken hold stayed");
        thread::sleep(Duration::from_millis(20));
    }
    // Given up: asking for the outcome now says so.
    assert!(matches!(
        pending.wait(Duration::ZERO),
        Err(Error::Cancelled)
    ));
}

/// Giving up an acquire whose hold nobody took, after that hold ended (its lease ran out) and
/// the owner (another thread sharing it) took a new one, leaves the new hold alone: the give-up
/// releases the hold it got, by its fencing token.
#[test]
fn giving_up_an_untaken_hold_that_ended_leaves_the_owners_newer_hold() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).unwrap();
    for cancel in [true, false] {
        let lock = client.lock(&format!("pending-ended-{cancel}")).unwrap();
        let (holder, waiter, other) = (Owner::random(), Owner::random(), Owner::random());
        lock.acquire(&holder, None, None).unwrap();
        let (tx, rx) = mpsc::channel();
        let short = AcquireOptions::new(Some(LONG), Some(Duration::from_millis(300)));
        let pending = pending(&lock, &waiter, short);
        pending.on_finished(move || tx.send(()).unwrap());
        lock.release(&holder).unwrap();
        rx.recv_timeout(LONG).expect("no notification");
        while lock.is_held_by(&waiter).unwrap() {
            thread::sleep(Duration::from_millis(20)); // the untaken hold's lease runs out
        }
        lock.acquire(&waiter, Some(Duration::ZERO), None).unwrap();
        if cancel {
            pending.cancel();
        } else {
            drop(pending);
        }
        thread::sleep(Duration::from_millis(300)); // the give-up runs on the runtime
        assert_eq!(lock.hold_count(&waiter).unwrap(), 1, "cancel {cancel}");
        let other_got = lock.try_acquire(&other, None).unwrap();
        assert!(other_got.is_none(), "cancel {cancel}: another owner got in");
        lock.release(&waiter).unwrap();
    }
}

/// The give-up's release of an untaken hold runs on the runtime, but the owner's next acquire
/// waits for it: before, that acquire reached Redis first and re-entered the hold given up
/// (count 2, and the hold ended one release early), in 18 of 20 rounds.
#[test]
fn an_acquire_after_giving_up_an_untaken_hold_is_a_new_hold() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).unwrap();
    for round in 0..10 {
        let lock = client.lock(&format!("pending-given-up-{round}")).unwrap();
        let waiter = Owner::random();
        let pending = granted_untaken(&lock, &waiter);
        if round % 2 == 0 {
            pending.cancel();
        } else {
            drop(pending);
        }
        let again = lock.acquire(&waiter, Some(LONG), None).unwrap();
        assert_eq!(
            again.hold_count(),
            1,
            "round {round}: re-entered the given-up hold"
        );
        assert_eq!(lock.release(&waiter).unwrap(), 0, "round {round}");
        assert!(
            matches!(lock.release(&waiter), Err(Error::NotHeld)),
            "round {round}"
        );
    }
}

#[test]
fn a_first_wait_long_enough_acquires_on_the_calling_thread() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).unwrap();
    let lock = client.lock("pending-first-wait").unwrap();
    lock.acquire(&Owner::random(), None, Some(Duration::from_millis(200)))
        .unwrap();
    let started = lock
        .start_acquire(&Owner::random(), wait_up_to(LONG), None, LONG)
        .unwrap();
    assert!(matches!(started, Started::Acquired(_)));
}

#[test]
fn many_waits_hold_no_thread_and_each_gets_the_lock_in_turn() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).unwrap();
    let lock = client.lock("pending-many").unwrap();
    let holder = Owner::random();
    lock.acquire(&holder, None, None).unwrap();
    // All from this one thread: none of them blocks it.
    let waiters: Vec<_> = (0..50)
        .map(|_| {
            let owner = Owner::random();
            let pending = pending(&lock, &owner, wait_up_to(Duration::from_secs(60)));
            (owner, pending)
        })
        .collect();
    // Released at once, maybe before the client listens for grants: the queue keeps its order.
    lock.release(&holder).unwrap();
    for (owner, pending) in &waiters {
        let hold = pending
            .wait(LONG)
            .unwrap()
            .expect("the next in arrival order");
        assert!(lock.is_held_by(owner).unwrap());
        assert_eq!(hold.hold_count(), 1);
        lock.release(owner).unwrap();
    }
    assert!(!lock.is_locked().unwrap());
}

#[test]
fn a_closed_client_refuses_to_start() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).unwrap();
    let lock = client.lock("pending-closed").unwrap();
    client.close();
    let result = lock.start_acquire(&Owner::random(), wait_up_to(LONG), None, Duration::ZERO);
    assert_eq!(result.map(|_| ()).unwrap_err(), Error::Closed);
}
