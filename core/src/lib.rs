//! # redlock-core
//!
//! Redis distributed locks owned by tokens, not threads: an exclusive reentrant lock and a
//! read/write lock, with a watchdog, notification-based waiting and fencing tokens. Every
//! language binding of redlock-sdk calls this crate, so its guarantees are the product's.
//!
//! ## Guarantees
//! - **Mutual exclusion** per name while leases hold: one writer, or any number of readers.
//! - **Token ownership**: whoever presents an [`Owner`]'s token is the owner; a lock taken in one
//!   process or language is released in another by presenting the token. Hand such holds over
//!   with a fixed lease: a watchdog-kept hold that another client releases is reported lost to the
//!   client that took it (its watchdog cannot tell that release from a loss).
//! - **Reentrancy** in both modes, with hold counts; the writer may also read (downgrade); a
//!   reader asking to write fails at once with [`Error::UpgradeNotAllowed`] instead of hanging.
//! - **Writers are not starved**: once a writer waits, new readers queue behind it. Readers
//!   that waited through a write have a turn before the next writer; the turn lasts until the
//!   last of them is in, at most four re-check intervals (1 s by default), and a reader that
//!   arrives during it may join it.
//! - **Leases**: a hold without a lease is renewed by one watchdog task per client (every
//!   lease/3, up to 500 holds a call, calls kept built while their holds stay); a hold the
//!   watchdog finds gone is reported lost, and so is one whose lease has passed since the last
//!   renewal that worked (Redis unreachable or refusing: it has let the hold expire), when the
//!   first tick after ends; a renewal call that Redis has not
//!   answered when a lease it renews passes is given up then, so a silent Redis does not delay
//!   the report to the command timeout. (Counted from the start of the tick whose renewal last
//!   worked: early by up to that call's time, never late by more than a tick. Another client
//!   may hold the lock as soon as the lease ends: guard resources with fencing tokens.) Each
//!   reader's share has its own lease.
//! - **One round trip** per acquire attempt and per release (one Lua script each), made on one
//!   of a few direct connections of the client when one is idle (the caller writes and reads
//!   the socket itself; plain sockets only), else on the shared multiplexed connection (always
//!   over TLS). Waiting is by pub/sub
//!   notification with a bounded re-check; waiters of one client queue locally so one at a time
//!   talks to Redis. Dropping a waiting acquire leaves nothing in Redis.
//! - **Hand-over in the release**: a release that frees the lock gives it to the first waiting
//!   writer in the same script, and that waiter is in without a round trip of its own. Only a
//!   waiter whose client Redis still counts as listening gets it: a process that crashes while
//!   it waits is passed over, not handed the lock for a whole lease. (A host that vanishes
//!   without closing its connections still looks alive to Redis until TCP gives up on it.)
//!   Every script's work is bounded, however crowded a name: a script blocks the whole
//!   server, so a call passes over at most 200 waiters and drops at most 200 stale ones (100
//!   ended readers); the waiters' next attempts go on from there.
//! - **Fencing tokens**: every acquisition returns a 64-bit token; for one name, tokens of new
//!   write (and exclusive) holds strictly increase, also across free periods. The counter is
//!   shared by all names of a Redis Cluster hash slot (at most 16 384 counter keys ever).
//!   It can move backwards only if Redis loses data: a failover to a replica that missed the
//!   increment, a restart without persistence, or an `allkeys-*` `maxmemory-policy` that evicts
//!   the counter (it has no TTL, so `noeviction` and the `volatile-*` policies never take it).
//!   Compare tokens only within one Redis lifetime.
//!   Tokens stop at 2^53 − 1, the last that Redis' Lua (whose numbers are doubles) counts
//!   exactly: once a slot's counter reaches it, acquisitions there fail with [`Error::Redis`]
//!   (`FENCESPENT`) and releases grant nobody the lock, rather than repeat a token.
//! - **Bounded calls**: every Redis call has a timeout; an unreachable Redis is a
//!   [`Error::Connection`], never a hang. Idle connections the server closed (its idle
//!   `timeout`, a restart) fail no call: the direct ones are looked at before each use, and the
//!   command connection is pinged every 30 s ([`ClientBuilder::ping_interval`]), which keeps
//!   it open and replaces it after a restart. A server `timeout` shorter than the ping interval
//!   may still close the command connection between two calls. Calls that may run twice are
//!   then sent again at once: the watchdog's renewals, reads (`is_locked`, `hold_count`,
//!   `inspect`, ...), `extend` and a waiter's withdrawal. An acquire or a release goes to a
//!   direct connection, and when that one is found closed, to the command connection after a
//!   `PING` (which makes it reconnect if it was closed too); so does it after any call or
//!   connect failed on I/O, until a `PING` works, so the first call after an outage does not
//!   get the error of a reconnect made while Redis was down. What may still fail once with
//!   [`Error::Connection`] is a call that must not run twice (an acquire, a release, a
//!   `force_unlock`) made on the command connection with no sign of its death beforehand:
//!   direct connections turned off or all in use, or TLS. A reconnect the server refuses (a
//!   password changed, a user turned off or denied `SELECT`) is made again by the next call, so the client works
//!   again once the server takes its credentials.
//! - **A Redis that refuses work** (`OOM`, `MISCONF`, `READONLY`, `BUSY`, an ACL): a refused call
//!   is an [`Error::Redis`] and leaves no script half done. A waiter whose acquire failed so is
//!   withdrawn once Redis takes writes again (tried every re-check interval, for up to a lease),
//!   so no later release hands it the lock; the owner's next calls on the name wait for that
//!   (up to the command timeout, then [`Error::Connection`]). An ACL user needs channel rights (`&<prefix>:*` or
//!   `allchannels`; Redis 7 gives none by default) for notifications and hand-overs; without
//!   them waiters get the lock by their re-checks, and releases still succeed.
//! - **Keys written by something else** (an operator's `SET`, `PERSIST` or `DEL` of one key,
//!   another library's lock under the same key): a key of the wrong type or garbage in a field
//!   is an [`Error::Redis`] (`WRONGTYPE`, `BADFIELD`), refused before anything changed; a hash at a name's state key that this library did not write is
//!   refused (`FOREIGNKEY`) rather than held beside; one key of a name lost or kept past its
//!   time lets no second holder in; a fencing counter set outside 1..2^53 refuses acquires
//!   (`FENCESPENT`). [`Client::force_unlock`] clears a name whatever its keys hold.
//! - **Any runtime, and none of it needed for safety**: an async [`Client`] is used from tokio
//!   runtimes but bound to none. Its watchdog, its keepalive and the tidy-ups of cancelled or
//!   abandoned calls run on the library's own runtime (two threads, started on first use, the
//!   one the [`blocking`] API uses), so a client made in a runtime that has ended (a `static`
//!   client made by the first `#[tokio::test]`) keeps renewing, and a runtime kept busy by user
//!   code lets no watched hold expire. An acquire whose future is polled late (a busy asyncio
//!   loop, a blocked runtime) after Redis gave it the hold — later than a third of its lease
//!   (at least 100 ms, but less than half the lease) — confirms that very hold (its fence) and
//!   lengthens its lease (never shortens it) before handing it out; a hold that ran out
//!   meanwhile is never handed out: the acquire goes on with the time left (a cancel meanwhile
//!   gives the hold back). A hold counts from when its attempt was sent; a grant from the
//!   earlier of the last time the client's pub/sub socket was found empty and the last time the
//!   waiter looked for one, so a grant after a wait or a silence of more than a third of the
//!   lease costs that one more round trip. Hot calls stay on the caller's runtime, on direct
//!   connections of that runtime; the pub/sub connection runs on the runtime of the first caller
//!   that waits and is started again on another should that one end. When no thread can be
//!   made, calls that need one fail with [`Error::Connection`] rather than panic.
//! - **Log lines** through `tracing` (a lost hold, a failed renewal, a contention alert with its
//!   holders' host, pid and thread; holds lost together are summed up in one line). Lock names
//!   and tokens show as logfmt would: `lock=orders:42`, or quoted with escapes when a name has a
//!   space, `=`, a quote, a backslash or a control character (`lock="a b\n"`), so a name forges
//!   neither a line nor a field of its own. A host that does not use `tracing` gets them
//!   through [`logs::forward_logs`], on a thread of their own, as every language binding does.
//!
//! Keys: see [`keys`] for the layout (every key of a name in one cluster slot). The scripts need
//! Redis 5.0 or later and use nothing newer (a test keeps it so).
//!
//! ```no_run
//! # async fn demo() -> redlock_core::Result<()> {
//! use std::time::Duration;
//! let client = redlock_core::Client::connect("redis://127.0.0.1:6379").await?;
//! let owner = redlock_core::Owner::random();
//! let lock = client.lock("orders:42")?;
//! let hold = lock.acquire(&owner, Some(Duration::from_secs(2)), None).await?;
//! println!("fencing token {}", hold.fencing_token());
//! lock.release(&owner).await?;
//! # Ok(()) }
//! ```

mod background;
pub mod blocking;
mod callbacks;
mod client;
mod config;
mod direct;
mod error;
mod inspect;
mod keepalive;
pub mod keys;
mod lock;
pub mod logs;
#[cfg(unix)]
mod nosigpipe;
mod owner;
mod pubsub;
#[cfg(feature = "test-support")]
pub mod testing;
mod watchdog;

pub use client::{Client, ClientBuilder, MAX_LEASE};
pub use config::{Config, ContentionAlert, LockLostEvent};
pub use error::{Error, ErrorKind, Result};
pub use inspect::{HolderInfo, HolderMetadata, LockInfo, MAX_LABEL_LEN, validate_label};
pub use keys::{MAX_NAME_LEN, MAX_PREFIX_LEN};
pub use lock::{AcquireOptions, Hold, Lock, LockStats, Mode, ReadWriteLock};
pub use owner::{MAX_TOKEN_LEN, Owner};
