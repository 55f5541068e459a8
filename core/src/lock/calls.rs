//! The two hot script calls of one name (acquire and release) with the name's keys written
//! once per handle: a call then copies one buffer and appends its own arguments, where writing
//! the six keys into a fresh invocation cost more than the rest of the command.

use redis::{Cmd, ConnectionLike, FromRedisValue, RedisResult, Script};

use super::scripts::SCRIPTS;
use crate::keys::{LockKeys, SCRIPT_KEY_COUNT};

/// `EVALSHA <sha> 6 <keys>` of acquire.lua and release.lua for one name.
pub(crate) struct KeyedCalls {
    acquire: Cmd,
    release: Cmd,
}

impl KeyedCalls {
    pub(crate) fn new(keys: &LockKeys) -> Self {
        KeyedCalls {
            acquire: keyed(&SCRIPTS.acquire, keys),
            release: keyed(&SCRIPTS.release, keys),
        }
    }

    /// An acquire call missing only its arguments.
    pub(crate) fn acquire(&self) -> Cmd {
        self.acquire.clone()
    }

    /// A release call missing only its arguments.
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
