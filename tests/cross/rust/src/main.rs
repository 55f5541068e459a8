//! The Rust worker of the cross-language tests: see `tests/cross/PROTOCOL.md`.

use std::fs::OpenOptions;
use std::io::Write;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redlock_core::{Client, Lock, Owner};

type Failure = Box<dyn std::error::Error>;

const USAGE: &str = "usage: cross-worker MODE REDIS_URL LOCK_NAME ARG...";

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Err(e) = run(&args).await {
        eprintln!("cross-worker (rust): {e}");
        std::process::exit(1);
    }
}

async fn run(args: &[String]) -> Result<(), Failure> {
    let [_, mode, url, name, rest @ ..] = args else {
        return Err(USAGE.into());
    };
    let mut builder = Client::builder(url.as_str()).prefix("cross");
    if mode == "wait" {
        builder = builder.recheck_interval(Duration::from_secs(60));
    }
    let client = builder.connect().await?;
    match (mode.as_str(), rest) {
        ("mutex", [counter, sections, out]) => {
            mutex(&client.lock(name)?, counter, sections.parse()?, out).await?
        }
        ("read" | "write", [log, sections, out]) => {
            let rw = client.read_write_lock(name)?;
            let (lock, tag) = if mode == "read" {
                (rw.read(), "R")
            } else {
                (rw.write(), "W")
            };
            read_write(&lock, tag, log, sections.parse()?, out).await?
        }
        ("hold", [token]) => {
            let owner = Owner::from_token(token.as_str())?;
            let lease = Some(Duration::from_millis(60_000));
            let hold = client.lock(name)?.acquire(&owner, None, lease).await?;
            println!("held {}", hold.fencing_token());
        }
        ("release", [token]) => {
            let owner = Owner::from_token(token.as_str())?;
            println!("released {}", client.lock(name)?.release(&owner).await?);
        }
        ("wait", [ready]) => {
            let lock = client.lock(name)?;
            let owner = Owner::random();
            std::fs::File::create(ready)?;
            let hold = lock.acquire(&owner, None, None).await?;
            let now_ms = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis();
            println!("acquired {} {now_ms}", hold.fencing_token());
            lock.release(&owner).await?;
        }
        _ => return Err(USAGE.into()),
    }
    client.close();
    Ok(())
}

async fn mutex(lock: &Lock, counter: &str, sections: u32, out: &str) -> Result<(), Failure> {
    let owner = Owner::random();
    for _ in 0..sections {
        let started = Instant::now();
        let hold = lock.acquire(&owner, None, None).await?;
        let wait_us = started.elapsed().as_micros();
        let text = std::fs::read_to_string(counter).unwrap_or_default();
        let value = text.trim().parse::<u64>().unwrap_or(0) + 1;
        std::fs::write(counter, value.to_string())?; // truncate and write: not atomic
        record(out, value, hold.fencing_token(), wait_us)?;
        lock.release(&owner).await?;
    }
    Ok(())
}

async fn read_write(
    lock: &Lock,
    tag: &str,
    log: &str,
    sections: u64,
    out: &str,
) -> Result<(), Failure> {
    let owner = Owner::random();
    let pid = std::process::id();
    for index in 1..=sections {
        let started = Instant::now();
        let hold = lock.acquire(&owner, None, None).await?;
        let wait_us = started.elapsed().as_micros();
        append_line(log, &format!("enter {tag} {pid}"))?;
        tokio::time::sleep(Duration::from_millis(2)).await;
        append_line(log, &format!("exit {tag} {pid}"))?;
        record(out, index, hold.fencing_token(), wait_us)?;
        lock.release(&owner).await?;
    }
    Ok(())
}

fn record(out: &str, value: u64, fencing: u64, wait_us: u128) -> std::io::Result<()> {
    let pid = std::process::id();
    append_line(out, &format!("rust {pid} {value} {fencing} {wait_us}"))
}

/// One write of one whole line to a file opened for appending: lines never interleave.
fn append_line(path: &str, line: &str) -> std::io::Result<()> {
    let mut file = OpenOptions::new().create(true).append(true).open(path)?;
    file.write_all(format!("{line}\n").as_bytes())
}
