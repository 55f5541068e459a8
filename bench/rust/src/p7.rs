//! P7: a read/write lock under 8 reader tasks and 1 writer task for a fixed time, against 9
//! tasks on an exclusive lock, all of one client, each task with its own owner. Every section
//! holds the lock for a short simulated piece of work. Reader and writer throughput, the
//! writer's waits (it must not starve) and the exclusive throughput; readers and the writer are
//! checked never to be inside together.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

use redlock_core::{Client, Owner};

use crate::common::{
    Ctx, Fragment, Headline, LEASE, Latency, R, Series, StealSample, StealSpan, max, median,
    percentile, r3, secs, sorted, violation,
};

const READERS: usize = 8;
const EXCLUSIVE_TASKS: usize = 9;
/// What each section does while holding the lock.
const WORK: Duration = Duration::from_millis(1);
/// "Bounded": the writer's longest wait must stay under this.
const WRITER_WAIT_BOUND_MS: f64 = 1000.0;

struct Shared {
    readers: AtomicI64,
    writer: AtomicBool,
    stop: AtomicBool,
}

struct TaskOut {
    writer: bool,
    waits_us: Vec<f64>,
}

pub async fn run(ctx: &mut Ctx) -> R<Fragment> {
    let (reps, duration) = if ctx.quick {
        (3, Duration::from_secs(1))
    } else {
        (3, Duration::from_secs(3))
    };
    println!(
        "P7 read/write: {READERS} readers + 1 writer vs {EXCLUSIVE_TASKS} tasks on an exclusive \
         lock, {:.0} s per run, {reps} reps, {} ms of work per section",
        secs(duration),
        WORK.as_millis()
    );
    let client = Client::builder(&ctx.url)
        .prefix(ctx.prefix("p7"))
        .connect()
        .await?;
    // Warm-up.
    rw_rep(&client, Duration::from_millis(200)).await?;
    exclusive_rep(&client, Duration::from_millis(200)).await?;

    let (mut reader_rates, mut writer_rates, mut ex_rates) = (Vec::new(), Vec::new(), Vec::new());
    let (mut reader_waits, mut writer_waits, mut ex_waits) = (Vec::new(), Vec::new(), Vec::new());
    let (mut writer_max_ms, mut writer_min_sections) = (Vec::new(), usize::MAX);
    let mut rw_steal = Vec::new();
    for rep in 0..reps {
        let order = if rep % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for is_rw in order {
            if is_rw {
                let steal_from = StealSample::now();
                let (elapsed, outs) = rw_rep(&client, duration).await?;
                let steal = steal_from.until(StealSample::now());
                rw_steal.push(steal);
                let (mut r, mut w) = (Vec::new(), Vec::new());
                let (mut r_n, mut w_n) = (0, 0);
                for o in outs {
                    if o.writer {
                        w_n += o.waits_us.len();
                        w.extend(o.waits_us);
                    } else {
                        r_n += o.waits_us.len();
                        r.extend(o.waits_us);
                    }
                }
                let w_max = max(&w) / 1e3;
                println!(
                    "  rep {} read/write: readers {:.0} sections/s, writer {:.0} sections/s \
                     ({w_n} sections, wait max {w_max:.1} ms); host steal {}",
                    rep + 1,
                    r_n as f64 / secs(elapsed),
                    w_n as f64 / secs(elapsed),
                    StealSpan::shown(&[steal])
                );
                reader_rates.push(r_n as f64 / secs(elapsed));
                writer_rates.push(w_n as f64 / secs(elapsed));
                writer_max_ms.push(w_max);
                writer_min_sections = writer_min_sections.min(w_n);
                reader_waits.extend(r);
                writer_waits.extend(w);
            } else {
                let (elapsed, outs) = exclusive_rep(&client, duration).await?;
                let n: usize = outs.iter().map(|o| o.waits_us.len()).sum();
                println!(
                    "  rep {} exclusive: {:.0} sections/s",
                    rep + 1,
                    n as f64 / secs(elapsed)
                );
                ex_rates.push(n as f64 / secs(elapsed));
                ex_waits.extend(outs.into_iter().flat_map(|o| o.waits_us));
            }
        }
    }
    client.close();

    let ratio = median(&reader_rates) / median(&ex_rates);
    let worst_writer_ms = max(&writer_max_ms);
    let met = writer_min_sections > 0 && worst_writer_ms <= WRITER_WAIT_BOUND_MS;
    let ww = sorted(writer_waits.clone());
    let rw_sorted = sorted(reader_waits.clone());
    println!(
        "  readers / exclusive {ratio:.2}x; writer: {:.0} sections/s, at least {writer_min_sections} \
         per run, wait p50 {:.2} ms, max {worst_writer_ms:.1} ms → {}",
        median(&writer_rates),
        percentile(&ww, 50.0) / 1e3,
        if met { "met" } else { "NOT met" }
    );
    let rw_series = Series::new("redlock-rust", "sections/s", "higher", &reader_rates)
        .latency(Latency::from_us(&reader_waits))
        .extra("writer_sections_per_s", median(&writer_rates))
        .extra("writer_wait_max_ms", worst_writer_ms)
        .extra("writer_wait_p50_ms", percentile(&ww, 50.0) / 1e3)
        .extra("writer_wait_p99_ms", percentile(&ww, 99.0) / 1e3)
        .extra("writer_sections_min_per_run", writer_min_sections as f64)
        .extra("reader_wait_p50_ms", percentile(&rw_sorted, 50.0) / 1e3)
        .extra("reader_wait_p99_ms", percentile(&rw_sorted, 99.0) / 1e3)
        .extra("reader_wait_max_ms", max(&rw_sorted) / 1e3)
        .extra("readers", READERS as f64)
        .extra("work_ms", WORK.as_secs_f64() * 1e3)
        // The host's steal during the read/write runs (see p4.rs): a stopped vCPU stops every task.
        .steal(&rw_steal);
    let ex_sorted = sorted(ex_waits.clone());
    let ex_series = Series::new(
        "redlock-rust (exclusive lock, 9 tasks)",
        "sections/s",
        "higher",
        &ex_rates,
    )
    .latency(Latency::from_us(&ex_waits))
    .extra("wait_p50_ms", percentile(&ex_sorted, 50.0) / 1e3)
    .extra("wait_max_ms", max(&ex_sorted) / 1e3)
    .extra("tasks", EXCLUSIVE_TASKS as f64)
    .extra("work_ms", WORK.as_secs_f64() * 1e3);
    Ok(Fragment {
        goal: "P7".into(),
        title: "Rust: read/write lock, 8 readers + 1 writer vs exclusive".into(),
        target: "writer not starved: sections in every run, wait max <= 1 s".into(),
        headline: Headline {
            label: "reader sections/s / exclusive sections/s".into(),
            value: r3(ratio),
            met,
        },
        series: vec![rw_series, ex_series],
        notes: format!(
            "{reps} reps of {:.0} s, variants interleaved (order swapped each rep); one client, \
             tokio tasks with an owner each, lease 10 s; each section sleeps {} ms inside the \
             lock; series 1: reader sections/s of {READERS} readers + 1 writer on one read/write \
             lock (writer figures in extra; writer_wait_max_ms over all runs); series 2: \
             {EXCLUSIVE_TASKS} tasks on one exclusive lock; readers and writer checked never to \
             be inside together; steal_pct: the host's steal during the read/write runs, % of \
             all CPUs",
            secs(duration),
            WORK.as_millis()
        ),
    })
}

/// 8 readers and 1 writer until `duration` is over; returns the elapsed time and every
/// task's waits.
async fn rw_rep(client: &Client, duration: Duration) -> R<(Duration, Vec<TaskOut>)> {
    let rw = client.read_write_lock("rw")?;
    let shared = Arc::new(Shared {
        readers: AtomicI64::new(0),
        writer: AtomicBool::new(false),
        stop: AtomicBool::new(false),
    });
    let barrier = Arc::new(tokio::sync::Barrier::new(READERS + 2));
    let mut handles = Vec::new();
    for i in 0..=READERS {
        let writer = i == READERS;
        let lock = if writer { rw.write() } else { rw.read() };
        let (shared, barrier) = (shared.clone(), barrier.clone());
        handles.push(tokio::spawn(async move {
            let owner = Owner::random();
            let mut waits_us = Vec::new();
            barrier.wait().await;
            while !shared.stop.load(Ordering::SeqCst) {
                let t = Instant::now();
                lock.acquire(&owner, None, Some(LEASE)).await?;
                waits_us.push(t.elapsed().as_secs_f64() * 1e6);
                if writer {
                    if shared.writer.swap(true, Ordering::SeqCst)
                        || shared.readers.load(Ordering::SeqCst) != 0
                    {
                        return Err(violation("the writer got in beside readers".into()));
                    }
                    tokio::time::sleep(WORK).await;
                    shared.writer.store(false, Ordering::SeqCst);
                } else {
                    shared.readers.fetch_add(1, Ordering::SeqCst);
                    if shared.writer.load(Ordering::SeqCst) {
                        return Err(violation("a reader got in beside the writer".into()));
                    }
                    tokio::time::sleep(WORK).await;
                    shared.readers.fetch_sub(1, Ordering::SeqCst);
                }
                lock.release(&owner).await?;
            }
            R::Ok(TaskOut { writer, waits_us })
        }));
    }
    finish(barrier, &shared.stop, handles, duration).await
}

/// 9 tasks on one exclusive lock until `duration` is over.
async fn exclusive_rep(client: &Client, duration: Duration) -> R<(Duration, Vec<TaskOut>)> {
    let lock = client.lock("exclusive")?;
    let inside = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let barrier = Arc::new(tokio::sync::Barrier::new(EXCLUSIVE_TASKS + 1));
    let mut handles = Vec::new();
    for _ in 0..EXCLUSIVE_TASKS {
        let (lock, inside, stop, barrier) =
            (lock.clone(), inside.clone(), stop.clone(), barrier.clone());
        handles.push(tokio::spawn(async move {
            let owner = Owner::random();
            let mut waits_us = Vec::new();
            barrier.wait().await;
            while !stop.load(Ordering::SeqCst) {
                let t = Instant::now();
                lock.acquire(&owner, None, Some(LEASE)).await?;
                waits_us.push(t.elapsed().as_secs_f64() * 1e6);
                if inside.swap(true, Ordering::SeqCst) {
                    return Err(violation("two tasks inside one exclusive lock".into()));
                }
                tokio::time::sleep(WORK).await;
                inside.store(false, Ordering::SeqCst);
                lock.release(&owner).await?;
            }
            R::Ok(TaskOut {
                writer: true,
                waits_us,
            })
        }));
    }
    finish(barrier, &stop, handles, duration).await
}

async fn finish(
    barrier: Arc<tokio::sync::Barrier>,
    stop: &AtomicBool,
    handles: Vec<tokio::task::JoinHandle<R<TaskOut>>>,
    duration: Duration,
) -> R<(Duration, Vec<TaskOut>)> {
    barrier.wait().await;
    let started = Instant::now();
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::SeqCst);
    let mut outs = Vec::new();
    for h in handles {
        outs.push(h.await??);
    }
    Ok((started.elapsed(), outs))
}
