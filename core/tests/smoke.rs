use std::time::Duration;

use redlock_core::testing::RedisServer;
use redlock_core::{Client, Error, Owner};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let lock = client.lock("smoke").unwrap();
    let a = Owner::random();
    let b = Owner::random();
    let h1 = lock.acquire(&a, Some(Duration::ZERO), None).await.unwrap();
    let h2 = lock.acquire(&a, Some(Duration::ZERO), None).await.unwrap();
    assert_eq!(h2.hold_count(), 2);
    assert_eq!(h1.fencing_token(), h2.fencing_token());
    assert!(matches!(lock.acquire(&b, Some(Duration::from_millis(100)), None).await, Err(Error::Timeout)));
    let info = lock.inspect().await.unwrap();
    println!("{info:#?}");
    assert_eq!(lock.release(&a).await.unwrap(), 1);
    let waiter = {
        let lock = lock.clone();
        let b = b.clone();
        tokio::spawn(async move { lock.acquire(&b, None, None).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let t0 = std::time::Instant::now();
    assert_eq!(lock.release(&a).await.unwrap(), 0);
    let hb = waiter.await.unwrap().unwrap();
    println!("handoff {:?}", t0.elapsed());
    assert!(hb.fencing_token() > h1.fencing_token());
    lock.release(&b).await.unwrap();
    assert_eq!(server.dbsize(), 1, "only the slot's fence counter remains");
}
