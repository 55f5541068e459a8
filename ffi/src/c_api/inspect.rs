//! Inspect results as JSON text: one self-describing document instead of a dozen getters, and
//! every language the ABI serves parses JSON natively (Go's encoding/json, for one).
//!
//! Shape (all durations in milliseconds; `null` where there is no value):
//! ```text
//! {"name": "orders:42", "mode": "write" | "read" | null, "holder_count": 1,
//!  "lease_left_ms": 29500 | null, "waiting_writers": 0, "waiting_readers": 0,
//!  "last_fencing_token": 17,
//!  "holders": [{"mode": "write", "owner_token": "…", "hold_count": 1, "fencing_token": 17,
//!               "lease_left_ms": 29500, "held_for_ms": 500 | null, "host": "…", "pid": 123,
//!               "thread": "…", "acquired_at_ms": 1767000000000}]}
//! ```

use redlock_core::{HolderInfo, LockInfo};
use serde_json::{Value, json};

use super::status::mode_word;

/// The JSON document of one lock's snapshot.
pub(crate) fn info_json(info: &LockInfo) -> String {
    json!({
        "name": info.name,
        "mode": info.mode.map(mode_word),
        "holder_count": info.holder_count,
        "lease_left_ms": info.lease_left.map(|d| d.as_millis() as u64),
        "waiting_writers": info.waiting_writers,
        "waiting_readers": info.waiting_readers,
        "last_fencing_token": info.last_fencing_token,
        "holders": holders_json(&info.holders),
    })
    .to_string()
}

/// The JSON array of holders (also in contention alerts).
pub(crate) fn holders_json(holders: &[HolderInfo]) -> Value {
    holders
        .iter()
        .map(|h| {
            json!({
                "mode": mode_word(h.mode),
                "owner_token": h.owner_token,
                "hold_count": h.hold_count,
                "fencing_token": h.fencing_token,
                "lease_left_ms": h.lease_left.as_millis() as u64,
                "held_for_ms": h.held_for.map(|d| d.as_millis() as u64),
                "host": h.metadata.host,
                "pid": h.metadata.pid,
                "thread": h.metadata.thread,
                "acquired_at_ms": h.metadata.acquired_at_ms,
            })
        })
        .collect()
}
