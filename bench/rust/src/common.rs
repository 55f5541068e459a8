//! What every goal shares: the run context, Redis' own counters (INFO commandstats, MONITOR),
//! process figures (CPU, RSS, live heap), statistics and the fragment format of
//! bench/FRAGMENTS.md.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::StreamExt;
use redis::aio::MultiplexedConnection;
use serde::Serialize;

/// Errors of the bench: anything, with a message.
pub type R<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Fixed lease of the timed sections (P1, P4, P5, P7): no watchdog renewals in the counts.
pub const LEASE: Duration = Duration::from_secs(10);

/// Everything a goal needs.
pub struct Ctx {
    pub url: String,
    pub quick: bool,
    pub out: PathBuf,
    /// Unique per run, so a shared redis-server keeps runs apart.
    pub run_prefix: String,
    pub admin: Admin,
}

impl Ctx {
    /// The key prefix of one goal.
    pub fn prefix(&self, goal: &str) -> String {
        format!("{}-{goal}", self.run_prefix)
    }

    /// PING round trips measured: fewer in quick mode.
    pub fn pings(&self) -> usize {
        if self.quick { 300 } else { 1000 }
    }
}

// -- the bench's own footprint -----------------------------------------------------------------

/// The system allocator, counting live heap bytes (for P6's memory per hold).
pub struct CountingAlloc;

static LIVE_HEAP: AtomicI64 = AtomicI64::new(0);

// SAFETY: every call is forwarded to `System` unchanged; only a counter is updated on the side.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE_HEAP.fetch_add(layout.size() as i64, Ordering::Relaxed);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE_HEAP.fetch_add(layout.size() as i64, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) };
        LIVE_HEAP.fetch_sub(layout.size() as i64, Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE_HEAP.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        }
        p
    }
}

/// Live heap bytes of this process.
pub fn heap_live() -> i64 {
    LIVE_HEAP.load(Ordering::Relaxed)
}

/// Resident set size of this process in bytes (VmRSS of /proc/self/status).
pub fn rss_bytes() -> i64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<i64>().ok())
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

/// User + system CPU time of this process (all threads).
pub fn cpu_time() -> Duration {
    // SAFETY: getrusage only writes into the struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage struct.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    if rc != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Wall clock in nanoseconds since the UNIX epoch: comparable between processes of one host.
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// A small xorshift generator (random samples without a dependency).
pub struct Rng(u64);
impl Rng {
    pub fn seeded() -> Rng {
        Rng(now_ns() | 1)
    }
    pub fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }
}

// -- Redis' counters ----------------------------------------------------------------------------

/// An admin connection of the bench itself (its own commands are left out of every count).
pub struct Admin {
    client: redis::Client,
    conn: MultiplexedConnection,
}

impl Admin {
    pub async fn connect(url: &str) -> R<Admin> {
        let client = redis::Client::open(url)?;
        let conn = client.get_multiplexed_async_connection().await?;
        Ok(Admin { client, conn })
    }

    pub async fn commandstats(&mut self) -> R<CmdStats> {
        let text: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut self.conn)
            .await?;
        Ok(CmdStats::parse(&text))
    }

    /// Median PING round trip in µs over `n` pings (after a few unmeasured ones).
    pub async fn ping_p50_us(&mut self, n: usize) -> R<f64> {
        let mut lat = Vec::with_capacity(n);
        for i in 0..n + 20 {
            let t = Instant::now();
            let _: String = redis::cmd("PING").query_async(&mut self.conn).await?;
            if i >= 20 {
                lat.push(t.elapsed().as_secs_f64() * 1e6);
            }
        }
        Ok(percentile(&sorted(lat), 50.0))
    }

    /// Starts counting every command Redis runs, until [`Monitor::stop`].
    pub async fn monitor(&self) -> R<Monitor> {
        let monitor = self.client.get_async_monitor().await?;
        let task = tokio::spawn(async move {
            let mut counts = MonitorCounts::default();
            let mut lines = monitor.into_on_message::<String>();
            while let Some(line) = lines.next().await {
                if line.contains(MONITOR_END) {
                    break;
                }
                if line.contains(" lua] ") {
                    counts.in_scripts += 1;
                } else {
                    counts.sent += 1;
                    let name = line
                        .split_once("] \"")
                        .and_then(|(_, rest)| rest.split('"').next())
                        .unwrap_or("?")
                        .to_lowercase();
                    *counts.sent_by_command.entry(name).or_default() += 1;
                }
            }
            counts
        });
        Ok(Monitor {
            task,
            conn: self.conn.clone(),
        })
    }
}

const MONITOR_END: &str = "redlock-bench-monitor-end";

/// A running MONITOR count.
pub struct Monitor {
    task: tokio::task::JoinHandle<MonitorCounts>,
    conn: MultiplexedConnection,
}

/// Commands seen under MONITOR: sent by clients (round trips) and run inside scripts.
#[derive(Default, Debug)]
pub struct MonitorCounts {
    pub sent: u64,
    pub in_scripts: u64,
    pub sent_by_command: BTreeMap<String, u64>,
}

impl Monitor {
    pub async fn stop(mut self) -> R<MonitorCounts> {
        let _: String = redis::cmd("ECHO")
            .arg(MONITOR_END)
            .query_async(&mut self.conn)
            .await?;
        Ok(tokio::time::timeout(Duration::from_secs(60), self.task).await??)
    }
}

/// INFO commandstats: calls and µs per command (subcommands as `client|setinfo`).
#[derive(Debug, Clone, Default)]
pub struct CmdStats {
    calls: HashMap<String, u64>,
    usec: HashMap<String, u64>,
}

/// Commands only a client can send (never run inside a script), or that start a script.
/// Everything else Redis counts (hset, zadd, publish, ...) is taken as run inside our scripts:
/// redlock-core sends nothing else itself (P4's MONITOR run checks this).
fn sent_by_client(name: &str) -> bool {
    matches!(
        name,
        "eval"
            | "evalsha"
            | "eval_ro"
            | "evalsha_ro"
            | "fcall"
            | "fcall_ro"
            | "subscribe"
            | "unsubscribe"
            | "psubscribe"
            | "punsubscribe"
            | "ssubscribe"
            | "sunsubscribe"
            | "hello"
            | "auth"
            | "select"
            | "ping"
            | "reset"
            | "quit"
    ) || name.starts_with("script|")
        || name.starts_with("client|")
}

impl CmdStats {
    fn parse(text: &str) -> CmdStats {
        let mut stats = CmdStats::default();
        for line in text.lines() {
            let Some((name, fields)) = line
                .trim()
                .strip_prefix("cmdstat_")
                .and_then(|rest| rest.split_once(':'))
            else {
                continue;
            };
            let field = |key: &str| {
                fields
                    .split(',')
                    .find_map(|f| f.strip_prefix(key))
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            stats.calls.insert(name.to_owned(), field("calls="));
            stats.usec.insert(name.to_owned(), field("usec="));
        }
        stats
    }

    /// The counts since `before`.
    pub fn since(&self, before: &CmdStats) -> CmdStats {
        let diff = |now: &HashMap<String, u64>, then: &HashMap<String, u64>| {
            now.iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.saturating_sub(then.get(k).copied().unwrap_or(0)),
                    )
                })
                .filter(|(_, v)| *v > 0)
                .collect()
        };
        CmdStats {
            calls: diff(&self.calls, &before.calls),
            usec: diff(&self.usec, &before.usec),
        }
    }

    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &CmdStats) {
        for (mine, theirs) in [
            (&mut self.calls, &other.calls),
            (&mut self.usec, &other.usec),
        ] {
            for (k, v) in theirs {
                *mine.entry(k.clone()).or_default() += v;
            }
        }
    }

    pub fn calls(&self, names: &[&str]) -> u64 {
        names
            .iter()
            .map(|n| self.calls.get(*n).copied().unwrap_or(0))
            .sum()
    }

    pub fn usec(&self, names: &[&str]) -> u64 {
        names
            .iter()
            .map(|n| self.usec.get(*n).copied().unwrap_or(0))
            .sum()
    }

    /// Script calls (each one round trip).
    pub fn script_calls(&self) -> u64 {
        self.calls(&["evalsha", "eval", "evalsha_ro", "eval_ro"])
    }

    /// Round trips sent by clients (script calls, script loads, subscriptions, connection setup).
    pub fn round_trips(&self) -> u64 {
        self.calls
            .iter()
            .filter(|(name, _)| sent_by_client(name))
            .map(|(_, calls)| calls)
            .sum()
    }

    /// "name=calls" of every command with calls, most first (for the summary).
    pub fn breakdown(&self) -> String {
        let mut v: Vec<(&String, &u64)> = self
            .calls
            .iter()
            .filter(|(n, _)| !matches!(n.as_str(), "info" | "ping" | "echo"))
            .collect();
        v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        v.iter()
            .map(|(n, c)| format!("{n}={c}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

// -- statistics ---------------------------------------------------------------------------------

pub fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(|a, b| a.total_cmp(b));
    v
}

/// Nearest-rank percentile of sorted values (0 when empty).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

pub fn median(v: &[f64]) -> f64 {
    let s = sorted(v.to_vec());
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

pub fn max(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::NEG_INFINITY, f64::max).max(0.0)
}

/// Rounded for the fragment (3 decimals; finite).
pub fn r3(x: f64) -> f64 {
    if x.is_finite() {
        (x * 1000.0).round() / 1000.0
    } else {
        0.0
    }
}

pub fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

// -- fragments ----------------------------------------------------------------------------------

#[derive(Serialize)]
pub struct Fragment {
    pub goal: String,
    pub title: String,
    pub target: String,
    pub headline: Headline,
    pub series: Vec<Series>,
    pub notes: String,
}

#[derive(Serialize)]
pub struct Headline {
    pub label: String,
    pub value: f64,
    pub met: bool,
}

#[derive(Serialize)]
pub struct Series {
    pub library: String,
    pub metric: String,
    pub better: String,
    pub runs: Vec<f64>,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_us: Option<Latency>,
    pub extra: BTreeMap<String, f64>,
}

#[derive(Serialize)]
pub struct Latency {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
    pub samples: Vec<f64>,
}

impl Latency {
    /// From latencies in µs (in the order measured); keeps up to 2000 evenly spaced samples.
    pub fn from_us(values: &[f64]) -> Latency {
        let s = sorted(values.to_vec());
        let step = values.len().div_ceil(2000).max(1);
        Latency {
            p50: r3(percentile(&s, 50.0)),
            p99: r3(percentile(&s, 99.0)),
            max: r3(max(&s)),
            samples: values
                .iter()
                .step_by(step)
                .map(|v| (v * 10.0).round() / 10.0)
                .collect(),
        }
    }
}

impl Series {
    pub fn new(library: &str, metric: &str, better: &str, runs: &[f64]) -> Series {
        Series {
            library: library.to_owned(),
            metric: metric.to_owned(),
            better: better.to_owned(),
            runs: runs.iter().map(|v| r3(*v)).collect(),
            median: r3(median(runs)),
            min: r3(runs.iter().copied().fold(f64::INFINITY, f64::min)),
            max: r3(max(runs)),
            latency_us: None,
            extra: BTreeMap::new(),
        }
    }
    pub fn latency(mut self, latency: Latency) -> Series {
        self.latency_us = Some(latency);
        self
    }
    pub fn extra(mut self, key: &str, value: f64) -> Series {
        self.extra.insert(key.to_owned(), r3(value));
        self
    }
    /// `steal_pct` over `spans` (see [`StealSpan`]), left out where /proc/stat cannot be read.
    pub fn steal(self, spans: &[StealSpan]) -> Series {
        match StealSpan::percent(spans) {
            Some(pct) => self.extra("steal_pct", (pct * 10.0).round() / 10.0),
            None => self,
        }
    }
}

/// Writes `<goal>-rust.json` into the output directory.
pub fn write_fragment(ctx: &Ctx, fragment: &Fragment) -> R<PathBuf> {
    std::fs::create_dir_all(&ctx.out)?;
    let path = ctx.out.join(format!("{}-rust.json", fragment.goal));
    let mut text = serde_json::to_string_pretty(fragment)?;
    text.push('\n');
    std::fs::write(&path, text)?;
    Ok(path)
}

/// Fails loudly: the bench found a broken guarantee.
pub fn violation(what: String) -> Box<dyn std::error::Error + Send + Sync> {
    format!("GUARANTEE VIOLATED: {what}").into()
}

/// The host's steal counter (/proc/stat, all CPUs, USER_HZ ticks) at a moment. The hypervisor of
/// a small VM stops vCPUs for milliseconds at a time, and the contended waits of 10 ms and more
/// coincide with such stops (docs/benchmarks.md): each timed run says how much was taken away.
#[derive(Clone, Copy)]
pub struct StealSample {
    ticks: Option<u64>,
    at: Instant,
}

/// Stolen CPU time over wall time; `None` stolen once a reading failed.
#[derive(Clone, Copy)]
pub struct StealSpan {
    stolen: Option<Duration>,
    elapsed: Duration,
}

/// USER_HZ, the unit of /proc/stat (100 on every Linux architecture).
const USER_HZ: u64 = 100;

impl StealSample {
    pub fn now() -> Self {
        let ticks = std::fs::read_to_string("/proc/stat").ok().and_then(|s| {
            let mut fields = s.lines().next()?.split_whitespace();
            (fields.next()? == "cpu").then_some(())?;
            fields.nth(7)?.parse().ok()
        });
        StealSample {
            ticks,
            at: Instant::now(),
        }
    }

    pub fn until(self, to: StealSample) -> StealSpan {
        let stolen = match (self.ticks, to.ticks) {
            (Some(a), Some(b)) if b >= a => Some(Duration::from_millis((b - a) * 1000 / USER_HZ)),
            _ => None,
        };
        StealSpan {
            stolen,
            elapsed: to.at - self.at,
        }
    }
}

impl StealSpan {
    /// Percent of all CPUs' time stolen over `spans`, if every reading worked.
    pub fn percent(spans: &[StealSpan]) -> Option<f64> {
        let cpus = std::thread::available_parallelism().ok()?.get() as f64;
        let stolen: Option<Duration> = spans.iter().map(|s| s.stolen).sum();
        let elapsed: Duration = spans.iter().map(|s| s.elapsed).sum();
        (!elapsed.is_zero()).then_some(())?;
        Some(100.0 * secs(stolen?) / (secs(elapsed) * cpus))
    }

    /// The percent for a line of output: `1.5 %`, or `-`.
    pub fn shown(spans: &[StealSpan]) -> String {
        Self::percent(spans).map_or("-".into(), |p| format!("{p:.1} %"))
    }
}
