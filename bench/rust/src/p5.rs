//! P5: one process, one client, one lock: 8 tokio tasks and, separately, 8 OS threads on
//! `redlock_core::blocking`, each with its own owner. Commands sent by clients per section (INFO
//! commandstats deltas), sections/s and waits. Variants interleave, the order swapping each rep.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use redlock_core::{Client, Owner, blocking};

use crate::common::{
    Ctx, Fragment, Headline, LEASE, Latency, R, Series, max, median, percentile, r3, secs, sorted,
    violation,
};

const WORKERS: usize = 8;

struct RepOut {
    elapsed: Duration,
    waits_us: Vec<f64>,
    failed_attempts: u64,
}

#[derive(Default)]
struct Variant {
    trips: Vec<f64>,
    scripts: Vec<f64>,
    rates: Vec<f64>,
    failed: Vec<f64>,
    waits_us: Vec<f64>,
}

pub async fn run(ctx: &mut Ctx) -> R<Fragment> {
    let (reps, sections) = if ctx.quick { (3, 100) } else { (3, 500) };
    println!(
        "P5 one client, one lock: {WORKERS} tokio tasks and {WORKERS} blocking threads x {sections} \
         sections, {reps} reps"
    );
    let builder = Client::builder(&ctx.url).prefix(ctx.prefix("p5"));
    let client = builder.clone().connect().await?;
    let blocking_client = {
        let builder = builder.clone();
        std::thread::spawn(move || blocking::Client::from_builder(builder))
            .join()
            .map_err(|_| "blocking connect panicked")??
    };
    // Warm-up: connections, script cache, subscriptions.
    tasks_rep(&client, 10).await?;
    threads(&blocking_client, 10).await?;

    let (mut tasks, mut threads_v) = (Variant::default(), Variant::default());
    for rep in 0..reps {
        let order = if rep % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for is_tasks in order {
            let before = ctx.admin.commandstats().await?;
            let out = if is_tasks {
                tasks_rep(&client, sections).await?
            } else {
                threads(&blocking_client, sections).await?
            };
            let d = ctx.admin.commandstats().await?.since(&before);
            let total = (WORKERS * sections) as f64;
            let v = if is_tasks { &mut tasks } else { &mut threads_v };
            v.trips.push(d.round_trips() as f64 / total);
            v.scripts.push(d.script_calls() as f64 / total);
            v.rates.push(total / secs(out.elapsed));
            v.failed.push(out.failed_attempts as f64 / total);
            v.waits_us.extend(out.waits_us);
            println!(
                "  rep {} {}: {:.2} commands/section ({:.2} script calls, {:.2} failed \
                 attempts), {:.0} sections/s; Redis: {}",
                rep + 1,
                if is_tasks { "tasks  " } else { "threads" },
                d.round_trips() as f64 / total,
                d.script_calls() as f64 / total,
                out.failed_attempts as f64 / total,
                total / secs(out.elapsed),
                d.breakdown()
            );
        }
    }
    client.close();
    blocking_client.close();

    let series = |name: &str, v: &Variant| {
        let w = sorted(v.waits_us.clone());
        println!(
            "  {name:<32} {:.2} commands/section median, {:.0} sections/s, wait p50 {:.2} ms \
             p99 {:.2} ms max {:.2} ms",
            median(&v.trips),
            median(&v.rates),
            percentile(&w, 50.0) / 1e3,
            percentile(&w, 99.0) / 1e3,
            max(&w) / 1e3
        );
        Series::new(name, "Redis commands/section", "lower", &v.trips)
            .latency(Latency::from_us(&v.waits_us))
            .extra("sections_per_s", median(&v.rates))
            .extra("wait_p50_ms", percentile(&w, 50.0) / 1e3)
            .extra("wait_p99_ms", percentile(&w, 99.0) / 1e3)
            .extra("wait_max_ms", max(&w) / 1e3)
            .extra("script_calls_per_section", median(&v.scripts))
            .extra("failed_attempts_per_section", median(&v.failed))
            .extra("workers", WORKERS as f64)
            .extra("sections_per_worker", sections as f64)
    };
    let a = series("redlock-rust", &tasks);
    let b = series("redlock-rust (blocking threads)", &threads_v);
    let worse = median(&tasks.trips).max(median(&threads_v.trips));
    Ok(Fragment {
        goal: "P5".into(),
        title: "Rust: 8 tasks / 8 threads of one client on one lock".into(),
        target: "<= 2.5 Redis commands per section".into(),
        headline: Headline {
            label: "Redis commands per section (worse of tokio tasks / blocking threads)".into(),
            value: r3(worse),
            met: worse <= 2.5,
        },
        series: vec![a, b],
        notes: format!(
            "{reps} reps, variants interleaved (order swapped each rep); one process, one client, \
             one exclusive lock; {WORKERS} workers with an owner each x {sections} back-to-back \
             sections (acquire wait None, lease 10 s, release at once); series 1: tokio tasks on \
             a 2-worker runtime, series 2: OS threads on redlock_core::blocking; commands = \
             INFO commandstats deltas of script calls, script loads, (un)subscribes and connection \
             setup; sections checked never to overlap"
        ),
    })
}

async fn tasks_rep(client: &Client, sections: usize) -> R<RepOut> {
    let lock = client.lock("tasks")?;
    let stats_before = lock.stats();
    let inside = Arc::new(AtomicBool::new(false));
    let barrier = Arc::new(tokio::sync::Barrier::new(WORKERS + 1));
    let mut handles = Vec::new();
    for _ in 0..WORKERS {
        let (lock, inside, barrier) = (lock.clone(), inside.clone(), barrier.clone());
        handles.push(tokio::spawn(async move {
            let owner = Owner::random();
            let mut waits = Vec::with_capacity(sections);
            barrier.wait().await;
            for _ in 0..sections {
                let t = Instant::now();
                lock.acquire(&owner, None, Some(LEASE)).await?;
                waits.push(t.elapsed().as_secs_f64() * 1e6);
                if inside.swap(true, Ordering::SeqCst) {
                    return Err(violation("two tasks inside one exclusive lock".into()));
                }
                inside.store(false, Ordering::SeqCst);
                lock.release(&owner).await?;
            }
            R::Ok(waits)
        }));
    }
    barrier.wait().await;
    let started = Instant::now();
    let mut waits_us = Vec::new();
    for h in handles {
        waits_us.extend(h.await??);
    }
    let elapsed = started.elapsed();
    Ok(RepOut {
        elapsed,
        waits_us,
        failed_attempts: lock.stats().failed_attempts - stats_before.failed_attempts,
    })
}

/// Runs [`threads_rep`] on a plain OS thread (no tokio context, as a non-async caller would).
async fn threads(client: &blocking::Client, sections: usize) -> R<RepOut> {
    let client = client.clone();
    let handle = std::thread::spawn(move || threads_rep(&client, sections));
    tokio::task::spawn_blocking(move || handle.join())
        .await?
        .map_err(|_| "blocking threads panicked")?
}

fn threads_rep(client: &blocking::Client, sections: usize) -> R<RepOut> {
    let probe = client.lock("threads")?;
    let stats_before = probe.stats()?;
    let inside = AtomicBool::new(false);
    let barrier = std::sync::Barrier::new(WORKERS + 1);
    let (elapsed, waits_us) = std::thread::scope(|s| -> R<(Duration, Vec<f64>)> {
        let mut handles = Vec::new();
        for _ in 0..WORKERS {
            let (inside, barrier) = (&inside, &barrier);
            handles.push(s.spawn(move || -> R<Vec<f64>> {
                let lock = client.lock("threads")?;
                let owner = Owner::random();
                let mut waits = Vec::with_capacity(sections);
                barrier.wait();
                for _ in 0..sections {
                    let t = Instant::now();
                    lock.acquire(&owner, None, Some(LEASE))?;
                    waits.push(t.elapsed().as_secs_f64() * 1e6);
                    if inside.swap(true, Ordering::SeqCst) {
                        return Err(violation("two threads inside one exclusive lock".into()));
                    }
                    inside.store(false, Ordering::SeqCst);
                    lock.release(&owner)?;
                }
                Ok(waits)
            }));
        }
        barrier.wait();
        let started = Instant::now();
        let mut waits = Vec::new();
        for h in handles {
            waits.extend(h.join().map_err(|_| "a thread panicked")??);
        }
        Ok((started.elapsed(), waits))
    })?;
    Ok(RepOut {
        elapsed,
        waits_us,
        failed_attempts: probe.stats()?.failed_attempts - stats_before.failed_attempts,
    })
}
