//! Errors that Redis itself replies with: each call reports the contract's kind for it, and the
//! message keeps Redis' own line (its error code first), whatever path the call took.

mod common;

use std::fmt::Debug;
use std::time::Instant;

use common::*;
use redlock_core::blocking::Client;
use redlock_core::{ErrorKind, Owner, Result};

fn blocking_client(url: String) -> Client {
    let builder = redlock_core::Client::builder(url)
        .command_timeout(ms(1000))
        .recheck_interval(ms(200));
    Client::from_builder(builder).expect("connect")
}

/// The kind of a call's error (None when it succeeded), printed for the failure report.
fn kind<T: Debug>(what: &str, result: Result<T>) -> (String, Option<ErrorKind>) {
    eprintln!("{what}: {result:?}");
    (what.to_owned(), result.err().map(|e| e.kind()))
}

/// A password set while the client was connected, then its connections killed: it reconnects
/// with none. Redis answers a short call `NOAUTH`, but a call of more than 10 arguments (every
/// lock script call) `ERR Protocol error: unauthenticated multibulk length`, and closes the
/// socket. Both are the contract's `Connection` ("auth failed"), for every call.
#[test]
fn a_password_required_while_connected_is_a_connection_error_for_every_call() {
    let server = RedisServer::start();
    let client = blocking_client(server.url());
    let held = Owner::random();
    let taken = client.lock("taken").unwrap();
    taken.acquire(&held, NOW, Some(ms(60_000))).unwrap();
    ok(server.command(&["CONFIG", "SET", "requirepass", "s3cret"]));
    let killed = std::process::Command::new("redis-cli")
        .args([
            "-p",
            &server.port().to_string(),
            "-a",
            "s3cret",
            "--no-auth-warning",
        ])
        .args(["CLIENT", "KILL", "TYPE", "normal"])
        .output()
        .expect("redis-cli");
    assert!(killed.status.success(), "{killed:?}");

    let (me, other) = (Owner::random(), Owner::random());
    let free = client.lock("free").unwrap();
    let rw = client.read_write_lock("rw").unwrap();
    let lease = Some(ms(10_000));
    let outcomes = [
        kind(
            "acquire",
            free.acquire(&me, Some(ms(500)), lease)
                .map(|h| h.fencing_token()),
        ),
        kind(
            "a waiting acquire",
            taken.acquire(&other, Some(ms(500)), lease).map(|_| ()),
        ),
        kind(
            "try_acquire",
            taken.try_acquire(&other, lease).map(|h| h.is_some()),
        ),
        kind("extend", taken.extend(&held, ms(20_000))),
        kind("inspect", taken.inspect().map(|i| i.holder_count)),
        kind("hold_count", taken.hold_count(&held)),
        kind(
            "read",
            rw.read().acquire(&me, Some(ms(500)), lease).map(|_| ()),
        ),
        kind(
            "write",
            rw.write().acquire(&other, Some(ms(500)), lease).map(|_| ()),
        ),
        kind("release", taken.release(&held)),
        kind("force_unlock", client.force_unlock("taken")),
    ];
    let wrong: Vec<_> = outcomes
        .iter()
        .filter(|(_, kind)| *kind != Some(ErrorKind::Connection))
        .collect();
    assert!(wrong.is_empty(), "not a Connection error: {wrong:?}");
}

/// A refusal's message is Redis' own line, code first (`READONLY You can't write against a
/// read only replica.`, `NOPERM ...`), so that callers who match Redis' codes find them.
#[test]
fn a_refusals_message_starts_with_the_servers_error_code() {
    let primary = RedisServer::start();
    let server = RedisServer::start();
    ok(server.command(&["ACL", "SETUSER", "noeval", "on", ">pw", "~*", "&*", "+@all"]));
    ok(server.command(&["ACL", "SETUSER", "noeval", "-evalsha", "-eval"]));
    let url = format!("redis://noeval:pw@127.0.0.1:{}", server.port());
    let refused = blocking_client(url)
        .lock("m")
        .unwrap()
        .acquire(&Owner::random(), NOW, None);
    let message = refused.expect_err("no script rights").to_string();
    assert!(message.contains("redis error: NOPERM "), "{message}");

    let client = blocking_client(server.url());
    ok(server.command(&["REPLICAOF", "127.0.0.1", &primary.port().to_string()]));
    let start = Instant::now();
    let message = loop {
        match client
            .lock("m")
            .unwrap()
            .acquire(&Owner::random(), NOW, Some(ms(5000)))
        {
            Err(e) if e.kind() == ErrorKind::Redis => break e.to_string(),
            other => assert!(start.elapsed() < ms(5000), "{other:?}"),
        }
        std::thread::sleep(ms(50));
    };
    assert!(
        message.contains("redis error: READONLY You can't write"),
        "{message}"
    );
}
