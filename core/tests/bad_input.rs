//! Bad input is answered with a clear error of the contract's kinds, never a crash or a hang.

mod common;

use std::time::Duration;

use common::*;
use redlock_core::{Client, Error, ErrorKind, MAX_LEASE, MAX_NAME_LEN, Owner};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_empty_and_oversized_are_invalid() {
    let server = RedisServer::start();
    let client = connect(&server).await;
    for bad in [String::new(), "n".repeat(MAX_NAME_LEN + 1)] {
        assert_eq!(
            client.lock(&bad).err().map(|e| e.kind()),
            Some(ErrorKind::InvalidArgument)
        );
        assert_eq!(
            client.read_write_lock(&bad).err().map(|e| e.kind()),
            Some(ErrorKind::InvalidArgument)
        );
        assert_eq!(
            client.inspect(&bad).await.unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
        assert_eq!(
            client.force_unlock(&bad).await.unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
    }
    assert!(client.lock(&"n".repeat(MAX_NAME_LEN)).is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn odd_names_work_and_stay_distinct() {
    let server = RedisServer::start();
    let client = connect(&server).await;
    let names = [
        "{braces}",
        "a}b{c",
        "colons:in:it",
        "sp ace",
        "🔒✨",
        "%7B",
        "{",
        "}",
        "\u{0}nul",
        &"n".repeat(MAX_NAME_LEN),
    ];
    let owners: Vec<Owner> = names.iter().map(|_| Owner::random()).collect();
    for (name, owner) in names.iter().zip(&owners) {
        client
            .lock(name)
            .unwrap()
            .acquire(owner, NOW, None)
            .await
            .unwrap();
    }
    // Every name is its own lock: each is held by its own owner only.
    for (name, owner) in names.iter().zip(&owners) {
        let info = client.inspect(name).await.unwrap();
        assert_eq!(info.holders.len(), 1, "{name}");
        assert_eq!(info.holders[0].owner_token, owner.token(), "{name}");
        assert_eq!(info.name, *name);
    }
    for (name, owner) in names.iter().zip(&owners) {
        client.lock(name).unwrap().release(owner).await.unwrap();
    }
    assert_eq!(lock_keys(&server), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_and_huge_durations() {
    let server = RedisServer::start();
    let client = connect(&server).await;
    let lock = client.lock("durations").unwrap();
    let o = Owner::random();
    assert_eq!(
        lock.acquire(&o, NOW, Some(Duration::ZERO))
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        lock.acquire(&o, NOW, Some(Duration::from_micros(10)))
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        lock.acquire(&o, NOW, Some(MAX_LEASE + ms(1)))
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        lock.acquire(&o, NOW, Some(Duration::MAX))
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        lock.extend(&o, Duration::ZERO).await.unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    // A huge wait is "forever" (never an overflow): it succeeds at once on a free lock.
    lock.acquire(&o, Some(Duration::MAX), Some(MAX_LEASE))
        .await
        .unwrap();
    assert!(
        lock.inspect().await.unwrap().lease_left.unwrap()
            > Duration::from_secs(9 * 365 * 24 * 3600)
    );
    lock.release(&o).await.unwrap();
    // Zero wait on a taken lock is a single try.
    lock.acquire(&o, NOW, None).await.unwrap();
    assert_eq!(
        lock.acquire(&Owner::random(), NOW, None).await.unwrap_err(),
        Error::Timeout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_and_odd_tokens() {
    let server = RedisServer::start();
    let client = connect(&server).await;
    assert_eq!(
        Owner::from_token("").unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        Owner::from_token("t".repeat(513)).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    let lock = client.lock("tokens").unwrap();
    let real = Owner::from_token("r:tok{with}odd🔒chars").unwrap();
    lock.acquire(&real, NOW, None).await.unwrap();
    for wrong in ["r:tok", "w", "r:tok{with}odd🔒chars ", "n"] {
        let wrong = Owner::from_token(wrong).unwrap();
        assert_eq!(lock.release(&wrong).await.unwrap_err(), Error::NotHeld);
        assert!(!lock.is_held_by(&wrong).await.unwrap());
    }
    assert_eq!(lock.release(&real).await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_client_refuses_everything() {
    let server = RedisServer::start();
    let client = connect(&server).await;
    let lock = client.lock("closed").unwrap();
    let o = Owner::random();
    client.close();
    client.close(); // twice is harmless
    assert!(client.is_closed());
    assert_eq!(
        lock.acquire(&o, NOW, None).await.unwrap_err(),
        Error::Closed
    );
    assert_eq!(lock.release(&o).await.unwrap_err(), Error::Closed);
    assert_eq!(lock.is_locked().await.unwrap_err(), Error::Closed);
    assert_eq!(lock.inspect().await.unwrap_err(), Error::Closed);
    assert_eq!(client.lock("other").err(), Some(Error::Closed));
}

/// Closing stops the watchdog, so a hold it kept will lapse: waiting for its loss must end
/// rather than hang forever (the C ABI's `rl_hold_wait_lost` with no timeout did).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_client_ends_waits_for_a_kept_hold_to_be_lost() {
    let server = RedisServer::start();
    let client = connect(&server).await;
    let lock = client.lock("closed while kept").unwrap();
    let kept = lock.acquire(&Owner::random(), NOW, None).await.unwrap();
    let waiting = tokio::spawn(async move {
        kept.lost().await;
        kept.is_lost()
    });
    tokio::time::sleep(ms(100)).await;
    client.close();
    let lost = tokio::time::timeout(ms(5_000), waiting).await;
    assert!(matches!(lost, Ok(Ok(true))), "{lost:?}");
    assert_eq!(client.watched_holds(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_client_settings_are_invalid() {
    let server = RedisServer::start();
    let url = server.url();
    for builder in [
        Client::builder(&url).prefix(""),
        Client::builder(&url).prefix("a{b}"),
        // Its locks' keys would be prefix "app"'s fencing counters (app:fence:{S}).
        Client::builder(&url).prefix("app:fence"),
        Client::builder(&url).lease(Duration::ZERO),
        Client::builder(&url).lease(ms(10)),
        Client::builder(&url).command_timeout(Duration::ZERO),
        Client::builder(&url).recheck_interval(Duration::ZERO),
        // Announced for 0 ms (four intervals in whole ms): as if it never waited.
        Client::builder(&url).recheck_interval(Duration::from_micros(200)),
        Client::builder(&url).recheck_interval(MAX_LEASE + Duration::from_millis(1)),
        Client::builder(&url).recheck_interval(Duration::MAX),
        Client::builder(&url).ping_interval(Some(Duration::ZERO)),
        Client::builder(&url).direct_connections(65),
        Client::builder(&url).direct_connections(usize::MAX),
        Client::builder("not a url"),
        Client::builder("http://127.0.0.1:1"),
        Client::builder(""),
    ] {
        let err = builder.connect().await.err().expect("refused");
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    }
    // Never pinging, or all but never, is allowed.
    for interval in [None, Some(Duration::MAX)] {
        let client = Client::builder(&url)
            .ping_interval(interval)
            .connect()
            .await;
        let (lock, owner) = (
            client.unwrap().lock("ping interval").unwrap(),
            Owner::random(),
        );
        lock.acquire(&owner, NOW, None).await.unwrap();
        lock.release(&owner).await.unwrap();
    }
}

/// As blocking.rs' direct test, on the async API: timeouts too long to count are "never".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_with_timeouts_too_long_to_count_still_work() {
    let server = RedisServer::start();
    let client = builder(&server)
        .command_timeout(Duration::MAX)
        .connect_timeout(Duration::MAX)
        .connect()
        .await
        .unwrap();
    let lock = client.lock("huge timeouts").unwrap();
    let (owner, other) = (Owner::random(), Owner::random());
    lock.acquire(&owner, NOW, None).await.unwrap();
    lock.release(&owner).await.unwrap();
    lock.acquire(&owner, NOW, Some(ms(5000))).await.unwrap();
    // A wait that times out, and one dropped: the other owner's next call follows its tidy-up.
    let timed_out = lock.acquire(&other, Some(ms(50)), None).await;
    assert_eq!(timed_out.unwrap_err().kind(), ErrorKind::Timeout);
    let waiting = {
        let (lock, other) = (lock.clone(), other.clone());
        tokio::spawn(async move { lock.acquire(&other, None, None).await })
    };
    tokio::time::sleep(ms(100)).await;
    waiting.abort();
    assert_eq!(lock.hold_count(&other).await.unwrap(), 0);
    lock.release(&owner).await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefixes_separate_key_spaces() {
    let server = RedisServer::start();
    let a = builder(&server).prefix("app-a").connect().await.unwrap();
    let b = builder(&server).prefix("app-b").connect().await.unwrap();
    a.lock("x")
        .unwrap()
        .acquire(&Owner::random(), NOW, None)
        .await
        .unwrap();
    b.lock("x")
        .unwrap()
        .acquire(&Owner::random(), NOW, None)
        .await
        .unwrap();
}
