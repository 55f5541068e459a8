//! The core when resources run out: file descriptors, Redis' `maxclients`, pub/sub output
//! buffers, threads, very many names.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::*;
use redlock_core::{Client, Error, ErrorKind, Owner};

/// A raw RESP connection kept open (so that it still works once `maxclients` is reached).
struct Admin {
    reader: BufReader<TcpStream>,
}

impl Admin {
    fn new(server: &RedisServer) -> Admin {
        let stream = TcpStream::connect(("127.0.0.1", server.port())).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Admin {
            reader: BufReader::new(stream),
        }
    }

    fn command(&mut self, args: &[&str]) -> String {
        let mut out = format!("*{}\r\n", args.len());
        for a in args {
            out.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        self.reader.get_mut().write_all(out.as_bytes()).unwrap();
        self.read_reply()
    }

    fn read_reply(&mut self) -> String {
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        let mut reply = line.clone();
        match line.as_bytes()[0] {
            b'$' => {
                let n: i64 = line[1..].trim().parse().unwrap();
                if n >= 0 {
                    let mut buf = vec![0; n as usize + 2];
                    self.reader.read_exact(&mut buf).unwrap();
                    reply.push_str(&String::from_utf8_lossy(&buf));
                }
            }
            b'*' => {
                let n: i64 = line[1..].trim().parse().unwrap();
                for _ in 0..n.max(0) {
                    reply.push_str(&self.read_reply());
                }
            }
            _ => {}
        }
        reply
    }

    fn connected_clients(&mut self) -> usize {
        let info = self.command(&["INFO", "clients"]);
        info.lines()
            .find_map(|l| l.strip_prefix("connected_clients:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    /// No new connection is accepted from now on.
    fn fill_maxclients(&mut self) {
        let n = self.connected_clients().to_string();
        ok(self.command(&["CONFIG", "SET", "maxclients", &n]));
    }

    fn free_maxclients(&mut self) {
        ok(self.command(&["CONFIG", "SET", "maxclients", "10000"]));
    }
}

/// Case 2: `maxclients` reached before a client's first waiter: the pub/sub connection cannot be
/// made. The waiter must still see a release within about a re-check interval (the contract: a
/// lost message costs at most `recheck_interval`), not only at the end of its subscribe's wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_without_a_pubsub_connection_still_rechecks_at_its_interval_maxclients() {
    limited(60, async {
        let server = RedisServer::start();
        let mut admin = Admin::new(&server);
        let holder_client = connect(&server).await;
        let waiter_client = builder(&server)
            .recheck_interval(ms(100))
            .command_timeout(ms(3_000))
            .connect()
            .await
            .unwrap();
        let name = "maxclients-first-wait";
        let holder = Owner::random();
        holder_client
            .lock(name)
            .unwrap()
            .acquire(&holder, NOW, Some(Duration::from_secs(30)))
            .await
            .unwrap();
        // Warm the clients' direct connections, then no new connection is accepted.
        tokio::time::sleep(ms(200)).await;
        admin.fill_maxclients();
        let lock = waiter_client.lock(name).unwrap();
        let started = Instant::now();
        let waiting = {
            let lock = lock.clone();
            tokio::spawn(async move {
                let owner = Owner::random();
                let r = lock
                    .acquire(&owner, Some(Duration::from_secs(20)), None)
                    .await;
                (r.map(|h| h.fencing_token()), Instant::now())
            })
        };
        tokio::time::sleep(ms(300)).await;
        let released_at = Instant::now();
        holder_client
            .lock(name)
            .unwrap()
            .release(&holder)
            .await
            .unwrap();
        let (got, at) = waiting.await.unwrap();
        let latency = at.saturating_duration_since(released_at);
        println!(
            "waiter result {got:?}; started {:?} before release; got it {latency:?} after release",
            released_at - started
        );
        assert!(got.is_ok(), "{got:?}");
        admin.free_maxclients();
        assert!(
            latency < ms(1_000),
            "the waiter saw the release only {latency:?} after it (recheck interval 100 ms)"
        );
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Scenarios that change process-wide limits run in a subprocess of this test binary (only the
// named test runs there), as fork.rs does. RLIMIT_NPROC does not bind root, so the subprocess
// runs as `nobody` (uid/gid 65534) where it must.

const SCENARIO_ENV: &str = "REDLOCK_EXHAUSTION_SCENARIO";
const URL_ENV: &str = "REDLOCK_EXHAUSTION_URL";

fn in_own_process(name: &str, as_nobody: bool, scenario: fn(&str)) {
    if std::env::var_os(SCENARIO_ENV).is_some() {
        scenario(&std::env::var(URL_ENV).unwrap());
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if as_nobody && unsafe { libc::geteuid() } != 0 {
        println!("skipped: switching to `nobody` needs root");
        return;
    }
    let server = RedisServer::start();
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(SCENARIO_ENV, "1")
        .env(URL_ENV, server.url())
        .env("RUST_BACKTRACE", "0")
        .current_dir("/");
    if as_nobody {
        use std::os::unix::process::CommandExt;
        command.uid(65534).gid(65534);
    }
    let out = command.output().unwrap();
    println!(
        "--- subprocess stdout ---\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    println!(
        "--- subprocess stderr ---\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "scenario failed: {:?}", out.status);
}

fn set_soft_limit(resource: libc::__rlimit_resource_t, soft: libc::rlim_t) -> libc::rlim_t {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain libc calls on a local struct.
    unsafe {
        assert_eq!(libc::getrlimit(resource, &mut limit), 0);
        let was = limit.rlim_cur;
        limit.rlim_cur = soft;
        assert_eq!(
            libc::setrlimit(resource, &limit),
            0,
            "{}",
            std::io::Error::last_os_error()
        );
        was
    }
}

/// No new thread can be made in this process until the returned limit is set back.
fn forbid_new_threads() -> libc::rlim_t {
    let was = set_soft_limit(libc::RLIMIT_NPROC, 1);
    let probe = std::thread::Builder::new().spawn(|| {});
    assert!(probe.is_err(), "RLIMIT_NPROC did not bind: run as root?");
    was
}

/// Case 4: the first blocking call needs the process' runtime (two worker threads). If no thread
/// can be made it must fail with an error, not panic.
#[test]
fn the_first_blocking_call_without_threads_fails_with_an_error() {
    in_own_process(
        "the_first_blocking_call_without_threads_fails_with_an_error",
        true,
        |url| {
            let was = forbid_new_threads();
            let first = std::panic::catch_unwind(|| {
                redlock_core::blocking::Client::connect(url).map(|_| ())
            });
            set_soft_limit(libc::RLIMIT_NPROC, was);
            println!("first blocking connect without threads: {first:?}");
            // Once threads can be made again, it works.
            let client = redlock_core::blocking::Client::connect(url).unwrap();
            let owner = Owner::random();
            client
                .lock("x")
                .unwrap()
                .acquire(&owner, NOW, None)
                .unwrap();
            client.lock("x").unwrap().release(&owner).unwrap();
            match first {
                Ok(Err(e)) => println!("error kind {:?}: {e}", e.kind()),
                Ok(Ok(())) => println!("it connected"),
                Err(_) => panic!("the blocking connect panicked instead of failing"),
            }
        },
    );
}

/// Case 4 (async API, a current-thread runtime, no blocking-pool thread alive): the watchdog finds
/// one hold lost while no thread can be made. It must report it, and keep renewing the client's
/// other holds once threads can be made again (no permanently dead watchdog).
#[test]
fn a_lost_hold_reported_while_no_thread_can_be_made_does_not_kill_the_watchdog() {
    in_own_process(
        "a_lost_hold_reported_while_no_thread_can_be_made_does_not_kill_the_watchdog",
        true,
        |url| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let reports = Arc::new(AtomicUsize::new(0));
                let seen = reports.clone();
                let client = redlock_core::Client::builder(url)
                    .lease(ms(600)) // renewed every 200 ms
                    .direct_connections(0)
                    .on_lock_lost(move |_| {
                        seen.fetch_add(1, Ordering::SeqCst);
                    })
                    .connect()
                    .await
                    .unwrap();
                let (a, b) = (client.lock("a").unwrap(), client.lock("b").unwrap());
                let owner = Owner::random();
                let hold_a = a.acquire(&owner, NOW, None).await.unwrap();
                let hold_b = b.acquire(&owner, NOW, None).await.unwrap();
                // Another client, so the loss is found by this client's watchdog.
                let other = redlock_core::Client::builder(url)
                    .direct_connections(0)
                    .connect()
                    .await
                    .unwrap();
                let was = forbid_new_threads();
                // Hold a is taken away behind the client's back.
                assert!(other.force_unlock("a").await.unwrap());
                tokio::time::timeout(Duration::from_secs(3), hold_a.lost())
                    .await
                    .expect("hold a reported lost");
                tokio::time::sleep(ms(300)).await;
                set_soft_limit(libc::RLIMIT_NPROC, was);
                // Several leases later, hold b must still be held (renewed) or be reported lost.
                tokio::time::sleep(ms(2_000)).await;
                let held = b.is_held_by(&owner).await.unwrap();
                println!(
                    "b held: {held}; b reported lost: {}; callbacks run: {}; renew calls: {}",
                    hold_b.is_lost(),
                    reports.load(Ordering::SeqCst),
                    client.watchdog_calls()
                );
                assert!(
                    held || hold_b.is_lost(),
                    "hold b expired without being reported lost: the watchdog is dead"
                );
                assert!(held, "hold b was not renewed any more");
            });
        },
    );
}

/// The lowest descriptor number not open now: with RLIMIT_NOFILE set to it, no new one can be
/// made.
fn lowest_free_fd() -> libc::rlim_t {
    // SAFETY: F_GETFD only asks whether the descriptor is open.
    (0..)
        .find(|&fd| unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1)
        .unwrap() as libc::rlim_t
}

fn admin_of(url: &str) -> Admin {
    let port: u16 = url
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .parse()
        .unwrap();
    let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    Admin {
        reader: BufReader::new(stream),
    }
}

/// Case 1: no descriptor left (EMFILE). A first waiter (its pub/sub connection cannot be made)
/// still re-checks at its interval; calls whose connection was killed fail with `Connection`
/// (never a panic or a hang); a watched hold is kept or reported lost; and everything works
/// again once descriptors are free.
#[test]
fn running_out_of_file_descriptors() {
    in_own_process("running_out_of_file_descriptors", false, |url| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let mut admin = admin_of(url);
        let blocking = redlock_core::blocking::Client::connect(url).unwrap();
        let blocking_owner = Owner::random();
        let blocking_lock = blocking.lock("blocking").unwrap();
        blocking_lock
            .acquire(&blocking_owner, NOW, Some(ms(60_000)))
            .unwrap();
        blocking_lock.release(&blocking_owner).unwrap();
        runtime.block_on(async {
            let client = redlock_core::Client::builder(url)
                .lease(ms(3_000))
                .recheck_interval(ms(100))
                .command_timeout(ms(3_000))
                .connect()
                .await
                .unwrap();
            let owner = Owner::random();
            let kept = client.lock("kept").unwrap();
            let hold = kept.acquire(&owner, NOW, None).await.unwrap();
            let contended = client.lock("contended").unwrap();
            let holder = Owner::random();
            contended.acquire(&holder, NOW, Some(ms(30_000))).await.unwrap();
            tokio::time::sleep(ms(300)).await;

            let was = set_soft_limit(libc::RLIMIT_NOFILE, lowest_free_fd());
            assert!(std::fs::File::open("/dev/null").is_err(), "descriptors left");

            // 1. A first waiter: no pub/sub connection can be made.
            let waiting = {
                let contended = contended.clone();
                tokio::spawn(async move {
                    let r = contended.acquire(&Owner::random(), Some(ms(20_000)), None).await;
                    (r.map(|h| h.fencing_token()), Instant::now())
                })
            };
            tokio::time::sleep(ms(300)).await;
            let released = Instant::now();
            contended.release(&holder).await.unwrap();
            let (got, at) = waiting.await.unwrap();
            let latency = at.saturating_duration_since(released);
            println!("EMFILE: first waiter {got:?}, {latency:?} after the release");

            // 2. Connections killed: reconnects fail with EMFILE.
            // Descriptors the killed connections free are taken at once by a hog thread.
            let hogging = Arc::new(std::sync::atomic::AtomicBool::new(true));
            let hog = {
                let hogging = hogging.clone();
                std::thread::spawn(move || {
                    let mut taken = Vec::new();
                    while hogging.load(Ordering::SeqCst) {
                        // SAFETY: dup of stdin's descriptor; closed below.
                        loop {
                            let fd = unsafe { libc::dup(0) };
                            if fd < 0 {
                                break;
                            }
                            taken.push(fd);
                        }
                        std::thread::yield_now();
                    }
                    for fd in taken.iter() {
                        // SAFETY: our own dups.
                        unsafe { libc::close(*fd) };
                    }
                    taken.len()
                })
            };
            let killed = admin.command(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"]);
            println!("killed {killed:?}");
            tokio::time::sleep(ms(200)).await;
            let started = Instant::now();
            let r = client.lock("other").unwrap().acquire(&Owner::random(), NOW, None).await;
            println!("EMFILE: async acquire {:?} in {:?}", r.as_ref().map(|h| h.fencing_token()), started.elapsed());
            let blocking_result = {
                let lock = blocking.lock("blocking").unwrap();
                let owner = blocking_owner.clone();
                std::thread::spawn(move || {
                    let started = Instant::now();
                    let r = lock.acquire(&owner, NOW, Some(ms(60_000))).map(|h| h.fencing_token());
                    (r, started.elapsed())
                })
                .join()
                .unwrap()
            };
            println!("EMFILE: blocking acquire {blocking_result:?}");
            if blocking_result.0.is_ok() {
                blocking.lock("blocking").unwrap().release(&blocking_owner).unwrap();
            }
            tokio::time::sleep(ms(1_000)).await;
            hogging.store(false, Ordering::SeqCst);
            println!("hogged {} freed descriptors", hog.join().unwrap());
            set_soft_limit(libc::RLIMIT_NOFILE, was);

            // 3. Recovery.
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut recovered = None;
            while Instant::now() < deadline {
                let o = Owner::random();
                let lock = client.lock("after").unwrap();
                if lock.acquire(&o, NOW, None).await.is_ok() && lock.release(&o).await.is_ok() {
                    recovered = Some(Instant::now());
                    break;
                }
                tokio::time::sleep(ms(100)).await;
            }
            let blocking_after = {
                let lock = blocking.lock("blocking").unwrap();
                let owner = blocking_owner.clone();
                std::thread::spawn(move || {
                    lock.acquire(&owner, NOW, Some(ms(60_000)))
                        .and_then(|_| lock.release(&owner))
                })
                .join()
                .unwrap()
            };
            tokio::time::sleep(ms(3_500)).await; // more than a lease
            let held = kept.is_held_by(&owner).await;
            println!(
                "after: async recovered {:?}; blocking {blocking_after:?}; kept held {held:?}, reported lost {}",
                recovered.is_some(),
                hold.is_lost()
            );
            assert!(recovered.is_some(), "the async client did not recover");
            assert!(blocking_after.is_ok(), "the blocking client did not recover");
            assert!(held.unwrap() || hold.is_lost(), "kept hold expired unreported");
            assert!(
                latency < ms(1_000),
                "the first waiter saw the release only {latency:?} after it (recheck 100 ms)"
            );
        });
    });
}

/// Case 3: a tiny pub/sub output buffer limit: the hub's connection is killed whenever
/// notifications pile up. Waiters must still get the lock (no wait to its deadline), and no two
/// hold one name at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiny_pubsub_output_buffer_limit() {
    limited(120, async {
        let server = RedisServer::start();
        ok(server.command(&["CONFIG", "SET", "client-output-buffer-limit", "pubsub 1kb 1kb 0"]));
        let waiters_client = connect(&server).await;
        let releasers_client = connect(&server).await;
        let names: Vec<String> = (0..30).map(|i| format!("obl-{i}-{}", "x".repeat(1000))).collect();
        let holders: Arc<Vec<AtomicUsize>> = Arc::new((0..names.len()).map(|_| AtomicUsize::new(0)).collect());
        let violations = Arc::new(AtomicUsize::new(0));
        let worst = Arc::new(std::sync::Mutex::new(Duration::ZERO));
        let acquired = Arc::new(AtomicUsize::new(0));
        let stop = Instant::now() + Duration::from_secs(12);
        let mut tasks = Vec::new();
        for (i, name) in names.iter().enumerate() {
            for client in [&waiters_client, &waiters_client, &releasers_client, &releasers_client] {
                let lock = client.lock(name).unwrap();
                let (holders, violations, worst, acquired) =
                    (holders.clone(), violations.clone(), worst.clone(), acquired.clone());
                tasks.push(tokio::spawn(async move {
                    let owner = Owner::random();
                    while Instant::now() < stop {
                        let started = Instant::now();
                        match lock.acquire(&owner, Some(Duration::from_secs(20)), Some(ms(10_000))).await {
                            Ok(_) => {}
                            Err(e) => panic!("acquire failed: {e}"),
                        }
                        let waited = started.elapsed();
                        {
                            let mut w = worst.lock().unwrap();
                            if waited > *w {
                                *w = waited;
                            }
                        }
                        acquired.fetch_add(1, Ordering::SeqCst);
                        if holders[i].fetch_add(1, Ordering::SeqCst) != 0 {
                            violations.fetch_add(1, Ordering::SeqCst);
                        }
                        tokio::task::yield_now().await;
                        holders[i].fetch_sub(1, Ordering::SeqCst);
                        lock.release(&owner).await.unwrap();
                    }
                }));
            }
        }
        let hub_ids = {
            let url_port = server.port();
            tokio::task::spawn_blocking(move || {
                let mut ids = std::collections::HashSet::new();
                while Instant::now() < stop {
                    let mut admin = Admin {
                        reader: BufReader::new(TcpStream::connect(("127.0.0.1", url_port)).unwrap()),
                    };
                    for line in admin.command(&["CLIENT", "LIST", "TYPE", "pubsub"]).lines() {
                        if let Some(id) = line.split_whitespace().find_map(|w| w.strip_prefix("id=")) {
                            ids.insert(id.to_owned());
                        }
                    }
                    std::thread::sleep(ms(20));
                }
                ids.len()
            })
        };
        for t in tasks {
            t.await.unwrap();
        }
        let kills = hub_ids.await.unwrap();
        println!(
            "acquired {} times; worst wait {:?}; two holders seen {} times; distinct pub/sub connections seen {kills}",
            acquired.load(Ordering::SeqCst),
            *worst.lock().unwrap(),
            violations.load(Ordering::SeqCst)
        );
        assert_eq!(violations.load(Ordering::SeqCst), 0);
    })
    .await;
}

fn subscriptions_of_pubsub_clients(server: &RedisServer) -> Vec<String> {
    server
        .command(&["CLIENT", "LIST", "TYPE", "pubsub"])
        .lines()
        .filter_map(|l| {
            l.split_whitespace()
                .find(|w| w.starts_with("sub="))
                .map(str::to_owned)
        })
        .collect()
}

/// `PREFIX-0` to `PREFIX-{n-1}` held (for 120 s) by the holder of a client, and another
/// client for waiters whose subscriptions linger `linger_ms`.
async fn names_held(
    server: &RedisServer,
    prefix: &str,
    n: usize,
    linger_ms: u64,
) -> (Client, Owner, Client) {
    let holder_client = connect(server).await;
    let holder = Owner::random();
    for i in 0..n {
        let lock = holder_client.lock(&format!("{prefix}-{i}")).unwrap();
        lock.acquire(&holder, NOW, Some(ms(120_000))).await.unwrap();
    }
    let waiters_client = builder(server)
        .subscription_linger(ms(linger_ms))
        .connect()
        .await
        .unwrap();
    (holder_client, holder, waiters_client)
}

/// Waits up to 10 s for the server's pub/sub clients to have no subscription left.
async fn all_unsubscribed_soon(server: &RedisServer) {
    let done = Instant::now();
    let mut subs = subscriptions_of_pubsub_clients(server);
    while done.elapsed() < Duration::from_secs(10) && !subs.iter().all(|s| s == "sub=0") {
        tokio::time::sleep(ms(200)).await;
        subs = subscriptions_of_pubsub_clients(server);
    }
    println!("{:?} after the last waiter: {subs:?}", done.elapsed());
    assert!(subs.iter().all(|s| s == "sub=0"), "{subs:?}");
}

/// Case 5: thousands of names, each with a waiter of one client: the subscriptions go back
/// down once the waiters are done (after the linger).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_waited_names_unsubscribe_afterwards() {
    limited(180, async {
        let server = RedisServer::start();
        let n = 5_000;
        let (holder_client, holder, waiters_client) = names_held(&server, "many", n, 500).await;
        let started = Instant::now();
        let tasks: Vec<_> = (0..n)
            .map(|i| {
                let lock = waiters_client.lock(&format!("many-{i}")).unwrap();
                tokio::spawn(async move {
                    let owner = Owner::random();
                    lock.acquire(&owner, Some(Duration::from_secs(120)), Some(ms(60_000)))
                        .await
                        .unwrap();
                    lock.release(&owner).await.unwrap();
                })
            })
            .collect();
        // Wait until all are subscribed (lock channel + grant channel each).
        loop {
            let subs = subscriptions_of_pubsub_clients(&server);
            if subs.iter().any(|s| s == &format!("sub={}", 2 * n))
                || started.elapsed() > Duration::from_secs(60)
            {
                println!("subscribed after {:?}: {subs:?}", started.elapsed());
                break;
            }
            tokio::time::sleep(ms(100)).await;
        }
        for i in 0..n {
            holder_client
                .lock(&format!("many-{i}"))
                .unwrap()
                .release(&holder)
                .await
                .unwrap();
        }
        for t in tasks {
            t.await.unwrap();
        }
        println!("all waiters done after {:?}", started.elapsed());
        all_unsubscribed_soon(&server).await;
        // And the hub still works.
        let lock = waiters_client.lock("many-0").unwrap();
        let (a, b) = (Owner::random(), Owner::random());
        lock.acquire(&a, NOW, None).await.unwrap();
        let waiting = {
            let lock = lock.clone();
            tokio::spawn(async move { lock.acquire(&b, Some(ms(5_000)), None).await.map(drop) })
        };
        tokio::time::sleep(ms(200)).await;
        lock.release(&a).await.unwrap();
        waiting.await.unwrap().unwrap();
    })
    .await;
}

/// Waiters that give up while their subscriptions still queue behind many others: a channel
/// the sweep dropped meanwhile is not subscribed afterwards (it would stay subscribed for
/// good, its messages read by a client nobody waits on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_wanted_no_more_by_its_turn_is_not_made() {
    limited(60, async {
        let server = RedisServer::start();
        let n = 2_000;
        let (_holder_client, _holder, waiters_client) = names_held(&server, "gone", n, 1).await;
        // Each gives up a few ms after its first attempt: its channel's SUBSCRIBE is still
        // queued behind the others' when it leaves.
        let tasks: Vec<_> = (0..n)
            .map(|i| {
                let lock = waiters_client.lock(&format!("gone-{i}")).unwrap();
                tokio::spawn(async move {
                    let err = lock.acquire(&Owner::random(), Some(ms(5)), None).await;
                    assert_eq!(err.unwrap_err(), Error::Timeout);
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        all_unsubscribed_soon(&server).await;
    })
    .await;
}

/// Case 2: `maxclients` reached and the client's connections killed: calls fail with a clear
/// error in bounded time, a watched hold is kept or reported lost, and all works once a slot
/// frees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maxclients_reached_after_connections_were_killed() {
    limited(60, async {
        let server = RedisServer::start();
        let mut admin = Admin::new(&server);
        let client = builder(&server).lease(ms(3_000)).connect().await.unwrap();
        let url = server.url();
        let blocking = tokio::task::spawn_blocking(move || {
            redlock_core::blocking::Client::connect(&url).unwrap()
        })
        .await
        .unwrap();
        let owner = Owner::random();
        let kept = client.lock("kept").unwrap();
        let hold = kept.acquire(&owner, NOW, None).await.unwrap();
        // Below the connections now: those stay, no new one is accepted.
        println!(
            "maxclients 1: {:?}",
            admin.command(&["CONFIG", "SET", "maxclients", "1"])
        );
        println!(
            "killed {:?}",
            admin.command(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"])
        );
        tokio::time::sleep(ms(300)).await;
        let started = Instant::now();
        let r = client
            .lock("other")
            .unwrap()
            .acquire(&Owner::random(), NOW, None)
            .await
            .map(drop);
        println!("async acquire: {r:?} in {:?}", started.elapsed());
        if let Err(e) = &r {
            assert_eq!(
                e.kind(),
                ErrorKind::Connection,
                "async acquire under maxclients: {e}"
            );
        }
        let b = {
            let blocking = blocking.clone();
            tokio::task::spawn_blocking(move || {
                let started = Instant::now();
                let o = Owner::random();
                let lock = blocking.lock("blocking").unwrap();
                let r = lock.acquire(&o, NOW, Some(ms(60_000))).map(drop);
                let rel = if r.is_ok() {
                    Some(lock.release(&o))
                } else {
                    None
                };
                (r, rel, started.elapsed())
            })
            .await
            .unwrap()
        };
        println!("blocking acquire/release: {b:?}");
        // Redis refused the connection (the acquire never ran): `Connection`, as the async API
        // reports it, not `Redis` (a refused command).
        if let Err(e) = &b.0 {
            assert_eq!(
                e.kind(),
                ErrorKind::Connection,
                "blocking acquire under maxclients: {e}"
            );
        }
        tokio::time::sleep(ms(1_000)).await;
        admin.free_maxclients();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut recovered = false;
        while Instant::now() < deadline && !recovered {
            let o = Owner::random();
            let lock = client.lock("after").unwrap();
            recovered = lock.acquire(&o, NOW, None).await.is_ok() && lock.release(&o).await.is_ok();
            tokio::time::sleep(ms(100)).await;
        }
        let blocking_after = tokio::task::spawn_blocking(move || {
            let o = Owner::random();
            let lock = blocking.lock("blocking").unwrap();
            lock.acquire(&o, NOW, None).and_then(|_| lock.release(&o))
        })
        .await
        .unwrap();
        tokio::time::sleep(ms(3_500)).await;
        let held = kept.is_held_by(&owner).await.unwrap();
        println!(
            "after: recovered {recovered}; blocking {blocking_after:?}; kept held {held}, lost {}",
            hold.is_lost()
        );
        assert!(recovered);
        assert!(blocking_after.is_ok());
        assert!(held || hold.is_lost());
    })
    .await;
}
