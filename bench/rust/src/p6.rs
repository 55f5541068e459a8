//! P6: one client keeps 100 000 exclusive holds alive with its watchdog (holds without a lease).
//! Full mode uses the default client lease (30 s, so a renewal tick every 10 s, as with
//! Redisson's default watchdog); quick mode a 3 s lease (a tick every second). CPU is also
//! reported per tick, so any other tick period can be worked out. Runs in a fresh process
//! (this binary re-run as a worker) so its CPU time and memory are the client's alone.
//!
//! While the holds sit idle, consecutive windows of whole ticks measure Redis script calls per
//! tick (INFO commandstats deltas; ticks = window / (lease / 3)), the process' CPU (getrusage)
//! and, once, RSS and live heap per hold. At the end a random sample of holds is checked to be
//! still held, none may have been reported lost, and all are released.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redlock_core::{Client, Owner};
use serde::{Deserialize, Serialize};

use crate::common::{
    Admin, Ctx, Fragment, Headline, R, Rng, Series, cpu_time, heap_live, median, r3, rss_bytes,
    secs, violation,
};

pub const WORKER: &str = "__worker-p6";
/// The client lease of each mode: the default (30 s), and a short one for quick runs.
const LEASE: Duration = Duration::from_secs(30);
const QUICK_LEASE: Duration = Duration::from_secs(3);
const CONCURRENCY: usize = 32;
const SAMPLE: usize = 1000;

#[derive(Serialize, Deserialize)]
struct Window {
    ticks: f64,
    script_calls: u64,
    watchdog_calls: u64,
    redis_usec: u64,
    cpu_pct: f64,
    cpu_ms: f64,
    wall_s: f64,
}

#[derive(Serialize, Deserialize)]
struct Outcome {
    holds: usize,
    acquire_s: f64,
    rss_before: i64,
    rss_held: i64,
    rss_end: i64,
    heap_before: i64,
    heap_held: i64,
    heap_end: i64,
    tick_busy_ms: f64,
    windows: Vec<Window>,
    sampled: usize,
    watched: usize,
    lost: u64,
    release_s: f64,
}

// -- worker -------------------------------------------------------------------------------------

/// `REDIS_URL=… redlock-bench __worker-p6 PREFIX HOLDS TICKS_PER_WINDOW WINDOWS`: prints
/// `result JSON`.
pub fn worker_main(args: &[String]) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    match runtime.block_on(worker(args)) {
        Ok(outcome) => println!(
            "result {}",
            serde_json::to_string(&outcome).expect("outcome")
        ),
        Err(e) => {
            eprintln!("p6 worker: {e}");
            std::process::exit(1);
        }
    }
}

fn name(i: usize) -> String {
    format!("hold:{i}")
}

/// An owner per hold, as long as a random one (49 bytes), derived again when needed.
fn owner(tag: &str, i: usize) -> Owner {
    Owner::from_token(format!("p6-owner-{i:027}:{tag}")).expect("valid token")
}

async fn worker(args: &[String]) -> R<Outcome> {
    let [prefix, holds, ticks, windows, lease_ms] = args else {
        return Err(
            "usage: REDIS_URL=... __worker-p6 PREFIX HOLDS TICKS_PER_WINDOW WINDOWS LEASE_MS"
                .into(),
        );
    };
    let url = std::env::var("REDIS_URL")?;
    let (holds, ticks, windows): (usize, u32, usize) =
        (holds.parse()?, ticks.parse()?, windows.parse()?);
    let lease = Duration::from_millis(lease_ms.parse()?);
    let period = lease / 3;
    let lost = Arc::new(AtomicU64::new(0));
    let counter = lost.clone();
    let client = Client::builder(url.as_str())
        .prefix(prefix.as_str())
        .lease(lease)
        .on_lock_lost(move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
        })
        .connect()
        .await?;
    let mut admin = Admin::connect(&url).await?;
    let tag = format!("{:012x}", crate::common::now_ns() & 0xffff_ffff_ffff);

    // Warm-up: connections, script cache, the runtime's and allocator's first pools.
    let warm = Owner::random();
    for i in 0..64 {
        let lock = client.lock(&format!("warm:{i}"))?;
        lock.acquire(&warm, None, None).await?;
        lock.release(&warm).await?;
    }

    let (rss_before, heap_before) = (rss_bytes(), heap_live());
    let started = Instant::now();
    for_all(&client, &tag, holds, |lock, owner| async move {
        let hold = lock.acquire(&owner, None, None).await?;
        if hold.lease().is_some() || hold.hold_count() != 1 {
            return Err("a watchdog hold was expected".into());
        }
        Ok(())
    })
    .await?;
    let acquire_s = secs(started.elapsed());
    let (rss_held, heap_held) = (rss_bytes(), heap_live());
    if client.watched_holds() != holds {
        return Err(format!("{} holds watched, {holds} taken", client.watched_holds()).into());
    }

    // Start the windows in the middle of the quiet time between two ticks: each window then
    // holds whole ticks even if their duration varies.
    let (tick_began, tick_busy) = after_tick(&client, period).await?;
    if tick_busy < period {
        tokio::time::sleep_until((tick_began + (period + tick_busy) / 2).into()).await;
    }
    let tick_busy_ms = tick_busy.as_secs_f64() * 1e3;
    let mut measured = Vec::new();
    let base = tokio::time::Instant::now();
    let mut before = (
        cpu_time(),
        Instant::now(),
        admin.commandstats().await?,
        client.watchdog_calls(),
    );
    for w in 1..=windows {
        tokio::time::sleep_until(base + period * ticks * w as u32).await;
        let now = (
            cpu_time(),
            Instant::now(),
            admin.commandstats().await?,
            client.watchdog_calls(),
        );
        let wall = now.1 - before.1;
        let d = now.2.since(&before.2);
        measured.push(Window {
            ticks: secs(wall) / secs(period),
            script_calls: d.script_calls(),
            watchdog_calls: now.3 - before.3,
            redis_usec: d.usec(&["evalsha", "eval"]),
            cpu_pct: 100.0 * secs(now.0 - before.0) / secs(wall),
            cpu_ms: 1e3 * secs(now.0 - before.0),
            wall_s: secs(wall),
        });
        before = now;
    }
    let (rss_end, heap_end) = (rss_bytes(), heap_live());

    // Every hold still ours: a random sample asked of Redis, the watchdog's own count, no loss.
    let mut rng = Rng::seeded();
    let picks: Vec<usize> = if holds <= SAMPLE {
        (0..holds).collect()
    } else {
        (0..SAMPLE).map(|_| rng.below(holds)).collect()
    };
    for &i in &picks {
        let count = client.lock(&name(i))?.hold_count(&owner(&tag, i)).await?;
        if count != 1 {
            return Err(violation(format!(
                "hold {i} has count {count} after idle holding"
            )));
        }
    }
    let watched = client.watched_holds();
    let lost_count = lost.load(Ordering::SeqCst);
    if watched != holds || lost_count != 0 {
        return Err(violation(format!(
            "{watched} of {holds} holds still watched, {lost_count} reported lost"
        )));
    }
    let started = Instant::now();
    for_all(&client, &tag, holds, |lock, owner| async move {
        match lock.release(&owner).await? {
            0 => Ok(()),
            n => Err(format!("release left {n} holds").into()),
        }
    })
    .await?;
    let release_s = secs(started.elapsed());
    client.close();
    Ok(Outcome {
        holds,
        acquire_s,
        rss_before,
        rss_held,
        rss_end,
        heap_before,
        heap_held,
        heap_end,
        tick_busy_ms,
        windows: measured,
        sampled: picks.len(),
        watched,
        lost: lost_count,
        release_s,
    })
}

/// Runs `op` for every hold index with [`CONCURRENCY`] tasks.
async fn for_all<F, Fut>(client: &Client, tag: &str, holds: usize, op: F) -> R<()>
where
    F: Fn(redlock_core::Lock, Owner) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = R<()>> + Send,
{
    let mut tasks = Vec::new();
    for t in 0..CONCURRENCY {
        let (client, tag, op) = (client.clone(), tag.to_owned(), op.clone());
        tasks.push(tokio::spawn(async move {
            for i in (t..holds).step_by(CONCURRENCY) {
                op(client.lock(&name(i))?, owner(&tag, i)).await?;
            }
            R::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

/// Waits until a renewal tick has started and its calls have stopped; returns when it began
/// and how long it ran.
async fn after_tick(client: &Client, period: Duration) -> R<(Instant, Duration)> {
    let deadline = Instant::now() + period * 3;
    let start_calls = client.watchdog_calls();
    while client.watchdog_calls() == start_calls {
        if Instant::now() > deadline {
            return Err("no watchdog tick seen".into());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let began = Instant::now();
    let mut last = client.watchdog_calls();
    let mut last_change = Instant::now();
    while last_change.elapsed() < Duration::from_millis(50) {
        tokio::time::sleep(Duration::from_millis(2)).await;
        let now = client.watchdog_calls();
        if now != last {
            last = now;
            last_change = Instant::now();
        }
    }
    Ok((began, last_change - began))
}

// -- parent -------------------------------------------------------------------------------------

pub async fn run(ctx: &mut Ctx) -> R<Fragment> {
    let (holds, ticks, windows, lease) = if ctx.quick {
        (10_000, 1, 3, QUICK_LEASE)
    } else {
        (100_000, 1, 3, LEASE)
    };
    println!(
        "P6 one client idly holding {holds} watchdog-kept locks (lease {:?}, a tick every \
         {:?}): {windows} windows of {ticks} tick(s), in a fresh process",
        lease,
        lease / 3
    );
    let exe = std::env::current_exe()?;
    let mut command = std::process::Command::new(exe);
    command
        .arg(WORKER)
        .env("REDIS_URL", &ctx.url)
        .arg(ctx.prefix("p6"))
        .arg(holds.to_string())
        .arg(ticks.to_string())
        .arg(windows.to_string())
        .arg(lease.as_millis().to_string())
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit());
    let output = tokio::task::spawn_blocking(move || command.output()).await??;
    if !output.status.success() {
        return Err(format!("the P6 worker failed ({})", output.status).into());
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let json = text
        .lines()
        .find_map(|l| l.strip_prefix("result "))
        .ok_or("no result from the P6 worker")?;
    let o: Outcome = serde_json::from_str(json)?;

    let per_tick: Vec<f64> = o
        .windows
        .iter()
        .map(|w| w.script_calls as f64 / w.ticks.round().max(1.0))
        .collect();
    let cpu: Vec<f64> = o.windows.iter().map(|w| w.cpu_pct).collect();
    let cpu_ms_per_tick: Vec<f64> = o
        .windows
        .iter()
        .map(|w| w.cpu_ms / w.ticks.round().max(1.0))
        .collect();
    let n = o.holds as f64;
    // The memory a hold takes once kept: its renewal's call is built at the first tick.
    let rss_acquired = (o.rss_held - o.rss_before) as f64 / n;
    let rss_kept = (o.rss_end - o.rss_before) as f64 / n;
    let bytes_per_hold = rss_acquired.max(rss_kept);
    let heap_per_hold = (o.heap_held - o.heap_before) as f64 / n;
    let heap_kept = (o.heap_end - o.heap_before) as f64 / n;
    for (i, w) in o.windows.iter().enumerate() {
        println!(
            "  window {}: {:.2} s = {:.2} ticks; {} script calls (watchdog's own count {}), Redis \
             {:.1} ms; CPU {:.2} % of a core ({:.1} ms)",
            i + 1,
            w.wall_s,
            w.ticks,
            w.script_calls,
            w.watchdog_calls,
            w.redis_usec as f64 / 1e3,
            w.cpu_pct,
            w.cpu_ms
        );
    }
    let (calls, cpu_pct) = (median(&per_tick), median(&cpu));
    println!(
        "  {} holds taken in {:.2} s ({:.0}/s); a tick's calls take {:.1} ms; RSS {:.0} B/hold \
         after acquiring, {:.0} B/hold after the windows; live heap {:.0} and {:.0} B/hold; \
         sample of {} still held, {} watched, {} lost; released in {:.2} s",
        o.holds,
        o.acquire_s,
        n / o.acquire_s,
        o.tick_busy_ms,
        rss_acquired,
        rss_kept,
        heap_per_hold,
        heap_kept,
        o.sampled,
        o.watched,
        o.lost,
        o.release_s
    );
    let met = calls <= 1000.0 && cpu_pct <= 1.0 && bytes_per_hold <= 1024.0;
    println!(
        "  {calls:.1} calls/tick, CPU {cpu_pct:.2} %, {bytes_per_hold:.0} B/hold → {}",
        if met { "met" } else { "NOT met" }
    );
    let redis_ms: Vec<f64> = o
        .windows
        .iter()
        .map(|w| w.redis_usec as f64 / 1e3 / w.ticks.round().max(1.0))
        .collect();
    let series = Series::new(
        "redlock-rust",
        "Redis calls/renewal tick",
        "lower",
        &per_tick,
    )
    .extra("cpu_pct", cpu_pct)
    .extra("bytes_per_hold", bytes_per_hold)
    .extra("bytes_per_hold_after_acquiring", rss_acquired)
    .extra("bytes_per_hold_after_ticks", rss_kept)
    .extra("heap_bytes_per_hold", heap_per_hold)
    .extra("heap_bytes_per_hold_after_ticks", heap_kept)
    .extra("holds", n)
    .extra("lease_ms", lease.as_millis() as f64)
    .extra("cpu_ms_per_tick", median(&cpu_ms_per_tick))
    .extra(
        "watchdog_calls_per_tick",
        median(
            &o.windows
                .iter()
                .map(|w| w.watchdog_calls as f64 / w.ticks.round().max(1.0))
                .collect::<Vec<_>>(),
        ),
    )
    .extra("redis_ms_per_tick", median(&redis_ms))
    .extra("tick_busy_ms", o.tick_busy_ms)
    .extra("acquire_per_s", n / o.acquire_s)
    .extra("sample_checked", o.sampled as f64)
    .extra("lost", o.lost as f64);
    Ok(Fragment {
        goal: "P6".into(),
        title: format!("Rust: one client keeping {holds} holds alive"),
        target: "<= 1000 Redis calls per renewal tick, <= 1 % of a core, <= 1024 B per hold".into(),
        headline: Headline {
            label: "Redis calls per renewal tick".into(),
            value: r3(calls),
            met,
        },
        series: vec![series],
        notes: format!(
            "{holds} exclusive holds without a lease (an owner each, 49-byte tokens; names hold:N, \
             key prefix of ~10 bytes) taken by {CONCURRENCY} tasks; \
             client lease {lease:?} so the watchdog ticks every {period:?}; {windows} consecutive \
             idle windows of {ticks} tick(s) each, started midway between two ticks (runs = script \
             calls per tick from INFO commandstats deltas; ticks = window / tick period); CPU = \
             getrusage(SELF) user+sys / wall of the holding process alone (a fresh process), also \
             given per tick (cpu_ms_per_tick); bytes_per_hold = VmRSS minus VmRSS before \
             acquiring, / holds, the larger of after acquiring all and after the windows (the \
             renewal calls are built at the first tick); a random sample of {} holds checked still held \
             (hold_count) and none reported lost, then all released",
            o.sampled,
            period = lease / 3,
        ),
    })
}
