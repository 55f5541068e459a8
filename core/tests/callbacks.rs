//! User callbacks under a storm: a Redis that loses every hold at once (flushed, failed over)
//! raises one lock-lost callback per hold. A slow callback must cost its own client's later
//! callbacks only: not a thread per hold, not another client's callbacks, not the library's
//! own tidy-ups. And what a contention alert costs Redis.

mod common;

use std::collections::HashSet;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use common::*;
use redlock_core::{Client, Error, Owner};

/// Opened by the test; every callback waits for it.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
}

impl Gate {
    fn wait(&self) {
        let open = self.open.lock().unwrap();
        drop(self.opened.wait_while(open, |open| !*open).unwrap());
    }

    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }
}

fn threads_of_this_process() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

async fn until(what: &str, limit: Duration, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(ms(20)).await;
    }
}

/// A client (watched holds of 900 ms) whose lock-lost callback records the lock's name, then
/// waits for `gate`.
async fn stuck_client(server: &RedisServer, gate: &Arc<Gate>) -> (Client, Arc<Mutex<Vec<String>>>) {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let (gate, seen2) = (gate.clone(), seen.clone());
    let client = builder(server)
        .lease(ms(900))
        .on_lock_lost(move |event| {
            seen2.lock().unwrap().push(event.name.clone());
            gate.wait();
        })
        .connect()
        .await
        .unwrap();
    (client, seen)
}

/// `count` watched holds of `client`, on names `storm:N`.
async fn storm_holds(client: &Client, count: usize) -> Vec<redlock_core::Hold> {
    let mut holds = Vec::new();
    for i in 0..count {
        let lock = client.lock(&format!("storm:{i}")).unwrap();
        holds.push(lock.acquire(&Owner::random(), NOW, None).await.unwrap());
    }
    holds
}

/// 600 watched holds of one client lost at once while its callback blocks: before, tokio's
/// blocking pool started a thread per event (up to 512), all stuck behind the first, and the
/// other client's callback waited behind them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_of_lost_holds_with_a_stuck_callback_takes_one_thread_and_stops_no_other_client() {
    limited(60, async {
        let server = RedisServer::start();
        let gate = Arc::new(Gate::default());
        let (stuck, seen) = stuck_client(&server, &gate).await;
        let (other, other_lost) = recording_losses(&server, ms(900)).await;
        let holds = storm_holds(&stuck, 600).await;
        let other_hold = other
            .lock("other")
            .unwrap()
            .acquire(&Owner::random(), NOW, None)
            .await
            .unwrap();
        let before = threads_of_this_process();
        ok(server.command(&["FLUSHALL"]));
        let limit = Duration::from_secs(10);
        until("the first callback runs", limit, || {
            !seen.lock().unwrap().is_empty()
        })
        .await;
        until("every loss found", limit, || stuck.watched_holds() == 0).await;
        // The other client's loss is reported while the first client's callback is stuck.
        until("the other client's callback", limit, || {
            other_lost.lock().unwrap().len() == 1
        })
        .await;
        tokio::time::sleep(ms(300)).await;
        let during = threads_of_this_process();
        assert!(
            during <= before + 8,
            "{before} threads before the storm, {during} during it"
        );
        assert_eq!(seen.lock().unwrap().len(), 1, "one callback at a time");
        gate.open();
        until("every callback", limit, || {
            seen.lock().unwrap().len() == 600
        })
        .await;
        let names: HashSet<String> = seen.lock().unwrap().iter().cloned().collect();
        assert_eq!(names.len(), 600, "each lost hold reported once");
        drop((holds, other_hold));
        stuck.close();
        other.close();
    })
    .await;
}

/// Raises this process' soft limit of open files to its hard limit (hundreds of clients).
fn allow_all_open_files() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain libc calls on a local struct.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        limit.rlim_cur = limit.rlim_max;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
    }
}

/// A slow callback delays its own client's callbacks only, however many clients have one
/// running: before, past 512 (tokio's cap on the callbacks' threads) the next client's
/// callbacks waited for another client's to return (found by the reentry audit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_callbacks_of_many_clients_stop_no_other_clients_callback() {
    allow_all_open_files();
    limited(120, async {
        let server = RedisServer::start();
        let gate = Arc::new(Gate::default());
        let mut stuck = Vec::new();
        let mut holds = Vec::new();
        for i in 0..520 {
            let (client, seen) = stuck_client(&server, &gate).await;
            let lock = client.lock(&format!("slow:{i}")).unwrap();
            holds.push(lock.acquire(&Owner::random(), NOW, None).await.unwrap());
            stuck.push((client, seen));
        }
        let (other, other_lost) = recording_losses(&server, ms(900)).await;
        ok(server.command(&["FLUSHALL"]));
        let limit = Duration::from_secs(10);
        until("every stuck callback runs", limit, || {
            stuck
                .iter()
                .all(|(_, seen)| !seen.lock().unwrap().is_empty())
        })
        .await;
        let hold = other
            .lock("other")
            .unwrap()
            .acquire(&Owner::random(), NOW, None)
            .await
            .unwrap();
        let admin = connect(&server).await;
        assert!(admin.force_unlock("other").await.unwrap());
        until(
            "the other client's callback",
            Duration::from_secs(10),
            || other_lost.lock().unwrap().len() == 1,
        )
        .await;
        assert!(hold.is_lost());
        gate.open();
        drop(holds);
        for (client, _) in &stuck {
            client.close();
        }
        other.close();
    })
    .await;
}

/// A blocking caller's acquire cancelled while its attempt was on the wire is undone once the
/// late reply comes, read on a blocking thread of the library. Before, lost-hold callbacks that
/// blocked held every such thread (512), and the attempt's hold stayed in Redis for its lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_acquire_is_undone_while_callbacks_are_stuck() {
    limited(60, async {
        let server = RedisServer::start();
        let gate = Arc::new(Gate::default());
        let (stuck, entered) = stuck_client(&server, &gate).await;
        let holds = storm_holds(&stuck, 600).await;
        ok(server.command(&["FLUSHALL"]));
        let limit = Duration::from_secs(10);
        until("every loss found", limit, || stuck.watched_holds() == 0).await;
        tokio::time::sleep(ms(300)).await;
        // A blocking caller's attempt, cancelled while Redis does not answer: its late reply
        // is read on a blocking thread of the library, then undone.
        let blocking = redlock_core::blocking::Client::from_builder(builder(&server)).unwrap();
        let lock = blocking.lock("cancelled").unwrap();
        let warm = Owner::random(); // the attempt below goes out at once, on an open socket
        let lock = tokio::task::spawn_blocking(move || {
            drop(lock.acquire(&warm, NOW, None).unwrap());
            lock.release(&warm).unwrap();
            lock
        })
        .await
        .unwrap();
        ok(server.command(&["CLIENT", "PAUSE", "1000", "ALL"]));
        let cancel = redlock_core::blocking::CancelToken::new();
        let cancel2 = cancel.clone();
        let attempt = tokio::task::spawn_blocking(move || {
            let options = redlock_core::AcquireOptions::new(NOW, None);
            lock.acquire_with(&Owner::random(), options, Some(&cancel2))
        });
        tokio::time::sleep(ms(300)).await;
        cancel.cancel();
        let cancelled = attempt.await.unwrap();
        assert!(
            matches!(cancelled, Err(Error::Cancelled)),
            "cancelled on the wire: {cancelled:?}"
        );
        let other = connect(&server).await;
        tokio::time::sleep(ms(2_500)).await;
        let info = other.lock("cancelled").unwrap().inspect().await.unwrap();
        assert!(
            info.holders.is_empty(),
            "the cancelled attempt's hold stayed in Redis ({} callbacks entered): {info:?}",
            entered.lock().unwrap().len()
        );
        gate.open();
        drop(holds);
        stuck.close();
        other.close();
        blocking.close();
    })
    .await;
}

/// The callbacks of a client share one thread now: one that panics must not stop the next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_callback_does_not_stop_the_next_ones() {
    limited(30, async {
        let server = RedisServer::start();
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let seen2 = seen.clone();
        let client: Client = builder(&server)
            .lease(ms(900))
            .on_lock_lost(move |event| {
                seen2.lock().unwrap().push(event.name.clone());
                panic!("a callback that panics");
            })
            .connect()
            .await
            .unwrap();
        let mut holds = Vec::new();
        for i in 0..20 {
            let lock = client.lock(&format!("panics:{i}")).unwrap();
            holds.push(lock.acquire(&Owner::random(), NOW, None).await.unwrap());
        }
        ok(server.command(&["FLUSHALL"]));
        until("every callback", Duration::from_secs(10), || {
            seen.lock().unwrap().len() == 20
        })
        .await;
        drop(holds);
        client.close();
    })
    .await;
}

/// A contention alert reads the holders, not the waiters: every waiter that waits long raises
/// one, and thousands behind a dead holder would each have scanned all the others (the scale
/// audit: 12-33 ms of Redis per alert at 10 000 waiters).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contention_alert_does_not_scan_the_waiters() {
    limited(30, async {
        let server = RedisServer::start();
        let holder = connect(&server).await;
        let lock = holder.lock("alerted").unwrap();
        lock.acquire(&Owner::random(), NOW, None).await.unwrap();
        let alerts: Arc<Mutex<usize>> = Arc::default();
        let seen = alerts.clone();
        let waiter = builder(&server)
            .contention_alert_attempts(Some(1))
            .on_contention(move |_| *seen.lock().unwrap() += 1)
            .connect()
            .await
            .unwrap();
        ok(server.command(&["CONFIG", "RESETSTAT"]));
        let waited = waiter
            .lock("alerted")
            .unwrap()
            .acquire(&Owner::random(), Some(ms(600)), None)
            .await;
        assert!(waited.is_err());
        until("the alert", Duration::from_secs(5), || {
            *alerts.lock().unwrap() == 1
        })
        .await;
        let stats = server.command(&["INFO", "commandstats"]);
        assert!(
            !stats.contains("cmdstat_hvals"),
            "the alert counted the waiters: {stats}"
        );
        // An admin's inspect still counts them.
        let info = holder.lock("alerted").unwrap().inspect().await.unwrap();
        assert_eq!(info.waiting_writers, 0);
        assert!(
            server
                .command(&["INFO", "commandstats"])
                .contains("cmdstat_hvals")
        );
        holder.close();
        waiter.close();
    })
    .await;
}

/// A lock-lost callback hands its reaction to async code with `tokio::spawn` (the thread has a
/// tokio context: spawning does not panic). The spawned task must run (found by the review:
/// the callbacks' own runtime has no workers, so its tasks never ran).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_spawned_by_a_lost_callback_runs() {
    limited(30, async {
        let server = RedisServer::start();
        let ran: Arc<Mutex<Vec<String>>> = Arc::default();
        let called: Arc<Mutex<Vec<String>>> = Arc::default();
        let (ran2, called2) = (ran.clone(), called.clone());
        let client = builder(&server)
            .lease(ms(900))
            .on_lock_lost(move |event| {
                called2.lock().unwrap().push(event.name.clone());
                let (ran, name) = (ran2.clone(), event.name.clone());
                tokio::spawn(async move { ran.lock().unwrap().push(name) });
            })
            .connect()
            .await
            .unwrap();
        let _hold = client
            .lock("spawned")
            .unwrap()
            .acquire(&Owner::random(), NOW, None)
            .await
            .unwrap();
        ok(server.command(&["FLUSHALL"]));
        let start = Instant::now();
        while called.lock().unwrap().is_empty() {
            assert!(start.elapsed() < Duration::from_secs(10), "no callback");
            tokio::time::sleep(ms(20)).await;
        }
        tokio::time::sleep(ms(1_000)).await;
        assert_eq!(
            *ran.lock().unwrap(),
            vec!["spawned".to_string()],
            "the callback ran; the task it spawned did not within 1 s"
        );
    })
    .await;
}
