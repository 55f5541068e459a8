//! The scripts' replies, parsed: plain integers and strings, which Redis converts far more
//! cheaply than tables (see acquire.lua).

use redis::{ParsingError, Value};

/// One acquire script reply (see acquire.lua).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AttemptReply {
    Acquired {
        fence: u64,
        count: u32,
    },
    Busy {
        retry_ms: u64,
    },
    /// A reader of this lock asked to write: upgrades are refused.
    UpgradeRefused,
}

impl redis::FromRedisValue for AttemptReply {
    fn from_redis_value(v: Value) -> Result<Self, ParsingError> {
        let parsed = match &v {
            // 'fence:count'
            Value::BulkString(text) => std::str::from_utf8(text)
                .ok()
                .and_then(|t| t.split_once(':'))
                .and_then(|(fence, count)| {
                    Some(AttemptReply::Acquired {
                        fence: fence.parse().ok()?,
                        count: count.parse().ok()?,
                    })
                }),
            Value::Int(-1) => Some(AttemptReply::UpgradeRefused),
            Value::Int(ms) if *ms >= 1 => Some(AttemptReply::Busy {
                retry_ms: *ms as u64,
            }),
            _ => None,
        };
        parsed.ok_or_else(|| format!("unexpected acquire reply {v:?}").into())
    }
}

/// One release script reply (see release.lua).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ReleaseReply {
    /// The owner still has this many holds in this mode.
    Left(u32),
    /// The owner's last hold in this mode ended; it had this fencing token. The release
    /// granted the lock to a waiter of the client `granted_to` (its id), if it did.
    Ended {
        fence: u64,
        granted_to: Option<String>,
    },
    /// The owner held nothing in this mode; every hold of the name with a fence up to `upto`
    /// is gone (a hold with a larger one was taken after this release ran).
    NotHeld { upto: u64 },
}

impl redis::FromRedisValue for ReleaseReply {
    fn from_redis_value(v: Value) -> Result<Self, ParsingError> {
        let parsed = match &v {
            // 'fence' or 'fence:client'
            Value::BulkString(text) => std::str::from_utf8(text).ok().and_then(|text| {
                let (fence, granted_to) = match text.split_once(':') {
                    Some((fence, client)) if !client.is_empty() => (fence, Some(client.into())),
                    Some(_) => return None,
                    None => (text, None),
                };
                Some(ReleaseReply::Ended {
                    fence: fence.parse().ok()?,
                    granted_to,
                })
            }),
            Value::Int(left) if *left > 0 => u32::try_from(*left).ok().map(ReleaseReply::Left),
            Value::Int(below) if *below < 0 => Some(ReleaseReply::NotHeld {
                upto: below.unsigned_abs() - 1,
            }),
            _ => None,
        };
        parsed.ok_or_else(|| format!("unexpected release reply {v:?}").into())
    }
}

/// One extend script reply (see extend.lua): extended, or not held with every hold of the name
/// up to this fence gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ExtendReply {
    Extended,
    NotHeld { upto: u64 },
}

impl redis::FromRedisValue for ExtendReply {
    fn from_redis_value(v: Value) -> Result<Self, ParsingError> {
        match &v {
            Value::Int(1) => Ok(ExtendReply::Extended),
            Value::Int(minus) if *minus <= 0 => Ok(ExtendReply::NotHeld {
                upto: minus.unsigned_abs(),
            }),
            _ => Err(format!("unexpected extend reply {v:?}").into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::FromRedisValue;

    fn parse(v: Value) -> Result<AttemptReply, redis::ParsingError> {
        AttemptReply::from_redis_value(v)
    }

    #[test]
    fn acquire_replies_parse() {
        let text = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        assert_eq!(
            parse(text("9007199254740993:2")),
            Ok(AttemptReply::Acquired {
                fence: 9_007_199_254_740_993,
                count: 2
            })
        );
        assert_eq!(
            parse(Value::Int(250)),
            Ok(AttemptReply::Busy { retry_ms: 250 })
        );
        assert_eq!(parse(Value::Int(-1)), Ok(AttemptReply::UpgradeRefused));
    }

    #[test]
    fn malformed_acquire_replies_are_errors() {
        let text = |s: &[u8]| Value::BulkString(s.to_vec());
        for bad in [
            Value::Int(0),
            Value::Int(-2),
            Value::Nil,
            text(b""),
            text(b"12"),
            text(b"12:"),
            text(b"x:1"),
            text(b"1:99999999999"),
            text(b"\xff:1"),
            Value::Array(vec![Value::Int(1), Value::Int(2), Value::Int(1)]),
        ] {
            assert!(parse(bad.clone()).is_err(), "{bad:?} parsed");
        }
    }

    fn release(v: Value) -> Result<ReleaseReply, ParsingError> {
        ReleaseReply::from_redis_value(v)
    }

    #[test]
    fn release_replies_parse() {
        let text = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        assert_eq!(release(Value::Int(2)), Ok(ReleaseReply::Left(2)));
        assert_eq!(
            release(text("9007199254740993")),
            Ok(ReleaseReply::Ended {
                fence: 9_007_199_254_740_993,
                granted_to: None,
            })
        );
        assert_eq!(
            release(text("12:5f0c9a1e33b2")),
            Ok(ReleaseReply::Ended {
                fence: 12,
                granted_to: Some("5f0c9a1e33b2".into()),
            })
        );
        assert_eq!(
            release(Value::Int(-1)),
            Ok(ReleaseReply::NotHeld { upto: 0 })
        );
        assert_eq!(
            release(Value::Int(-8)),
            Ok(ReleaseReply::NotHeld { upto: 7 })
        );
        assert_eq!(
            release(Value::Int(i64::MIN)),
            Ok(ReleaseReply::NotHeld {
                upto: i64::MAX as u64
            })
        );
        for bad in [
            Value::Int(0),
            Value::Int(1 << 40),
            Value::Nil,
            text(""),
            text("-1"),
            text("x"),
            text("12:"),
            text(":ab"),
            text("x:ab"),
        ] {
            assert!(release(bad.clone()).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn extend_replies_parse() {
        let parse = ExtendReply::from_redis_value;
        assert_eq!(parse(Value::Int(1)), Ok(ExtendReply::Extended));
        assert_eq!(parse(Value::Int(0)), Ok(ExtendReply::NotHeld { upto: 0 }));
        assert_eq!(parse(Value::Int(-5)), Ok(ExtendReply::NotHeld { upto: 5 }));
        for bad in [Value::Int(2), Value::Nil, Value::Okay] {
            assert!(parse(bad.clone()).is_err(), "{bad:?} parsed");
        }
    }
}
