//! Cancellation safety of acquire under contention (seeded; `SEEDS=n` runs more, from
//! `SEED0`). Waiters' acquire futures are dropped at random moments (timeouts, select!, aborted
//! tasks); afterwards Redis must hold nothing of theirs, no hold of theirs may be kept, owners'
//! hold counts must be exact and live waiters must not wait for a lease to run out.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::*;
use redlock_core::{Client, Hold, Lock, Owner, Result};

const LEASE: Option<Duration> = Some(Duration::from_secs(3));
/// A live waiter that waits this long met a leftover (holds here last ~ a millisecond).
const TOO_LONG: Duration = Duration::from_millis(1500);

struct Rng(u64);
impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The seeds to run: `SEEDS` of them (else `default`) from `SEED0` (else 1).
fn seeds(default: u64) -> std::ops::Range<u64> {
    let var = |name: &str| std::env::var(name).ok().and_then(|s| s.parse::<u64>().ok());
    let first = var("SEED0").unwrap_or(1);
    first..first + var("SEEDS").unwrap_or(default)
}

async fn spin_us(us: u64) {
    let end = Instant::now() + Duration::from_micros(us);
    while Instant::now() < end {
        tokio::task::yield_now().await;
    }
}

/// Runs one acquire and drops it at a random moment (5 µs .. 5 ms) in one of four ways.
/// `Some` when the acquire ended first.
async fn cut_acquire(
    lock: &Lock,
    owner: &Owner,
    wait: Option<Duration>,
    lease: Option<Duration>,
    rng: &mut Rng,
) -> Option<Result<Hold>> {
    let us = 5 + rng.below(5000);
    match rng.below(4) {
        0 => tokio::time::timeout(Duration::from_micros(us), lock.acquire(owner, wait, lease))
            .await
            .ok(),
        1 => tokio::select! {
            biased;
            r = lock.acquire(owner, wait, lease) => Some(r),
            _ = spin_us(us) => None,
        },
        2 => {
            let (l, o) = (lock.clone(), owner.clone());
            let task = tokio::spawn(async move { l.acquire(&o, wait, lease).await });
            spin_us(us).await;
            task.abort();
            task.await.ok()
        }
        _ => {
            let n = rng.below(200);
            tokio::select! {
                biased;
                r = lock.acquire(owner, wait, lease) => Some(r),
                _ = async { for _ in 0..n { tokio::task::yield_now().await } } => None,
            }
        }
    }
}

fn dump(server: &RedisServer, name: &str) -> String {
    let keys = server.command(&["KEYS", &format!("*{{{name}}}*")]);
    let mut out = format!("keys: {keys:?}\n");
    for key in keys
        .lines()
        .filter(|l| !l.starts_with('*') && !l.starts_with('$'))
    {
        let kind = server.command(&["TYPE", key]);
        let body = match kind.trim() {
            "+hash" => server.command(&["HGETALL", key]),
            "+zset" => server.command(&["ZRANGE", key, "0", "-1", "WITHSCORES"]),
            other => other.to_owned(),
        };
        let ttl = server.command(&["PTTL", key]);
        out += &format!("{key} pttl {ttl:?}: {body:?}\n");
    }
    out
}

/// Keys of `name` other than the fencing counter, once they are gone (up to `within`).
async fn leftovers(server: &RedisServer, name: &str, within: Duration) -> Vec<String> {
    let until = Instant::now() + within;
    loop {
        let left: Vec<String> = lock_keys(server)
            .into_iter()
            .filter(|k| k.contains(&format!("{{{name}}}")))
            .collect();
        if left.is_empty() || Instant::now() > until {
            return left;
        }
        tokio::time::sleep(ms(20)).await;
    }
}

/// Waits for a round's tasks, then for the name's keys to be gone (up to `within`).
async fn finish(
    server: &RedisServer,
    name: &str,
    tasks: Vec<tokio::task::JoinHandle<std::result::Result<(), String>>>,
    within: Duration,
) -> std::result::Result<(), String> {
    let mut first_err = None;
    for t in tasks {
        if let Err(e) = t.await.unwrap() {
            first_err.get_or_insert(e);
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    let left = leftovers(server, name, within).await;
    if !left.is_empty() {
        return Err(format!("leftover keys {left:?}\n{}", dump(server, name)));
    }
    Ok(())
}

/// Runs `round` for every seed (see [`seeds`]) and fails with those that failed.
async fn every_seed<F, Fut>(default: u64, mut round: F)
where
    F: FnMut(u64) -> Fut,
    Fut: Future<Output = std::result::Result<(), String>>,
{
    let mut failures = Vec::new();
    for seed in seeds(default) {
        if let Err(e) = round(seed).await {
            eprintln!("seed {seed}: {e}");
            failures.push(seed);
        }
    }
    assert!(failures.is_empty(), "failing seeds: {failures:?}");
}

async fn clients(server: &RedisServer, n: usize) -> Vec<Client> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(connect(server).await);
    }
    out
}

/// A live acquire that must not wait for a lease: reports a long wait with the keys as seen then.
async fn live_acquire(
    server: &RedisServer,
    lock: &Lock,
    owner: &Owner,
    what: &str,
) -> std::result::Result<(Hold, Duration), String> {
    let started = Instant::now();
    let acquire = lock.acquire(owner, Some(Duration::from_secs(10)), LEASE);
    tokio::pin!(acquire);
    let mut seen = None;
    let hold = loop {
        tokio::select! {
            h = &mut acquire => break h,
            _ = tokio::time::sleep(TOO_LONG), if seen.is_none() => {
                seen = Some(dump(server, lock.name()));
            }
        }
    };
    let waited = started.elapsed();
    let hold = hold.map_err(|e| format!("{what}: live acquire failed: {e}"))?;
    if let Some(seen) = seen {
        return Err(format!(
            "{what}: live acquire waited {waited:?}; keys after {TOO_LONG:?}:\n{seen}"
        ));
    }
    Ok((hold, waited))
}

/// Many clients and owners on one exclusive lock; live workers (some re-entering, with
/// re-entries dropped mid-flight) and cancelled waiters mixed.
async fn exclusive_round(
    server: &Arc<RedisServer>,
    clients: &[Client],
    seed: u64,
) -> std::result::Result<(), String> {
    let name = format!("x-{seed}");
    let mut tasks = Vec::new();
    for (i, client) in clients.iter().enumerate() {
        // One live worker per client.
        let lock = client.lock(&name).unwrap();
        let mut rng = Rng::new(seed * 1000 + i as u64);
        let srv = server.clone();
        tasks.push(tokio::spawn(async move {
            let me = Owner::random();
            for round in 0..12 {
                let (hold, _) =
                    live_acquire(&srv, &lock, &me, &format!("live {i} round {round}")).await?;
                let mut count = hold.hold_count();
                if count != 1 {
                    return Err(format!("live {i}: fresh hold count {count}"));
                }
                if rng.below(2) == 0 {
                    lock.acquire(&me, Some(Duration::ZERO), LEASE)
                        .await
                        .map_err(|e| format!("re-entry: {e}"))?;
                    count += 1;
                }
                // A re-entry dropped mid-flight.
                if let Some(r) = cut_acquire(&lock, &me, None, LEASE, &mut rng).await {
                    r.map_err(|e| format!("cut re-entry: {e}"))?;
                    count += 1;
                }
                let seen = lock.hold_count(&me).await.map_err(|e| e.to_string())?;
                // hold_count waits for tidy-ups, but a dropped script may still be on its
                // way on another connection: look until it settles (as waiting.rs does).
                let mut ok = seen == count;
                if !ok {
                    for _ in 0..100 {
                        tokio::time::sleep(ms(10)).await;
                        if lock.hold_count(&me).await.unwrap() == count {
                            ok = true;
                            break;
                        }
                    }
                }
                if !ok {
                    return Err(format!(
                        "live {i} round {round}: hold count {} expected {count}\n{}",
                        lock.hold_count(&me).await.unwrap(),
                        dump(&srv, lock.name())
                    ));
                }
                spin_us(rng.below(1000)).await;
                for left in (0..count).rev() {
                    let now = lock
                        .release(&me)
                        .await
                        .map_err(|e| format!("release: {e}"))?;
                    if now != left {
                        return Err(format!("live {i}: release left {now}, expected {left}"));
                    }
                }
            }
            Ok(())
        }));
        // Two cancellers per client.
        for j in 0..2 {
            let lock = client.lock(&name).unwrap();
            let mut rng = Rng::new(seed * 1000 + 100 + (i * 10 + j) as u64);
            tasks.push(tokio::spawn(async move {
                for _ in 0..25 {
                    let who = Owner::random();
                    let wait = if rng.below(3) == 0 {
                        Some(Duration::from_millis(1 + rng.below(5)))
                    } else {
                        None
                    };
                    if let Some(Ok(_)) = cut_acquire(&lock, &who, wait, LEASE, &mut rng).await {
                        lock.release(&who)
                            .await
                            .map_err(|e| format!("release of a completed cut acquire: {e}"))?;
                    }
                    spin_us(rng.below(2000)).await;
                }
                Ok::<(), String>(())
            }));
        }
    }
    finish(server, &name, tasks, ms(600)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exclusive_with_cancelled_waiters_and_reentries() {
    let server = Arc::new(RedisServer::start());
    let clients = clients(&server, 3).await;
    every_seed(10, |seed| exclusive_round(&server, &clients, seed)).await;
}

/// The grant on its way: a holder releases while a queued waiter X (first in line) is dropped a
/// few µs..ms later; the live waiter Y behind it must get the lock promptly, and nothing stays.
async fn grant_round(
    server: &Arc<RedisServer>,
    clients: &[Client],
    seed: u64,
) -> std::result::Result<Duration, String> {
    let name = format!("g-{seed}");
    let mut rng = Rng::new(seed);
    let pick = |rng: &mut Rng| clients[rng.below(clients.len() as u64) as usize].clone();
    let holder_lock = pick(&mut rng).lock(&name).unwrap();
    let x_lock = pick(&mut rng).lock(&name).unwrap();
    let y_lock = pick(&mut rng).lock(&name).unwrap();
    let holder = Owner::random();
    holder_lock
        .acquire(&holder, NOW, LEASE)
        .await
        .map_err(|e| e.to_string())?;
    let x = Owner::random();
    let x_task = {
        let (l, o) = (x_lock.clone(), x.clone());
        tokio::spawn(async move { l.acquire(&o, None, LEASE).await })
    };
    tokio::time::sleep(ms(20 + rng.below(30))).await;
    let y = Owner::random();
    let y_task = {
        let (l, o) = (y_lock.clone(), y.clone());
        tokio::spawn(async move {
            let started = Instant::now();
            let h = l.acquire(&o, Some(Duration::from_secs(10)), LEASE).await;
            (h, Instant::now(), started)
        })
    };
    tokio::time::sleep(ms(20 + rng.below(30))).await;
    let released_at = Instant::now();
    holder_lock
        .release(&holder)
        .await
        .map_err(|e| e.to_string())?;
    spin_us(rng.below(3000)).await;
    x_task.abort();
    if let Ok(Ok(_)) = x_task.await {
        // X's acquire completed before the abort: a real hold, given back here.
        x_lock
            .release(&x)
            .await
            .map_err(|e| format!("x release: {e}"))?;
    }
    let (hold, got_at, _) = y_task.await.unwrap();
    let hold = hold.map_err(|e| format!("y: {e}"))?;
    let latency = got_at - released_at;
    let _ = hold;
    y_lock.release(&y).await.map_err(|e| e.to_string())?;
    let left = leftovers(server, &name, ms(600)).await;
    if !left.is_empty() {
        return Err(format!("leftover keys {left:?}\n{}", dump(server, &name)));
    }
    if latency > TOO_LONG {
        return Err(format!("y waited {latency:?} after the release"));
    }
    Ok(latency)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_dropped_as_its_grant_arrives() {
    let server = Arc::new(RedisServer::start());
    let clients = clients(&server, 3).await;
    let mut failures = Vec::new();
    let mut worst = Duration::ZERO;
    for seed in seeds(50) {
        match grant_round(&server, &clients, seed).await {
            Ok(l) => worst = worst.max(l),
            Err(e) => {
                eprintln!("seed {seed}: {e}");
                failures.push(seed);
            }
        }
    }
    eprintln!("worst latency {worst:?}");
    assert!(failures.is_empty(), "failing seeds: {failures:?}");
}

/// Read/write views: writers and readers waiting, some dropped at random moments, around a
/// holder's release; live ones must all get in without a lease-long wait; nothing stays.
async fn rw_round(
    server: &Arc<RedisServer>,
    clients: &[Client],
    seed: u64,
) -> std::result::Result<(), String> {
    let name = format!("rw-{seed}");
    let mut tasks = Vec::new();
    let done = Arc::new(AtomicU64::new(0));
    for (i, client) in clients.iter().enumerate() {
        for j in 0..2 {
            let rw = client.read_write_lock(&name).unwrap();
            let mut rng = Rng::new(seed * 1000 + (i * 10 + j) as u64);
            let done = done.clone();
            let srv = server.clone();
            tasks.push(tokio::spawn(async move {
                let me = Owner::random();
                for round in 0..10 {
                    let read = rng.below(2) == 0;
                    let view = if read { rw.read() } else { rw.write() };
                    let what = format!(
                        "live {i}.{j} round {round} {}",
                        if read { "read" } else { "write" }
                    );
                    let (hold, _) = live_acquire(&srv, &view, &me, &what).await?;
                    let mut count = hold.hold_count();
                    if let Some(r) = cut_acquire(&view, &me, None, LEASE, &mut rng).await {
                        r.map_err(|e| format!("{what}: cut re-entry: {e}"))?;
                        count += 1;
                    }
                    let mut seen = view.hold_count(&me).await.unwrap();
                    for _ in 0..100 {
                        if seen == count {
                            break;
                        }
                        tokio::time::sleep(ms(10)).await;
                        seen = view.hold_count(&me).await.unwrap();
                    }
                    if seen != count {
                        return Err(format!(
                            "{what}: hold count {seen}, expected {count}\n{}",
                            dump(&srv, view.name())
                        ));
                    }
                    spin_us(rng.below(1000)).await;
                    for left in (0..count).rev() {
                        let now = view
                            .release(&me)
                            .await
                            .map_err(|e| format!("{what}: release: {e}"))?;
                        if now != left {
                            return Err(format!("{what}: release left {now}, expected {left}"));
                        }
                    }
                }
                done.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }));
        }
        for j in 0..2 {
            let rw = client.read_write_lock(&name).unwrap();
            let mut rng = Rng::new(seed * 1000 + 500 + (i * 10 + j) as u64);
            tasks.push(tokio::spawn(async move {
                for _ in 0..25 {
                    let who = Owner::random();
                    let view = if rng.below(2) == 0 {
                        rw.read()
                    } else {
                        rw.write()
                    };
                    if let Some(Ok(_)) = cut_acquire(&view, &who, None, LEASE, &mut rng).await {
                        view.release(&who)
                            .await
                            .map_err(|e| format!("release of a completed cut acquire: {e}"))?;
                    }
                    spin_us(rng.below(2000)).await;
                }
                Ok::<(), String>(())
            }));
        }
    }
    finish(server, &name, tasks, ms(1500)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_write_with_cancelled_waiters_and_reentries() {
    let server = Arc::new(RedisServer::start());
    let clients = clients(&server, 3).await;
    every_seed(10, |seed| rw_round(&server, &clients, seed)).await;
}

/// Live writers queued in order with cancelled writers between them; each cancelled one is
/// dropped at a random moment around the release that might grant it the lock. The live ones
/// must get the lock in their order, each promptly.
async fn order_round(
    server: &Arc<RedisServer>,
    clients: &[Client],
    seed: u64,
) -> std::result::Result<(), String> {
    let name = format!("o-{seed}");
    let mut rng = Rng::new(seed + 77);
    let pick = |rng: &mut Rng| clients[rng.below(clients.len() as u64) as usize].clone();
    let holder_lock = pick(&mut rng).lock(&name).unwrap();
    let holder = Owner::random();
    holder_lock
        .acquire(&holder, NOW, LEASE)
        .await
        .map_err(|e| e.to_string())?;
    let order = Arc::new(std::sync::Mutex::new(Vec::<(usize, Instant)>::new()));
    let mut live = Vec::new();
    let mut cancelled = Vec::new();
    const LIVE: usize = 4;
    for k in 0..LIVE {
        // 0..2 cancelled waiters ahead of each live one.
        for _ in 0..rng.below(3) {
            let lock = pick(&mut rng).lock(&name).unwrap();
            let o = Owner::random();
            let (l, oo) = (lock.clone(), o.clone());
            let task = tokio::spawn(async move { l.acquire(&oo, None, LEASE).await });
            cancelled.push((task, lock, o, rng.below(3000)));
            tokio::time::sleep(ms(15)).await;
        }
        let lock = pick(&mut rng).lock(&name).unwrap();
        let order = order.clone();
        let hold_us = rng.below(2000);
        live.push(tokio::spawn(async move {
            let me = Owner::random();
            let h = lock
                .acquire(&me, Some(Duration::from_secs(10)), LEASE)
                .await;
            let at = Instant::now();
            h.map_err(|e| format!("live {k}: {e}"))?;
            order.lock().unwrap().push((k, at));
            spin_us(hold_us).await;
            lock.release(&me)
                .await
                .map_err(|e| format!("live {k} release: {e}"))?;
            Ok::<(), String>(())
        }));
        tokio::time::sleep(ms(15)).await;
    }
    let started = Instant::now();
    holder_lock
        .release(&holder)
        .await
        .map_err(|e| e.to_string())?;
    // Drop the cancelled ones at random moments over the next few ms.
    let mut stray = 0;
    for (task, lock, o, at_us) in cancelled {
        let wait = Duration::from_micros(at_us).saturating_sub(started.elapsed());
        spin_us(wait.as_micros() as u64).await;
        task.abort();
        if let Ok(Ok(_)) = task.await {
            stray += 1;
            lock.release(&o)
                .await
                .map_err(|e| format!("stray release: {e}"))?;
        }
    }
    let _ = stray;
    for t in live {
        t.await.unwrap()?;
    }
    let total = started.elapsed();
    let order = order.lock().unwrap().clone();
    let ks: Vec<usize> = order.iter().map(|(k, _)| *k).collect();
    let gaps: Vec<Duration> = order.iter().map(|(_, at)| *at - started).collect();
    if ks != (0..LIVE).collect::<Vec<_>>() {
        return Err(format!(
            "live waiters got the lock in order {ks:?} (at {gaps:?})"
        ));
    }
    if total > TOO_LONG {
        return Err(format!(
            "live waiters took {total:?} in all (got it at {gaps:?})"
        ));
    }
    let left = leftovers(server, &name, ms(600)).await;
    if !left.is_empty() {
        return Err(format!("leftover keys {left:?}\n{}", dump(server, &name)));
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_waiters_keep_their_order_around_dropped_ones() {
    let server = Arc::new(RedisServer::start());
    let clients = clients(&server, 3).await;
    every_seed(20, |seed| order_round(&server, &clients, seed)).await;
}
