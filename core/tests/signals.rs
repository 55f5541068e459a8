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
