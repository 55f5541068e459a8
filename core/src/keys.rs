//! Key layout. Every key of one lock name shares one Redis Cluster hash slot.
//!
//! For a name `N` and prefix `P` (the hash tag is `N` with `%`, `{`, `}` percent-escaped, so any
//! name is legal and two names never share a key):
//!
//! | key                 | type | holds                                                        |
//! |---------------------|------|--------------------------------------------------------------|
//! | `P:{N}`             | hash | writer (`wo` token, `wc` count, `wf` fence, `wm` metadata; `q` once waiters or readers may exist beside it, `wg` the waiter id a release granted it to, until that waiter's attempt claims it), readers (`rc:T`, `rf:T`, `rm:T`), reader count `n`; exists exactly while held; a lone writer's lease is its TTL |
//! | `P:{N}:exp`         | zset | only while readers hold: each reader's lease end (ms), and the writer's (`w`) after a downgrade |
//! | `P:{N}:ww`          | zset | writers waiting, in arrival order (waiter id `X-SEQ:T` scored by first announcement µs) |
//! | `P:{N}:wi`          | hash | per waiting writer: `expiry:lease:metadata`, for grants      |
//! | `P:{N}:wr`          | zset | readers waiting (`r:T`), and `turn` while readers have their turn |
//! | `P:fence:{S}`       | int  | fencing counter shared by every name of one hash slot        |
//!
//! Channel `P:{N}:ch` carries wake-ups; `P:{N}:ch:C` the grants to the waiters of client `C`. The fencing counters never expire but there are at most
//! 16 384 of them (one per slot): `S` is a short tag chosen to hash into the name's slot.
//! (So a prefix may not end in `:fence`: prefix `P:fence`'s lock `S` would be `P`'s counter.)

use std::fmt;
use std::io::Write;
use std::sync::{Arc, LazyLock};

use redis::{RedisWrite, ToRedisArgs};

use crate::error::{Error, Result};

/// Longest accepted lock name, in bytes (contract: 1..=1024).
pub const MAX_NAME_LEN: usize = 1024;
/// Longest accepted key prefix, in bytes.
pub const MAX_PREFIX_LEN: usize = 128;
const SLOTS: usize = 16_384;
/// How many keys [`LockKeys::script_keys`] writes.
pub(crate) const SCRIPT_KEY_COUNT: usize = 6;

/// The Redis keys and channel of one lock name. Only the state key and the fencing counter are
/// stored; the other keys are the state key plus a suffix, written straight into a command's
/// arguments. A client keeping 100 000 holds alive keeps one of these per hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockKeys {
    pub(crate) name: Arc<str>,
    state: Box<str>,
    fence: Box<str>,
    pub(crate) slot: u16,
}

/// One key (or the channel) of a lock name: the state key plus a suffix.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeyArg<'a> {
    base: &'a str,
    suffix: &'static str,
}

impl<'a> KeyArg<'a> {
    /// The expiries key of the lock whose state key is `state`.
    pub(crate) fn expiries_of(state: &'a str) -> Self {
        KeyArg {
            base: state,
            suffix: ":exp",
        }
    }
}

impl fmt::Display for KeyArg<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.base)?;
        f.write_str(self.suffix)
    }
}

impl ToRedisArgs for KeyArg<'_> {
    fn write_redis_args<W: ?Sized + RedisWrite>(&self, out: &mut W) {
        let mut arg = out.writer_for_next_arg();
        arg.write_all(self.base.as_bytes())
            .and_then(|()| arg.write_all(self.suffix.as_bytes()))
            .expect("writing to memory");
    }
}

impl LockKeys {
    pub(crate) fn new(prefix: &str, name: &str) -> Result<Self> {
        validate_name(name)?;
        let tag = escape_tag(name);
        let slot = slot_of(tag.as_bytes());
        Ok(LockKeys {
            name: name.into(),
            state: format!("{prefix}:{{{tag}}}").into(),
            fence: format!("{prefix}:fence:{{{}}}", SLOT_TAGS[slot as usize]).into(),
            slot,
        })
    }

    /// The lock name these keys belong to.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The Redis Cluster hash slot of every key of this name.
    pub fn slot(&self) -> u16 {
        self.slot
    }

    pub(crate) fn state(&self) -> &str {
        &self.state
    }
    pub(crate) fn expiries(&self) -> KeyArg<'_> {
        KeyArg::expiries_of(&self.state)
    }
    pub(crate) fn waiting_writers(&self) -> KeyArg<'_> {
        self.suffixed(":ww")
    }
    pub(crate) fn waiting_readers(&self) -> KeyArg<'_> {
        self.suffixed(":wr")
    }
    pub(crate) fn waiter_info(&self) -> KeyArg<'_> {
        self.suffixed(":wi")
    }
    pub(crate) fn fence(&self) -> &str {
        &self.fence
    }
    /// Every key a lock script declares ([`SCRIPT_KEY_COUNT`]), in the order of prelude.lua's
    /// `KEYS`.
    pub(crate) fn script_keys(&self) -> impl ToRedisArgs + '_ {
        (
            self.state(),
            self.expiries(),
            self.waiting_writers(),
            self.waiting_readers(),
            self.waiter_info(),
            self.fence(),
        )
    }
    /// The pub/sub channel of wake-ups and grants.
    pub(crate) fn channel(&self) -> KeyArg<'_> {
        self.suffixed(":ch")
    }

    fn suffixed(&self, suffix: &'static str) -> KeyArg<'_> {
        KeyArg {
            base: &self.state,
            suffix,
        }
    }
}

pub(crate) fn validate_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid("lock name must not be empty"));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(Error::invalid(format!(
            "lock name is {} bytes, the limit is {MAX_NAME_LEN}",
            name.len()
        )));
    }
    Ok(())
}

pub(crate) fn validate_prefix(prefix: &str) -> Result<()> {
    if prefix.is_empty() || prefix.len() > MAX_PREFIX_LEN {
        return Err(Error::invalid(format!(
            "key prefix must be 1..={MAX_PREFIX_LEN} bytes"
        )));
    }
    if prefix.contains(['{', '}']) {
        return Err(Error::invalid(
            "key prefix must not contain '{' or '}' (they would move the hash tag)",
        ));
    }
    // Prefix P keeps its fencing counters at `P:fence:{S}` (S a decimal slot tag), which is
    // the state key of lock S under prefix `P:fence`: that prefix would clear, block or reset
    // P's counters.
    if prefix.ends_with(":fence") {
        return Err(Error::invalid(
            "key prefix must not end with \":fence\" (its locks' keys would be the fencing \
             counters of the prefix before it)",
        ));
    }
    Ok(())
}

/// Percent-escapes the bytes that would end or nest a hash tag; injective, so names stay distinct.
fn escape_tag(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for ch in name.chars() {
        match ch {
            '%' => out.push_str("%25"),
            '{' => out.push_str("%7B"),
            '}' => out.push_str("%7D"),
            c => out.push(c),
        }
    }
    out
}

/// CRC16/XMODEM as Redis Cluster specifies it (polynomial 0x1021, initial value 0).
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The cluster slot of a hash tag's content.
pub(crate) fn slot_of(tag: &[u8]) -> u16 {
    crc16(tag) % SLOTS as u16
}

/// For each slot, the smallest decimal number whose text hashes into that slot.
static SLOT_TAGS: LazyLock<Vec<u32>> = LazyLock::new(|| {
    let mut tags = vec![u32::MAX; SLOTS];
    let mut missing = SLOTS;
    let mut candidate: u32 = 0;
    while missing > 0 {
        let slot = slot_of(candidate.to_string().as_bytes()) as usize;
        if tags[slot] == u32::MAX {
            tags[slot] = candidate;
            missing -= 1;
        }
        candidate += 1;
    }
    tags
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_keys_are_all_in_the_names_slot_and_counted() {
        let keys = LockKeys::new("redlock", "a{b}c").unwrap();
        let mut call = redis::Cmd::new();
        call.arg(keys.script_keys());
        let written: Vec<&[u8]> = call
            .args_iter()
            .map(|arg| match arg {
                redis::Arg::Simple(bytes) => bytes,
                _ => panic!("only plain arguments expected"),
            })
            .collect();
        assert_eq!(written.len(), SCRIPT_KEY_COUNT);
        assert_eq!(written[0], keys.state().as_bytes());
        for key in written {
            let key = std::str::from_utf8(key).unwrap();
            let open = key.find('{').unwrap();
            let close = open + key[open..].find('}').unwrap();
            assert_eq!(
                slot_of(&key.as_bytes()[open + 1..close]),
                keys.slot(),
                "{key}"
            );
        }
    }

    #[test]
    fn crc16_matches_the_cluster_spec_vector() {
        // The Redis Cluster specification's test vector.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        // Known slots (from CLUSTER KEYSLOT).
        assert_eq!(slot_of(b"foo"), 12182);
        assert_eq!(slot_of(b"user1000"), 3443);
    }

    #[test]
    fn every_key_of_a_name_shares_the_slot_of_its_tag() {
        for name in ["orders:42", "a{b}c", "}{", "%7B", "🔒 lock", "x"] {
            let keys = LockKeys::new("redlock", name).unwrap();
            for key in [
                keys.state().to_owned(),
                keys.expiries().to_string(),
                keys.waiting_writers().to_string(),
                keys.waiting_readers().to_string(),
                keys.waiter_info().to_string(),
                keys.fence().to_owned(),
            ] {
                assert_eq!(slot_of(hash_tag(&key)), keys.slot, "{key}");
            }
        }
    }

    #[test]
    fn names_never_share_keys() {
        let a = LockKeys::new("p", "a}b").unwrap();
        let b = LockKeys::new("p", "a%7Db").unwrap();
        let c = LockKeys::new("p", "a").unwrap();
        assert_ne!(a.state, b.state);
        assert_ne!(a.state, c.state);
        assert_ne!(
            c.expiries().to_string(),
            LockKeys::new("p", "a}:exp").unwrap().state()
        );
    }

    #[test]
    fn bad_names_and_prefixes_are_rejected() {
        assert!(LockKeys::new("p", "").is_err());
        assert!(LockKeys::new("p", &"n".repeat(MAX_NAME_LEN)).is_ok());
        assert!(LockKeys::new("p", &"n".repeat(MAX_NAME_LEN + 1)).is_err());
        assert!(validate_prefix("").is_err());
        assert!(validate_prefix("a{b").is_err());
        assert!(validate_prefix("app:locks").is_ok());
    }

    /// Redis Cluster's rule: the content between the first '{' and the next '}', if non-empty.
    fn hash_tag(key: &str) -> &[u8] {
        let open = key.find('{').unwrap();
        let close = open + 1 + key[open + 1..].find('}').unwrap();
        &key.as_bytes()[open + 1..close]
    }
}
