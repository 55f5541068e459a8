//! The library's log lines handed to a host without `tracing` (`logs::forward_logs`), as every
//! binding does. Its own test binary: the subscriber it installs is process-wide.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redlock_core::logs::{LogRecord, forward_logs};
use redlock_core::testing::RedisServer;
use redlock_core::{Client, Owner};
use tracing::Level;

type Seen = Arc<Mutex<Vec<(Level, String, String)>>>;

/// The forwarding is process-wide: one test at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn sink(seen: &Seen) -> redlock_core::logs::LogSink {
    let seen = seen.clone();
    Arc::new(move |record: &LogRecord<'_>| {
        seen.lock().unwrap().push((
            record.level,
            record.target.to_owned(),
            record.message.to_owned(),
        ));
    })
}

/// A client whose watched holds last 600 ms without renewal.
async fn short_lease_client(server: &RedisServer) -> Client {
    Client::builder(server.url())
        .lease(Duration::from_millis(600))
        .connect()
        .await
        .unwrap()
}

/// A watched hold of `lock`, force-unlocked by `by`: its loss is logged (a warn line naming the
/// lock), and has been once this returns.
async fn lose_a_hold(lock: &redlock_core::Lock, by: &Client) {
    let hold = lock
        .acquire(&Owner::random(), Some(Duration::ZERO), None)
        .await
        .unwrap();
    assert!(by.force_unlock(lock.name()).await.unwrap());
    tokio::time::timeout(Duration::from_secs(5), hold.lost())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lines_at_the_level_asked_reach_the_sink_and_stop_when_asked() {
    let _serial = SERIAL.lock().await;
    let server = RedisServer::start();
    let seen: Seen = Arc::default();
    forward_logs(Some(Level::WARN), Some(sink(&seen))).unwrap();

    // A lost hold logs a warn line with its lock's name.
    let client = short_lease_client(&server).await;
    let lock = client.lock("forwarded {name}").unwrap();
    let other = Client::connect(&server.url()).await.unwrap();
    lose_a_hold(&lock, &other).await;
    let lines = seen.lock().unwrap().clone();
    let lost = lines
        .iter()
        .find(|(_, _, message)| message.starts_with("lock lost"))
        .unwrap_or_else(|| panic!("no lost-hold line among {lines:?}"));
    assert_eq!(lost.0, Level::WARN);
    assert!(lost.1.starts_with("redlock_core"), "{lost:?}");
    assert!(lost.2.contains(r#"lock="forwarded {name}""#), "{lost:?}");
    // Nothing less severe than asked.
    assert!(
        lines.iter().all(|(level, ..)| *level <= Level::WARN),
        "{lines:?}"
    );

    // Stopped: no more lines.
    forward_logs(None, None).unwrap();
    seen.lock().unwrap().clear();
    lose_a_hold(&lock, &other).await;
    assert!(
        seen.lock().unwrap().is_empty(),
        "{:?}",
        seen.lock().unwrap()
    );

    // Debug level: the debug lines come too.
    forward_logs(Some(Level::DEBUG), Some(sink(&seen))).unwrap();
    tracing::debug!(target: "redlock_core::test", answer = 42, "a debug line");
    let wanted = (
        Level::DEBUG,
        "redlock_core::test".to_owned(),
        "a debug line answer=42".to_owned(),
    );
    eventually(|| seen.lock().unwrap().contains(&wanted)).await;
    forward_logs(None, None).unwrap();
}

async fn eventually(done: impl Fn() -> bool) {
    for _ in 0..300 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("not within 3 s");
}

/// The sink runs on a thread of its own: a sink that blocks holds up no thread that logs, and
/// lines past the queue's bound are dropped and counted in a warn line of their own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_sink_holds_up_no_thread_that_logs() {
    let _serial = SERIAL.lock().await;
    let (release, blocked) = std::sync::mpsc::channel::<()>();
    let blocked = Mutex::new(Some(blocked));
    let seen: Seen = Arc::default();
    let kept = seen.clone();
    forward_logs(
        Some(Level::WARN),
        Some(Arc::new(move |record: &LogRecord<'_>| {
            if let Some(blocked) = blocked.lock().unwrap().take() {
                let _ = blocked.recv(); // the first line waits until the test lets it go
            }
            kept.lock().unwrap().push((
                record.level,
                record.target.to_owned(),
                record.message.to_owned(),
            ));
        })),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let lines = redlock_core::logs::QUEUED * 3;
    for i in 0..lines {
        tracing::warn!(target: "redlock_core::test", "line {i}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    release.send(()).unwrap();
    let dropped_line = |(_, _, message): &(Level, String, String)| {
        message
            .ends_with("log lines of the library were dropped: the host's logging did not keep up")
    };
    let counts = |seen: &[(Level, String, String)]| {
        let delivered = seen
            .iter()
            .filter(|line| line.2.starts_with("line "))
            .count();
        let dropped: usize = seen
            .iter()
            .filter(|line| dropped_line(line))
            .map(|line| line.2.split(' ').next().unwrap().parse::<usize>().unwrap())
            .sum();
        (delivered, dropped)
    };
    // The count of dropped lines comes right after the line that was being handed over when
    // they were dropped, before the queued lines: wait for all of them.
    for _ in 0..300 {
        let (delivered, dropped) = counts(&seen.lock().unwrap());
        if dropped > 0 && delivered + dropped >= lines {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let seen = seen.lock().unwrap().clone();
    let (delivered, dropped) = counts(&seen);
    assert!(
        dropped > 0,
        "no line was dropped, or the count of them never came"
    );
    assert_eq!(
        delivered + dropped,
        lines,
        "{delivered} delivered, {dropped} dropped"
    );
    // In order.
    let numbers: Vec<usize> = seen
        .iter()
        .filter_map(|line| line.2.strip_prefix("line ")?.parse().ok())
        .collect();
    assert!(numbers.windows(2).all(|w| w[0] < w[1]), "out of order");
    forward_logs(None, None).unwrap();
}

/// Changing the level or the sink again and again (a host that raises it per incident) frees
/// the sinks swapped out: memory does not grow with the number of changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn level_changes_do_not_grow_memory() {
    let _serial = SERIAL.lock().await;
    let seen: Seen = Arc::default();
    forward_logs(Some(Level::WARN), Some(sink(&seen))).unwrap();
    let before = rss_kib();
    for i in 0..400_000 {
        let level = if i % 2 == 0 {
            Level::WARN
        } else {
            Level::ERROR
        };
        forward_logs(Some(level), Some(sink(&seen))).unwrap();
    }
    let after = rss_kib();
    forward_logs(None, None).unwrap();
    assert!(
        after < before + 4 * 1024,
        "RSS grew by {} KiB over 400 000 changes",
        after - before
    );
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Any text is a valid lock name: one with a newline must not forge a second line in the
/// host's log (C, Go, Python and Java all print what the sink gets), nor one with a space a
/// field of its line. Found by the log audit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newline_in_a_lock_name_stays_on_its_line() {
    let _serial = SERIAL.lock().await;
    let server = RedisServer::start();
    let seen: Seen = Arc::default();
    forward_logs(Some(Level::WARN), Some(sink(&seen))).unwrap();
    let client = short_lease_client(&server).await;
    let name = "orders:42 owner=forged\nERROR redlock_core: forged line\r\u{1b}[2K";
    lose_a_hold(&client.lock(name).unwrap(), &client).await;
    forward_logs(None, None).unwrap();
    let lines = seen.lock().unwrap().clone();
    let lost = lines
        .iter()
        .find(|(_, _, message)| message.contains("orders:42"))
        .unwrap_or_else(|| panic!("no line names the lock among {lines:?}"));
    assert!(
        !lost.2.contains(['\n', '\r', '\u{1b}']),
        "a control character reached the host: {lost:?}"
    );
    assert!(
        lost.2.contains(
            r#"lock="orders:42 owner=forged\nERROR redlock_core: forged line\r\u{1b}[2K""#
        ),
        "{lost:?}"
    );
}
