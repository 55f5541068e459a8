//! A process that stops running for a while (SIGSTOP / SIGCONT: a GC pause, a VM migration, a
//! frozen container) in the middle of a call whose reply Redis sends while it is stopped.
//! The scenarios run in a subprocess of this test binary (REDLOCK_SUSPEND_ROLE), which the
//! test stops and continues.
#![cfg(unix)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use redlock_core::Owner;
use redlock_core::testing::RedisServer;

const ROLE_ENV: &str = "REDLOCK_SUSPEND_ROLE";
const URL_ENV: &str = "REDLOCK_SUSPEND_URL";
/// Far longer than Redis takes to answer here (the stall below, 0.5 s).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(3);

struct Subprocess {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Subprocess {
    fn start(test: &str, role: &str, url: &str) -> Subprocess {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", test, "--nocapture", "--test-threads=1"])
            .env(ROLE_ENV, role)
            .env(URL_ENV, url)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Subprocess {
            child,
            stdin,
            stdout,
        }
    }

    /// The next thing the subprocess said (after "@@ "; the harness prints other lines, and its
    /// own text ahead of the first).
    fn line(&mut self) -> String {
        loop {
            let mut line = String::new();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "subprocess ended"
            );
            if let Some((_, said)) = line.split_once("@@ ") {
                return said.trim_end().to_owned();
            }
        }
    }

    fn tell(&mut self, what: &str) {
        writeln!(self.stdin, "{what}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn signal(&self, signal: libc::c_int) {
        // SAFETY: a signal to our own child, which has not been waited for yet.
        assert_eq!(
            unsafe { libc::kill(self.child.id() as libc::pid_t, signal) },
            0
        );
    }
}

impl Drop for Subprocess {
    fn drop(&mut self) {
        self.signal(libc::SIGCONT);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// In the subprocess: waits for the parent's word on stdin.
fn wait_for_word() -> String {
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    line.trim().to_owned()
}

fn say(what: impl std::fmt::Display) {
    println!("@@ {what}");
    std::io::stdout().flush().unwrap();
}

/// The parent's part: the subprocess sends one call while Redis is busy (so it is surely in
/// its read when stopped); Redis answers 0.5 s later, well within the command timeout, while
/// the subprocess is stopped; it is continued after 4 s. Returns what the subprocess printed
/// after the call.
fn stop_during_call(server: &RedisServer, sub: &mut Subprocess, stopped_for: Duration) {
    assert_eq!(sub.line(), "ready");
    let stall = server.stall(Duration::from_millis(600)); // returns once it runs (~100 ms)
    sub.tell("go");
    assert_eq!(sub.line(), "calling");
    // Stopped only once its call waits in Redis' socket (Redis is stalled), however slowly a
    // loaded machine ran it: stopped before sending, a call rightly fails at its deadline.
    // (Without /proc, as on macOS, a fixed wait, which a loaded machine can outrun.)
    let calling = Instant::now();
    if std::path::Path::new("/proc/net/tcp").exists() {
        while !request_queued_at(server.port()) {
            assert!(
                calling.elapsed() < Duration::from_secs(5),
                "no call reached Redis"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    } else {
        std::thread::sleep(Duration::from_millis(130));
    }
    std::thread::sleep(Duration::from_millis(20)); // in its read now
    let stopped = Instant::now();
    sub.signal(libc::SIGSTOP);
    stall.join().unwrap(); // Redis runs the call and sends its reply now
    std::thread::sleep(stopped_for.saturating_sub(stopped.elapsed()));
    sub.signal(libc::SIGCONT);
}

/// Whether bytes wait unread on the server's side of a connection to the local port `port`
/// (Redis is running a script: it reads nothing), from /proc/net/tcp and tcp6.
fn request_queued_at(port: u16) -> bool {
    let queued = |line: &str| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let local_port = (fields.get(1).and_then(|a| a.rsplit(':').next()))
            .and_then(|p| u16::from_str_radix(p, 16).ok());
        let unread = (fields.get(4).and_then(|q| q.split(':').nth(1)))
            .and_then(|r| u64::from_str_radix(r, 16).ok());
        // State 01: established.
        local_port == Some(port) && fields.get(3) == Some(&"01") && unread.is_some_and(|r| r > 0)
    };
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|path| {
        let table = std::fs::read_to_string(path).unwrap_or_default();
        table.lines().skip(1).any(queued)
    })
}

/// One scenario of a call answered while its process was stopped: in the subprocess (`role`),
/// `role_main`; here, the subprocess started and stopped during its call. What it said after
/// the call (its outcome, then whether it holds the lock), or None in the subprocess.
fn answered_while_stopped(test: &str, role: &str, role_main: fn()) -> Option<(String, String)> {
    if std::env::var(ROLE_ENV).as_deref() == Ok(role) {
        role_main();
        return None;
    }
    let server = RedisServer::start();
    let mut sub = Subprocess::start(test, role, &server.url());
    stop_during_call(&server, &mut sub, Duration::from_secs(4));
    let (outcome, held) = (sub.line(), sub.line());
    println!("subprocess: {outcome}; {held}");
    Some((outcome, held))
}

const ANSWERED_IN_TIME: &str = "Redis answered in 0.5 s (command timeout 3 s), yet the call failed";

// ---------------------------------------------------------------------------------------------
// A blocking caller (the C, Java, Python-sync and Go bindings): its acquire is made on a
// direct connection, read on its own thread.

#[test]
fn a_blocking_acquire_answered_while_the_process_was_stopped_gets_the_lock() {
    let Some((outcome, held)) = answered_while_stopped(
        "a_blocking_acquire_answered_while_the_process_was_stopped_gets_the_lock",
        "blocking-acquire",
        blocking_acquire_role,
    ) else {
        return;
    };
    assert_eq!(outcome, "acquired", "{ANSWERED_IN_TIME}");
    assert_eq!(held, "held: true");
}

#[test]
fn a_cancellable_blocking_acquire_answered_while_the_process_was_stopped_gets_the_lock() {
    let Some((outcome, held)) = answered_while_stopped(
        "a_cancellable_blocking_acquire_answered_while_the_process_was_stopped_gets_the_lock",
        "cancellable-acquire",
        blocking_acquire_role,
    ) else {
        return;
    };
    assert_eq!(outcome, "acquired", "{ANSWERED_IN_TIME}");
    assert_eq!(held, "held: true");
}

/// Also with a cancel token, as the Java and sync Python bindings pass one ("cancellable-").
fn blocking_acquire_role() {
    use redlock_core::blocking::{CancelToken, Client};
    let cancellable = std::env::var(ROLE_ENV).unwrap().starts_with("cancellable");
    let cancel = CancelToken::new();
    let url = std::env::var(URL_ENV).unwrap();
    let builder = redlock_core::Client::builder(url.as_str()).command_timeout(COMMAND_TIMEOUT);
    let client = Client::from_builder(builder).unwrap();
    let lock = client.lock("suspended").unwrap();
    let owner = Owner::random();
    // Warm up: the script is loaded and a direct connection is idle.
    lock.acquire(&owner, Some(Duration::ZERO), Some(Duration::from_secs(60)))
        .unwrap();
    lock.release(&owner).unwrap();
    say("ready");
    wait_for_word();
    say("calling");
    let started = Instant::now();
    let options =
        redlock_core::AcquireOptions::new(Some(Duration::ZERO), Some(Duration::from_secs(60)));
    let got = lock.acquire_with(&owner, options, cancellable.then_some(&cancel));
    let took = started.elapsed();
    match got {
        Ok(_hold) => say("acquired"),
        Err(e) => say(format!("failed after {took:?}: {e}")),
    }
    // Let a background undo, if any, run.
    std::thread::sleep(Duration::from_millis(500));
    say(format!("held: {}", lock.is_held_by(&owner).unwrap()));
}

#[test]
fn a_blocking_release_answered_while_the_process_was_stopped_succeeds() {
    let Some((outcome, held)) = answered_while_stopped(
        "a_blocking_release_answered_while_the_process_was_stopped_succeeds",
        "blocking-release",
        blocking_release_role,
    ) else {
        return;
    };
    assert_eq!(held, "held: false", "the release ran in Redis");
    assert_eq!(outcome, "released", "{ANSWERED_IN_TIME}");
}

fn blocking_release_role() {
    use redlock_core::blocking::Client;
    let url = std::env::var(URL_ENV).unwrap();
    let builder = redlock_core::Client::builder(url.as_str()).command_timeout(COMMAND_TIMEOUT);
    let client = Client::from_builder(builder).unwrap();
    let lock = client.lock("suspended").unwrap();
    let owner = Owner::random();
    lock.acquire(&owner, Some(Duration::ZERO), Some(Duration::from_secs(60)))
        .unwrap();
    lock.release(&owner).unwrap();
    lock.acquire(&owner, Some(Duration::ZERO), Some(Duration::from_secs(60)))
        .unwrap();
    say("ready");
    wait_for_word();
    say("calling");
    let started = Instant::now();
    match lock.release(&owner) {
        Ok(_) => say("released"),
        Err(e) => say(format!("failed after {:?}: {e}", started.elapsed())),
    }
    std::thread::sleep(Duration::from_millis(500));
    say(format!("held: {}", lock.is_held_by(&owner).unwrap()));
}

// ---------------------------------------------------------------------------------------------
// An async caller: its acquire attempt is made on a direct async connection (or the
// multiplexed one) under the command timeout.

#[test]
fn an_async_acquire_answered_while_the_process_was_stopped_gets_the_lock() {
    let Some((outcome, held)) = answered_while_stopped(
        "an_async_acquire_answered_while_the_process_was_stopped_gets_the_lock",
        "async-acquire",
        async_acquire_role,
    ) else {
        return;
    };
    assert_eq!(outcome, "acquired", "{ANSWERED_IN_TIME}");
    assert_eq!(held, "held: true");
}

fn async_acquire_role() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let url = std::env::var(URL_ENV).unwrap();
        let client = redlock_core::Client::builder(url.as_str())
            .command_timeout(COMMAND_TIMEOUT)
            .connect()
            .await
            .unwrap();
        let lock = client.lock("suspended").unwrap();
        let owner = Owner::random();
        let lease = Some(Duration::from_secs(60));
        for _ in 0..5 {
            lock.acquire(&owner, Some(Duration::ZERO), lease)
                .await
                .unwrap();
            lock.release(&owner).await.unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        say("ready");
        tokio::task::spawn_blocking(wait_for_word).await.unwrap();
        say("calling");
        let started = Instant::now();
        match lock.acquire(&owner, Some(Duration::ZERO), lease).await {
            Ok(_) => say("acquired"),
            Err(e) => say(format!("failed after {:?}: {e}", started.elapsed())),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        say(format!("held: {}", lock.is_held_by(&owner).await.unwrap()));
    });
}

// ---------------------------------------------------------------------------------------------
// A watched holder stopped past its lease while another process takes the lock; and one stopped
// for less than a lease but longer than the renewal period.

const SHORT_LEASE: Duration = Duration::from_millis(1500);

fn holder_role(mode: &str) {
    use redlock_core::blocking::{Client, wait_lost};
    let url = std::env::var(URL_ENV).unwrap();
    let builder = redlock_core::Client::builder(url.as_str()).lease(SHORT_LEASE);
    let client = Client::from_builder(builder).unwrap();
    let rw = client.read_write_lock("frozen").unwrap();
    let lock = if mode == "read" {
        rw.read()
    } else {
        rw.write()
    };
    let owner = Owner::random();
    let hold = lock.acquire(&owner, Some(Duration::ZERO), None).unwrap();
    say(format!("held {}", hold.fencing_token()));
    wait_for_word();
    // Right after the stop: the first renewal tick runs now.
    let lost = wait_lost(&hold, Some(Duration::from_secs(2)));
    say(format!(
        "lost {lost}; is_held_by {:?}; hold_count {:?}; fencing_token {:?}; release {:?}",
        lock.is_held_by(&owner).map_err(|e| e.to_string()),
        lock.hold_count(&owner).map_err(|e| e.to_string()),
        lock.fencing_token(&owner).map_err(|e| e.to_string()),
        lock.release(&owner).map_err(|e| e.kind()),
    ));
}

#[test]
fn a_holder_stopped_past_its_lease_learns_it_lost_the_lock_and_the_new_holder_keeps_it() {
    let role = std::env::var(ROLE_ENV);
    if let Ok(mode) = role.as_deref().map(|r| r.strip_prefix("holder-")) {
        return holder_role(mode.unwrap());
    }
    for mode in ["write", "read"] {
        let server = RedisServer::start();
        let mut sub = Subprocess::start(
            "a_holder_stopped_past_its_lease_learns_it_lost_the_lock_and_the_new_holder_keeps_it",
            &format!("holder-{mode}"),
            &server.url(),
        );
        let held = sub.line();
        assert!(held.starts_with("held "), "{held}");
        sub.signal(libc::SIGSTOP);
        let client = redlock_core::blocking::Client::from_builder(
            redlock_core::Client::builder(server.url()).lease(SHORT_LEASE),
        )
        .unwrap();
        let writer = client.read_write_lock("frozen").unwrap();
        let owner = Owner::random();
        let started = Instant::now();
        let hold = writer
            .write()
            .acquire(&owner, Some(Duration::from_secs(5)), None)
            .expect("the stopped holder's lease ran out");
        println!("{mode}: the writer got it after {:?}", started.elapsed());
        std::thread::sleep(Duration::from_secs(4).saturating_sub(started.elapsed()));
        sub.signal(libc::SIGCONT);
        sub.tell("go");
        let told = sub.line();
        println!("{mode}: subprocess: {told}");
        assert!(
            told.starts_with("lost true; is_held_by Ok(false); hold_count Ok(0); fencing_token Ok(None); release Err(LockLost)"),
            "{mode}: {told}"
        );
        std::thread::sleep(SHORT_LEASE);
        assert!(writer.write().is_held_by(&owner).unwrap(), "{mode}");
        assert!(!hold.is_lost(), "{mode}");
        assert_eq!(
            writer.write().fencing_token(&owner).unwrap(),
            Some(hold.fencing_token())
        );
    }
}

fn short_stop_role() {
    use redlock_core::blocking::{Client, wait_lost};
    let url = std::env::var(URL_ENV).unwrap();
    let builder = redlock_core::Client::builder(url.as_str()).lease(SHORT_LEASE);
    let client = Client::from_builder(builder).unwrap();
    let lock = client.lock("briefly-frozen").unwrap();
    let owner = Owner::random();
    let hold = lock.acquire(&owner, Some(Duration::ZERO), None).unwrap();
    say("held");
    wait_for_word();
    let lost = wait_lost(&hold, Some(SHORT_LEASE * 2));
    say(format!(
        "lost {lost}; is_held_by {:?}; release {:?}",
        lock.is_held_by(&owner).map_err(|e| e.to_string()),
        lock.release(&owner).map_err(|e| e.kind()),
    ));
}

#[test]
fn a_holder_stopped_for_less_than_its_lease_keeps_the_lock() {
    if std::env::var(ROLE_ENV).as_deref() == Ok("short-stop") {
        return short_stop_role();
    }
    let server = RedisServer::start();
    let mut sub = Subprocess::start(
        "a_holder_stopped_for_less_than_its_lease_keeps_the_lock",
        "short-stop",
        &server.url(),
    );
    assert_eq!(sub.line(), "held");
    // Longer than the renewal period (lease / 3), half the lease: the lease still holds.
    for _ in 0..3 {
        sub.signal(libc::SIGSTOP);
        std::thread::sleep(SHORT_LEASE / 2);
        sub.signal(libc::SIGCONT);
        std::thread::sleep(Duration::from_millis(300));
    }
    sub.tell("go");
    let told = sub.line();
    println!("subprocess: {told}");
    assert_eq!(told, "lost false; is_held_by Ok(true); release Ok(0)");
}

// ---------------------------------------------------------------------------------------------
// A waiter stopped at the head of the queue when the lock is released (and granted to it); its
// wait of 2 s ends while it is stopped.

fn frozen_waiter_role() {
    use redlock_core::blocking::{Client, wait_lost};
    let url = std::env::var(URL_ENV).unwrap();
    let builder = redlock_core::Client::builder(url.as_str()).lease(SHORT_LEASE);
    let client = Client::from_builder(builder).unwrap();
    let lock = client.lock("frozen-waiter").unwrap();
    let owner = Owner::random();
    say("waiting");
    let started = Instant::now();
    let got = lock.acquire(&owner, Some(Duration::from_secs(2)), None);
    let took = started.elapsed();
    let said = match &got {
        Ok(hold) => format!(
            "acquired {} after {took:?}, lost at once: {}",
            hold.fencing_token(),
            hold.is_lost()
        ),
        Err(e) => format!("failed after {took:?}: {e}"),
    };
    let lost = got
        .as_ref()
        .map(|hold| wait_lost(hold, Some(Duration::from_secs(2))));
    say(format!(
        "{said}; lost later {lost:?}; is_held_by {:?}; release {:?}",
        lock.is_held_by(&owner).map_err(|e| e.to_string()),
        lock.release(&owner).map_err(|e| e.kind()),
    ));
}

#[test]
fn a_waiter_stopped_at_the_head_of_the_queue_holds_up_the_next_one_for_a_lease_at_most() {
    if std::env::var(ROLE_ENV).as_deref() == Ok("frozen-waiter") {
        return frozen_waiter_role();
    }
    use redlock_core::blocking::Client;
    let server = RedisServer::start();
    let client = || {
        Client::from_builder(redlock_core::Client::builder(server.url()).lease(SHORT_LEASE))
            .unwrap()
    };
    let (first, second) = (client(), client());
    let holder = Owner::random();
    let lock = first.lock("frozen-waiter").unwrap();
    lock.acquire(&holder, Some(Duration::ZERO), None).unwrap();
    let mut sub = Subprocess::start(
        "a_waiter_stopped_at_the_head_of_the_queue_holds_up_the_next_one_for_a_lease_at_most",
        "frozen-waiter",
        &server.url(),
    );
    assert_eq!(sub.line(), "waiting");
    std::thread::sleep(Duration::from_millis(300)); // announced and listening
    let next = std::thread::spawn(move || {
        let lock = second.lock("frozen-waiter").unwrap();
        let owner = Owner::random();
        let hold = lock.acquire(&owner, Some(Duration::from_secs(10)), None);
        (Instant::now(), hold, lock, owner, second)
    });
    std::thread::sleep(Duration::from_millis(300)); // queued behind the subprocess
    sub.signal(libc::SIGSTOP);
    let stopped = Instant::now();
    std::thread::sleep(Duration::from_millis(100));
    let released = Instant::now();
    lock.release(&holder).unwrap();
    let (got_at, hold, next_lock, next_owner, _second) = next.join().unwrap();
    let hold = hold.expect("the next waiter gets the lock");
    let held_up = got_at - released;
    println!(
        "next waiter in {held_up:?} after the release; lock info {:?}",
        lock.inspect().map(|i| i.holders.len())
    );
    std::thread::sleep(Duration::from_secs(5).saturating_sub(stopped.elapsed()));
    sub.signal(libc::SIGCONT);
    let told = sub.line();
    println!("subprocess: {told}");
    std::thread::sleep(SHORT_LEASE);
    assert!(next_lock.is_held_by(&next_owner).unwrap());
    assert!(!hold.is_lost());
    // A lease (the frozen waiter's grant), not its wait or the next one's (10 s); with room
    // for a slow host.
    assert!(held_up < SHORT_LEASE * 3, "held up {held_up:?}");
    assert!(
        told.contains("is_held_by Ok(false)") && !told.contains("release Ok"),
        "{told}"
    );
}

// ---------------------------------------------------------------------------------------------
// The Redis server stopped for longer than the leases and the command timeout.

#[test]
fn a_redis_stopped_past_the_leases_leaves_no_two_holders_once_continued() {
    use redlock_core::blocking::{Client, wait_lost};
    let server = RedisServer::start();
    let info = server.command(&["INFO", "server"]);
    let pid: libc::pid_t = info
        .lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let client = || {
        Client::from_builder(
            redlock_core::Client::builder(server.url())
                .lease(SHORT_LEASE)
                .command_timeout(Duration::from_secs(1)),
        )
        .unwrap()
    };
    let (a, b, c) = (client(), client(), client());
    let (owner_a, owner_b, owner_c) = (Owner::random(), Owner::random(), Owner::random());
    let lock_a = a.lock("server-stopped").unwrap();
    let lock_b = b.lock("server-stopped").unwrap();
    let lock_c = c.lock("server-stopped").unwrap();
    let hold_a = lock_a
        .acquire(&owner_a, Some(Duration::ZERO), None)
        .unwrap();
    // SAFETY: our own redis-server child.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    let stopped = Instant::now();
    // A waiter during the stop: errors (or times out), never hangs.
    let waiting = std::thread::spawn(move || {
        let got = lock_c.acquire(&owner_c, Some(Duration::from_secs(2)), None);
        (
            got.map(|h| h.fencing_token()).map_err(|e| e.to_string()),
            lock_c,
            owner_c,
            c,
        )
    });
    let during = lock_b.acquire(&owner_b, Some(Duration::ZERO), None);
    println!(
        "during the stop: {:?} after {:?}",
        during.as_ref().map(|h| h.fencing_token()),
        stopped.elapsed()
    );
    assert!(during.is_err());
    let lost_a = wait_lost(&hold_a, Some(Duration::from_secs(3)));
    println!("a lost: {lost_a} after {:?}", stopped.elapsed());
    let (waited, lock_c, owner_c, _c) = waiting.join().unwrap();
    println!("c: {waited:?} after {:?}", stopped.elapsed());
    std::thread::sleep(Duration::from_secs(4).saturating_sub(stopped.elapsed()));
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    assert!(lost_a, "a's hold was reported lost during the stop");
    let hold_b = lock_b
        .acquire(&owner_b, Some(Duration::from_secs(5)), None)
        .expect("b gets the lock after the resume");
    println!(
        "b holds {} after {:?}",
        hold_b.fencing_token(),
        stopped.elapsed()
    );
    std::thread::sleep(Duration::from_secs(1));
    let holders = lock_b.inspect().unwrap().holders;
    println!(
        "holders: {:?}",
        holders.iter().map(|h| &h.owner_token).collect::<Vec<_>>()
    );
    assert_eq!(holders.len(), 1);
    assert!(lock_b.is_held_by(&owner_b).unwrap());
    assert!(!lock_a.is_held_by(&owner_a).unwrap());
    assert!(!lock_c.is_held_by(&owner_c).unwrap());
    assert_eq!(
        lock_a.release(&owner_a).map_err(|e| e.kind()),
        Err(redlock_core::ErrorKind::LockLost)
    );
    std::thread::sleep(SHORT_LEASE * 2);
    assert!(!hold_b.is_lost());
    assert!(lock_b.is_held_by(&owner_b).unwrap());
}
