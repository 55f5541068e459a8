//! P4: 4 OS processes (this binary re-run as workers) contend for one exclusive lock. Workers
//! record wall-clock nanoseconds (shared by all processes of the host) when they ask, get and
//! start releasing the lock; the parent checks that no two sections overlap and computes
//! throughput, waits, handoffs (release start → next holder in, when that holder was already
//! waiting), hand changes and commands sent by clients per section (INFO commandstats deltas). One more
//! untimed run under MONITOR counts them a second way.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use redlock_core::{Client, Owner};
use tokio::sync::mpsc;

use crate::common::{
    Ctx, Fragment, Headline, LEASE, Latency, MonitorCounts, R, Series, StealSample, StealSpan, max,
    median, now_ns, percentile, r3, sorted, violation,
};

pub const WORKER: &str = "__worker-p4";
pub(crate) const PROCESSES: usize = 4;
const LOCK_NAME: &str = "contended";

// -- worker -------------------------------------------------------------------------------------

/// `REDIS_URL=… redlock-bench __worker-p4 PREFIX SECTIONS INDEX` (the URL in the environment, so a
/// password stays out of the process list): prints `ready`, waits for `go`, runs the
/// sections, prints one `r ASKED ACQUIRED RELEASE_START FENCE` line per section and
/// `done START END`, then waits for `quit`.
pub fn worker_main(args: &[String]) {
    run_worker("p4 worker", worker(args));
}

/// Runs a worker on the runtime every P4 worker uses (one thread), exiting with 1 on error.
pub(crate) fn run_worker(what: &str, worker: impl Future<Output = R<()>>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    if let Err(e) = runtime.block_on(worker) {
        eprintln!("{what} {}: {e}", std::process::id());
        std::process::exit(1);
    }
}

async fn worker(args: &[String]) -> R<()> {
    let [prefix, sections, _index] = args else {
        return Err("usage: REDIS_URL=... __worker-p4 PREFIX SECTIONS INDEX".into());
    };
    let url = std::env::var("REDIS_URL")?;
    let sections: usize = sections.parse()?;
    let client = Client::builder(url.as_str())
        .prefix(prefix.as_str())
        .connect()
        .await?;
    let lock = client.lock(LOCK_NAME)?;
    let owner = Owner::random();
    // Warm-up: connection and script cache.
    lock.acquire(&owner, None, Some(LEASE)).await?;
    lock.release(&owner).await?;

    let mut commands = parent_lines();
    say("ready\n")?;
    expect(&mut commands, "go").await?;
    let mut rows = Vec::with_capacity(sections);
    let start = now_ns();
    for _ in 0..sections {
        let asked = now_ns();
        let hold = lock.acquire(&owner, None, Some(LEASE)).await?;
        let acquired = now_ns();
        let release_start = now_ns();
        lock.release(&owner).await?;
        rows.push((asked, acquired, release_start, hold.fencing_token()));
    }
    let end = now_ns();
    let mut out = String::with_capacity(rows.len() * 80);
    for (a, b, c, f) in rows {
        out.push_str(&format!("r {a} {b} {c} {f}\n"));
    }
    out.push_str(&format!("done {start} {end}\n"));
    say(&out)?;
    expect(&mut commands, "quit").await?;
    client.close();
    Ok(())
}

/// The parent's words to a worker (its stdin lines), read on a thread of their own.
pub(crate) fn parent_lines() -> mpsc::UnboundedReceiver<String> {
    let (tx, commands) = mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    commands
}

pub(crate) fn say(text: &str) -> R<()> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()?;
    Ok(())
}

pub(crate) async fn expect(commands: &mut mpsc::UnboundedReceiver<String>, what: &str) -> R<()> {
    match commands.recv().await {
        Some(line) if line.trim() == what => Ok(()),
        other => Err(format!("expected {what:?} from the parent, got {other:?}").into()),
    }
}

// -- parent -------------------------------------------------------------------------------------

#[derive(Clone, Copy)]
struct Section {
    worker: usize,
    asked: u64,
    acquired: u64,
    release_start: u64,
    fence: u64,
}

struct Rep {
    sections_per_s: f64,
    waits_us: Vec<f64>,
    handoffs_us: Vec<f64>,
    hand_changes: f64,
    round_trips: f64,
    script_calls: f64,
    rtt_us: f64,
    breakdown: String,
    monitor: Option<MonitorCounts>,
    steal: StealSpan,
}

/// The worker processes of one repetition, this binary re-run: their stdin and stdout lines.
pub(crate) struct Workers {
    children: Vec<(Child, ChildStdin)>,
    lines: mpsc::UnboundedReceiver<(usize, String)>,
}

impl Workers {
    /// `PROCESSES` workers, each run as `redlock-bench ARGS… INDEX`.
    pub(crate) fn spawn(ctx: &Ctx, args: &[String]) -> R<Workers> {
        let exe = std::env::current_exe()?;
        let (tx, lines) = mpsc::unbounded_channel();
        let mut children = Vec::new();
        for i in 0..PROCESSES {
            let mut child = Command::new(&exe)
                .args(args)
                .arg(i.to_string())
                .env("REDIS_URL", &ctx.url)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()?;
            let stdin = child.stdin.take().ok_or("worker stdin")?;
            let stdout = child.stdout.take().ok_or("worker stdout")?;
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if tx.send((i, line)).is_err() {
                        break;
                    }
                }
                let _ = tx.send((i, "eof".to_owned()));
            });
            children.push((child, stdin));
        }
        Ok(Workers { children, lines })
    }

    pub(crate) fn tell(&mut self, what: &str) -> R<()> {
        for (_, stdin) in &mut self.children {
            writeln!(stdin, "{what}")?;
            stdin.flush()?;
        }
        Ok(())
    }

    pub(crate) async fn next(&mut self) -> R<(usize, String)> {
        match tokio::time::timeout(Duration::from_secs(300), self.lines.recv()).await {
            Ok(Some((i, line))) if line == "eof" => {
                Err(format!("worker {i} ended early (see its error above)").into())
            }
            Ok(Some(item)) => Ok(item),
            Ok(None) => Err("workers gone".into()),
            Err(_) => Err("no word from the workers for 300 s".into()),
        }
    }

    /// Waits for every worker's `ready`.
    pub(crate) async fn all_ready(&mut self) -> R<()> {
        for _ in 0..PROCESSES {
            let (i, line) = self.next().await?;
            if line != "ready" {
                return Err(format!("worker {i} said {line:?} instead of ready").into());
            }
        }
        Ok(())
    }

    pub(crate) async fn finish(mut self) -> R<()> {
        self.tell("quit")?;
        let children: Vec<Child> = std::mem::take(&mut self.children)
            .into_iter()
            .map(|(c, _)| c)
            .collect();
        tokio::task::spawn_blocking(move || -> R<()> {
            for mut child in children {
                let status = child.wait()?;
                if !status.success() {
                    return Err(format!("a worker exited with {status}").into());
                }
            }
            Ok(())
        })
        .await?
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for (child, _) in &mut self.children {
            if let Ok(None) = child.try_wait() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

async fn one_rep(ctx: &mut Ctx, sections: usize, monitored: bool) -> R<Rep> {
    let mut workers = Workers::spawn(
        ctx,
        &[WORKER.into(), ctx.prefix("p4"), sections.to_string()],
    )?;
    workers.all_ready().await?;
    let rtt_us = ctx.admin.ping_p50_us(ctx.pings()).await?;
    let before = ctx.admin.commandstats().await?;
    let monitor = if monitored {
        Some(ctx.admin.monitor().await?)
    } else {
        None
    };
    let steal_from = StealSample::now();
    workers.tell("go")?;
    let mut all = Vec::with_capacity(PROCESSES * sections);
    let (mut first, mut last) = (u64::MAX, 0u64);
    let mut done = 0;
    while done < PROCESSES {
        let (i, line) = workers.next().await?;
        let fields: Vec<&str> = line.split_whitespace().collect();
        let num = |k: usize| -> R<u64> {
            Ok(fields
                .get(k)
                .ok_or_else(|| format!("short line {line:?}"))?
                .parse()?)
        };
        match fields.first() {
            Some(&"r") => all.push(Section {
                worker: i,
                asked: num(1)?,
                acquired: num(2)?,
                release_start: num(3)?,
                fence: num(4)?,
            }),
            Some(&"done") => {
                first = first.min(num(1)?);
                last = last.max(num(2)?);
                done += 1;
            }
            _ => return Err(format!("worker {i} said {line:?}").into()),
        }
    }
    let steal = steal_from.until(StealSample::now());
    let monitor = match monitor {
        Some(m) => Some(m.stop().await?),
        None => None,
    };
    let delta = ctx.admin.commandstats().await?.since(&before);
    workers.finish().await?;

    let total = PROCESSES * sections;
    if all.len() != total {
        return Err(format!("{} sections reported, {total} expected", all.len()).into());
    }
    all.sort_by_key(|s| s.acquired);
    let mut handoffs_us = Vec::new();
    let mut hand_changes = 0;
    for pair in all.windows(2) {
        let (prev, next) = (pair[0], pair[1]);
        if next.acquired < prev.release_start {
            return Err(violation(format!(
                "sections overlap: worker {} got the lock at {} ns, before worker {} started \
                 releasing at {} ns",
                next.worker, next.acquired, prev.worker, prev.release_start
            )));
        }
        if next.fence <= prev.fence {
            return Err(violation(format!(
                "fencing tokens not increasing: {} then {}",
                prev.fence, next.fence
            )));
        }
        if next.worker != prev.worker {
            hand_changes += 1;
        }
        if next.asked < prev.release_start {
            handoffs_us.push((next.acquired - prev.release_start) as f64 / 1e3);
        }
    }
    Ok(Rep {
        sections_per_s: total as f64 / ((last - first) as f64 / 1e9),
        waits_us: all
            .iter()
            .map(|s| (s.acquired - s.asked) as f64 / 1e3)
            .collect(),
        handoffs_us,
        hand_changes: hand_changes as f64,
        round_trips: delta.round_trips() as f64 / total as f64,
        script_calls: delta.script_calls() as f64 / total as f64,
        rtt_us,
        breakdown: delta.breakdown(),
        monitor,
        steal,
    })
}

pub async fn run(ctx: &mut Ctx) -> R<Fragment> {
    let (reps, sections) = if ctx.quick { (3, 200) } else { (3, 1000) };
    println!(
        "P4 contended: {PROCESSES} processes x {sections} sections on one exclusive lock, {reps} reps \
         (+1 untimed under MONITOR)"
    );
    let mut runs = Vec::new();
    let mut floor = Vec::new();
    for rep in 0..reps {
        let r = one_rep(ctx, sections, false).await?;
        let handoff_p50 = percentile(&sorted(r.handoffs_us.clone()), 50.0);
        let w = sorted(r.waits_us.clone());
        println!(
            "  rep {}: {:.0} sections/s; wait p50 {:.2} ms p99 {:.2} ms max {:.2} ms; handoff p50 \
             {:.1} µs over {} ({:.2} rtt, PING p50 {:.1} µs); {} hand changes; {:.2} round \
             trips/section ({:.2} script calls)",
            rep + 1,
            r.sections_per_s,
            percentile(&w, 50.0) / 1e3,
            percentile(&w, 99.0) / 1e3,
            max(&w) / 1e3,
            handoff_p50,
            r.handoffs_us.len(),
            handoff_p50 / r.rtt_us,
            r.rtt_us,
            r.hand_changes,
            r.round_trips,
            r.script_calls
        );
        // The floor, interleaved: the same processes' bare pub/sub hop, no lock.
        floor.push(crate::p4_floor::one_rep(ctx, sections, r.rtt_us).await?);
        runs.push(r);
    }
    println!(
        "    Redis commands of the last rep: {}",
        runs[reps - 1].breakdown
    );
    let monitored = one_rep(ctx, sections, true).await?;
    let counts = monitored.monitor.as_ref().ok_or("no MONITOR counts")?;
    let total = (PROCESSES * sections) as f64;
    let monitor_trips = counts.sent as f64 / total;
    println!(
        "  under MONITOR (untimed): {monitor_trips:.2} commands/section sent by clients, {:.2} \
         commands/section inside scripts; sent: {:?}",
        counts.in_scripts as f64 / total,
        counts.sent_by_command
    );

    let collect = |f: &dyn Fn(&Rep) -> f64| runs.iter().map(f).collect::<Vec<f64>>();
    let rates = collect(&|r| r.sections_per_s);
    let ratios = collect(&|r| percentile(&sorted(r.handoffs_us.clone()), 50.0) / r.rtt_us);
    let handoff_p50 = median(&collect(&|r| {
        percentile(&sorted(r.handoffs_us.clone()), 50.0)
    }));
    let handoff_p99 = median(&collect(&|r| {
        percentile(&sorted(r.handoffs_us.clone()), 99.0)
    }));
    let waits_us: Vec<f64> = runs.iter().flat_map(|r| r.waits_us.clone()).collect();
    let w = sorted(waits_us.clone());
    let wait_max_ms = max(&w) / 1e3;
    let rep_wait_max_ms = median(&collect(&|r| max(&r.waits_us) / 1e3));
    let steals: Vec<StealSpan> = runs.iter().map(|r| r.steal).collect();
    let cmds = median(&collect(&|r| r.round_trips));
    let handoff_rtt = median(&ratios);
    let met = handoff_rtt <= 2.0 && wait_max_ms <= 10.0 && cmds <= 4.0;
    println!(
        "  median: {:.0} sections/s; handoff p50 {handoff_rtt:.2} rtt; wait max {wait_max_ms:.2} \
         ms (median rep {rep_wait_max_ms:.2}); {cmds:.2} commands/section; steal {} → {}",
        median(&rates),
        StealSpan::shown(&steals),
        if met { "met" } else { "NOT met" }
    );
    let series = Series::new("redlock-rust", "sections/s", "higher", &rates)
        .latency(Latency::from_us(&waits_us))
        .extra("handoff_p50_rtt", handoff_rtt)
        .extra("handoff_p50_us", handoff_p50)
        .extra("handoff_p99_us", handoff_p99)
        .extra(
            "handoffs_counted",
            median(&collect(&|r| r.handoffs_us.len() as f64)),
        )
        .extra("ping_rtt_p50_us", median(&collect(&|r| r.rtt_us)))
        .extra("wait_p50_ms", percentile(&w, 50.0) / 1e3)
        .extra("wait_p99_ms", percentile(&w, 99.0) / 1e3)
        .extra("wait_max_ms", wait_max_ms)
        .extra("wait_max_ms_rep_median", rep_wait_max_ms)
        .extra("redis_cmds_per_section", cmds)
        .extra(
            "script_calls_per_section",
            median(&collect(&|r| r.script_calls)),
        )
        .extra("redis_cmds_per_section_monitor", monitor_trips)
        .extra(
            "script_internal_cmds_per_section_monitor",
            counts.in_scripts as f64 / total,
        )
        .extra("hand_changes", median(&collect(&|r| r.hand_changes)))
        .extra("processes", PROCESSES as f64)
        .extra("sections_per_process", sections as f64)
        .steal(&steals);
    Ok(Fragment {
        goal: "P4".into(),
        title: "Rust: 4 processes contending for one exclusive lock".into(),
        target: "handoff p50 <= 2 RTT, wait max <= 10 ms, <= 4 Redis commands per section".into(),
        headline: Headline {
            label: "handoff p50 / PING rtt p50".into(),
            value: r3(handoff_rtt),
            met,
        },
        series: vec![series, crate::p4_floor::series(&floor)],
        notes: format!(
            "{reps} reps of {PROCESSES} processes x {sections} back-to-back sections (acquire wait \
             None, lease 10 s, release at once); wall-clock ns shared by the processes; sections \
             checked never to overlap and fencing tokens to increase; handoff = release start → \
             next acquire returned, counted when the next holder asked before that release \
             started; wait_max over all reps (wait_max_ms_rep_median: the median of each rep's max), \
             other figures medians of reps; steal_pct = the host's steal (/proc/stat) from go to \
             the last worker's end over the timed reps, % of all CPUs; commands from \
             INFO commandstats deltas (script calls, script loads, (un)subscribes, connection \
             setup), and once more untimed under MONITOR (lines not marked lua]); after each rep, \
             the floor: the same {PROCESSES} processes pass a message around a ring, each hop a \
             script that only PUBLISHes then one more script round trip (no lock), timed like a \
             handoff and divided by that rep's PING"
        ),
    })
}
