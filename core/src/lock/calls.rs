//! The two hot script calls of one lock view (acquire and release) with the name's keys, and
//! what never changes for the view, written once per handle: a call then copies one buffer and
//! appends its own arguments, where writing the six keys into a fresh invocation cost more than
//! the rest of the command.

use redis::{Cmd, ConnectionLike, FromRedisValue, RedisResult, Script};

use super::Mode;
use super::scripts::SCRIPTS;
use crate::keys::{LockKeys, SCRIPT_KEY_COUNT};

/// `EVALSHA <sha> 6 <keys>` of acquire.lua and release.lua (the script of one mode), the
/// release's first two arguments included.
pub(crate) struct KeyedCalls {
    acquire: Cmd,
    release: Cmd,
}

impl KeyedCalls {
    /// `announcement_ms`: how long a readers' turn lasts (release.lua's second argument).
    pub(crate) fn new(keys: &LockKeys, mode: Mode, announcement_ms: u64) -> Self {
        let mut release = keyed(SCRIPTS.release(mode), keys);
        release.arg(keys.channel()).arg(announcement_ms);
        KeyedCalls {
            acquire: keyed(SCRIPTS.acquire(mode), keys),
            release,
        }
    }

    /// An acquire call missing only its arguments.
    pub(crate) fn acquire(&self) -> Cmd {
        self.acquire.clone()
    }

    /// A release call missing only the owner's token.
    pub(crate) fn release(&self) -> Cmd {
        self.release.clone()
    }
}

fn keyed(script: &Script, keys: &LockKeys) -> Cmd {
    let mut call = redis::cmd("EVALSHA");
    call.arg(script.get_hash())
        .arg(SCRIPT_KEY_COUNT)
        .arg(keys.script_keys());
    call
}

/// Runs `call`, an `EVALSHA` of `script`, on a plain connection, loading the script once if the
/// server does not know it (a restart or failover forgets scripts).
pub(crate) fn eval_sync<T: FromRedisValue>(
    connection: &mut dyn ConnectionLike,
    script: &Script,
    call: &Cmd,
) -> RedisResult<T> {
    let no_script = redis::ErrorKind::Server(redis::ServerErrorKind::NoScript);
    match call.query(connection) {
        Err(e) if e.kind() == no_script => {
            script.load(connection)?;
            call.query(connection)
        }
        other => other,
    }
}

/// [`eval_sync`] on an async connection.
pub(crate) async fn eval_async<T: FromRedisValue, C: redis::aio::ConnectionLike>(
    connection: &mut C,
    script: &Script,
    call: &Cmd,
) -> RedisResult<T> {
    let no_script = redis::ErrorKind::Server(redis::ServerErrorKind::NoScript);
    match call.query_async(connection).await {
        Err(e) if e.kind() == no_script => {
            script.load_async(connection).await?;
            call.query_async(connection).await
        }
        other => other,
    }
}
