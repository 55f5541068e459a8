//! The renewal loop and the script calls it builds: the hot path at many holds, apart from the
//! tracking, which it only reads (a snapshot per tick) and tells which holds were found gone.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use super::WatchKey;
use super::pages::still_in;
use crate::client::ClientInner;
use crate::keys::KeyArg;
use crate::lock::scripts::SCRIPTS;

/// What a renewal sends for one hold, in one allocation: the state key, the owner token, then
/// the hold's tag (its mode's letter and its fence). At 100 000 holds, building a tick's calls
/// is mostly waiting for memory: one cache miss per hold here instead of three (the lock's
/// keys, the key text, the token).
#[derive(Clone)]
pub(super) struct Renewal {
    text: Arc<str>,
    /// Where the token starts in `text`.
    split: u32,
    /// Where the tag starts in `text`.
    tag_at: u32,
    pub(super) slot: u16,
    /// Unique per tracking: a hold released and taken again gets a new one.
    pub(super) id: u64,
}

impl Renewal {
    /// The renewal of the hold of `key` with this fencing token: only that hold is renewed,
    /// not a later one of the same owner (taken with a fixed lease here or by another instance
    /// after this one was released or lost). One exception: a server that lost its data counts
    /// fences anew, and another instance's hold that draws this fence before the next tick
    /// passes for this one (this client's own later holds replace the tracking: `track`).
    pub(super) fn new(key: &WatchKey, id: u64, fence: u64) -> Self {
        use std::fmt::Write;
        let state = key.keys.state();
        let mut text = String::with_capacity(state.len() + key.token.len() + 21);
        text.push_str(state);
        text.push_str(&key.token);
        text.push_str(key.mode.as_arg());
        write!(text, "{fence}").expect("writing to a String");
        Renewal {
            text: text.into(),
            split: state.len() as u32,
            tag_at: (state.len() + key.token.len()) as u32,
            slot: key.keys.slot,
            id,
        }
    }

    fn state_key(&self) -> &str {
        &self.text[..self.split as usize]
    }

    fn token(&self) -> &str {
        &self.text[self.split as usize..self.tag_at as usize]
    }

    /// The mode's letter, then the fence (see renew.lua).
    fn tag(&self) -> &str {
        &self.text[self.tag_at as usize..]
    }

    /// The renewals of the holds of a renew call, with the tracking id at each of its positions
    /// (those that left it are left out) and their slot: their texts again, from its arguments.
    pub(super) fn all_from_call(call: &redis::Cmd, in_call: &[u64], slot: u16) -> Vec<Self> {
        let args = CallArgs::of(call, in_call.len());
        fn text(bytes: &[u8]) -> &str {
            std::str::from_utf8(bytes).expect("a renewal's text")
        }
        still_in(in_call)
            .map(|(at, id)| {
                let [state, _] = args.keys(at).map(text);
                let [tag, token] = args.argv(at).map(text);
                Renewal {
                    text: format!("{state}{token}{tag}").into(),
                    split: state.len() as u32,
                    tag_at: (state.len() + token.len()) as u32,
                    slot,
                    id,
                }
            })
            .collect()
    }
}

const PREFETCH_AHEAD: usize = 8;

#[cfg(target_arch = "x86_64")]
fn prefetch(text: &str) {
    use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
    // SAFETY: SSE is part of x86_64; a prefetch only hints the cache, it never faults.
    unsafe { _mm_prefetch::<_MM_HINT_T0>(text.as_ptr().cast()) };
}

#[cfg(not(target_arch = "x86_64"))]
fn prefetch(_text: &str) {}

/// The renewal loop; ends when the client is closed or dropped.
pub(crate) async fn run(client: Weak<ClientInner>, period: Duration) {
    let Some(shutdown) = client.upgrade().map(|c| c.shutdown.clone()) else {
        return;
    };
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    // When the last tick started: its renewals set their holds' leases no earlier.
    let mut previous = None;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = ticker.tick() => {}
        }
        let Some(client) = client.upgrade() else {
            return;
        };
        let started = Instant::now();
        renew_all(&client, previous).await;
        previous = Some(started);
    }
}

async fn renew_all(client: &ClientInner, previous: Option<Instant>) {
    let planned = client.watchdog.plan_renewals();
    let lease_ms = client.config.lease.as_millis() as u64;
    let mut lost = HashSet::new();
    // Ids only while something fails (the common tick collects nothing). Confirmations matter
    // only for holds whose renewals failed in an earlier tick.
    let (mut failed, mut confirmed) = (Vec::new(), Vec::new());
    let confirming = client.watchdog.any_unconfirmed();
    let (mut unreachable, mut refused) = (false, 0);
    // A call still unanswered when a lease it renews passes is given up then (a Redis that does
    // not answer): its holds are reported lost at their lease's end, not the command timeout's.
    let give_up_at = (client.watchdog).first_lease_end(previous, client.config.lease);
    for planned in planned {
        if unreachable {
            // The rest would wait for the same dead connection, each up to the timeout.
            failed.extend(planned.ids());
            continue;
        }
        let (request, ids, built) = planned.into_call(lease_ms);
        if let Some(built) = built {
            (client.watchdog).keep_renewal_call(built, request.clone(), ids.clone());
        }
        client.watchdog.renew_calls.fetch_add(1, Ordering::Relaxed);
        let call = client.eval_rerunnable::<Vec<u8>>(&SCRIPTS.renew, &request, false);
        let answer = match give_up_at {
            Some(at) => tokio::time::timeout_at(at.into(), call)
                .await
                .unwrap_or_else(|_| Err(gave_up())),
            None => call.await,
        };
        match answer {
            Ok(renewed) => {
                for (&id, ok) in ids.iter().zip(renewed) {
                    if ok == b'0' {
                        lost.insert(id);
                    } else if ok == b'e' {
                        // Redis refused a command on this hold's keys (a key of the wrong
                        // type): it fails as a refused call would, the rest of the batch
                        // renewed.
                        failed.push(id);
                        refused += 1;
                    } else if confirming {
                        confirmed.push(id);
                    }
                }
            }
            // Retried next tick; a hold counts as lost once Redis says so, or once its lease
            // has passed with no renewal that worked (`renewals_checked`).
            Err(err) => {
                tracing::warn!(
                    %err,
                    holds = ids.len(),
                    server = %crate::config::redact(&client.config.url),
                    "watchdog renewal failed: tried again next tick; holds not renewed for a \
                     whole lease are reported lost"
                );
                unreachable = matches!(err, crate::Error::Connection(_));
                failed.extend(ids);
            }
        }
    }
    if refused > 0 {
        tracing::warn!(
            holds = refused,
            "watchdog renewal refused by Redis (keys of another type?)"
        );
    }
    if !lost.is_empty() {
        client.watchdog.mark_lost(client, &lost);
    }
    let lease = client.config.lease;
    (client.watchdog).renewals_checked(client, &failed, &confirmed, previous, lease);
}

fn gave_up() -> crate::Error {
    crate::Error::Connection("Redis did not answer a renewal before a lease it renews ended".into())
}

/// The `EVALSHA` of renew.lua for one page: the holds of `last` (a call built before, with the
/// tracking id at each of its positions; holds that left are left out) in their order, then the
/// holds that `joined`. A plain command, built in one buffer sized up front (at 100 000 holds
/// the arguments are most of a tick's work when built from the holds' texts).
pub(super) fn renew_call(
    last: Option<(&redis::Cmd, &[u64])>,
    joined: &[Renewal],
    lease_ms: u64,
) -> redis::Cmd {
    // The kept holds' arguments, and where in the last call each is.
    let kept = last.map(|(call, in_call)| {
        let at: Vec<usize> = still_in(in_call).map(|(at, _)| at).collect();
        (CallArgs::of(call, in_call.len()), at)
    });
    let kept_bytes = kept.as_ref().map_or(0, |(args, _)| args.bytes());
    let bytes: usize = joined.iter().map(|hold| 2 * hold.text.len() + 16).sum();
    let holds = kept.as_ref().map_or(0, |(_, at)| at.len()) + joined.len();
    let mut call = redis::Cmd::with_capacity(4 + 4 * holds, kept_bytes + bytes + 64);
    call.arg("EVALSHA").arg(SCRIPTS.renew.sha()).arg(2 * holds);
    if let Some((args, at)) = &kept {
        for &at in at {
            call.arg(&args.keys(at)[..]);
        }
    }
    for (i, hold) in joined.iter().enumerate() {
        // Each hold's bytes are somewhere else on the heap: ask for the ones a few holds ahead
        // now, so the copy does not stall on every hold.
        if let Some(ahead) = joined.get(i + PREFETCH_AHEAD) {
            prefetch(&ahead.text);
        }
        call.arg(hold.state_key())
            .arg(KeyArg::expiries_of(hold.state_key()));
    }
    call.arg(lease_ms);
    if let Some((args, at)) = &kept {
        for &at in at {
            call.arg(&args.argv(at)[..]);
        }
    }
    for hold in joined {
        call.arg(hold.tag()).arg(hold.token());
    }
    call
}

/// The arguments of a renew call of `holds` holds: `EVALSHA`, the script and the key count;
/// two keys per hold; the lease; two arguments per hold.
struct CallArgs<'a> {
    args: Vec<&'a [u8]>,
    holds: usize,
}

impl<'a> CallArgs<'a> {
    fn of(call: &'a redis::Cmd, holds: usize) -> Self {
        let args: Vec<&[u8]> = (call.args_iter())
            .map(|arg| match arg {
                redis::Arg::Simple(bytes) => bytes,
                _ => unreachable!("a renew call has no cursor"),
            })
            .collect();
        assert_eq!(args.len(), 4 + 4 * holds, "a renew call of {holds} holds");
        CallArgs { args, holds }
    }

    /// The keys of the hold at position `at`: its state key, then its expiries key.
    fn keys(&self, at: usize) -> [&'a [u8]; 2] {
        [self.args[3 + 2 * at], self.args[4 + 2 * at]]
    }

    /// The arguments of the hold at position `at`: its tag, then its token.
    fn argv(&self, at: usize) -> [&'a [u8]; 2] {
        let first = 4 + 2 * self.holds + 2 * at;
        [self.args[first], self.args[first + 1]]
    }

    fn bytes(&self) -> usize {
        self.args.iter().map(|arg| arg.len()).sum()
    }
}
