//! What an operator sees at 3 a.m.: the volume and content of the log through an outage, the
//! contention alert's line, and passwords kept out of logs and errors.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use common::*;
use redlock_core::{AcquireOptions, Client, ContentionAlert, ErrorKind, Owner};
use tracing::field::{Field, Visit};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context, SubscriberExt};

#[derive(Clone, Debug)]
struct Line {
    at: Instant,
    level: tracing::Level,
    message: String,
    fields: String,
    target: String,
}

impl Line {
    fn text(&self) -> String {
        format!(
            "{} {} {} {}",
            self.level, self.target, self.message, self.fields
        )
    }
}

#[derive(Default)]
struct Capture {
    lines: Mutex<Vec<Line>>,
}

struct V<'a>(&'a mut String, &'a mut String);
impl Visit for V<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            *self.0 = format!("{value:?}");
        } else {
            self.1.push_str(&format!("{}={:?} ", field.name(), value));
        }
    }
}

struct CaptureLayer(Arc<Capture>);
impl<S: tracing::Subscriber> Layer<S> for CaptureLayer {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let (mut message, mut fields) = (String::new(), String::new());
        event.record(&mut V(&mut message, &mut fields));
        self.0.lines.lock().unwrap().push(Line {
            at: Instant::now(),
            level: *event.metadata().level(),
            message,
            fields,
            target: event.metadata().target().to_owned(),
        });
    }
}

/// One global capture (the library's own threads log too, so a thread-local default would miss them).
fn capture() -> Arc<Capture> {
    static CAPTURE: OnceLock<Arc<Capture>> = OnceLock::new();
    CAPTURE
        .get_or_init(|| {
            let capture = Arc::new(Capture::default());
            let subscriber = tracing_subscriber::registry().with(
                CaptureLayer(capture.clone())
                    .with_filter(tracing_subscriber::filter::LevelFilter::DEBUG),
            );
            tracing::subscriber::set_global_default(subscriber).unwrap();
            capture
        })
        .clone()
}

fn lines_since(capture: &Capture, from: Instant) -> Vec<Line> {
    capture
        .lines
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.at >= from)
        .cloned()
        .collect()
}

/// Prints per second, per level and message, and returns the worst second's warn+error count.
fn report(lines: &[Line], from: Instant) -> usize {
    let mut per_second: BTreeMap<u64, BTreeMap<String, usize>> = BTreeMap::new();
    let mut worst = 0;
    for l in lines {
        let s = l.at.duration_since(from).as_secs();
        *per_second
            .entry(s)
            .or_default()
            .entry(format!("{} {}", l.level, l.message))
            .or_default() += 1;
    }
    for (s, counts) in &per_second {
        let warn_error: usize = counts
            .iter()
            .filter(|(k, _)| k.starts_with("WARN") || k.starts_with("ERROR"))
            .map(|(_, n)| n)
            .sum();
        worst = worst.max(warn_error);
        println!("t={s:>3}s warn+error={warn_error:>5} {counts:?}");
    }
    worst
}

/// Log volume through an outage longer than the lease, with 2 000 watched holds, 50 waiters on 10 names and 8
/// threads of blocking calls.
#[test]
fn log_volume_through_an_outage() {
    let capture = capture();
    let mut server = RedisServer::start();
    let url = server.url();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let lost = Arc::new(AtomicUsize::new(0));
    let lost2 = lost.clone();
    let client = rt
        .block_on(
            Client::builder(url.clone())
                .lease(Duration::from_secs(3))
                .command_timeout(Duration::from_secs(1))
                .connect_timeout(Duration::from_secs(1))
                .contention_alert_after(Some(Duration::from_secs(2)))
                .on_lock_lost(move |_| {
                    lost2.fetch_add(1, Ordering::Relaxed);
                })
                .connect(),
        )
        .unwrap();
    // 2 000 watched holds.
    rt.block_on(async {
        for i in 0..2000 {
            let lock = client.lock(&format!("hold:{i}")).unwrap();
            lock.acquire(&Owner::random(), NOW, None).await.unwrap();
        }
        // 10 names held by one owner; 5 waiters each.
        for i in 0..10 {
            let lock = client.lock(&format!("busy:{i}")).unwrap();
            lock.acquire(&Owner::random(), NOW, None).await.unwrap();
        }
    });
    assert_eq!(client.watched_holds(), 2010);
    let stop = Arc::new(AtomicBool::new(false));
    let mut waiters = Vec::new();
    for i in 0..50 {
        let lock = client.lock(&format!("busy:{}", i % 10)).unwrap();
        let stop = stop.clone();
        waiters.push(rt.spawn(async move {
            let mut errors = 0;
            while !stop.load(Ordering::Relaxed) {
                match lock
                    .acquire(
                        &Owner::random(),
                        Some(Duration::from_secs(3)),
                        Some(Duration::from_secs(5)),
                    )
                    .await
                {
                    Ok(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                    Err(_) => {
                        errors += 1;
                        tokio::time::sleep(Duration::from_millis(100)).await
                    }
                }
            }
            errors
        }));
    }
    let blocking = redlock_core::blocking::Client::from_builder(
        Client::builder(url.clone())
            .command_timeout(Duration::from_secs(1))
            .connect_timeout(Duration::from_secs(1)),
    )
    .unwrap();
    let mut threads = Vec::new();
    for t in 0..8 {
        let blocking = blocking.clone();
        let stop = stop.clone();
        threads.push(std::thread::spawn(move || {
            let owner = Owner::random();
            let lock = blocking.lock(&format!("loop:{t}")).unwrap();
            let (mut ok, mut err) = (0u64, 0u64);
            while !stop.load(Ordering::Relaxed) {
                match lock.acquire(&owner, Some(Duration::from_millis(200)), None) {
                    Ok(_) => {
                        ok += 1;
                        let _ = lock.release(&owner);
                    }
                    Err(_) => {
                        err += 1;
                        std::thread::sleep(Duration::from_millis(10));
                    }
                }
            }
            (ok, err)
        }));
    }
    std::thread::sleep(Duration::from_secs(3));
    let from = Instant::now();
    println!("stopping redis");
    server.stop();
    std::thread::sleep(Duration::from_secs(8));
    println!("restarting redis");
    server.restart();
    std::thread::sleep(Duration::from_secs(6));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        println!("thread {:?}", t.join().unwrap());
    }
    for w in waiters {
        let _ = rt.block_on(w);
    }
    let lines = lines_since(&capture, from);
    let worst = report(&lines, from);
    println!(
        "lost callbacks: {}, watched now: {}",
        lost.load(Ordering::Relaxed),
        client.watched_holds()
    );
    for l in lines
        .iter()
        .filter(|l| l.level <= tracing::Level::WARN && !l.message.starts_with("lock lost"))
    {
        println!("sample: t={:?} {}", l.at.duration_since(from), l.text());
    }
    client.close();
    blocking.close();
    server.stop();
    let warns = lines
        .iter()
        .filter(|l| l.level <= tracing::Level::WARN)
        .count();
    assert!(
        warns > 0,
        "silence at warn level while 2 000 holds were lost"
    );
    assert!(
        worst < 100,
        "a storm: {worst} warn/error lines in one second (a line per lost hold?)"
    );
}

fn alert_lines(capture: &Capture, from: Instant, name: &str) -> Vec<Line> {
    lines_since(capture, from)
        .into_iter()
        .filter(|l| {
            l.message.starts_with("lock contention") && l.fields.contains(&format!("lock={name} "))
        })
        .collect()
}

/// (3) The alert's log line: one per waiting acquire, naming the holder with where it runs
/// (host, pid, thread label), as the alert callback and inspect do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_log_line_names_the_holder_process() {
    let capture = capture();
    let server = RedisServer::start();
    // The holder: another client (as another process would be), with a thread label.
    let holder_client = connect(&server).await;
    let lock = holder_client.lock("audit:alert").unwrap();
    let mut options = AcquireOptions::new(NOW, None);
    options.label = Some("billing-worker-7".into());
    lock.acquire_with(&Owner::random(), options).await.unwrap();
    let alerts: Arc<Mutex<Vec<ContentionAlert>>> = Arc::default();
    let seen = alerts.clone();
    let waiter_client = builder(&server)
        .contention_alert_after(Some(ms(300)))
        .recheck_interval(ms(50))
        .on_contention(move |a| seen.lock().unwrap().push(a.clone()))
        .connect()
        .await
        .unwrap();
    let from = Instant::now();
    let err = waiter_client
        .lock("audit:alert")
        .unwrap()
        .acquire(&Owner::random(), Some(ms(1500)), None)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);
    tokio::time::sleep(ms(300)).await;
    let lines = alert_lines(&capture, from, "audit:alert");
    for l in &lines {
        println!("{}", l.text());
    }
    let alerts = alerts.lock().unwrap().clone();
    assert_eq!(alerts.len(), 1, "one alert per waiting acquire");
    let meta = &alerts[0].holders[0].metadata;
    println!("callback's holder metadata: {meta:?}");
    assert_eq!(meta.thread, "billing-worker-7");
    assert_eq!(lines.len(), 1, "one alert line per waiting acquire");
    let text = lines[0].text();
    assert!(
        text.contains("billing-worker-7") && text.contains(&format!("{}", meta.pid)),
        "the alert's log line does not say which process/thread holds the lock: {text}"
    );
}

/// (3) A read/write lock: the alert names all readers (or at least says how many there are).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_alert_counts_all_readers() {
    let capture = capture();
    let server = RedisServer::start();
    let readers = connect(&server).await;
    let rw = readers.read_write_lock("audit:readers").unwrap();
    for _ in 0..150 {
        rw.read()
            .acquire(&Owner::random(), NOW, None)
            .await
            .unwrap();
    }
    let alerts: Arc<Mutex<Vec<ContentionAlert>>> = Arc::default();
    let seen = alerts.clone();
    let waiter_client = builder(&server)
        .contention_alert_after(Some(ms(200)))
        .on_contention(move |a| seen.lock().unwrap().push(a.clone()))
        .connect()
        .await
        .unwrap();
    let from = Instant::now();
    let _ = waiter_client
        .read_write_lock("audit:readers")
        .unwrap()
        .write()
        .acquire(&Owner::random(), Some(ms(800)), None)
        .await;
    tokio::time::sleep(ms(300)).await;
    let alerts = alerts.lock().unwrap().clone();
    assert_eq!(alerts.len(), 1);
    let lines = alert_lines(&capture, from, "audit:readers");
    assert_eq!(lines.len(), 1);
    let text = lines[0].text();
    println!(
        "alert holders: {} (readers holding: 150); log line mentions 150: {}",
        alerts[0].holders.len(),
        text.contains("holder_count=150")
    );
    assert!(
        alerts[0].holders.len() == 150 || text.contains("holder_count=150"),
        "the alert lists {} of 150 readers and says nothing of the rest",
        alerts[0].holders.len()
    );
}

/// (2) Passwords never reach a log line, an error or a Debug output.
#[test]
fn passwords_stay_out_of_logs_and_errors() {
    let capture = capture();
    let secret = "Pw0rdSecretXyz";
    let mut server = RedisServer::start_with_password(Some(secret));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let from = Instant::now();
    let mut texts = Vec::new();
    let port = server.port();
    rt.block_on(async {
        for url in [
            format!("redis://default:{secret}x@127.0.0.1:{port}"),
            format!("redis://:{secret}x@127.0.0.1:{port}/0"),
            format!("rediss://default:{secret}@127.0.0.1:{port}"),
            format!("rediss://default:{secret}@127.0.0.1:{port}/#insecure"),
            format!(
                "redis://default:{secret}@127.0.0.1:{}",
                redlock_core::testing::free_port()
            ),
            format!("redis://default:{secret}@127.0.0.1:{port}/99"),
            format!("redis://default:{secret}@127.0.0.1:notaport"),
            format!("redis+unix:///nonexistent.sock?pass={secret}"),
        ] {
            let builder = Client::builder(url.clone()).connect_timeout(ms(500));
            texts.push(format!("{:?}", builder.config()));
            match builder.connect().await {
                Ok(c) => {
                    texts.push(format!("{:?}", c.config()));
                    c.close();
                }
                Err(e) => {
                    texts.push(format!("{e} / {e:?}"));
                }
            }
        }
        // An outage with a watched hold on a client with a password.
        let client = Client::builder(format!("redis://default:{secret}@127.0.0.1:{port}"))
            .lease(Duration::from_secs(2))
            .command_timeout(ms(500))
            .connect()
            .await
            .unwrap();
        client
            .lock("pw")
            .unwrap()
            .acquire(&Owner::random(), NOW, None)
            .await
            .unwrap();
        server.stop();
        let err = client
            .lock("pw2")
            .unwrap()
            .acquire(&Owner::random(), NOW, None)
            .await
            .unwrap_err();
        texts.push(format!("{err} / {err:?}"));
        tokio::time::sleep(Duration::from_secs(4)).await;
        server.restart();
        tokio::time::sleep(Duration::from_secs(2)).await;
        client.close();
    });
    for l in lines_since(&capture, from) {
        texts.push(l.text());
    }
    let leaks: Vec<&String> = texts.iter().filter(|t| t.contains(secret)).collect();
    for t in &texts {
        println!("{t}");
    }
    assert!(leaks.is_empty(), "password leaked: {leaks:#?}");
}
