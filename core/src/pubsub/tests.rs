//! Unit tests of the hub's hand-out: grants read early in the socket and late by the task,
//! and the right to watch the socket. (Waiting through Redis is tested in `core/tests`.)

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;

use super::*;

/// Shared state with one lock channel `L:ch` (and its grant channel `L:ch:test`).
fn shared_with_channel() -> (Arc<Shared>, Arc<Signal>) {
    let shared = Arc::new(Shared::default());
    let signal = Arc::new(Signal::default());
    let state = ChannelState {
        signal: signal.clone(),
        users: 1,
        confirmed: true,
        idle_since: None,
        waiting_for_confirmation: Vec::new(),
    };
    shared.channels.lock().unwrap().insert("L:ch".into(), state);
    (shared, signal)
}

/// A RESP2 pub/sub message frame.
fn message(channel: &str, payload: &str) -> Vec<u8> {
    let part = |p: &str| format!("${}\r\n{p}\r\n", p.len());
    format!(
        "*3\r\n{}{}{}",
        part("message"),
        part(channel),
        part(payload)
    )
    .into_bytes()
}

fn task_reads(shared: &Shared, channel: &str, payload: &str) {
    let channels = shared.channels.lock().unwrap();
    dispatch(
        &channels,
        ":test",
        channel,
        payload.as_bytes(),
        false,
        Instant::now(),
    );
}

#[test]
fn a_grant_is_handed_out_once_whether_read_early_late_or_both() {
    let (shared, signal) = shared_with_channel();
    let fires = || signal.messages.load(Ordering::SeqCst);
    let take = |waiter: &str| {
        let taken = signal.grants.lock().unwrap().untaken.remove(waiter);
        taken.map(|(fence, _)| fence)
    };

    // Read early by a waiter (twice: a message still unread may be looked at again), then by
    // the task: one hand-out, one wake-up.
    signal.grant("c-1:tok", 7, true, Instant::now());
    signal.grant("c-1:tok", 7, true, Instant::now());
    assert_eq!((take("c-1:tok"), fires()), (Some(7), 1));
    task_reads(&shared, "L:ch:test", "g:7:c-1:tok");
    assert_eq!((take("c-1:tok"), fires()), (None, 1));

    // Read by the task alone: handed out as always.
    task_reads(&shared, "L:ch:test", "g:8:c-2:tok");
    assert_eq!((take("c-2:tok"), fires()), (Some(8), 2));

    // A release message wakes the channel's waiters when the task reads it, never early.
    let channels = shared.channels.lock().unwrap();
    dispatch(
        &channels,
        ":test",
        "L:ch",
        b"released",
        true,
        Instant::now(),
    );
    assert_eq!(fires(), 2);
    dispatch(
        &channels,
        ":test",
        "L:ch",
        b"released",
        false,
        Instant::now(),
    );
    assert_eq!(fires(), 3);
}

#[test]
fn a_waiter_finds_a_grant_in_the_socket_without_taking_the_bytes_out() {
    let (shared, signal) = shared_with_channel();
    let (mut redis_side, mut client_side) = UnixStream::pair().unwrap();
    let watched = WatchedSocket::over(&shared, client_side.as_raw_fd());
    let mut sent = message("L:ch", "released");
    sent.extend(message("L:ch:test", "g:9:c-3:tok"));
    redis_side.write_all(&sent).unwrap();

    watched.grant_early();
    assert_eq!(
        signal
            .grants
            .lock()
            .unwrap()
            .untaken
            .get("c-3:tok")
            .map(|g| g.0),
        Some(9)
    );
    assert_eq!(
        signal.messages.load(Ordering::SeqCst),
        1,
        "the grant alone woke anyone"
    );
    // Every byte is still there for the connection task.
    let mut unread = vec![0; sent.len()];
    client_side.read_exact(&mut unread).unwrap();
    assert_eq!(unread, sent);
}

#[test]
fn bytes_that_are_not_a_whole_grant_of_this_client_hand_out_nothing() {
    let grant = message("L:ch:test", "g:9:c-3:tok");
    let cases = [
        // The end of a message the task has half read, then a whole grant behind it.
        [&grant[5..], &grant[..]].concat(),
        // A grant on the channel of another client.
        message("L:ch:other", "g:9:c-4:tok"),
        // A grant cut short (the rest not arrived yet).
        grant[..grant.len() - 3].to_vec(),
        // Not a message at all.
        b"+OK\r\n".to_vec(),
    ];
    for bytes in cases {
        let (shared, signal) = shared_with_channel();
        let (mut redis_side, client_side) = UnixStream::pair().unwrap();
        let watched = WatchedSocket::over(&shared, client_side.as_raw_fd());
        redis_side.write_all(&bytes).unwrap();
        watched.grant_early();
        assert!(
            signal.grants.lock().unwrap().untaken.is_empty(),
            "{bytes:?}"
        );
        assert_eq!(signal.messages.load(Ordering::SeqCst), 0, "{bytes:?}");
    }
}

#[test]
fn one_waiter_at_a_time_may_watch_the_socket() {
    // Never connects: the hub's task starts with its first subscription.
    let redis = redis::Client::open("redis://127.0.0.1:1").unwrap();
    let timeouts = (Duration::from_secs(1), Duration::from_secs(1));
    let hub = PubSubHub::new(redis, CancellationToken::new(), timeouts, Duration::ZERO);
    let first = hub.watch_socket().expect("free");
    assert!(hub.watch_socket().is_none());
    assert_eq!(first.fd(), None, "not connected");
    drop(first);
    assert!(hub.watch_socket().is_some());
}
