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
//! Guarantees: at most [`MAX_IDLE`] idle connections are kept, and one the server closed
//! while idle (a restart, its idle `timeout`) is dropped before use, not found by a failed call
//! (plain sockets; redis-rs' TLS connection does not lend its socket); a connection that saw
//! an I/O error or a timeout is never reused (a late reply must never be read as the next call's); every
//! call is bounded by the command timeout like an async one; a signal arriving mid-call does not
//! fail it (plain sockets: [`wire`] reads again; TLS: [`SignalsHeldOff`]).

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

/// One blocking caller's connection: our own over a plain socket, redis-rs' over TLS.
pub(crate) enum DirectConnection {
    Plain(Wire),
    Tls(redis::Connection),
}

impl DirectConnection {
    /// Runs an `EVALSHA` of `script` (behind a `PING` with `ping_first`), sent again with the
    /// script's source if the server forgot it (see `calls::eval_sync`).
    pub(crate) fn eval<T: FromRedisValue>(
        &mut self,
        script: &LuaScript,
        call: &Cmd,
        ping_first: bool,
    ) -> RedisResult<T> {
        use crate::lock::calls::eval_sync;
        match self {
            DirectConnection::Plain(wire) => eval_sync(wire, script, call, ping_first),
            DirectConnection::Tls(connection) => {
                let _signals = SignalsHeldOff::new();
                eval_sync(connection, script, call, ping_first)
            }
        }
    }

    /// Whether an idle connection may be used (see [`probe::is_alive`]). redis-rs' TLS
    /// connection does not lend its socket: a closed one is found by the call made on it.
    fn is_alive(&self) -> bool {
        match self {
            #[cfg(unix)]
            DirectConnection::Plain(wire) => wire.is_alive(),
            _ => true,
        }
    }

    /// What became of a call that timed out on this connection, waiting up to `patience`.
    /// On a plain socket its late reply is read. redis-rs' connection (TLS) discards a reply
    /// whose read timed out: a `PING` answered on it then says only that the call has run.
    pub(crate) fn late<T: FromRedisValue>(&mut self, patience: Duration) -> Late<T> {
        match self {
            DirectConnection::Plain(wire) => Late::Reply(wire.late_reply(patience)),
            DirectConnection::Tls(connection) => {
                let _signals = SignalsHeldOff::new();
                let ran = connection.set_read_timeout(Some(patience)).is_ok()
                    && redis::cmd("PING").query::<()>(connection).is_ok();
                if ran { Late::Ran } else { Late::Unknown }
            }
        }
    }
}

/// What became of a call that timed out (see [`DirectConnection::late`]).
pub(crate) enum Late<T> {
    Reply(RedisResult<T>),
    /// It has run; its reply is lost.
    Ran,
    /// The connection failed or Redis stayed silent: nothing is known.
    Unknown,
}

/// Idle connections kept for reuse (one per concurrently calling thread is enough).
const MAX_IDLE: usize = 16;

pub(crate) struct DirectConnections {
    redis: redis::Client,
    idle: Mutex<Vec<DirectConnection>>,
    command_timeout: Duration,
    connect_timeout: Duration,
}

impl DirectConnections {
    pub(crate) fn new(
        redis: redis::Client,
        command_timeout: Duration,
        connect_timeout: Duration,
    ) -> Self {
        DirectConnections {
            redis,
            idle: Mutex::default(),
            command_timeout,
            connect_timeout,
        }
    }

    /// Runs `call` on an idle connection (or a new one) on this thread. A connection whose call
    /// timed out goes to `late`: its reply may still come, and only `late` may read it. So does
    /// one whose call `cancel` ended while it waited for the reply (`Cancelled`; plain sockets:
    /// a TLS call runs to its reply or its timeout).
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
        if let DirectConnection::Plain(wire) = &mut connection {
            wire.watch(cancel);
        }
        let result = call(&mut connection);
        let cancelled = match &mut connection {
            DirectConnection::Plain(wire) => wire.unwatch(),
            DirectConnection::Tls(_) => false,
        };
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

    /// Drops every idle connection (on close).
    pub(crate) fn clear(&self) {
        self.idle.lock().unwrap().clear();
    }

    fn open(&self) -> Result<DirectConnection> {
        let info = self.redis.get_connection_info();
        if let Some(wire) = Wire::open(info, self.connect_timeout, self.command_timeout) {
            return Ok(DirectConnection::Plain(wire?));
        }
        let _signals = SignalsHeldOff::new();
        let connection = self
            .redis
            .get_connection_with_timeout(self.connect_timeout)?;
        connection.set_read_timeout(Some(self.command_timeout))?;
        connection.set_write_timeout(Some(self.command_timeout))?;
        Ok(DirectConnection::Tls(connection))
    }

    /// An idle connection that the server has not closed (they are dropped: one closed by a
    /// restart or by the server's idle `timeout` would fail the call made on it).
    fn idle_alive(&self) -> Option<DirectConnection> {
        let mut idle = self.idle.lock().unwrap();
        while let Some(connection) = idle.pop() {
            if connection.is_alive() {
                return Some(connection);
            }
        }
        None
    }

    fn give_back(&self, connection: DirectConnection) {
        let mut idle = self.idle.lock().unwrap();
        if idle.len() < MAX_IDLE {
            idle.push(connection);
        }
    }
}

/// Holds off asynchronous signals on this thread for one direct call.
///
/// A socket read with a timeout (`SO_RCVTIMEO`, how the command timeout is kept) is never
/// restarted after a signal handler runs, even with `SA_RESTART` (signal(7)): it fails with
/// `EINTR`, leaving the call's outcome unknown. Host runtimes signal their threads all the
/// time (Go preempts goroutines with SIGURG; JVMs and Python have handlers too), so the call
/// would fail at random. Blocked signals stay pending and are delivered when the call ends
/// (within the command timeout); faults (SIGSEGV and the like) are never blocked.
#[cfg(unix)]
struct SignalsHeldOff {
    previous: libc::sigset_t,
}

#[cfg(unix)]
impl SignalsHeldOff {
    fn new() -> Self {
        // SAFETY: plain libc calls on sigset_t values owned here.
        unsafe {
            let mut held: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut held);
            for fault in [
                libc::SIGSEGV,
                libc::SIGBUS,
                libc::SIGFPE,
                libc::SIGILL,
                libc::SIGTRAP,
                libc::SIGSYS,
                libc::SIGABRT,
            ] {
                libc::sigdelset(&mut held, fault);
            }
            let mut previous: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_BLOCK, &held, &mut previous);
            SignalsHeldOff { previous }
        }
    }
}

#[cfg(unix)]
impl Drop for SignalsHeldOff {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved in `new` on this same thread.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.previous, std::ptr::null_mut());
        }
    }
}

#[cfg(not(unix))]
struct SignalsHeldOff;

#[cfg(not(unix))]
impl SignalsHeldOff {
    fn new() -> Self {
        SignalsHeldOff
    }
}
