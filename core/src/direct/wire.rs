//! A plain (TCP or Unix socket) RESP2 connection for blocking callers' direct calls.
//!
//! redis-rs' sync connection fails a read that a signal interrupts (`EINTR`: a socket read with
//! a timeout is never restarted, signal(7)), so calls on it run with signals held off — two
//! `sigprocmask` system calls per call. It also zeroes an 8 KiB buffer before every read.
//! Here a read that a signal interrupts is simply made again, within the same deadline, and the
//! read buffer is zeroed once. TLS connections keep redis-rs' connection (see `super`).
//!
//! Guarantees: a call's write and read together end within the command timeout; a reply that
//! arrives late stays in the buffer, so the connection can still read it in order
//! ([`Wire::late_reply`]); the handshake is what redis-rs sends for RESP2 (`AUTH` with or without
//! a user name, `SELECT`).

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
#[cfg(unix)]
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use super::resp::ReplyBuffer;
use crate::blocking::CancelToken;
use redis::{
    Cmd, ConnectionAddr, ConnectionInfo, ConnectionLike, ErrorKind, FromRedisValue, RedisError,
    RedisResult, Value,
};

/// A connected socket.
pub(super) enum Stream {
    Tcp(TcpStream),
    #[cfg(unix)]
    Unix(UnixStream),
}

impl Stream {
    fn set_read_timeout(&self, timeout: Duration) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(Some(timeout)),
            #[cfg(unix)]
            Stream::Unix(s) => s.set_read_timeout(Some(timeout)),
        }
    }

    fn set_write_timeout(&self, timeout: Duration) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_write_timeout(Some(timeout)),
            #[cfg(unix)]
            Stream::Unix(s) => s.set_write_timeout(Some(timeout)),
        }
    }

    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            #[cfg(unix)]
            Stream::Unix(s) => s.read(buf),
        }
    }

    /// Reads what has arrived, without waiting (`WouldBlock` when nothing has).
    fn read_arrived(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.set_nonblocking(true)?;
        let read = self.read(buf);
        self.set_nonblocking(false)?;
        read
    }

    fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_nonblocking(on),
            #[cfg(unix)]
            Stream::Unix(s) => s.set_nonblocking(on),
        }
    }

    /// Writes everything (`write_all` makes an interrupted write again).
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.write_all(bytes),
            #[cfg(unix)]
            Stream::Unix(s) => crate::nosigpipe::UnixWriter(s).write_all(bytes),
        }
    }
}

pub(crate) struct Wire {
    stream: Stream,
    command_timeout: Duration,
    db: i64,
    /// The socket's read timeout is shorter than the command timeout (a call's second read).
    read_timeout_shortened: bool,
    out: Vec<u8>,
    replies: ReplyBuffer,
    /// While set, a call waits for its reply in slices and gives up once this fires.
    cancel: Option<CancelToken>,
    /// The last call gave up on its reply because `cancel` fired.
    gave_up: bool,
    /// Replies of the last call not read yet (a call that timed out or gave up).
    unread: usize,
}

/// How often a call with a cancel token looks at it while it waits for the reply.
const CANCEL_CHECK: Duration = Duration::from_millis(10);

impl Wire {
    /// Connects to a plain address and authenticates; `None` for a TLS address.
    pub(crate) fn open(
        info: &ConnectionInfo,
        connect_timeout: Duration,
        command_timeout: Duration,
    ) -> Option<RedisResult<Wire>> {
        let stream = match info.addr() {
            ConnectionAddr::Tcp(host, port) => connect_tcp(host, *port, connect_timeout),
            #[cfg(unix)]
            ConnectionAddr::Unix(path) => connect_unix(path, connect_timeout),
            _ => return None,
        };
        Some((|| {
            let stream = stream?;
            // The handshake is bounded by the connect timeout, later calls by the command timeout.
            stream.set_write_timeout(connect_timeout)?;
            stream.set_read_timeout(connect_timeout)?;
            let mut wire = Wire {
                stream,
                command_timeout: connect_timeout,
                db: info.redis_settings().db(),
                read_timeout_shortened: false,
                out: Vec::with_capacity(512),
                replies: ReplyBuffer::new(),
                cancel: None,
                gave_up: false,
                unread: 0,
            };
            wire.handshake(info)?;
            wire.stream.set_write_timeout(command_timeout)?;
            wire.stream.set_read_timeout(command_timeout)?;
            wire.command_timeout = command_timeout;
            Ok(wire)
        })())
    }

    /// The connected, authenticated socket and its database, for an async connection (the
    /// handshake leaves nothing unread).
    /// Whether the server has neither closed the connection nor sent anything unasked.
    #[cfg(unix)]
    pub(super) fn is_alive(&self) -> bool {
        match &self.stream {
            Stream::Tcp(s) => super::probe::is_alive(s),
            Stream::Unix(s) => super::probe::is_alive(s),
        }
    }

    pub(super) fn into_socket(self) -> (Stream, i64) {
        (self.stream, self.db)
    }

    fn handshake(&mut self, info: &ConnectionInfo) -> RedisResult<()> {
        let settings = info.redis_settings();
        if let Some(password) = settings.password() {
            let auth = |user: Option<&str>| {
                let mut auth = redis::cmd("AUTH");
                if let Some(user) = user {
                    auth.arg(user);
                }
                auth.arg(password);
                auth
            };
            let mut reply = self.request_value(&auth(settings.username()))?;
            // A server before 6.0 knows no users: AUTH takes the password alone.
            if settings.username().is_some() && is_error_with(&reply, "wrong number of arguments") {
                reply = self.request_value(&auth(None))?;
            }
            if let Value::ServerError(error) = reply {
                let detail = error.details().unwrap_or_default().to_string();
                return Err(RedisError::from((
                    ErrorKind::AuthenticationFailed,
                    "Password authentication failed",
                    detail,
                )));
            }
        }
        if settings.db() != 0 {
            let mut select = redis::cmd("SELECT");
            select.arg(settings.db());
            self.request_value(&select)?.extract_error()?;
        }
        Ok(())
    }

    /// Gives up on the calls' replies from now on once `cancel` (if any) fires.
    pub(super) fn watch(&mut self, cancel: Option<&CancelToken>) {
        self.cancel = cancel.cloned();
        self.gave_up = false;
    }

    /// Stops watching; returns whether a call gave up because the token fired.
    pub(super) fn unwatch(&mut self) -> bool {
        self.cancel = None;
        std::mem::take(&mut self.gave_up)
    }

    /// The reply of a call that timed out, waiting for it up to `patience`.
    pub(crate) fn late_reply<T: FromRedisValue>(&mut self, patience: Duration) -> RedisResult<T> {
        self.stream.set_read_timeout(patience)?;
        self.read_timeout_shortened = true;
        let deadline = deadline_after(patience);
        // The call's own reply is the last one it was owed (a release behind a PING owes two).
        while self.unread > 1 {
            self.read_value(deadline)?;
            self.unread -= 1;
        }
        let reply = self.read_value(deadline)?.extract_error()?;
        crate::lock::calls::convert(reply)
    }

    fn request_value(&mut self, call: &Cmd) -> RedisResult<Value> {
        self.out.clear();
        call.write_packed_command(&mut self.out);
        let deadline = self.start_call()?;
        self.unread = 1;
        self.stream.write_all(&self.out)?;
        let reply = self.read_value(deadline)?;
        self.unread = 0;
        Ok(reply)
    }

    /// Sends `packed` (`count` commands) and reads their replies, all within the command timeout.
    fn request_packed(&mut self, packed: &[u8], count: usize) -> RedisResult<Vec<Value>> {
        let deadline = self.start_call()?;
        self.unread = count;
        self.stream.write_all(packed)?;
        let mut replies = Vec::with_capacity(count);
        for _ in 0..count {
            replies.push(self.read_value(deadline)?);
            self.unread -= 1;
        }
        Ok(replies)
    }

    /// Reads one whole reply, making interrupted reads again until `deadline` (`None`: a
    /// timeout too long to count).
    fn read_value(&mut self, deadline: Option<Instant>) -> RedisResult<Value> {
        let mut reads = 0;
        loop {
            if let Some(value) = self.replies.next_reply()? {
                return Ok(value);
            }
            // Past the deadline, what has arrived is still read, without waiting: a process
            // that was stopped (SIGSTOP, a VM paused) while the reply came in finds it there.
            let mut wait = true;
            if self.cancel.is_some() {
                wait = self.slice_read_timeout(deadline)?;
            } else if let Some(deadline) = deadline.filter(|_| reads > 0) {
                // A second read (or one after an interruption) gets only the time left.
                wait = self.shorten_read_timeout(deadline)?;
            }
            reads += 1;
            let read = if wait {
                self.stream.read(self.replies.room())
            } else {
                self.stream.read_arrived(self.replies.room())
            };
            match read {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the server closed the connection",
                    )
                    .into());
                }
                Ok(read) => self.replies.filled(read),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if !wait && e.kind() == io::ErrorKind::WouldBlock => {
                    return Err(io::Error::from(io::ErrorKind::TimedOut).into());
                }
                Err(e) if self.cancel.is_some() && is_read_timeout(&e) => {
                    if self.cancel.as_ref().is_some_and(CancelToken::is_cancelled) {
                        self.gave_up = true;
                        return Err(
                            io::Error::other("cancelled while waiting for the reply").into()
                        );
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// The deadline of a call starting now.
    fn start_call(&mut self) -> io::Result<Option<Instant>> {
        self.restore_read_timeout()?;
        Ok(deadline_after(self.command_timeout))
    }

    /// The next read waits at most [`CANCEL_CHECK`], and not past `deadline`; false when
    /// `deadline` has passed (the next read must not wait at all).
    fn slice_read_timeout(&mut self, deadline: Option<Instant>) -> io::Result<bool> {
        let left = deadline.map_or(CANCEL_CHECK, |d| {
            d.saturating_duration_since(Instant::now())
        });
        if left.is_zero() {
            return Ok(false);
        }
        self.stream.set_read_timeout(left.min(CANCEL_CHECK))?;
        self.read_timeout_shortened = true;
        Ok(true)
    }

    /// The next read waits only the time left before `deadline`; false when it has passed.
    fn shorten_read_timeout(&mut self, deadline: Instant) -> io::Result<bool> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(false);
        }
        self.stream.set_read_timeout(left)?;
        self.read_timeout_shortened = true;
        Ok(true)
    }

    /// Restores the command timeout on the socket after a call that shortened it.
    fn restore_read_timeout(&mut self) -> io::Result<()> {
        if self.read_timeout_shortened {
            self.stream.set_read_timeout(self.command_timeout)?;
            self.read_timeout_shortened = false;
        }
        Ok(())
    }
}

/// So redis-rs' `Cmd::query` and `Script::load` run on it.
impl ConnectionLike for Wire {
    fn req_command(&mut self, call: &Cmd) -> RedisResult<Value> {
        self.request_value(call)
    }

    fn req_packed_command(&mut self, packed: &[u8]) -> RedisResult<Value> {
        Ok(self.request_packed(packed, 1)?.pop().unwrap_or(Value::Nil))
    }

    fn req_packed_commands(
        &mut self,
        packed: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        let mut replies = self.request_packed(packed, offset + count)?;
        Ok(replies.split_off(offset))
    }

    fn get_db(&self) -> i64 {
        self.db
    }

    fn check_connection(&mut self) -> bool {
        redis::cmd("PING").query::<String>(self).is_ok()
    }

    fn is_open(&self) -> bool {
        true
    }
}

/// A socket read that ran into its timeout (`SO_RCVTIMEO`: `EAGAIN` on Linux).
fn is_read_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

fn deadline_after(timeout: Duration) -> Option<Instant> {
    Instant::now().checked_add(timeout)
}

fn connect_tcp(host: &str, port: u16, timeout: Duration) -> io::Result<Stream> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, format!("{host} has no address"));
    for address in (host, port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&address, timeout) {
            Ok(stream) => {
                stream.set_nodelay(true)?;
                return Ok(Stream::Tcp(stream));
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// A blocking connect to a Unix socket waits with no limit while the server's listen backlog is
/// full (a stalled Redis accepts nobody); a non-blocking one fails with `EAGAIN` then, and is
/// made again until `timeout`.
#[cfg(unix)]
fn connect_unix(path: &std::path::Path, timeout: Duration) -> io::Result<Stream> {
    use socket2::{Domain, SockAddr, Socket, Type};
    let address = SockAddr::unix(path)?;
    let socket = Socket::new(Domain::UNIX, Type::STREAM, None)?;
    socket.set_nonblocking(true)?;
    let deadline = deadline_after(timeout);
    let mut pause = Duration::from_millis(1);
    loop {
        match socket.connect(&address) {
            Ok(()) => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if deadline.is_some_and(|deadline| Instant::now() + pause > deadline) {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "connecting to the Unix socket timed out (its backlog is full)",
                    ));
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(20));
            }
            Err(e) => return Err(e),
        }
    }
    socket.set_nonblocking(false)?;
    Ok(Stream::Unix(UnixStream::from(socket)))
}

fn is_error_with(reply: &Value, text: &str) -> bool {
    matches!(reply, Value::ServerError(e) if e.details().is_some_and(|d| d.contains(text)))
}
