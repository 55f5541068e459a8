//! What inspect calls and alerts report: holders, their metadata and leases.

use std::cell::RefCell;
use std::fmt::Write;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{LazyLock, Once};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::lock::Mode;

/// Longest thread or task label stored with a hold, in bytes.
pub const MAX_LABEL_LEN: usize = 256;

/// A label given for holds must say something: an empty one is `InvalidArgument` (leave the
/// label out to store the thread or task name). A long one is accepted and cut to
/// [`MAX_LABEL_LEN`] bytes. Bindings that take a label before any acquire check it here too.
pub fn validate_label(label: &str) -> Result<()> {
    if label.is_empty() {
        return Err(Error::invalid(
            "label must not be empty (leave it out to store the thread's name)",
        ));
    }
    Ok(())
}

/// A snapshot of one lock name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockInfo {
    pub name: String,
    /// `None` when free; `Write` while a writer holds it (even if it also reads after a downgrade).
    pub mode: Option<Mode>,
    /// Up to the inspect limit, writer first.
    pub holders: Vec<HolderInfo>,
    /// All live holders, even those past the listing limit.
    pub holder_count: u64,
    /// Writers announced as waiting (their registration has not run out), one per waiting call.
    pub waiting_writers: u64,
    /// Readers announced as waiting, one per waiting call (one owner may wait in several).
    pub waiting_readers: u64,
    /// Time until the last lease of the name ends (`None` when free).
    pub lease_left: Option<Duration>,
    /// The newest fencing token issued in this name's hash slot: an upper bound on the name's own
    /// last token, shared with other names of the slot (see the crate docs on fencing).
    pub last_fencing_token: u64,
}

/// One holder of a lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HolderInfo {
    pub mode: Mode,
    pub owner_token: String,
    pub hold_count: u32,
    pub fencing_token: u64,
    pub lease_left: Duration,
    pub metadata: HolderMetadata,
    /// How long the hold has existed: from its metadata's acquisition time (see
    /// [`HolderMetadata::acquired_at_ms`]) to Redis' clock now.
    pub held_for: Option<Duration>,
}

/// The description stored with each hold: who took it, where, and when.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HolderMetadata {
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub pid: u32,
    /// The thread or task label given at acquisition (by default the OS thread's name or id).
    #[serde(default)]
    pub thread: String,
    /// Unix time of acquisition, in milliseconds, by the holder's clock (by Redis' clock for a
    /// hold a release granted to a waiting writer).
    #[serde(default, rename = "at")]
    pub acquired_at_ms: u64,
}

static HOST: LazyLock<String> = LazyLock::new(|| {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::env::var("COMPUTERNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
});

impl HolderMetadata {
    /// Metadata for a hold taken now by this process, with `label` (or the current thread).
    pub(crate) fn current(label: Option<&str>) -> Self {
        let thread = match label {
            Some(l) => truncate(l, MAX_LABEL_LEN).to_owned(),
            None => {
                let t = std::thread::current();
                t.name()
                    .map(str::to_owned)
                    .unwrap_or_else(|| format!("{:?}", t.id()))
            }
        };
        HolderMetadata {
            host: HOST.clone(),
            pid: process_id(),
            thread,
            acquired_at_ms: unix_ms(),
        }
    }

    /// `current(label).to_json()` for a hold taken now. Without a label, the part that never
    /// changes for a thread (host, pid, thread) is written once per thread: building it took
    /// a system call and several allocations per acquire.
    pub(crate) fn current_json(label: Option<&str>) -> String {
        if label.is_some() {
            return Self::current(label).to_json();
        }
        THREAD_JSON_HEAD.with(|cell| {
            let mut cached = cell.borrow_mut();
            let pid = process_id();
            let head = match &mut *cached {
                Some((cached_pid, head)) if *cached_pid == pid => head,
                slot => {
                    let mut json = HolderMetadata {
                        acquired_at_ms: 0,
                        ..Self::current(None)
                    }
                    .to_json();
                    // serde writes the fields in declaration order: `"at":0}` comes last.
                    json.truncate(json.len() - "0}".len());
                    &mut slot.insert((pid, json)).1
                }
            };
            let mut json = String::with_capacity(head.len() + 21);
            json.push_str(head);
            let _ = write!(json, "{}}}", unix_ms());
            json
        })
    }

    /// Marks `json`, the metadata of a hold that a watchdog keeps with `lease_ms`: it then
    /// begins `{"wd":LEASE,`, which extend.lua finds without decoding JSON, so that an extend
    /// through any client (another process or language presenting the token) never sets the
    /// hold's lease below what the watchdog renews every lease/3. Readers ignore the field.
    pub(crate) fn mark_watched(json: &mut String, lease_ms: u64) {
        json.insert_str(1, &format!("\"wd\":{lease_ms},"));
    }

    pub(crate) fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Metadata written by another client or version: unknown text is kept as the thread label.
    pub(crate) fn parse(raw: &str) -> Self {
        serde_json::from_str(raw).unwrap_or_else(|_| HolderMetadata {
            thread: truncate(raw, MAX_LABEL_LEN).to_owned(),
            ..Default::default()
        })
    }
}

thread_local! {
    /// This thread's metadata up to the acquisition time, and the pid it was written for.
    static THREAD_JSON_HEAD: RefCell<Option<(u32, String)>> = const { RefCell::new(None) };
}

/// This process' id, asked of the kernel once (and again in a child after `fork`).
pub(crate) fn process_id() -> u32 {
    static PID: AtomicU32 = AtomicU32::new(0);
    let pid = PID.load(Ordering::Relaxed);
    if pid != 0 {
        return pid;
    }
    #[cfg(unix)]
    {
        extern "C" fn forget_pid_in_child() {
            PID.store(0, Ordering::Relaxed);
        }
        static AT_FORK: Once = Once::new();
        // SAFETY: registers a handler that only stores to an atomic (async-signal-safe).
        AT_FORK.call_once(|| unsafe {
            libc::pthread_atfork(None, None, Some(forget_pid_in_child));
        });
    }
    let pid = std::process::id();
    PID.store(pid, Ordering::Relaxed);
    pid
}

pub(crate) fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_round_trips_and_tolerates_foreign_text() {
        let m = HolderMetadata::current(Some("worker-1"));
        assert_eq!(HolderMetadata::parse(&m.to_json()), m);
        assert_eq!(HolderMetadata::parse("legacy").thread, "legacy");
    }

    #[test]
    fn cached_metadata_matches_a_fresh_one() {
        for _ in 0..2 {
            let before = unix_ms();
            let cached = HolderMetadata::parse(&HolderMetadata::current_json(None));
            let fresh = HolderMetadata::current(None);
            assert!(cached.acquired_at_ms >= before && cached.acquired_at_ms <= unix_ms());
            assert_eq!(
                cached,
                HolderMetadata {
                    acquired_at_ms: cached.acquired_at_ms,
                    ..fresh
                }
            );
        }
        let labelled = HolderMetadata::parse(&HolderMetadata::current_json(Some("job \"7\"")));
        assert_eq!(labelled.thread, "job \"7\"");
        assert_eq!(labelled.pid, std::process::id());
    }

    #[cfg(unix)]
    #[test]
    fn a_forked_child_reports_its_own_pid() {
        let parent = HolderMetadata::parse(&HolderMetadata::current_json(None)).pid;
        assert_eq!(parent, std::process::id());
        // SAFETY: the child only computes and exits; glibc's malloc is fork-safe.
        let child = unsafe { libc::fork() };
        assert!(child >= 0, "fork failed");
        if child == 0 {
            let meta = HolderMetadata::parse(&HolderMetadata::current_json(None));
            let ok = meta.pid == std::process::id() && meta.pid != parent;
            // SAFETY: ends the child without running the parent's test harness.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: waits for the child forked above.
        assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "status {status}"
        );
    }

    #[test]
    fn labels_are_cut_on_a_char_boundary() {
        let label = "🔒".repeat(100);
        let m = HolderMetadata::current(Some(&label));
        assert!(m.thread.len() <= MAX_LABEL_LEN);
        assert!(m.thread.chars().all(|c| c == '🔒'));
    }
}
