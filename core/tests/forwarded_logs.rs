//! The library's log lines handed to a host without `tracing` (`logs::forward_logs`), as every
//! binding does. Its own test binary: the subscriber it installs is process-wide.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redlock_core::logs::{LogRecord, forward_logs};
use redlock_core::testing::RedisServer;
use redlock_core::{Client, Owner};
use tracing::Level;

type Seen = Arc<Mutex<Vec<(Level, String, String)>>>;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lines_at_the_level_asked_reach_the_sink_and_stop_when_asked() {
    let server = RedisServer::start();
    let seen: Seen = Arc::default();
    forward_logs(Some(Level::WARN), Some(sink(&seen))).unwrap();

    // A lost hold logs a warn line with its lock's name.
    let client = Client::builder(server.url())
        .lease(Duration::from_millis(600))
        .connect()
        .await
        .unwrap();
    let lock = client.lock("forwarded {name}").unwrap();
    let hold = lock
        .acquire(&Owner::random(), Some(Duration::ZERO), None)
        .await
        .unwrap();
    let other = Client::connect(&server.url()).await.unwrap();
    assert!(other.force_unlock("forwarded {name}").await.unwrap());
    tokio::time::timeout(Duration::from_secs(5), hold.lost())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let lines = seen.lock().unwrap().clone();
    let lost = lines
        .iter()
        .find(|(_, _, message)| message.starts_with("lock lost"))
        .unwrap_or_else(|| panic!("no lost-hold line among {lines:?}"));
    assert_eq!(lost.0, Level::WARN);
    assert!(lost.1.starts_with("redlock_core"), "{lost:?}");
    assert!(lost.2.contains("lock=forwarded {name}"), "{lost:?}");
    // Nothing less severe than asked.
    assert!(
        lines.iter().all(|(level, ..)| *level <= Level::WARN),
        "{lines:?}"
    );

    // Stopped: no more lines.
    forward_logs(None, None).unwrap();
    seen.lock().unwrap().clear();
    let hold = lock
        .acquire(&Owner::random(), Some(Duration::ZERO), None)
        .await
        .unwrap();
    assert!(other.force_unlock("forwarded {name}").await.unwrap());
    tokio::time::timeout(Duration::from_secs(5), hold.lost())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        seen.lock().unwrap().is_empty(),
        "{:?}",
        seen.lock().unwrap()
    );

    // Debug level: the debug lines come too.
    forward_logs(Some(Level::DEBUG), Some(sink(&seen))).unwrap();
    tracing::debug!(target: "redlock_core::test", answer = 42, "a debug line");
    let lines = seen.lock().unwrap().clone();
    assert!(
        lines.contains(&(
            Level::DEBUG,
            "redlock_core::test".to_owned(),
            "a debug line answer=42".to_owned()
        )),
        "{lines:?}"
    );
    forward_logs(None, None).unwrap();
}
