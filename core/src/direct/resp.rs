//! RESP2 replies: the parser and the read buffer both direct connections share.

use redis::{ErrorKind, RedisError, RedisResult, Value};

/// Bytes read at once; a longer reply grows the buffer.
const READ_CHUNK: usize = 4096;
/// Redis' own limit on a string (`proto-max-bulk-len`, 512 MB by default).
const MAX_BULK: usize = 512 << 20;

/// Bytes read from a connection and not parsed yet: `buf[start..end]`. The buffer is zeroed
/// once, when it is made or grows, not before every read.
pub(super) struct ReplyBuffer {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl ReplyBuffer {
    pub(super) fn new() -> Self {
        ReplyBuffer {
            buf: vec![0; READ_CHUNK],
            start: 0,
            end: 0,
        }
    }

    /// The next whole reply, or `None` until more bytes arrive.
    pub(super) fn next_reply(&mut self) -> RedisResult<Option<Value>> {
        let Some((value, used)) = parse(&self.buf[self.start..self.end])? else {
            return Ok(None);
        };
        self.start += used;
        if self.start == self.end {
            (self.start, self.end) = (0, 0);
        }
        Ok(Some(value))
    }

    /// Whether every byte read has been parsed.
    pub(super) fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Space for the next read, at least half a chunk: unparsed bytes move to the front, and
    /// the buffer grows for a reply longer than it. Report what was read with [`Self::filled`].
    pub(super) fn room(&mut self) -> &mut [u8] {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            (self.start, self.end) = (0, self.end - self.start);
        }
        if self.buf.len() - self.end < READ_CHUNK / 2 {
            self.buf.resize(self.buf.len() * 2, 0);
        }
        &mut self.buf[self.end..]
    }

    /// `read` bytes were written at the front of [`Self::room`].
    pub(super) fn filled(&mut self, read: usize) {
        self.end += read;
    }
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
