//! Fencing tokens: strictly increasing per name for exclusive/write holds, across free periods.

mod common;

use common::*;
use redlock_core::Owner;

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
