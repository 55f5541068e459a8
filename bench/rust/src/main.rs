//! `redlock-bench`: redlock-core's figures for the benchmark suite. Writes one JSON fragment per
//! goal (bench/FRAGMENTS.md) into `$BENCH_OUT` and a summary to stdout.
//!
//! ```text
//! redlock-bench [--quick] [all | p1 p4 p5 p6 p7 ...]
//! ```
//!
//! - P1 uncontended acquire+release vs raw redis-rs (`SET NX PX` + `EVALSHA` compare-and-delete)
//! - P4 4 processes contending for one exclusive lock: handoffs, waits, commands per section;
//!   and, interleaved, the floor of any hand-off through Redis here (a bare pub/sub hop, no lock)
//! - P5 8 tokio tasks, and 8 blocking threads, of one client on one lock: commands per section
//! - P6 one client keeping 100 000 holds alive: Redis calls per renewal tick, CPU, memory per hold
//! - P7 8 readers + 1 writer on a read/write lock vs 9 tasks on an exclusive lock
//!
//! Redis: `$REDIS_URL`, else a throwaway redis-server of its own (redlock-core's test-support).
//! `$BENCH_QUICK=1` (or `--quick`) shrinks every run. Workers of P4 and P6 are this binary again.

mod common;
mod p1;
mod p4;
mod p4_floor;
mod p5;
mod p6;
mod p7;

use std::path::PathBuf;

use common::{Ctx, Fragment, R};

#[global_allocator]
static ALLOC: common::CountingAlloc = common::CountingAlloc;

const GOALS: [&str; 5] = ["P1", "P4", "P5", "P6", "P7"];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some(p4::WORKER) => return p4::worker_main(&args[1..]),
        Some(p4_floor::WORKER) => return p4_floor::worker_main(&args[1..]),
        Some(p6::WORKER) => return p6::worker_main(&args[1..]),
        _ => {}
    }
    let mut quick = std::env::var("BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
    let mut goals: Vec<&str> = Vec::new();
    for arg in &args {
        match arg.to_uppercase().as_str() {
            "--QUICK" => quick = true,
            "ALL" => goals.extend(GOALS),
            "-H" | "--HELP" => {
                println!("usage: redlock-bench [--quick] [all | p1 p4 p5 p6 p7 ...]");
                println!(
                    "env: REDIS_URL (else a throwaway redis-server), BENCH_OUT, BENCH_QUICK=1"
                );
                return;
            }
            goal => match GOALS.iter().find(|g| **g == goal) {
                Some(g) => goals.push(g),
                None => {
                    eprintln!("unknown argument {arg:?} (try --help)");
                    std::process::exit(2);
                }
            },
        }
    }
    if goals.is_empty() {
        goals.extend(GOALS);
    }
    goals.dedup();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    if let Err(e) = runtime.block_on(run(&goals, quick)) {
        eprintln!("redlock-bench failed: {e}");
        std::process::exit(1);
    }
}

async fn run(goals: &[&str], quick: bool) -> R<()> {
    // The server lives as long as the run when we start it ourselves.
    let mut own_server = None;
    let url = match std::env::var("REDIS_URL") {
        Ok(url) if !url.is_empty() => url,
        _ => {
            let server = redlock_core::testing::RedisServer::start();
            let url = server.url();
            own_server = Some(server);
            url
        }
    };
    let out = std::env::var_os("BENCH_OUT")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target/bench-out"));
    let admin = common::Admin::connect(&url).await?;
    let mut ctx = Ctx {
        url: url.clone(),
        quick,
        out,
        // Short, like the default prefix `redlock`: key lengths matter for P6's memory.
        run_prefix: format!("rb{}", std::process::id()),
        admin,
    };
    println!(
        "redlock-bench ({} mode) on {}{}; fragments into {}",
        if quick { "quick" } else { "full" },
        redact(&url),
        if own_server.is_some() {
            " (a throwaway redis-server)"
        } else {
            ""
        },
        ctx.out.display()
    );
    let mut written: Vec<(Fragment, PathBuf)> = Vec::new();
    for goal in goals {
        println!();
        let fragment = match *goal {
            "P1" => p1::run(&mut ctx).await?,
            "P4" => p4::run(&mut ctx).await?,
            "P5" => p5::run(&mut ctx).await?,
            "P6" => p6::run(&mut ctx).await?,
            _ => p7::run(&mut ctx).await?,
        };
        let path = common::write_fragment(&ctx, &fragment)?;
        written.push((fragment, path));
    }
    println!("\nsummary");
    for (f, path) in &written {
        println!(
            "  {:<3} {:<55} {:>9.3}  target {:<50} {}  ({})",
            f.goal,
            f.headline.label,
            f.headline.value,
            f.target,
            if f.headline.met { "MET" } else { "NOT MET" },
            path.display()
        );
    }
    drop(own_server);
    Ok(())
}

/// The URL without a password.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}***{}", &url[..s + 3], &url[at..]),
        _ => url.to_owned(),
    }
}
