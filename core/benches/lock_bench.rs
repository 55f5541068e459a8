//! `cargo bench -p redlock-core --features test-support` — not a timed test: figures only.
//!
//! 1. Uncontended acquire+release of one lock versus the raw minimum on the same redis-rs
//!    connection (`SET NX PX` + `EVALSHA` compare-and-delete), interleaved A B A B, 5 rounds.
//! 2. Contended: 4 tasks over 2 clients on one lock — sections/s, wait p50/p99/max, handoff
//!    latency (release → next holder in), and Redis commands per section from INFO commandstats.
//!
//! The machine is noisy: read ratios and medians.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redlock_core::testing::RedisServer;
use redlock_core::{Client, Owner};

const CYCLES: usize = 3_000;
const ROUNDS: usize = 5;
const CONTENDED_SECTIONS: usize = 1_000;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let raw = redis::Client::open(server.url()).unwrap();
    let mut raw_conn = raw.get_multiplexed_async_connection().await.unwrap();
    let rtt = round_trip(&mut raw_conn).await;
    println!(
        "redis-server {} — PING round trip p50 {:.1} µs\n",
        server.url(),
        micros(rtt)
    );

    println!("1. uncontended acquire+release ({CYCLES} cycles x {ROUNDS} rounds, interleaved)");
    let mut ours = Vec::new();
    let mut baseline = Vec::new();
    // Redis' own time per cycle, each side measured alone (stats reset before each run).
    let (mut ours_server, mut raw_server) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        server.command(&["CONFIG", "RESETSTAT"]);
        ours.push(redlock_cycles(&client).await);
        let stats = commandstats(&server);
        ours_server.push(2.0 * stats.usec_per_call("evalsha"));
        server.command(&["CONFIG", "RESETSTAT"]);
        baseline.push(raw_cycles(&mut raw_conn).await);
        let stats = commandstats(&server);
        raw_server.push(stats.usec_per_call("set") + stats.usec_per_call("evalsha"));
    }
    report("redlock (watchdog lease)", &ours);
    report("raw SET NX PX + EVALSHA", &baseline);
    let (ours_server, raw_server) = (median(ours_server), median(raw_server));
    println!(
        "   Redis' time per cycle: redlock {ours_server:.1} µs (acquire + release scripts), \
         raw {raw_server:.1} µs; the rest of p50 is client and network: redlock {:.1} µs, raw {:.1} µs",
        micros(median_d(ours.iter().map(|r| r.p50).collect())) - ours_server,
        micros(median_d(baseline.iter().map(|r| r.p50).collect())) - raw_server,
    );
    let ratio = median(ours.iter().map(|r| r.rate).collect())
        / median(baseline.iter().map(|r| r.rate).collect());
    println!("   ratio redlock / raw: {ratio:.2}x (target >= 0.9x)\n");

    println!("2. contended: 4 tasks over 2 clients, {CONTENDED_SECTIONS} sections each");
    contended(&server).await;
}

struct Run {
    rate: f64,
    p50: Duration,
    p99: Duration,
}

async fn redlock_cycles(client: &Client) -> Run {
    let lock = client.lock("bench:uncontended").unwrap();
    let owner = Owner::random();
    let mut lat = Vec::with_capacity(CYCLES);
    let started = Instant::now();
    for _ in 0..CYCLES {
        let t = Instant::now();
        lock.acquire(&owner, Some(Duration::ZERO), None)
            .await
            .unwrap();
        lock.release(&owner).await.unwrap();
        lat.push(t.elapsed());
    }
    summarize(started.elapsed(), lat)
}

async fn raw_cycles(conn: &mut redis::aio::MultiplexedConnection) -> Run {
    let unlock = redis::Script::new(
        "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
    );
    let token = uuid_like();
    let mut lat = Vec::with_capacity(CYCLES);
    let started = Instant::now();
    for _ in 0..CYCLES {
        let t = Instant::now();
        let ok: Option<String> = redis::cmd("SET")
            .arg("bench:raw")
            .arg(&token)
            .arg("NX")
            .arg("PX")
            .arg(30_000)
            .query_async(conn)
            .await
            .unwrap();
        assert!(ok.is_some());
        let _: i64 = unlock
            .key("bench:raw")
            .arg(&token)
            .invoke_async(conn)
            .await
            .unwrap();
        lat.push(t.elapsed());
    }
    summarize(started.elapsed(), lat)
}

async fn contended(server: &RedisServer) {
    let clients = [
        Client::connect(&server.url()).await.unwrap(),
        Client::connect(&server.url()).await.unwrap(),
    ];
    let before = commandstats(server);
    let released_at = Arc::new(AtomicU64::new(0)); // ns since `origin` of the last release
    let origin = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..4 {
        let lock = clients[i % 2].lock("bench:contended").unwrap();
        let released_at = released_at.clone();
        tasks.push(tokio::spawn(async move {
            let me = Owner::random();
            let mut waits = Vec::with_capacity(CONTENDED_SECTIONS);
            let mut handoffs = Vec::new();
            for _ in 0..CONTENDED_SECTIONS {
                let asked = Instant::now();
                lock.acquire(&me, None, Some(Duration::from_secs(10)))
                    .await
                    .unwrap();
                let now_ns = origin.elapsed().as_nanos() as u64;
                waits.push(asked.elapsed());
                let last_release = released_at.load(Ordering::SeqCst);
                let asked_ns = asked.duration_since(origin).as_nanos() as u64;
                if last_release > 0 && asked_ns <= last_release {
                    // We were already waiting when the lock was released: a real handoff.
                    handoffs.push(Duration::from_nanos(now_ns - last_release));
                }
                tokio::task::yield_now().await;
                released_at.store(origin.elapsed().as_nanos() as u64, Ordering::SeqCst);
                lock.release(&me).await.unwrap();
            }
            (waits, handoffs)
        }));
    }
    let mut waits = Vec::new();
    let mut handoffs = Vec::new();
    for t in tasks {
        let (w, h) = t.await.unwrap();
        waits.extend(w);
        handoffs.extend(h);
    }
    let elapsed = origin.elapsed();
    let after = commandstats(server);
    let sections = 4 * CONTENDED_SECTIONS;
    waits.sort();
    handoffs.sort();
    let per = |name: &str| (after.get(name) - before.get(name)) as f64 / sections as f64;
    let client_cmds = ["evalsha", "eval", "script|load", "subscribe", "unsubscribe"]
        .iter()
        .map(|c| per(c))
        .sum::<f64>();
    let all_cmds = (after.total() - before.total()) as f64 / sections as f64;
    println!(
        "   {:.0} sections/s ({} sections in {:.2?})",
        sections as f64 / elapsed.as_secs_f64(),
        sections,
        elapsed
    );
    println!(
        "   wait p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs",
        micros(waits[waits.len() / 2]),
        micros(waits[waits.len() * 99 / 100]),
        micros(*waits.last().unwrap())
    );
    if !handoffs.is_empty() {
        println!(
            "   handoff (release → waiter in) p50 {:.1} µs, p99 {:.1} µs over {} handoffs",
            micros(handoffs[handoffs.len() / 2]),
            micros(handoffs[handoffs.len() * 99 / 100]),
            handoffs.len()
        );
    }
    println!(
        "   Redis commands per section sent by clients: {client_cmds:.2} (target <= 4); counting script-internal calls: {all_cmds:.1}"
    );
}

struct Stats(
    std::collections::HashMap<String, u64>,
    std::collections::HashMap<String, f64>,
);
impl Stats {
    fn get(&self, name: &str) -> u64 {
        self.0.get(name).copied().unwrap_or(0)
    }
    fn usec_per_call(&self, name: &str) -> f64 {
        self.1.get(name).copied().unwrap_or(0.0)
    }
    fn total(&self) -> u64 {
        self.0
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "info" | "ping"))
            .map(|(_, v)| v)
            .sum()
    }
}

fn commandstats(server: &RedisServer) -> Stats {
    let text = server.command(&["INFO", "commandstats"]);
    let mut map = std::collections::HashMap::new();
    let mut usec = std::collections::HashMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("cmdstat_")
            && let Some((name, fields)) = rest.split_once(':')
            && let Some(calls) = fields.split(',').find_map(|f| f.strip_prefix("calls="))
        {
            map.insert(name.to_owned(), calls.parse().unwrap_or(0));
            if let Some(u) = fields
                .split(',')
                .find_map(|f| f.strip_prefix("usec_per_call="))
            {
                usec.insert(name.to_owned(), u.parse().unwrap_or(0.0));
            }
        }
    }
    Stats(map, usec)
}

async fn round_trip(conn: &mut redis::aio::MultiplexedConnection) -> Duration {
    let mut lat = Vec::new();
    for _ in 0..1000 {
        let t = Instant::now();
        let _: String = conn.ping().await.unwrap();
        lat.push(t.elapsed());
    }
    lat.sort();
    lat[lat.len() / 2]
}

fn summarize(elapsed: Duration, mut lat: Vec<Duration>) -> Run {
    lat.sort();
    Run {
        rate: lat.len() as f64 / elapsed.as_secs_f64(),
        p50: lat[lat.len() / 2],
        p99: lat[lat.len() * 99 / 100],
    }
}

fn report(name: &str, runs: &[Run]) {
    let rates: Vec<f64> = runs.iter().map(|r| r.rate).collect();
    let min = rates.iter().cloned().fold(f64::MAX, f64::min);
    let max = rates.iter().cloned().fold(0.0, f64::max);
    println!(
        "   {:<26} {:>8.0} cycles/s median (min {:.0}, max {:.0}); p50 {:.1} µs, p99 {:.1} µs",
        name,
        median(rates),
        min,
        max,
        micros(median_d(runs.iter().map(|r| r.p50).collect())),
        micros(median_d(runs.iter().map(|r| r.p99).collect()))
    );
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn median_d(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn uuid_like() -> String {
    Owner::random().token().to_owned()
}
