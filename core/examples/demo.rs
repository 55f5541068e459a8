//! The README demo: two clients and several tasks contend on one Redis, as in the seeds.
//!
//! 1. Seed 002: 2 clients × 5 tasks take numbers from a shared, non-atomic counter inside an
//!    exclusive lock: no number is taken twice and none is skipped.
//! 2. Seed 000: a read/write lock whose read hold is taken by one client and released by another
//!    through the owner token; readers share, a writer waits and gets in.
//! 3. The watchdog keeps a lease-less hold alive; force unlock makes it lost.
//!
//! Run with `scripts/demo.sh` (starts its own redis-server on a free port).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redlock_core::testing::RedisServer;
use redlock_core::{Client, Owner};
use tokio::sync::Mutex;

const CLIENTS: usize = 2;
const TASKS: usize = 5;
const SECTIONS: usize = 200;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> redlock_core::Result<()> {
    let server = RedisServer::start();
    println!("redis-server on {}\n", server.url());
    counter_scenario(&server).await?;
    read_write_scenario(&server).await?;
    watchdog_scenario(&server).await?;
    Ok(())
}

/// Seed 002: the counter lives outside Redis and is updated read-then-write.
async fn counter_scenario(server: &RedisServer) -> redlock_core::Result<()> {
    println!("1. exclusive lock: {CLIENTS} clients x {TASKS} tasks x {SECTIONS} sections");
    let counter = Arc::new(Mutex::new(0u64)); // only used inside the distributed lock
    let mut tasks = Vec::new();
    let started = Instant::now();
    for c in 0..CLIENTS {
        let client = Client::connect(&server.url()).await?;
        for t in 0..TASKS {
            let lock = client.lock("seed-002:counter")?;
            let counter = counter.clone();
            tasks.push(tokio::spawn(async move {
                let me = Owner::random();
                let mut taken = Vec::with_capacity(SECTIONS);
                let mut waits = Vec::with_capacity(SECTIONS);
                let mut fences = Vec::with_capacity(SECTIONS);
                for _ in 0..SECTIONS {
                    let asked = Instant::now();
                    let hold = lock
                        .acquire(&me, None, Some(Duration::from_secs(10)))
                        .await?;
                    waits.push(asked.elapsed());
                    let value = {
                        let mut guard = counter.try_lock().expect("two holders inside at once");
                        *guard += 1;
                        *guard
                    };
                    taken.push(value);
                    fences.push(hold.fencing_token());
                    lock.release(&me).await?;
                }
                Ok::<_, redlock_core::Error>((format!("client {c} task {t}"), taken, waits, fences))
            }));
        }
    }
    let mut all = BTreeSet::new();
    let mut duplicates = 0;
    let mut all_waits = Vec::new();
    let mut fences = Vec::new();
    println!(
        "   {:<18} {:>8} {:>10} {:>10}",
        "worker", "sections", "wait p50", "wait max"
    );
    for task in tasks {
        let (who, taken, mut waits, f) = task.await.expect("task")?;
        waits.sort();
        println!(
            "   {:<18} {:>8} {:>10.2?} {:>10.2?}",
            who,
            taken.len(),
            waits[waits.len() / 2],
            waits[waits.len() - 1]
        );
        for v in taken {
            if !all.insert(v) {
                duplicates += 1;
            }
        }
        all_waits.extend(waits);
        fences.extend(f);
    }
    let total = (CLIENTS * TASKS * SECTIONS) as u64;
    let gaps = (1..=total).filter(|v| !all.contains(v)).count();
    fences.sort_unstable();
    fences.dedup();
    all_waits.sort();
    println!(
        "   {} sections in {:.2?}: {} duplicates, {} gaps, {} distinct fencing tokens, wait p50 {:.2?} max {:.2?}",
        total,
        started.elapsed(),
        duplicates,
        gaps,
        fences.len(),
        all_waits[all_waits.len() / 2],
        all_waits[all_waits.len() - 1]
    );
    let verdict = duplicates == 0 && gaps == 0 && fences.len() as u64 == total;
    println!(
        "   verdict: {}\n",
        if verdict {
            "no duplicate, no gap"
        } else {
            "BROKEN"
        }
    );
    assert!(verdict);
    Ok(())
}

/// Seed 000: lock and unlock may run on different instances.
async fn read_write_scenario(server: &RedisServer) -> redlock_core::Result<()> {
    println!("2. read/write lock across instances (seed 000)");
    let instance_a = Client::connect(&server.url()).await?;
    let instance_b = Client::connect(&server.url()).await?;
    let article_a = instance_a.read_write_lock("seed-000:ARTICLE")?;
    let article_b = instance_b.read_write_lock("seed-000:ARTICLE")?;
    let reader = Owner::random();
    let other_reader = Owner::random();
    article_a
        .read()
        .acquire(&reader, Some(Duration::ZERO), None)
        .await?;
    article_b
        .read()
        .acquire(&other_reader, Some(Duration::ZERO), None)
        .await?;
    println!(
        "   instance A and B read at once: {} readers",
        instance_a.inspect("seed-000:ARTICLE").await?.holder_count
    );
    let writer = Owner::random();
    let write = article_b.write();
    let w = writer.clone();
    let waiting_writer = tokio::spawn(async move {
        let asked = Instant::now();
        write
            .acquire(&w, Some(Duration::from_secs(10)), None)
            .await
            .map(|h| (h, asked.elapsed()))
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let late = article_a
        .read()
        .acquire(&Owner::random(), Some(Duration::ZERO), None)
        .await;
    println!(
        "   a writer waits, so a new reader is refused: {}",
        late.is_err()
    );
    // The read hold taken on instance A is released on instance B with its token.
    let handed_over = Owner::from_token(reader.token())?;
    article_b.read().release(&handed_over).await?;
    article_b.read().release(&other_reader).await?;
    let (hold, waited) = waiting_writer.await.expect("writer task")?;
    println!(
        "   readers released (one by token on the other instance); writer got in after {waited:.2?}, fencing token {}",
        hold.fencing_token()
    );
    // Downgrade: keep reading after writing; upgrade is refused at once.
    article_b
        .read()
        .acquire(&writer, Some(Duration::ZERO), None)
        .await?;
    article_b.write().release(&writer).await?;
    let upgrade = article_b.write().acquire(&writer, None, None).await;
    println!(
        "   downgrade kept the read hold; upgrade answered at once: {:?}\n",
        upgrade.err().map(|e| e.kind())
    );
    article_b.read().release(&writer).await?;
    Ok(())
}

async fn watchdog_scenario(server: &RedisServer) -> redlock_core::Result<()> {
    println!("3. watchdog and force unlock");
    let client = Client::builder(server.url())
        .lease(Duration::from_millis(600))
        .on_lock_lost(|e| {
            println!(
                "   lock-lost callback: {} ({:?}) owner {}",
                e.name, e.mode, e.owner_token
            )
        })
        .connect()
        .await?;
    let lock = client.lock("seed-001:job")?;
    let owner = Owner::random();
    let hold = lock.acquire(&owner, Some(Duration::ZERO), None).await?;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    println!(
        "   after 2.5 leases the hold is still there: {}",
        lock.is_held_by(&owner).await?
    );
    let info = lock.inspect().await?;
    let h = &info.holders[0];
    println!(
        "   inspect: {:?} held by {} on {} pid {} for {:?}",
        info.mode.unwrap(),
        h.owner_token,
        h.metadata.host,
        h.metadata.pid,
        h.held_for.unwrap_or_default()
    );
    Client::connect(&server.url())
        .await?
        .force_unlock("seed-001:job")
        .await?;
    tokio::time::timeout(Duration::from_secs(5), hold.lost())
        .await
        .ok();
    tokio::time::sleep(Duration::from_millis(50)).await;
    println!(
        "   after force unlock: lost = {}, release says {:?}",
        hold.is_lost(),
        lock.release(&owner).await.err().map(|e| e.kind())
    );
    Ok(())
}
