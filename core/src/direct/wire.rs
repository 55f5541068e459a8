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

use redis::{
    Cmd, ConnectionAddr, ConnectionInfo, ConnectionLike, ErrorKind, FromRedisValue, RedisError,
    RedisResult, Value,
};

/// Bytes read at once; a longer reply grows the buffer.
const READ_CHUNK: usize = 4096;
/// Redis' own limit on a string (`proto-max-bulk-len`, 512 MB by default).
const MAX_BULK: usize = 512 << 20;

enum Stream {
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

    /// Writes everything (`write_all` makes an interrupted write again).
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.write_all(bytes),
            #[cfg(unix)]
            Stream::Unix(s) => s.write_all(bytes),
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
    buf: Vec<u8>,
    /// Unparsed bytes are `buf[start..end]`.
    start: usize,
    end: usize,
}

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
            ConnectionAddr::Unix(path) => UnixStream::connect(path).map(Stream::Unix),
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
                buf: vec![0; READ_CHUNK],
                start: 0,
                end: 0,
            };
            wire.handshake(info)?;
            wire.stream.set_write_timeout(command_timeout)?;
            wire.stream.set_read_timeout(command_timeout)?;
            wire.command_timeout = command_timeout;
            Ok(wire)
        })())
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

    /// The reply of a call that timed out, waiting for it up to `patience`.
    pub(crate) fn late_reply<T: FromRedisValue>(&mut self, patience: Duration) -> RedisResult<T> {
        self.stream.set_read_timeout(patience)?;
        self.read_timeout_shortened = true;
        let reply = self.read_value(deadline_after(patience))?.extract_error()?;
        Ok(T::from_redis_value(reply)?)
    }

    fn request_value(&mut self, call: &Cmd) -> RedisResult<Value> {
        self.out.clear();
        call.write_packed_command(&mut self.out);
        let deadline = self.start_call()?;
        self.stream.write_all(&self.out)?;
        self.read_value(deadline)
    }

    /// Sends `packed` (`count` commands) and reads their replies, all within the command timeout.
    fn request_packed(&mut self, packed: &[u8], count: usize) -> RedisResult<Vec<Value>> {
        let deadline = self.start_call()?;
        self.stream.write_all(packed)?;
        let mut replies = Vec::with_capacity(count);
        for _ in 0..count {
            replies.push(self.read_value(deadline)?);
        }
        Ok(replies)
    }

    /// Reads one whole reply, making interrupted reads again until `deadline` (`None`: a
    /// timeout too long to count).
    fn read_value(&mut self, deadline: Option<Instant>) -> RedisResult<Value> {
        let mut reads = 0;
        loop {
            if let Some((value, used)) = parse(&self.buf[self.start..self.end])? {
                self.start += used;
                if self.start == self.end {
                    (self.start, self.end) = (0, 0);
                }
                return Ok(value);
            }
            // A second read (or one after an interruption) gets only the time left.
            if let Some(deadline) = deadline.filter(|_| reads > 0) {
                self.shorten_read_timeout(deadline)?;
            }
            reads += 1;
            self.make_room();
            match self.stream.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the server closed the connection",
                    )
                    .into());
                }
                Ok(read) => self.end += read,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// The deadline of a call starting now.
    fn start_call(&mut self) -> io::Result<Option<Instant>> {
        self.restore_read_timeout()?;
        Ok(deadline_after(self.command_timeout))
    }

    fn shorten_read_timeout(&mut self, deadline: Instant) -> io::Result<()> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        self.stream.set_read_timeout(left)?;
        self.read_timeout_shortened = true;
        Ok(())
    }

    /// Restores the command timeout on the socket after a call that shortened it.
    fn restore_read_timeout(&mut self) -> io::Result<()> {
        if self.read_timeout_shortened {
            self.stream.set_read_timeout(self.command_timeout)?;
            self.read_timeout_shortened = false;
        }
        Ok(())
    }

    /// Space for at least one chunk after `end`: unparsed bytes move to the front, and the
    /// buffer grows for a reply longer than it.
    fn make_room(&mut self) {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            (self.start, self.end) = (0, self.end - self.start);
        }
        if self.buf.len() - self.end < READ_CHUNK / 2 {
            self.buf.resize(self.buf.len() * 2, 0);
        }
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

fn is_error_with(reply: &Value, text: &str) -> bool {
    matches!(reply, Value::ServerError(e) if e.details().is_some_and(|d| d.contains(text)))
}

/// One RESP2 reply from the front of `bytes` and the bytes it takes, or `None` if incomplete.
pub(crate) fn parse(bytes: &[u8]) -> RedisResult<Option<(Value, usize)>> {
    let Some(line_end) = bytes.windows(2).position(|w| w == b"\r\n") else {
        return Ok(None);
    };
    let Some((&kind, line)) = bytes[..line_end].split_first() else {
        return Err(protocol_error("an empty line"));
    };
    let after_line = line_end + 2;
    let value = match kind {
        b'+' if line == b"OK" => Value::Okay,
        b'+' => Value::SimpleString(text(line)?.to_owned()),
        b':' => Value::Int(number(line)?),
        // redis-rs' parser makes the error value, with its kind (NOSCRIPT, WRONGPASS, ...).
        b'-' => redis::parse_redis_value(&bytes[..after_line])?,
        b'$' => {
            let Ok(len) = usize::try_from(number(line)?) else {
                return Ok(Some((Value::Nil, after_line)));
            };
            if len > MAX_BULK {
                return Err(protocol_error("a string longer than Redis makes"));
            }
            let end = after_line + len;
            if bytes.len() < end + 2 {
                return Ok(None);
            }
            let data = bytes[after_line..end].to_vec();
            return Ok(Some((Value::BulkString(data), end + 2)));
        }
        b'*' => {
            let Ok(count) = usize::try_from(number(line)?) else {
                return Ok(Some((Value::Nil, after_line)));
            };
            let mut items = Vec::with_capacity(count.min(1024));
            let mut at = after_line;
            for _ in 0..count {
                let Some((item, used)) = parse(&bytes[at..])? else {
                    return Ok(None);
                };
                items.push(item);
                at += used;
            }
            return Ok(Some((Value::Array(items), at)));
        }
        _ => return Err(protocol_error("an unknown reply type")),
    };
    Ok(Some((value, after_line)))
}

fn text(line: &[u8]) -> RedisResult<&str> {
    std::str::from_utf8(line).map_err(|_| protocol_error("a reply line that is not UTF-8"))
}

fn number(line: &[u8]) -> RedisResult<i64> {
    text(line)?
        .parse()
        .map_err(|_| protocol_error("a malformed number"))
}

fn protocol_error(what: &str) -> RedisError {
    RedisError::from((
        ErrorKind::Parse,
        "unexpected reply from Redis",
        what.to_owned(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(bytes: &[u8]) -> Option<(Value, usize)> {
        parse(bytes).unwrap()
    }

    #[test]
    fn every_reply_kind_the_scripts_give_is_parsed_whole_and_no_further() {
        assert_eq!(parsed(b":42\r\n:1\r\n"), Some((Value::Int(42), 5)));
        assert_eq!(parsed(b"+OK\r\n"), Some((Value::Okay, 5)));
        assert_eq!(
            parsed(b"+PONG\r\n"),
            Some((Value::SimpleString("PONG".into()), 7))
        );
        assert_eq!(
            parsed(b"$7\r\n12:1\r\nx\r\n"),
            Some((Value::BulkString(b"12:1\r\nx".to_vec()), 13))
        );
        assert_eq!(parsed(b"$-1\r\n"), Some((Value::Nil, 5)));
        assert_eq!(
            parsed(b"*2\r\n:1\r\n$1\r\na\r\n"),
            Some((
                Value::Array(vec![Value::Int(1), Value::BulkString(b"a".to_vec())]),
                15
            ))
        );
        let (error, used) = parsed(b"-NOSCRIPT No matching script\r\n").unwrap();
        assert_eq!(used, 30);
        let error = error.extract_error().unwrap_err();
        assert_eq!(
            error.kind(),
            ErrorKind::Server(redis::ServerErrorKind::NoScript)
        );
    }

    #[test]
    fn a_reply_cut_anywhere_is_incomplete_not_wrong() {
        let whole = b"*3\r\n:12\r\n$5\r\nhello\r\n-ERR no\r\n";
        for cut in 0..whole.len() {
            assert_eq!(parsed(&whole[..cut]), None, "cut at {cut}");
        }
        assert!(parsed(whole).is_some());
    }

    #[test]
    fn garbage_is_a_parse_error() {
        for bad in [&b"?\r\n"[..], b"\r\n", b":x\r\n", b"$abc\r\n", b"+\xff\r\n"] {
            let err = parse(bad).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Parse, "{bad:?}");
        }
    }
}
