//! Blocking calls while the calling thread keeps receiving signals, as threads of Go, Java or
//! Python hosts do (Go preempts goroutines with SIGURG). A handler installed without
//! `SA_RESTART` interrupts any blocking system call; a direct call must not fail because of it.
//! (Its own test binary: the handler is process-wide.)
#![cfg(unix)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use redlock_core::Owner;
use redlock_core::blocking::Client;
use redlock_core::testing::RedisServer;

static SIGNALS_HANDLED: AtomicU64 = AtomicU64::new(0);

extern "C" fn count_signal(_: libc::c_int) {
    SIGNALS_HANDLED.fetch_add(1, Ordering::Relaxed);
}

#[test]
fn direct_calls_survive_a_stream_of_signals() {
    // SAFETY: installs a handler that only bumps an atomic; no SA_RESTART on purpose.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = count_signal as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut action.sa_mask);
        action.sa_flags = 0;
        assert_eq!(
            libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut()),
            0
        );
    }
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).unwrap();
    let lock = client.lock("signalled").unwrap();
    let owner = Owner::random();
    let done = Arc::new(AtomicBool::new(false));
    // SAFETY: pthread_self of this (the test) thread, signalled while it runs below.
    let target = unsafe { libc::pthread_self() };
    let sender = {
        let done = done.clone();
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                // SAFETY: the target thread outlives this loop (joined before it returns).
                unsafe { libc::pthread_kill(target, libc::SIGUSR1) };
                std::thread::sleep(Duration::from_micros(50));
            }
        })
    };
    let mut failures = Vec::new();
    for _ in 0..2000 {
        if let Err(e) = lock.acquire(&owner, None, Some(Duration::from_secs(10))) {
            failures.push(format!("acquire: {e}"));
            continue;
        }
        if let Err(e) = lock.release(&owner) {
            failures.push(format!("release: {e}"));
        }
    }
    done.store(true, Ordering::Relaxed);
    sender.join().unwrap();
    assert!(
        SIGNALS_HANDLED.load(Ordering::Relaxed) > 100,
        "the signals arrived"
    );
    assert!(
        failures.is_empty(),
        "{} calls failed, e.g. {:?}",
        failures.len(),
        failures.first()
    );
    assert!(!lock.is_locked().unwrap());
}

// ---------------------------------------------------------------------------------------------
// SIGPIPE: a C host keeps its default action (the process ends), unlike Rust programs, Python
// and the JVM, which ignore it. A write to a connection Redis closed (its idle `timeout`, a
// restart, a proxy, CLIENT KILL) must fail with EPIPE and cost a call at most, never the host.
// Run in a subprocess of this test binary with SIGPIPE back at its default, as a C host has it.
// (The signals audit, 2026-11-27: a C host died within 0.1-2.6 s, over TCP and Unix sockets.)

const SIGPIPE_URL_ENV: &str = "REDLOCK_SIGPIPE_URL";

#[test]
fn a_connection_closed_by_redis_does_not_kill_a_host_that_keeps_sigpipe_default_over_tcp() {
    sigpipe_storm(|server| server.url());
}

#[test]
fn a_connection_closed_by_redis_does_not_kill_a_host_that_keeps_sigpipe_default_over_unix() {
    sigpipe_storm(|server| format!("unix://{}", server.unix_socket().display()));
}

/// The subprocess' part: lock calls (waits included, so pub/sub too) for three seconds while
/// the parent kills every connection of the server every 20 ms. Errors are allowed; dying is not.
#[test]
fn sigpipe_scenario() {
    let Ok(url) = std::env::var(SIGPIPE_URL_ENV) else {
        return; // only in the subprocess
    };
    // SAFETY: restores the default action, as a C program has it.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    // Connecting may fail too, its connections killed as they open.
    let builder = redlock_core::Client::builder(url.as_str()).lease(Duration::from_millis(900));
    let client = loop {
        if let Ok(client) = Client::from_builder(builder.clone()) {
            break Arc::new(client);
        }
    };
    let end = std::time::Instant::now() + Duration::from_secs(3);
    let workers: Vec<_> = (0..6)
        .map(|i| {
            let client = client.clone();
            std::thread::spawn(move || {
                let lock = client.lock(&format!("piped-{}", i % 2)).unwrap();
                let owner = Owner::random();
                let (mut calls, mut errors) = (0u64, 0u64);
                while std::time::Instant::now() < end {
                    let wait = Some(Duration::from_millis(if i % 3 == 0 { 0 } else { 200 }));
                    match lock.acquire(&owner, wait, None) {
                        Ok(_) => {
                            let _ = lock.is_locked();
                            if lock.release(&owner).is_err() {
                                errors += 1;
                            }
                        }
                        Err(_) => errors += 1,
                    }
                    let _ = lock.inspect(); // on the command connection
                    calls += 1;
                }
                (calls, errors)
            })
        })
        .collect();
    for worker in workers {
        let (calls, errors) = worker.join().unwrap();
        println!("{calls} acquires, {errors} errors");
    }
}

fn sigpipe_storm(url_of: fn(&RedisServer) -> String) {
    let server = RedisServer::start();
    let mut child = sigpipe_scenario_on(url_of(&server));
    survives_killing(&mut child, || {
        server.command(&["CLIENT", "KILL", "TYPE", "normal"]);
        server.command(&["CLIENT", "KILL", "TYPE", "pubsub"]);
    });
}

/// This test binary running `sigpipe_scenario` alone, on `url`.
fn sigpipe_scenario_on(url: String) -> std::process::Child {
    std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "sigpipe_scenario",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(SIGPIPE_URL_ENV, url)
        .spawn()
        .unwrap()
}

/// Runs `kill` every 20 ms until `child` ends, which must be of its own accord.
fn survives_killing(child: &mut std::process::Child, mut kill: impl FnMut()) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "the subprocess hung");
        kill();
        std::thread::sleep(Duration::from_millis(20));
    };
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        status.signal(),
        None,
        "the host was killed by a signal: {status:?}"
    );
    assert!(status.success(), "{status:?}");
}

/// Redis at `maxclients` accepts a connection, writes an error and closes it: the command
/// connection's reconnect (a shared future that a blocking caller awaits, so polls on its own
/// thread) wrote its set-up with redis-rs' `writev` there, to a closed socket (the review of the
/// SIGPIPE fix, 2026-11-27).
#[test]
fn reconnects_refused_at_maxclients_do_not_kill_a_host_that_keeps_sigpipe_default() {
    use std::io::{Read, Write};
    let server = RedisServer::start();
    let socket = server.unix_socket();
    let mut child = sigpipe_scenario_on(format!("unix://{}", socket.display()));
    std::thread::sleep(Duration::from_millis(1_000));
    // One admin connection for the whole storm: at maxclients 1 no other is let in.
    let mut admin = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    let mut command = |args: &[&str]| {
        let mut out = format!("*{}\r\n", args.len());
        for arg in args {
            out.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
        }
        admin.write_all(out.as_bytes()).unwrap();
        let mut reply = [0; 512];
        let _ = admin.read(&mut reply).unwrap();
    };
    command(&["CONFIG", "SET", "maxclients", "1"]);
    survives_killing(&mut child, || {
        command(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"]);
        command(&["CLIENT", "KILL", "TYPE", "pubsub"]);
    });
}
