//! P4's floor: the least a hand-off through Redis can take on this machine, measured in the same
//! run and under the same load as P4, without any lock. The same 4 worker processes pass a
//! message around a ring: the holder runs a script that only `PUBLISH`es to the next process
//! (as a granting release does), then makes one more script round trip (as the releaser's next
//! attempt does); the next process is "in" when the message reaches it. A hop is timed from the
//! start of the publishing call to the message's arrival, like P4's hand-off (release start →
//! next holder in), and divided by the same PING round trip.
//!
//! A lock's hand-off adds to this what its scripts cost Redis and what its client does around
//! them; the hop itself is Redis' event loop, two sockets and waking a process on 2 shared cores.

use futures_util::StreamExt;

use crate::common::{Ctx, R, Series, max, median, now_ns, percentile, sorted};
use crate::p4::{PROCESSES, Workers, expect, parent_lines, run_worker, say};

pub const WORKER: &str = "__worker-p4-floor";

const PUBLISH: &str = "return redis.call('PUBLISH', KEYS[1], ARGV[1])";
/// The releaser's next round trip (its attempt, which finds the lock taken): one script call.
const NEXT_ATTEMPT: &str = "return redis.call('EXISTS', KEYS[1])";

// -- worker -------------------------------------------------------------------------------------

/// `REDIS_URL=… redlock-bench __worker-p4-floor PREFIX HOPS INDEX`: subscribes to its ring
/// channel, prints `ready`, waits for `go` (worker 0 then sends the first message), passes on
/// every message it gets until it got HOPS, prints `h SENT ARRIVED` per message and `done`, then
/// waits for `quit`.
pub fn worker_main(args: &[String]) {
    run_worker("p4 floor worker", worker(args));
}

async fn worker(args: &[String]) -> R<()> {
    let [prefix, hops, index] = args else {
        return Err("usage: REDIS_URL=... __worker-p4-floor PREFIX HOPS INDEX".into());
    };
    let hops: usize = hops.parse()?;
    let index: usize = index.parse()?;
    let channel = |i: usize| format!("{prefix}:ring:{}", i % PROCESSES);
    let client = redis::Client::open(std::env::var("REDIS_URL")?)?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub.subscribe(channel(index)).await?;
    let mut messages = pubsub.into_on_message();
    let publish = redis::Script::new(PUBLISH);
    let next_attempt = redis::Script::new(NEXT_ATTEMPT);
    let next = channel(index + 1);
    // Warm-up: both scripts loaded, the connection's first round trips made.
    let _: i64 = publish
        .key(&next)
        .arg("warm-up")
        .invoke_async(&mut conn)
        .await?;
    let _: i64 = next_attempt.key(prefix).invoke_async(&mut conn).await?;

    let mut commands = parent_lines();
    say("ready\n")?;
    expect(&mut commands, "go").await?;
    let total = hops * PROCESSES;
    // A message is "COUNT:SENT_NS"; message COUNT goes to worker (COUNT + 1) % PROCESSES.
    if index == 0 {
        let _: i64 = publish
            .key(&next)
            .arg(format!("0:{}", now_ns()))
            .invoke_async(&mut conn)
            .await?;
    }
    let mut rows = Vec::with_capacity(hops);
    while rows.len() < hops {
        let msg = messages.next().await.ok_or("pub/sub connection closed")?;
        let arrived = now_ns();
        let payload: String = msg.get_payload()?;
        let Some((count, sent)) = payload.split_once(':') else {
            continue; // another worker's warm-up
        };
        let (count, sent): (usize, u64) = (count.parse()?, sent.parse()?);
        rows.push((sent, arrived));
        if count + 1 < total {
            let message = format!("{}:{}", count + 1, now_ns());
            let _: i64 = publish
                .key(&next)
                .arg(message)
                .invoke_async(&mut conn)
                .await?;
            let _: i64 = next_attempt.key(prefix).invoke_async(&mut conn).await?;
        }
    }
    let mut out = String::with_capacity(rows.len() * 48);
    for (sent, arrived) in rows {
        out.push_str(&format!("h {sent} {arrived}\n"));
    }
    out.push_str("done\n");
    say(&out)?;
    expect(&mut commands, "quit").await?;
    Ok(())
}

// -- parent -------------------------------------------------------------------------------------

/// One repetition of the ring.
pub struct FloorRep {
    hops_us: Vec<f64>,
    hops_per_s: f64,
    rtt_us: f64,
}

/// One ring of `hops` messages per process, run right after a P4 repetition whose PING p50 was
/// `rtt_us`.
pub async fn one_rep(ctx: &mut Ctx, hops: usize, rtt_us: f64) -> R<FloorRep> {
    let mut workers = Workers::spawn(
        ctx,
        &[WORKER.into(), ctx.prefix("p4-floor"), hops.to_string()],
    )?;
    workers.all_ready().await?;
    workers.tell("go")?;
    let mut hops_us = Vec::with_capacity(hops * PROCESSES);
    let (mut first, mut last) = (u64::MAX, 0u64);
    let mut done = 0;
    while done < PROCESSES {
        let (i, line) = workers.next().await?;
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            ["h", sent, arrived] => {
                let (sent, arrived): (u64, u64) = (sent.parse()?, arrived.parse()?);
                hops_us.push(arrived.saturating_sub(sent) as f64 / 1e3);
                first = first.min(sent);
                last = last.max(arrived);
            }
            ["done"] => done += 1,
            _ => return Err(format!("floor worker {i} said {line:?}").into()),
        }
    }
    workers.finish().await?;
    let p50 = percentile(&sorted(hops_us.clone()), 50.0);
    println!(
        "         floor, bare pub/sub hop (no lock): p50 {p50:.1} µs = {:.2} rtt; max {:.2} ms",
        p50 / rtt_us,
        max(&hops_us) / 1e3
    );
    Ok(FloorRep {
        hops_per_s: hops_us.len() as f64 / ((last - first) as f64 / 1e9),
        hops_us,
        rtt_us,
    })
}

/// The floor's series: hops per second; hop p50 in µs and in round trips of each repetition's
/// PING p50 (medians of the repetitions).
pub fn series(reps: &[FloorRep]) -> Series {
    let p50 = |r: &FloorRep| percentile(&sorted(r.hops_us.clone()), 50.0);
    let rates: Vec<f64> = reps.iter().map(|r| r.hops_per_s).collect();
    let ratios: Vec<f64> = reps.iter().map(|r| p50(r) / r.rtt_us).collect();
    let p50s: Vec<f64> = reps.iter().map(p50).collect();
    let p99s: Vec<f64> = reps
        .iter()
        .map(|r| percentile(&sorted(r.hops_us.clone()), 99.0))
        .collect();
    Series::new(
        "floor: bare pub/sub hop (no lock)",
        "hops/s",
        "higher",
        &rates,
    )
    .extra("handoff_p50_rtt", median(&ratios))
    .extra("handoff_p50_us", median(&p50s))
    .extra("handoff_p99_us", median(&p99s))
}
