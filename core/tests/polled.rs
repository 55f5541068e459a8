//! Calls polled by the caller's own loop (`blocking::Lock::acquire_polled`/`release_polled`),
//! driven here as a foreign loop would: poll, sleep until the waker fires, poll again.

use std::sync::{Arc, Condvar, Mutex};
use std::task::{Poll, Wake, Waker};
use std::thread;
use std::time::{Duration, Instant};

use redlock_core::blocking::{Client, Lock, Polled};
use redlock_core::testing::RedisServer;
use redlock_core::{AcquireOptions, Error, Owner};

const LONG: Duration = Duration::from_secs(10);

/// A waker that a plain thread can sleep on, as an event loop sleeps on its descriptor.
#[derive(Default)]
struct Alarm {
    rung: Mutex<bool>,
    bell: Condvar,
}

impl Wake for Alarm {
    fn wake(self: Arc<Self>) {
        *self.rung.lock().unwrap() = true;
        self.bell.notify_all();
    }
}

impl Alarm {
    /// Sleeps until woken or `timeout` passes; true when woken (and re-arms).
    fn sleep(&self, timeout: Duration) -> bool {
        let rung = self.rung.lock().unwrap();
        let (mut rung, _) = self
            .bell
            .wait_timeout_while(rung, timeout, |r| !*r)
            .unwrap();
        std::mem::replace(&mut *rung, false)
    }
}

/// Polls `call` until it is ready, sleeping between polls until woken; panics after `LONG`.
/// Returns the outcome and how many polls it took.
fn drive<T: Send + 'static>(call: &Polled<T>) -> (Result<T, Error>, usize) {
    let alarm = Arc::new(Alarm::default());
    let waker = Waker::from(alarm.clone());
    let deadline = Instant::now() + LONG;
    for polls in 1.. {
        if let Poll::Ready(outcome) = call.poll(&waker) {
            return (outcome, polls);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(alarm.sleep(left), "a pending call was never woken");
    }
    unreachable!()
}

fn wait_up_to(wait: Duration) -> AcquireOptions {
    AcquireOptions::new(Some(wait), None)
}

fn setup(name: &str) -> (RedisServer, Client, Lock) {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).unwrap();
    let lock = client.lock(name).unwrap();
    (server, client, lock)
}

/// Waits (bounded) until `done` holds.
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !done() {
        assert!(Instant::now() < deadline, "never: {what}");
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn an_uncontended_cycle_completes_on_the_polling_thread_and_hands_out_once() {
    let (_server, _client, lock) = setup("polled-free");
    let me = Owner::random();
    for round in 0..5 {
        let acquire = lock.acquire_polled(&me, wait_up_to(LONG)).unwrap();
        let (hold, polls) = drive(&acquire);
        let hold = hold.unwrap();
        // The request is written by the first poll, the reply read by a later one: no more.
        // Once the client is warm (a connection of its own, the script loaded), the request is
        // written by the first poll and the reply read by the next: nothing else wakes it.
        assert!(
            round == 0 || polls <= 3,
            "{polls} polls for an uncontended acquire"
        );
        assert_eq!(hold.hold_count(), 1);
        assert!(lock.is_held_by(&me).unwrap());
        let again = acquire.poll(Waker::noop());
        assert!(matches!(again, Poll::Ready(Err(Error::InvalidArgument(_)))));

        let release = lock.release_polled(&me).unwrap();
        let (left, polls) = drive(&release);
        assert_eq!(left.unwrap(), 0);
        assert!(round == 0 || polls <= 3, "{polls} polls for a release");
        assert!(!lock.is_locked().unwrap());
        let again = release.poll(Waker::noop());
        assert!(matches!(again, Poll::Ready(Err(Error::InvalidArgument(_)))));
    }
}

#[test]
fn reentrant_holds_count_up_and_down() {
    let (_server, _client, lock) = setup("polled-reentrant");
    let me = Owner::random();
    for count in 1..=3 {
        let hold = drive(&lock.acquire_polled(&me, wait_up_to(LONG)).unwrap()).0;
        assert_eq!(hold.unwrap().hold_count(), count);
    }
    for left in (0..3).rev() {
        assert_eq!(drive(&lock.release_polled(&me).unwrap()).0.unwrap(), left);
    }
}

#[test]
fn a_waiting_acquire_is_woken_by_the_release_and_gets_the_lock() {
    let (_server, client, lock) = setup("polled-handoff");
    let (holder, waiter) = (Owner::random(), Owner::random());
    lock.acquire(&holder, None, None).unwrap();
    let acquire = lock.acquire_polled(&waiter, wait_up_to(LONG)).unwrap();
    let releaser = {
        let lock = client.lock("polled-handoff").unwrap();
        let holder = holder.clone();
        thread::spawn(move || {
            eventually("the waiter announced itself", || {
                lock.inspect().unwrap().waiting_writers == 1
            });
            lock.release(&holder).unwrap();
        })
    };
    let hold = drive(&acquire).0.unwrap();
    releaser.join().unwrap();
    assert!(hold.fencing_token() > 0);
    assert!(lock.is_held_by(&waiter).unwrap());
    lock.release(&waiter).unwrap();
}

#[test]
fn a_try_of_a_held_lock_times_out_and_a_wait_that_runs_out_too() {
    let (_server, _client, lock) = setup("polled-timeout");
    let (holder, other) = (Owner::random(), Owner::random());
    lock.acquire(&holder, None, None).unwrap();
    let tried = lock
        .acquire_polled(&other, wait_up_to(Duration::ZERO))
        .unwrap();
    assert_eq!(drive(&tried).0.unwrap_err(), Error::Timeout);
    let waited = lock
        .acquire_polled(&other, wait_up_to(Duration::from_millis(100)))
        .unwrap();
    assert_eq!(drive(&waited).0.unwrap_err(), Error::Timeout);
    assert_eq!(lock.inspect().unwrap().waiting_writers, 0);
    assert!(lock.is_held_by(&holder).unwrap());
}

#[test]
fn giving_up_a_waiting_acquire_leaves_nothing_in_redis() {
    let server = RedisServer::start();
    // Announcements last four re-check intervals: here long enough that only the withdrawal
    // of a given-up acquire, not an expiry, can clear it within the test.
    let builder =
        redlock_core::Client::builder(server.url()).recheck_interval(Duration::from_secs(60));
    let client = Client::from_builder(builder).unwrap();
    let lock = client.lock("polled-abandon").unwrap();
    let (holder, waiter) = (Owner::random(), Owner::random());
    lock.acquire(&holder, None, None).unwrap();
    for abandon_first in [true, false] {
        let acquire = lock.acquire_polled(&waiter, wait_up_to(LONG)).unwrap();
        assert!(acquire.poll(Waker::noop()).is_pending());
        eventually("the waiter announced itself", || {
            lock.inspect().unwrap().waiting_writers == 1
        });
        if abandon_first {
            acquire.abandon();
            eventually("the abandoned waiter withdrew", || {
                lock.inspect().unwrap().waiting_writers == 0
            });
            let polled = acquire.poll(Waker::noop());
            assert!(matches!(
                polled,
                Poll::Ready(Err(Error::InvalidArgument(_)))
            ));
        }
        drop(acquire);
        eventually("the dropped waiter withdrew", || {
            lock.inspect().unwrap().waiting_writers == 0
        });
    }
    lock.release(&holder).unwrap();
    // Nobody was granted the lock on the way out.
    assert!(!lock.is_locked().unwrap());
}

#[test]
fn a_release_given_up_after_its_request_was_sent_still_completes() {
    let (_server, _client, lock) = setup("polled-release-abandon");
    let me = Owner::random();
    for _ in 0..20 {
        lock.acquire(&me, None, None).unwrap();
        let release = lock.release_polled(&me).unwrap();
        let _ = release.poll(Waker::noop());
        drop(release);
        eventually("the release completed", || !lock.is_locked().unwrap());
    }
}

#[test]
fn errors_come_as_outcomes() {
    let (_server, client, lock) = setup("polled-errors");
    let (me, stranger) = (Owner::random(), Owner::random());
    let release = lock.release_polled(&stranger).unwrap();
    assert_eq!(drive(&release).0.unwrap_err(), Error::NotHeld);
    drive(&lock.acquire_polled(&me, wait_up_to(LONG)).unwrap())
        .0
        .unwrap();
    assert_eq!(
        drive(&lock.release_polled(&stranger).unwrap())
            .0
            .unwrap_err(),
        Error::NotHeld
    );
    assert_eq!(drive(&lock.release_polled(&me).unwrap()).0.unwrap(), 0);
    assert_eq!(
        drive(&lock.release_polled(&me).unwrap()).0.unwrap_err(),
        Error::NotHeld
    );
    client.close();
    assert!(matches!(
        lock.acquire_polled(&me, wait_up_to(LONG)),
        Err(Error::Closed)
    ));
    assert!(matches!(lock.release_polled(&me), Err(Error::Closed)));
}

#[test]
fn a_close_ends_a_waiting_acquire() {
    let (_server, client, lock) = setup("polled-close");
    let (holder, waiter) = (Owner::random(), Owner::random());
    lock.acquire(&holder, None, None).unwrap();
    let acquire = lock.acquire_polled(&waiter, wait_up_to(LONG)).unwrap();
    assert!(acquire.poll(Waker::noop()).is_pending());
    let closer = thread::spawn(move || {
        thread::sleep(Duration::from_millis(100));
        client.close();
    });
    assert_eq!(drive(&acquire).0.unwrap_err(), Error::Closed);
    closer.join().unwrap();
}
