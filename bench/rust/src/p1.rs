//! P1: uncontended acquire+release of one exclusive lock (fixed 10 s lease) against the raw
//! minimum on a multiplexed redis-rs connection: `SET key token NX PX 10000` + `EVALSHA`
//! compare-and-delete. Interleaved finely, after a warm-up: each repetition alternates the two
//! sides [`SLICES`] times (the order swapping every slice), so that both see the same machine. On a
//! virtual machine whose idle vCPUs are slow to wake, a round trip's cost drifts over seconds, and
//! one stretch per side and repetition measured the drift as much as the code (docs/benchmarks.md).
//! The same pair for blocking callers (what C, Java, Go and Python use): `redlock_core::blocking`
//! vs the same raw commands on a plain (sync) redis-rs connection, each on its own thread.

use std::time::{Duration, Instant};

use redlock_core::{Client, Lock, Owner};

use crate::common::{
    CmdStats, Ctx, Fragment, Headline, LEASE, Latency, R, Series, median, percentile, secs, sorted,
};

const COMPARE_AND_DELETE: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then \
     return redis.call('DEL', KEYS[1]) end return 0";

#[derive(Clone)]
struct Raw {
    conn: redis::aio::MultiplexedConnection,
    script: redis::Script,
    key: String,
    token: String,
}

/// Stretches per side and repetition, alternating with the other side's.
const SLICES: usize = 10;

/// One side's slices of one repetition, summed.
#[derive(Default)]
struct Slices {
    elapsed: Duration,
    lat: Vec<f64>,
    stats: CmdStats,
}

impl Slices {
    fn add(&mut self, (elapsed, lat): (Duration, Vec<f64>), stats: &CmdStats) {
        self.elapsed += elapsed;
        self.lat.extend(lat);
        self.stats.add(stats);
    }
}

#[derive(Default)]
struct Side {
    rates: Vec<f64>,
    lat_us: Vec<f64>,
    p50_us: Vec<f64>,
    redis_usec: Vec<f64>,
    round_trips: Vec<f64>,
}

impl Side {
    /// One repetition: its rate, latencies and Redis' counters.
    fn record(&mut self, is_ours: bool, rep: Slices) {
        let Slices {
            elapsed,
            lat,
            stats: d,
        } = rep;
        let cycles = lat.len();
        self.rates.push(cycles as f64 / secs(elapsed));
        self.p50_us.push(percentile(&sorted(lat.clone()), 50.0));
        self.lat_us.extend(lat);
        // Redis' own time: the top-level commands only (script-internal calls are inside).
        let usec = if is_ours {
            d.usec(&["evalsha", "eval"])
        } else {
            d.usec(&["set", "evalsha", "eval"])
        };
        self.redis_usec.push(usec as f64 / cycles as f64);
        // The raw side's SET is a round trip too (our client sends only script calls).
        let trips = d.round_trips() + if is_ours { 0 } else { d.calls(&["set"]) };
        self.round_trips.push(trips as f64 / cycles as f64);
    }
}

pub async fn run(ctx: &mut Ctx) -> R<Fragment> {
    let (reps, cycles, warm): (usize, usize, usize) = if ctx.quick {
        (3, 300, 100)
    } else {
        (5, 2000, 300)
    };
    println!(
        "P1 uncontended acquire+release: {reps} reps x {cycles} cycles, interleaved in {SLICES} \
         slices per side, lease 10 s"
    );
    let client = Client::builder(&ctx.url)
        .prefix(ctx.prefix("p1"))
        .connect()
        .await?;
    let lock = client.lock("uncontended")?;
    let owner = Owner::random();
    let mut raw = Raw {
        conn: redis::Client::open(ctx.url.as_str())?
            .get_multiplexed_async_connection()
            .await?,
        script: redis::Script::new(COMPARE_AND_DELETE),
        key: format!("{}:raw", ctx.prefix("p1")),
        token: Owner::random().token().to_owned(),
    };
    ours(&lock, &owner, warm).await?;
    raw_cycles(&mut raw, warm).await?;
    let rtt = ctx.admin.ping_p50_us(ctx.pings()).await?;

    let blocking_lock = redlock_core::blocking::Client::from_builder(
        Client::builder(&ctx.url).prefix(ctx.prefix("p1b")),
    )?
    .lock("uncontended")?;
    let mut raw_sync = RawSync {
        conn: redis::Client::open(ctx.url.as_str())?.get_connection()?,
        script: redis::Script::new(COMPARE_AND_DELETE),
        key: format!("{}:raw-sync", ctx.prefix("p1b")),
        token: Owner::random().token().to_owned(),
    };
    let (blocking_lock, raw_sync) = on_plain_thread(move || -> R<_> {
        ours_blocking(&blocking_lock, &owner_b(), warm)?;
        raw_sync_cycles(&mut raw_sync, warm)?;
        Ok((blocking_lock, raw_sync))
    })
    .await?;
    let (mut blocking_lock, mut raw_sync) = (Some(blocking_lock), Some(raw_sync));

    let (mut a, mut b) = (Side::default(), Side::default());
    let (mut c, mut d) = (Side::default(), Side::default());
    let (mut e, mut f) = (Side::default(), Side::default());
    let per_slice = cycles.div_ceil(SLICES);
    for rep in 0..reps {
        // [ours, raw] of the async, blocking and worker-task pairs.
        let mut async_pair: [Slices; 2] = Default::default();
        let mut blocking_pair: [Slices; 2] = Default::default();
        let mut worker_pair: [Slices; 2] = Default::default();
        for slice in 0..SLICES {
            let order = if (rep * SLICES + slice) % 2 == 0 {
                [true, false]
            } else {
                [false, true]
            };
            let cycles = per_slice;
            // Each pair's two sides back to back: the blocking pair on threads of their own, the
            // async pair in this task, then again from a task on one of the runtime's workers.
            for is_ours in order {
                let i = usize::from(!is_ours);
                let before = ctx.admin.commandstats().await?;
                let (bl, rs) = (blocking_lock.take().unwrap(), raw_sync.take().unwrap());
                let (bl, rs, (elapsed, lat)) = on_plain_thread(move || -> R<_> {
                    let mut rs = rs;
                    let run = if is_ours {
                        ours_blocking(&bl, &owner_b(), cycles)?
                    } else {
                        raw_sync_cycles(&mut rs, cycles)?
                    };
                    Ok((bl, rs, run))
                })
                .await?;
                (blocking_lock, raw_sync) = (Some(bl), Some(rs));
                let stats = ctx.admin.commandstats().await?.since(&before);
                blocking_pair[i].add((elapsed, lat), &stats);
            }
            for is_ours in order {
                let i = usize::from(!is_ours);
                let before = ctx.admin.commandstats().await?;
                let (elapsed, lat) = if is_ours {
                    ours(&lock, &owner, cycles).await?
                } else {
                    raw_cycles(&mut raw, cycles).await?
                };
                let stats = ctx.admin.commandstats().await?.since(&before);
                async_pair[i].add((elapsed, lat), &stats);
            }
            for is_ours in order {
                let i = usize::from(!is_ours);
                let before = ctx.admin.commandstats().await?;
                let (elapsed, lat) = if is_ours {
                    let (lock, owner) = (lock.clone(), owner.clone());
                    tokio::spawn(async move {
                        ours(&lock, &owner, cycles).await.map_err(|e| e.to_string())
                    })
                    .await??
                } else {
                    let mut raw = raw.clone();
                    tokio::spawn(async move {
                        raw_cycles(&mut raw, cycles)
                            .await
                            .map_err(|e| e.to_string())
                    })
                    .await??
                };
                let stats = ctx.admin.commandstats().await?.since(&before);
                worker_pair[i].add((elapsed, lat), &stats);
            }
        }
        let [ours, raw] = async_pair;
        a.record(true, ours);
        b.record(false, raw);
        let [ours, raw] = blocking_pair;
        c.record(true, ours);
        d.record(false, raw);
        let [ours, raw] = worker_pair;
        e.record(true, ours);
        f.record(false, raw);
    }
    client.close();

    let ratio = median(&a.rates) / median(&b.rates);
    let blocking_ratio = median(&c.rates) / median(&d.rates);
    let worker_ratio = median(&e.rates) / median(&f.rates);
    let series = |name: &str, s: &Side| {
        let p50 = median(&s.p50_us);
        let redis = median(&s.redis_usec);
        println!(
            "  {name:<38} {:>8.0} cycles/s median (min {:.0}, max {:.0}); p50 {p50:.1} µs \
             (Redis {redis:.1} µs, client+network {:.1} µs); {:.2} commands/cycle",
            median(&s.rates),
            s.rates.iter().copied().fold(f64::INFINITY, f64::min),
            s.rates.iter().copied().fold(0.0, f64::max),
            p50 - redis,
            median(&s.round_trips),
        );
        Series::new(name, "cycles/s", "higher", &s.rates)
            .latency(Latency::from_us(&s.lat_us))
            .extra("redis_usec_per_cycle", redis)
            .extra("client_and_network_usec_per_cycle", p50 - redis)
            .extra("round_trips_per_cycle", median(&s.round_trips))
            .extra("ping_rtt_p50_us", rtt)
    };
    let ours_series = series("redlock-rust", &a);
    let raw_series = series("redis-rs raw (SET NX PX + EVALSHA)", &b);
    let blocking_series = series("redlock-rust blocking", &c);
    let raw_sync_series = series("redis-rs raw sync connection", &d);
    let worker_series = series("redlock-rust, task on a worker", &e);
    let raw_worker_series = series("redis-rs raw, task on a worker", &f);
    println!("  PING rtt p50 {rtt:.1} µs; ratio redlock-rust / raw {ratio:.3}x (target >= 0.9x)");
    println!("  blocking callers: redlock-rust blocking / raw sync {blocking_ratio:.3}x");
    println!("  tasks on a runtime worker: redlock-rust / raw {worker_ratio:.3}x");
    Ok(Fragment {
        goal: "P1".into(),
        title: "Rust: uncontended acquire+release vs raw redis-rs".into(),
        target: ">= 0.9x raw".into(),
        headline: Headline {
            label: "redlock-rust / raw redis-rs (cycles/s)".into(),
            value: crate::common::r3(ratio),
            met: ratio >= 0.9,
        },
        series: vec![
            ours_series
                .extra(
                    "blocking_vs_raw_sync_ratio",
                    crate::common::r3(blocking_ratio),
                )
                .extra("worker_task_vs_raw_ratio", crate::common::r3(worker_ratio)),
            raw_series,
            blocking_series,
            raw_sync_series,
            worker_series,
            raw_worker_series,
        ],
        notes: format!(
            "{reps} reps x {cycles} cycles after {warm} warm-up cycles, each rep interleaved \
             in {SLICES} slices per side (order swapped each slice); one task; ours: Lock::acquire(owner, wait None, lease 10 s) + release; raw: \
             SET NX PX 10000 + EVALSHA compare-and-delete on one multiplexed redis-rs connection; \
             Redis usec from INFO commandstats deltas of the top-level commands; the headline is \
             the async pair; the blocking pair (redlock_core::blocking, used by every other \
             language, vs the raw commands on a sync redis-rs connection) runs interleaved with it, \
             each cycle loop on a blocking thread; so does the async pair again from a task spawned \
             on a runtime worker (the headline pair runs in the runtime's block_on, outside the \
             workers, where a multiplexed connection's round trip costs two cross-thread wake-ups)"
        ),
    })
}

async fn ours(lock: &Lock, owner: &Owner, cycles: usize) -> R<(Duration, Vec<f64>)> {
    let mut lat = Vec::with_capacity(cycles);
    let started = Instant::now();
    for _ in 0..cycles {
        let t = Instant::now();
        lock.acquire(owner, None, Some(LEASE)).await?;
        let left = lock.release(owner).await?;
        lat.push(t.elapsed().as_secs_f64() * 1e6);
        if left != 0 {
            return Err(format!("release left {left} holds").into());
        }
    }
    Ok((started.elapsed(), lat))
}

async fn raw_cycles(raw: &mut Raw, cycles: usize) -> R<(Duration, Vec<f64>)> {
    let mut lat = Vec::with_capacity(cycles);
    let started = Instant::now();
    for _ in 0..cycles {
        let t = Instant::now();
        let ok: Option<String> = redis::cmd("SET")
            .arg(&raw.key)
            .arg(&raw.token)
            .arg("NX")
            .arg("PX")
            .arg(LEASE.as_millis() as u64)
            .query_async(&mut raw.conn)
            .await?;
        let deleted: i64 = raw
            .script
            .key(&raw.key)
            .arg(&raw.token)
            .invoke_async(&mut raw.conn)
            .await?;
        lat.push(t.elapsed().as_secs_f64() * 1e6);
        if ok.is_none() || deleted != 1 {
            return Err("raw lock cycle failed: the key was taken".into());
        }
    }
    Ok((started.elapsed(), lat))
}

fn owner_b() -> Owner {
    static OWNER: std::sync::OnceLock<Owner> = std::sync::OnceLock::new();
    OWNER.get_or_init(Owner::random).clone()
}

struct RawSync {
    conn: redis::Connection,
    script: redis::Script,
    key: String,
    token: String,
}

fn ours_blocking(
    lock: &redlock_core::blocking::Lock,
    owner: &Owner,
    cycles: usize,
) -> R<(Duration, Vec<f64>)> {
    let mut lat = Vec::with_capacity(cycles);
    let started = Instant::now();
    for _ in 0..cycles {
        let t = Instant::now();
        lock.acquire(owner, None, Some(LEASE))?;
        let left = lock.release(owner)?;
        lat.push(t.elapsed().as_secs_f64() * 1e6);
        if left != 0 {
            return Err(format!("release left {left} holds").into());
        }
    }
    Ok((started.elapsed(), lat))
}

fn raw_sync_cycles(raw: &mut RawSync, cycles: usize) -> R<(Duration, Vec<f64>)> {
    let mut lat = Vec::with_capacity(cycles);
    let started = Instant::now();
    for _ in 0..cycles {
        let t = Instant::now();
        let ok: Option<String> = redis::cmd("SET")
            .arg(&raw.key)
            .arg(&raw.token)
            .arg("NX")
            .arg("PX")
            .arg(LEASE.as_millis() as u64)
            .query(&mut raw.conn)?;
        let deleted: i64 = raw
            .script
            .key(&raw.key)
            .arg(&raw.token)
            .invoke(&mut raw.conn)?;
        lat.push(t.elapsed().as_secs_f64() * 1e6);
        if ok.is_none() || deleted != 1 {
            return Err("raw lock cycle failed: the key was taken".into());
        }
    }
    Ok((started.elapsed(), lat))
}

/// Runs `f` on a plain thread, as a C, Java or Python caller would (a tokio blocking-pool thread
/// is inside the runtime, where the blocking API must hand each call to a helper thread).
async fn on_plain_thread<T: Send + 'static>(f: impl FnOnce() -> R<T> + Send + 'static) -> R<T> {
    let thread = std::thread::spawn(f);
    tokio::task::spawn_blocking(move || thread.join())
        .await?
        .map_err(|_| "a bench thread panicked")?
}
