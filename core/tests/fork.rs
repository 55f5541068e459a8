//! fork() while other threads of the process are inside blocking calls of the core: uncontended
//! acquire/release loops, contended blocking acquires that wait, an acquire that waits on a
//! lock the process holds (watched, renewed by the watchdog), and client connect/close loops.
//! The children must finish their first calls (on the inherited client and on a new one) in
//! bounded time, must be excluded from what the parent holds, and must not release it; the
//! parent's calls must keep working with its own replies.
//!
//! The forking runs in a subprocess of this test binary (REDLOCK_FORK_SCENARIO=1), so the test
//! harness' own threads are never forked.

use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use redlock_core::blocking::{CancelToken, Client};
use redlock_core::testing::RedisServer;
use redlock_core::{AcquireOptions, Error, Owner};

/// REDLOCK_FORK_COUNT overrides it.
const FORKS: usize = 200;

fn forks() -> usize {
    std::env::var("REDLOCK_FORK_COUNT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(FORKS)
}
const CHILD_LIMIT: Duration = Duration::from_secs(10);

#[test]
fn fork_while_other_threads_are_inside_blocking_calls() {
    in_own_process(
        "fork_while_other_threads_are_inside_blocking_calls",
        scenario,
    );
}

/// Runs `scenario` in a subprocess of this test binary (only the test `name` runs there), so
/// that the test harness' own threads are never forked; the test fails if it does.
fn in_own_process(name: &str, scenario: fn()) {
    if std::env::var_os("REDLOCK_FORK_SCENARIO").is_some() {
        scenario();
        return;
    }
    let server = RedisServer::start();
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env("REDLOCK_FORK_SCENARIO", "1")
        .env("REDLOCK_FORK_URL", server.url())
        .output()
        .unwrap();
    println!("{}", String::from_utf8_lossy(&out.stdout));
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "scenario failed: {:?}", out.status);
}

/// Waits up to `limit` for child `pid`: its exit status, or None when it had to be killed.
fn wait_or_kill(pid: i32, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    let mut status = 0;
    while Instant::now() < deadline {
        if unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } != 0 {
            return Some(std::process::ExitStatus::from_raw(status));
        }
        thread::sleep(Duration::from_millis(5));
    }
    None
}

/// Kills a child that `wait_or_kill` gave up on (after its stacks were shown).
fn kill(pid: i32) {
    let mut status = 0;
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, &mut status, 0);
    }
}

fn dump_stacks(pid: i32) {
    let out = Command::new("gdb")
        .args([
            "-p",
            &pid.to_string(),
            "-batch",
            "-ex",
            "thread apply all bt 25",
        ])
        .output();
    if let Ok(out) = out {
        for line in String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.starts_with('#') || l.starts_with("Thread"))
            .take(60)
        {
            eprintln!("    {line}");
        }
    }
}

/// The child: returns the step it failed at (0: fine). Writes each step it starts to `progress`.
fn child(progress: i32, client: &Client, held: &str, parent: &Owner, url: &str) -> i32 {
    let step = |n: u8| unsafe {
        libc::write(progress, &n as *const u8 as *const libc::c_void, 1);
    };
    step(1);
    let me = Owner::random();
    let inherited = match client.lock(held) {
        Ok(l) => l,
        Err(_) => return 11,
    };
    step(2);
    match inherited.try_acquire(&me, Some(Duration::from_secs(5))) {
        Ok(None) => {}
        _ => return 12,
    }
    step(3);
    match inherited.is_held_by(parent) {
        Ok(true) => {}
        _ => return 13,
    }
    step(4);
    let fresh = match Client::connect(url) {
        Ok(c) => c,
        Err(_) => return 14,
    };
    step(5);
    let fresh_held = fresh.lock(held).unwrap();
    match fresh_held.try_acquire(&me, Some(Duration::from_secs(5))) {
        Ok(None) => {}
        _ => return 15,
    }
    step(6);
    let own = fresh
        .lock(&format!("fork-test-child-{}", std::process::id()))
        .unwrap();
    if own
        .acquire(
            &me,
            Some(Duration::from_secs(1)),
            Some(Duration::from_secs(5)),
        )
        .is_err()
    {
        return 16;
    }
    if own.release(&me) != Ok(0) {
        return 17;
    }
    step(7);
    match inherited.release(&me) {
        Err(Error::NotHeld) => {}
        _ => return 18,
    }
    step(8);
    0
}

const STEPS: [&str; 9] = [
    "before any call",
    "client.lock on inherited client",
    "try_acquire on inherited client",
    "is_held_by on inherited client",
    "Client::connect (new client)",
    "try_acquire on new client",
    "acquire/release own name on new client",
    "release of parent's lock with child's owner",
    "done",
];

fn scenario() {
    let url = std::env::var("REDLOCK_FORK_URL").unwrap();
    let client = Client::connect(&url).unwrap();
    let held = format!("fork-test-held-{}", std::process::id());
    let parent = Owner::random();
    let held_lock = client.lock(&held).unwrap();
    let parent_hold = held_lock
        .acquire(&parent, Some(Duration::ZERO), None)
        .unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let mut threads = Vec::new();
    // Two uncontended loops, two contended ones (they wait on each other).
    for i in 0..4 {
        let lock = if i % 2 == 0 {
            client.lock(&format!("fork-test-own-{i}")).unwrap()
        } else {
            client.lock("fork-test-shared").unwrap()
        };
        let (stop, rounds, failures) = (stop.clone(), rounds.clone(), failures.clone());
        threads.push(thread::spawn(move || {
            let me = Owner::random();
            let mut last = 0;
            while !stop.load(Ordering::Relaxed) {
                match lock.acquire(&me, Some(Duration::from_secs(10)), None) {
                    Ok(h) => {
                        if h.hold_count() != 1 {
                            failures
                                .lock()
                                .unwrap()
                                .push(format!("hold count {}", h.hold_count()));
                        }
                        if i % 2 == 0 {
                            if h.fencing_token() <= last {
                                failures.lock().unwrap().push("token went back".into());
                            }
                            last = h.fencing_token();
                        }
                    }
                    Err(e) => failures.lock().unwrap().push(format!("acquire: {e}")),
                }
                match lock.release(&me) {
                    Ok(0) => {}
                    other => failures.lock().unwrap().push(format!("release: {other:?}")),
                }
                rounds.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    // One acquire that waits on the held lock the whole time (cancelled at the end).
    let cancel = CancelToken::new();
    {
        let lock = client.lock(&held).unwrap();
        let cancel = cancel.clone();
        threads.push(thread::spawn(move || {
            let r = lock.acquire_with(
                &Owner::random(),
                AcquireOptions::new(None, None),
                Some(&cancel),
            );
            assert!(matches!(r, Err(Error::Cancelled)), "{r:?}");
        }));
    }
    // Connect/close loop.
    {
        let (stop, url) = (stop.clone(), url.clone());
        threads.push(thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if let Ok(c) = Client::connect(&url) {
                    let _ = c.lock("fork-test-cc").and_then(|l| l.is_locked());
                    c.close();
                }
            }
        }));
    }
    thread::sleep(Duration::from_millis(200));

    let (mut hangs, mut bad) = (0, 0);
    for f in 0..forks() {
        let mut fds = [0i32; 2];
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        thread::sleep(Duration::from_millis((f % 3) as u64));
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            unsafe { libc::close(fds[0]) };
            let code = child(fds[1], &client, &held, &parent, &url);
            unsafe { libc::_exit(code) };
        }
        unsafe {
            libc::close(fds[1]);
            libc::fcntl(fds[0], libc::F_SETFL, libc::O_NONBLOCK);
        }
        let exited = wait_or_kill(pid, CHILD_LIMIT);
        let mut buf = [0u8; 16];
        let n = unsafe { libc::read(fds[0], buf.as_mut_ptr() as *mut libc::c_void, 16) };
        let last = if n > 0 {
            buf[n as usize - 1] as usize
        } else {
            0
        };
        match exited {
            None => {
                hangs += 1;
                eprintln!(
                    "fork {f}: child {pid} hung in step \"{}\"; its threads:",
                    STEPS[last]
                );
                if hangs <= 2 {
                    dump_stacks(pid);
                }
                kill(pid);
            }
            Some(status) if !status.success() => {
                bad += 1;
                eprintln!(
                    "fork {f}: child failed ({status:?}) in step \"{}\"",
                    STEPS[last]
                );
            }
            Some(_) => {}
        }
        unsafe { libc::close(fds[0]) };
    }
    stop.store(true, Ordering::Relaxed);
    cancel.cancel();
    for t in threads {
        t.join().unwrap();
    }
    let failures = failures.lock().unwrap().clone();
    eprintln!(
        "forks: {}, hung children: {hangs}, failed children: {bad}, parent rounds: {}, parent failures: {failures:?}",
        forks(),
        rounds.load(Ordering::Relaxed)
    );
    assert_eq!(
        held_lock.hold_count(&parent).unwrap(),
        1,
        "parent's hold gone"
    );
    assert!(!parent_hold.is_lost(), "parent's hold lost");
    assert_eq!(held_lock.release(&parent), Ok(0));
    assert!(failures.is_empty(), "{failures:?}");
    assert_eq!((hangs, bad), (0, 0), "children hung or failed");
}

/// The same, narrowed to the blocking client's own locks: two threads call `Lock::stats` (no
/// Redis round trip: only the client's and the view's mutexes) while the process forks; each
/// child makes one call on the inherited client.
#[test]
fn fork_while_threads_are_inside_calls_that_need_no_redis() {
    in_own_process(
        "fork_while_threads_are_inside_calls_that_need_no_redis",
        local_calls_scenario,
    );
}

fn local_calls_scenario() {
    let url = std::env::var("REDLOCK_FORK_URL").unwrap();
    let client = Client::connect(&url).unwrap();
    let lock = Arc::new(client.lock("fork-test-local").unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let (lock, stop) = (lock.clone(), stop.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let _ = lock.stats();
                }
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(20));
    let (forks, mut hangs, mut bad) = (50, 0, 0);
    for f in 0..forks {
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let me = Owner::random();
            let code = match lock.try_acquire(&me, Some(Duration::from_secs(5))) {
                Ok(Some(_)) if lock.release(&me) == Ok(0) => 0,
                other => {
                    eprintln!("child {}: try_acquire gave {other:?}", std::process::id());
                    1
                }
            };
            unsafe { libc::_exit(code) };
        }
        match wait_or_kill(pid, Duration::from_secs(3)) {
            None => {
                hangs += 1;
                if hangs == 1 {
                    eprintln!("fork {f}: child {pid} hung in its first call; its threads:");
                    dump_stacks(pid);
                }
                kill(pid);
            }
            Some(status) if !status.success() => bad += 1,
            Some(_) => {}
        }
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    eprintln!("forks: {forks}, hung children: {hangs}, failed children: {bad}");
    assert_eq!((hangs, bad), (0, 0), "children hung or failed");
}
