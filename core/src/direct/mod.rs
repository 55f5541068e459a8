//! Calls made on the calling thread, for blocking callers (Rust's `blocking`, and through it C,
//! Java and Python's sync API); the async hot calls' own connections are in [`hot`], and the
//! RESP2 parsing both share in `resp`.
//!
//! On the multiplexed async connection a round trip from a thread outside the runtime costs
//! two thread hand-offs (caller → connection task → caller) on top of the socket I/O; on a
//! plain blocking socket it is one write and one read on the caller's thread. Blocking callers
//! therefore make their single-round-trip calls (an acquire's first attempt, a release) here.
//! Waiting, the watchdog and pub/sub stay on the async side.
//!
//! Plain sockets only (TCP or Unix): over TLS, blocking callers use the multiplexed connection
//! as async ones do. (redis-rs' TLS connection discards a reply whose read timed out, so a late
//! acquire or release could not be undone or heard out exactly, and it does not lend its socket
//! to look at while idle.)
//!
//! Guarantees: at most [`MAX_IDLE`] idle connections are kept, and one the server closed
//! while idle (a restart, its idle `timeout`) is dropped before use, not found by a failed call;
//! a connection that saw an I/O error or a timeout is never reused (a late reply must never be
//! read as the next call's); every call is bounded by the command timeout like an async one; a
//! signal arriving mid-call does not fail it ([`wire`] reads again), nor does a stop of the
//! process (SIGSTOP, a paused VM) past the deadline while the reply came in: what has arrived
//! by then is read.

mod hot;
#[cfg(unix)]
mod probe;
mod resp;
mod wire;

pub(crate) use hot::{
    DEFAULT_DIRECT_CONNECTIONS, HotConnection, HotConnections, MAX_DIRECT_CONNECTIONS,
};
pub(crate) use resp::parse as parse_reply;

use std::sync::Mutex;
use std::time::Duration;

use redis::{Cmd, ErrorKind, FromRedisValue, RedisResult};

use crate::lock::scripts::LuaScript;

use crate::blocking::CancelToken;
use crate::error::{Error, Result};
use wire::Wire;

/// One blocking caller's connection: our own, over a plain socket.
pub(crate) struct DirectConnection(Wire);

impl DirectConnection {
    /// Runs an `EVALSHA` of `script` (behind a `PING` with `ping_first`), sent again with the
    /// script's source if the server forgot it (see `calls::eval_sync`).
    pub(crate) fn eval<T: FromRedisValue>(
        &mut self,
        script: &LuaScript,
        call: &Cmd,
        ping_first: bool,
    ) -> RedisResult<T> {
        crate::lock::calls::eval_sync(&mut self.0, script, call, ping_first)
    }

    /// Whether an idle connection may be used (see [`probe::is_alive`]).
    fn is_alive(&self) -> bool {
        #[cfg(unix)]
        return self.0.is_alive();
        #[cfg(not(unix))]
        true
    }

    /// The late reply of a call that timed out on this connection, waiting up to `patience`.
    pub(crate) fn late<T: FromRedisValue>(&mut self, patience: Duration) -> RedisResult<T> {
        self.0.late_reply(patience)
    }
}

/// Idle connections kept for reuse (one per concurrently calling thread is enough).
const MAX_IDLE: usize = 16;

pub(crate) struct DirectConnections {
    redis: redis::Client,
    /// Whether the address is a plain socket (see the module docs).
    plain: bool,
    /// `None` once the client is closed: a call that was on the wire when `clear` ran hands
    /// its connection back afterwards, and it must close then, not wait for the last handle.
    idle: Mutex<Option<Vec<DirectConnection>>>,
    command_timeout: Duration,
    connect_timeout: Duration,
}

impl DirectConnections {
    pub(crate) fn new(
        redis: redis::Client,
        command_timeout: Duration,
        connect_timeout: Duration,
    ) -> Self {
        let plain = matches!(
            redis.get_connection_info().addr(),
            redis::ConnectionAddr::Tcp(..) | redis::ConnectionAddr::Unix(_)
        );
        DirectConnections {
            redis,
            plain,
            idle: Mutex::new(Some(Vec::new())),
            command_timeout,
            connect_timeout,
        }
    }

    /// Whether blocking callers may call on their own connections: plain sockets only.
    pub(crate) fn usable(&self) -> bool {
        self.plain
    }

    /// Runs `call` on an idle connection (or a new one) on this thread. A connection whose call
    /// timed out goes to `late`: its reply may still come, and only `late` may read it. So does
    /// one whose call `cancel` ended while it waited for the reply (`Cancelled`).
    pub(crate) fn run_or_hand_over<T>(
        &self,
        cancel: Option<&CancelToken>,
        call: impl FnOnce(&mut DirectConnection) -> RedisResult<T>,
        late: impl FnOnce(DirectConnection),
    ) -> Result<T> {
        let mut connection = match self.idle_alive() {
            Some(connection) => connection,
            None => self.open()?,
        };
        connection.0.watch(cancel);
        let result = call(&mut connection);
        let cancelled = connection.0.unwatch();
        match result {
            Ok(value) => {
                self.give_back(connection);
                Ok(value)
            }
            Err(_) if cancelled => {
                late(connection);
                Err(Error::Cancelled)
            }
            Err(err) if err.is_timeout() => {
                late(connection);
                Err(Error::no_answer(self.command_timeout))
            }
            Err(err) => {
                // An error reply from the server leaves the connection in step; anything else
                // (I/O, a reply that could not be parsed) may not.
                if matches!(err.kind(), ErrorKind::Server(_) | ErrorKind::Extension) {
                    self.give_back(connection);
                }
                Err(err.into())
            }
        }
    }

    /// Drops every idle connection and keeps none from now on (on close).
    pub(crate) fn clear(&self) {
        drop(self.idle.lock().unwrap().take());
    }

    fn open(&self) -> Result<DirectConnection> {
        let info = self.redis.get_connection_info();
        match Wire::open(info, self.connect_timeout, self.command_timeout) {
            Some(wire) => Ok(DirectConnection(wire?)),
            // Callers ask `usable` first.
            None => Err(Error::Connection(
                "direct connections are plain sockets only".into(),
            )),
        }
    }

    /// An idle connection that the server has not closed (they are dropped: one closed by a
    /// restart or by the server's idle `timeout` would fail the call made on it).
    fn idle_alive(&self) -> Option<DirectConnection> {
        let mut idle = self.idle.lock().unwrap();
        let idle = idle.as_mut()?;
        while let Some(connection) = idle.pop() {
            if connection.is_alive() {
                return Some(connection);
            }
        }
        None
    }

    fn give_back(&self, connection: DirectConnection) {
        if let Some(idle) = self.idle.lock().unwrap().as_mut()
            && idle.len() < MAX_IDLE
        {
            idle.push(connection);
        }
    }
}
