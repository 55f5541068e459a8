//! Fencing tokens: strictly increasing per name for exclusive/write holds, across free periods.

mod common;

use common::*;
use std::time::Duration;

use redlock_core::{ErrorKind, Owner};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_tokens_strictly_increase_over_a_thousand_acquisitions() {
    let server = RedisServer::start();
    let a = connect(&server).await;
    let b = connect(&server).await;
    let mut last = 0u64;
    for i in 0..1000u32 {
        let client = if i % 2 == 0 { &a } else { &b };
        let lock = client.lock("fenced").unwrap();
        let owner = Owner::random();
        let hold = lock.acquire(&owner, NOW, None).await.unwrap();
        assert!(
            hold.fencing_token() > last,
            "token went from {last} to {}",
            hold.fencing_token()
        );
        if i % 10 == 0 {
            // A reentrant re-acquire returns the token of the hold it re-enters.
            let again = lock.acquire(&owner, NOW, None).await.unwrap();
            assert_eq!(again.fencing_token(), hold.fencing_token());
            lock.release(&owner).await.unwrap();
        }
        last = hold.fencing_token();
        lock.release(&owner).await.unwrap();
        // The lock is free here: the counter must survive free periods.
        assert_eq!(lock_keys(&server), Vec::<String>::new());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_counters_stay_bounded_by_hash_slots() {
    // 3 000 names used once each: no per-name key survives, at most one counter per slot.
    let server = RedisServer::start();
    let client = connect(&server).await;
    let owner = Owner::random();
    for i in 0..3000 {
        let lock = client.lock(&format!("job:{i}")).unwrap();
        lock.acquire(&owner, NOW, None).await.unwrap();
        lock.release(&owner).await.unwrap();
    }
    assert_eq!(lock_keys(&server), Vec::<String>::new());
    assert!(server.dbsize() <= 3000);
    let distinct_slots: std::collections::HashSet<u16> = (0..3000)
        .map(|i| client.lock(&format!("job:{i}")).unwrap().keys().slot())
        .collect();
    assert_eq!(server.dbsize(), distinct_slots.len() as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_get_tokens_too_and_writers_after_them_get_larger_ones() {
    let server = RedisServer::start();
    let client = connect(&server).await;
    let rw = client.read_write_lock("fenced-rw").unwrap();
    let (r, w) = (Owner::random(), Owner::random());
    let read = rw.read().acquire(&r, NOW, None).await.unwrap();
    rw.read().release(&r).await.unwrap();
    let write = rw.write().acquire(&w, NOW, None).await.unwrap();
    assert!(read.fencing_token() > 0);
    assert!(write.fencing_token() > read.fencing_token());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fences_from_two_to_the_53_on_are_refused_not_repeated() {
    // Lua's numbers are doubles: from 2^53 on, two fences drawn one after the other could be
    // the same number. The last exact one is handed out; after it, acquires fail clearly and a
    // release grants nobody the lock, and nothing is left behind.
    let server = RedisServer::start();
    let client = connect(&server).await;
    let rw = client.read_write_lock("spent").unwrap();
    let (a, b, r) = (Owner::random(), Owner::random(), Owner::random());
    rw.write().acquire(&a, NOW, None).await.unwrap();
    rw.write().release(&a).await.unwrap();
    let counters = server.command(&["KEYS", "*:fence:*"]);
    let counter = counters.lines().last().unwrap();
    server.command(&["SET", counter, "9007199254740990"]); // 2^53 - 2

    let hold = rw.write().acquire(&a, NOW, Some(ms(30_000))).await.unwrap();
    assert_eq!(hold.fencing_token(), 9_007_199_254_740_991); // 2^53 - 1, exact
    let other = connect(&server).await;
    let waiter_lock = other.lock("spent").unwrap();
    let waiter = tokio::spawn(async move {
        waiter_lock
            .acquire(&b, Some(Duration::from_secs(10)), Some(ms(30_000)))
            .await
    });
    while rw.write().inspect().await.unwrap().waiting_writers < 1 {
        tokio::time::sleep(ms(2)).await;
    }
    rw.write().release(&a).await.unwrap();
    let refused = waiter
        .await
        .unwrap()
        .expect_err("no fence is left to grant");
    assert_eq!(refused.kind(), ErrorKind::Redis);
    assert!(refused.to_string().contains("2^53"), "{refused}");

    for attempt in [
        rw.write().acquire(&a, NOW, None),
        rw.read().acquire(&r, NOW, None),
    ] {
        let refused = attempt.await.expect_err("no fence is left");
        assert_eq!(refused.kind(), ErrorKind::Redis, "{refused}");
    }
    assert!(!rw.write().is_locked().await.unwrap());
    assert_eq!(lock_keys(&server), Vec::<String>::new());
}

/// The owner's fencing token per Redis, asked through any client: the hold's own, the same on
/// re-entry, and none once the hold is released elsewhere, has expired or was force-unlocked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fencing_token_asked_of_redis_is_the_current_holds_or_none() {
    let server = RedisServer::start();
    let (mine, elsewhere) = (connect(&server).await, connect(&server).await);
    let owner = Owner::random();
    let handed = Owner::from_token(owner.token()).unwrap();
    let rw = mine.read_write_lock("asked fence").unwrap();
    let rw_elsewhere = elsewhere.read_write_lock("asked fence").unwrap();
    assert_eq!(rw.write().fencing_token(&owner).await.unwrap(), None);

    let fence = rw
        .write()
        .acquire(&owner, NOW, None)
        .await
        .unwrap()
        .fencing_token();
    rw_elsewhere
        .write()
        .acquire(&handed, NOW, None)
        .await
        .unwrap();
    assert_eq!(
        rw_elsewhere.write().fencing_token(&handed).await.unwrap(),
        Some(fence)
    );
    // A downgrade: the read hold has a token of its own, larger.
    let read_fence = rw
        .read()
        .acquire(&owner, NOW, None)
        .await
        .unwrap()
        .fencing_token();
    assert!(read_fence > fence);
    assert_eq!(
        rw.read().fencing_token(&owner).await.unwrap(),
        Some(read_fence)
    );
    assert_eq!(
        rw.read().fencing_token(&Owner::random()).await.unwrap(),
        None
    );
    for _ in 0..2 {
        rw_elsewhere.write().release(&handed).await.unwrap();
    }
    assert_eq!(rw.write().fencing_token(&owner).await.unwrap(), None);
    assert_eq!(
        rw.read().fencing_token(&owner).await.unwrap(),
        Some(read_fence)
    );
    rw.read().release(&owner).await.unwrap();
    assert_eq!(rw.read().fencing_token(&owner).await.unwrap(), None);

    let lock = mine.lock("asked fence, expired").unwrap();
    lock.acquire(&owner, NOW, Some(ms(100))).await.unwrap();
    tokio::time::sleep(ms(300)).await;
    assert_eq!(lock.fencing_token(&owner).await.unwrap(), None);
    lock.acquire(&owner, NOW, None).await.unwrap();
    assert!(lock.force_unlock().await.unwrap());
    assert_eq!(lock.fencing_token(&owner).await.unwrap(), None);
}
