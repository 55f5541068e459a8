//! Hand-offs between 4 processes on one lock, waiting the blocking way (the core's blocking API,
//! as C, Go, Java and Python wait) or on a current-thread runtime (as the Rust P4 workers do):
//! the p50 of release start -> next holder in, counted when that holder was already waiting.
//! Run the two modes alternately on one server to compare them (docs/benchmarks-history.md,
//! "A machine that wakes fast").
//!
//! Usage: `cargo run --release -p redlock-ffi --example bench_handoff -- URL blocking|async [sections]`
//! (the program re-runs itself as the 4 workers).

use redlock_core::{Owner, blocking};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}
const LEASE: Duration = Duration::from_secs(10);

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let url = &args[0];
    let mode = args[1].as_str();
    if args.len() > 3 {
        let (n, start): (usize, u128) = (args[2].parse().unwrap(), args[3].parse().unwrap());
        let rows = if mode == "blocking" {
            worker_blocking(url, n, start)
        } else {
            worker_async(url, n, start)
        };
        let mut out = String::new();
        for (a, b, c) in rows {
            out.push_str(&format!("{a} {b} {c}\n"));
        }
        print!("{out}");
        return;
    }
    let n: usize = args.get(2).map_or(1000, |a| a.parse().unwrap());
    let start = now_ns() + 1_500_000_000;
    let me = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..4)
        .map(|_| {
            Command::new(&me)
                .args([url, mode, &n.to_string(), &start.to_string()])
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut rows: Vec<(u128, u128, u128)> = Vec::new();
    for c in children {
        let out = c.wait_with_output().unwrap();
        for l in String::from_utf8(out.stdout).unwrap().lines() {
            let v: Vec<u128> = l.split(' ').map(|x| x.parse().unwrap()).collect();
            rows.push((v[0], v[1], v[2]));
        }
    }
    rows.sort_by_key(|r| r.1);
    let mut hand: Vec<f64> = Vec::new();
    for w in rows.windows(2) {
        if w[1].0 < w[0].2 {
            hand.push((w[1].1 as f64 - w[0].2 as f64) / 1e3);
        }
    }
    hand.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let secs = (rows.last().unwrap().2 - rows[0].0) as f64 / 1e9;
    println!(
        "{mode}: handoff p50 {:.1} us p90 {:.1} over {}; {:.0} sections/s",
        hand[hand.len() / 2],
        hand[hand.len() * 9 / 10],
        hand.len(),
        rows.len() as f64 / secs
    );
}

fn wait_until(start: u128) {
    while now_ns() < start {
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn worker_blocking(url: &str, n: usize, start: u128) -> Vec<(u128, u128, u128)> {
    let client = blocking::Client::connect(url).unwrap();
    let lock = client.lock("bench-handoff").unwrap();
    let owner = Owner::random();
    lock.acquire(&owner, None, Some(LEASE)).unwrap();
    lock.release(&owner).unwrap();
    wait_until(start);
    let mut rows = Vec::with_capacity(n);
    for _ in 0..n {
        let a = now_ns();
        lock.acquire(&owner, None, Some(LEASE)).unwrap();
        let b = now_ns();
        let c = now_ns();
        lock.release(&owner).unwrap();
        rows.push((a, b, c));
    }
    client.close();
    rows
}

fn worker_async(url: &str, n: usize, start: u128) -> Vec<(u128, u128, u128)> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = redlock_core::Client::connect(url).await.unwrap();
        let lock = client.lock("bench-handoff").unwrap();
        let owner = Owner::random();
        lock.acquire(&owner, None, Some(LEASE)).await.unwrap();
        lock.release(&owner).await.unwrap();
        wait_until(start);
        let mut rows = Vec::with_capacity(n);
        for _ in 0..n {
            let a = now_ns();
            lock.acquire(&owner, None, Some(LEASE)).await.unwrap();
            let b = now_ns();
            let c = now_ns();
            lock.release(&owner).await.unwrap();
            rows.push((a, b, c));
        }
        client.close();
        rows
    })
}
