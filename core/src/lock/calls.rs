//! The two hot script calls of one lock view (acquire and release) with the name's keys, and
//! what never changes for the view, written once per handle: a call then copies one buffer and
//! appends its own arguments, where writing the six keys into a fresh invocation cost more than
//! the rest of the command.

use redis::{Cmd, ConnectionLike, FromRedisValue, RedisError, RedisResult, Value};

use super::Mode;
use super::scripts::{LuaScript, SCRIPTS};
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

/// `EVALSHA <sha> 6 <keys>` of `script` with the lock's keys, missing only its arguments.
pub(crate) fn keyed(script: &LuaScript, keys: &LockKeys) -> Cmd {
    let mut call = redis::cmd("EVALSHA");
    call.arg(script.sha())
        .arg(SCRIPT_KEY_COUNT)
        .arg(keys.script_keys());
    call
}

/// Runs `call`, an `EVALSHA` of `script`, on a plain connection. A server that does not know
/// the script (a restart, a failover or `SCRIPT FLUSH` forgot it) is given it by `SCRIPT LOAD`
/// (which Redis 7.4+ never evicts, unlike scripts cached by `EVAL`) and gets the call again;
/// should a second flush land between the two, the call goes once more as an `EVAL` of the
/// source, which cannot miss. With `ping_first` the call goes out behind a `PING`, in the same
/// write (see [`behind_ping`]).
pub(crate) fn eval_sync<T: FromRedisValue>(
    connection: &mut dyn ConnectionLike,
    script: &LuaScript,
    call: &Cmd,
    ping_first: bool,
) -> RedisResult<T> {
    let run = |connection: &mut dyn ConnectionLike, call: &Cmd| {
        let reply: Value = if ping_first {
            behind_ping(call).query(connection).map(|(reply,)| reply)?
        } else {
            call.query(connection)?
        };
        convert(reply)
    };
    match run(connection, call) {
        Err(e) if unknown_script(&e) => {}
        other => return other,
    }
    load(script).query::<()>(connection)?;
    match run(connection, call) {
        Err(e) if unknown_script(&e) => run(connection, &with_source(script, call)),
        other => other,
    }
}

/// [`eval_sync`] on an async connection.
pub(crate) async fn eval_async<T: FromRedisValue, C: redis::aio::ConnectionLike>(
    connection: &mut C,
    script: &LuaScript,
    call: &Cmd,
    ping_first: bool,
) -> RedisResult<T> {
    match query_async(connection, call, ping_first).await {
        Err(e) if unknown_script(&e) => {}
        other => return other,
    }
    load(script).query_async::<()>(connection).await?;
    match query_async(connection, call, ping_first).await {
        Err(e) if unknown_script(&e) => {
            query_async(connection, &with_source(script, call), ping_first).await
        }
        other => other,
    }
}

/// [`eval_async`] for a call that may run twice (a renewal, a waiter's withdrawal): one that
/// meets a dead connection (the server closed it while idle, by its `timeout` or a kill) is sent
/// once more, on the connection the manager opens on that failure. (Whether the first try ran
/// is unknown, so a call that must not run twice fails instead.)
pub(crate) async fn eval_rerunnable<T: FromRedisValue>(
    connection: &mut crate::background::CommandConnection,
    script: &LuaScript,
    call: &Cmd,
    ping_first: bool,
) -> RedisResult<T> {
    match eval_async(connection, script, call, ping_first).await {
        Err(e) if e.is_connection_dropped() || e.is_io_error() => {
            eval_async(connection, script, call, ping_first).await
        }
        other => other,
    }
}

fn unknown_script(error: &RedisError) -> bool {
    error.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
}

/// `SCRIPT LOAD` of `script`.
fn load(script: &LuaScript) -> Cmd {
    let mut load = redis::cmd("SCRIPT");
    load.arg("LOAD").arg(script.source());
    load
}

/// `call`, an `EVALSHA` of `script`, as an `EVAL` of its source with the same keys and arguments.
fn with_source(script: &LuaScript, call: &Cmd) -> Cmd {
    let mut eval = redis::cmd("EVAL");
    eval.arg(script.source());
    for arg in call.args_iter().skip(2) {
        if let redis::Arg::Simple(bytes) = arg {
            eval.arg(bytes);
        }
    }
    eval
}

async fn query_async<T: FromRedisValue, C: redis::aio::ConnectionLike>(
    connection: &mut C,
    call: &Cmd,
    ping_first: bool,
) -> RedisResult<T> {
    let reply: Value = if ping_first {
        let (reply,) = behind_ping(call).query_async(connection).await?;
        reply
    } else {
        call.query_async(connection).await?
    };
    convert(reply)
}

/// A script's reply, read whole, as `T`. One of another shape comes from keys that something
/// other than this library wrote (a count of "abc"): Redis answered, so that is no connection
/// error (redis-rs gives a failed conversion the kind of a garbled stream).
pub(crate) fn convert<T: FromRedisValue>(reply: Value) -> RedisResult<T> {
    T::from_redis_value(reply).map_err(|error| {
        RedisError::from((
            redis::ErrorKind::UnexpectedReturnType,
            "unexpected reply from Redis",
            error.to_string(),
        ))
    })
}

/// `call` behind a `PING`, for a release that is likely to grant the lock to another client's
/// waiter: that waiter then hears of its grant before the releaser hears its reply.
///
/// Redis writes the output of one event-loop turn client by client, the client whose first
/// output of the turn came last first (it puts each at the head of its pending-writes list).
/// A script's grant message is queued while it runs and its reply after it ends, so the
/// releaser's reply would be written, and the releaser woken, before the waiter's grant; the
/// `PONG` queues the releaser before the script runs. Measured on Rust's P4 (4 processes on 2
/// cores, A/B): hand-off p50 117–122 µs alone, 105–110 µs behind a `PING`, 121–127 µs with the
/// `PING` after the call instead (the order, not the extra command, makes the difference).
fn behind_ping(call: &Cmd) -> redis::Pipeline {
    let mut pipe = redis::pipe();
    pipe.cmd("PING").ignore().add_command(call.clone());
    pipe
}
