//! Plain records that cross into Python (durations as float seconds, modes as strings).

use std::time::Duration;

use redlock_core::{ContentionAlert, HolderInfo, LockInfo, LockLostEvent, Mode};

/// One holder of a lock, as `inspect` reports it.
#[derive(Debug, Clone, uniffi::Record)]
pub struct HolderRecord {
    /// "read" or "write".
    pub mode: String,
    pub owner_token: String,
    pub hold_count: u32,
    pub fencing_token: u64,
    pub lease_left: f64,
    pub host: String,
    pub pid: u32,
    pub thread: String,
    /// Unix time of acquisition in seconds, by the holder's clock (0 when unknown).
    pub acquired_at: f64,
    pub held_for: Option<f64>,
}

/// A snapshot of one lock name.
#[derive(Debug, Clone, uniffi::Record)]
pub struct LockInfoRecord {
    pub name: String,
    /// "read", "write", or `None` when free.
    pub mode: Option<String>,
    pub holders: Vec<HolderRecord>,
    pub holder_count: u64,
    pub waiting_writers: u64,
    pub waiting_readers: u64,
    pub lease_left: Option<f64>,
    pub last_fencing_token: u64,
}

/// A waiter passed the client's contention threshold (seed 000's dead-lock alert).
#[derive(Debug, Clone, uniffi::Record)]
pub struct ContentionRecord {
    pub name: String,
    pub mode: String,
    pub owner_token: String,
    pub waited: f64,
    pub failed_attempts: u64,
    pub holders: Vec<HolderRecord>,
}

/// A hold kept alive by the watchdog is gone from Redis.
#[derive(Debug, Clone, uniffi::Record)]
pub struct LockLostRecord {
    pub name: String,
    pub mode: String,
    pub owner_token: String,
}

pub(crate) fn mode_name(mode: Mode) -> String {
    match mode {
        Mode::Read => "read",
        Mode::Write => "write",
    }
    .to_owned()
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

impl From<HolderInfo> for HolderRecord {
    fn from(h: HolderInfo) -> Self {
        HolderRecord {
            mode: mode_name(h.mode),
            owner_token: h.owner_token,
            hold_count: h.hold_count,
            fencing_token: h.fencing_token,
            lease_left: secs(h.lease_left),
            host: h.metadata.host,
            pid: h.metadata.pid,
            thread: h.metadata.thread,
            acquired_at: h.metadata.acquired_at_ms as f64 / 1000.0,
            held_for: h.held_for.map(secs),
        }
    }
}

impl From<LockInfo> for LockInfoRecord {
    fn from(info: LockInfo) -> Self {
        LockInfoRecord {
            name: info.name,
            mode: info.mode.map(mode_name),
            holders: info.holders.into_iter().map(Into::into).collect(),
            holder_count: info.holder_count,
            waiting_writers: info.waiting_writers,
            waiting_readers: info.waiting_readers,
            lease_left: info.lease_left.map(secs),
            last_fencing_token: info.last_fencing_token,
        }
    }
}

impl From<&ContentionAlert> for ContentionRecord {
    fn from(alert: &ContentionAlert) -> Self {
        ContentionRecord {
            name: alert.name.clone(),
            mode: mode_name(alert.mode),
            owner_token: alert.owner_token.clone(),
            waited: secs(alert.waited),
            failed_attempts: alert.failed_attempts,
            holders: alert.holders.iter().cloned().map(Into::into).collect(),
        }
    }
}

impl From<&LockLostEvent> for LockLostRecord {
    fn from(event: &LockLostEvent) -> Self {
        LockLostRecord {
            name: event.name.clone(),
            mode: mode_name(event.mode),
            owner_token: event.owner_token.clone(),
        }
    }
}
