//! The Lua scripts, each one round trip. Called by SHA; a call the server answers with
//! `NOSCRIPT` (a restart, a failover or `SCRIPT FLUSH` forgot it) loads the script and is sent
//! again, as an `EVAL` of the source if it was forgotten once more (see `calls`). Only keys and
//! arguments vary: no caller text is ever spliced into a script.

use std::sync::LazyLock;

use redis::Script;

use super::Mode;

const PRELUDE: &str = include_str!("prelude.lua");
const CLOCK: &str = include_str!("clock.lua");
const GRANT: &str = include_str!("grant.lua");
const HELPERS: &str = include_str!("helpers.lua");
const CLOCK_MARK: &str = "--[[clock]]";
const GRANT_MARK: &str = "--[[grant]]";
const HELPERS_MARK: &str = "--[[helpers]]";
const MODE_MARK: &str = "--[[mode]]";

pub(crate) struct Scripts {
    /// acquire.lua and release.lua once per mode, [write, read]: the mode is written into the
    /// script rather than sent with every call (Redis builds ARGV anew for each call).
    acquire: [LuaScript; 2],
    release: [LuaScript; 2],
    pub extend: LuaScript,
    pub renew: LuaScript,
    pub state: LuaScript,
    pub inspect: LuaScript,
    pub force_unlock: LuaScript,
    pub unregister_waiter: LuaScript,
}

/// One assembled script: its SHA, for calls, and its source, for a call the server answers with
/// `NOSCRIPT`.
pub(crate) struct LuaScript {
    sha: Box<str>,
    source: Box<str>,
}

impl LuaScript {
    fn new(source: String) -> Self {
        LuaScript {
            sha: Script::new(&source).get_hash().into(),
            source: source.into(),
        }
    }

    pub(crate) fn sha(&self) -> &str {
        &self.sha
    }

    pub(crate) fn source(&self) -> &str {
        &self.source
    }
}

/// The prelude, then `body` with the clock, the grant functions and the helpers spliced in, in
/// that order (each uses the ones before): all three where the body says `--[[helpers]]`, or
/// the clock and the grant functions earlier where it says `--[[grant]]` (ahead of a fast path
/// that grants), or the clock alone earlier where it says `--[[clock]]` (ahead of a fast path
/// that reads it). A body with no mark gets the clock right after the prelude.
fn assemble(body: &str) -> String {
    let body = if body.contains(GRANT_MARK) {
        body.replacen(GRANT_MARK, &format!("{CLOCK}\n{GRANT}"), 1)
            .replacen(HELPERS_MARK, HELPERS, 1)
    } else if body.contains(CLOCK_MARK) {
        body.replacen(CLOCK_MARK, CLOCK, 1).replacen(
            HELPERS_MARK,
            &format!("{GRANT}\n{HELPERS}"),
            1,
        )
    } else if body.contains(HELPERS_MARK) {
        body.replacen(HELPERS_MARK, &format!("{CLOCK}\n{GRANT}\n{HELPERS}"), 1)
    } else {
        format!("{CLOCK}\n{body}")
    };
    format!("{PRELUDE}\n{body}")
}

fn with_prelude(body: &str) -> LuaScript {
    LuaScript::new(assemble(body))
}

/// `body`, which says `--[[mode]]` where its mode is defined, once for writes and once for reads.
fn per_mode(body: &str) -> [LuaScript; 2] {
    [Mode::Write, Mode::Read].map(|mode| with_prelude(&with_mode(body, mode)))
}

fn with_mode(body: &str, mode: Mode) -> String {
    let definition = format!("local mode = '{}'", mode.as_arg());
    body.replacen(MODE_MARK, &definition, 1)
}

impl Scripts {
    pub(crate) fn acquire(&self, mode: Mode) -> &LuaScript {
        &self.acquire[mode_index(mode)]
    }

    pub(crate) fn release(&self, mode: Mode) -> &LuaScript {
        &self.release[mode_index(mode)]
    }
}

fn mode_index(mode: Mode) -> usize {
    match mode {
        Mode::Write => 0,
        Mode::Read => 1,
    }
}

pub(crate) static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    acquire: per_mode(include_str!("acquire.lua")),
    release: per_mode(include_str!("release.lua")),
    extend: with_prelude(include_str!("extend.lua")),
    renew: with_prelude(include_str!("renew.lua")),
    state: with_prelude(include_str!("state.lua")),
    inspect: with_prelude(include_str!("inspect.lua")),
    force_unlock: with_prelude(include_str!("force_unlock.lua")),
    unregister_waiter: with_prelude(include_str!("unregister_waiter.lua")),
});

#[cfg(test)]
mod tests {
    use super::*;

    const BODIES: [&str; 8] = [
        include_str!("acquire.lua"),
        include_str!("release.lua"),
        include_str!("extend.lua"),
        include_str!("renew.lua"),
        include_str!("state.lua"),
        include_str!("inspect.lua"),
        include_str!("force_unlock.lua"),
        include_str!("unregister_waiter.lua"),
    ];

    #[test]
    fn the_per_mode_scripts_define_their_mode_once_before_using_it() {
        for body in [include_str!("acquire.lua"), include_str!("release.lua")] {
            for (mode, letter) in [(Mode::Write, 'w'), (Mode::Read, 'r')] {
                let script = assemble(&with_mode(body, mode));
                let definition = format!("local mode = '{letter}'");
                assert_eq!(script.matches(&definition).count(), 1);
                assert!(!script.contains(MODE_MARK));
                let line = script.lines().position(|l| l == definition);
                let first_use = script.lines().position(|l| l.contains("mode =="));
                assert!(
                    line.is_some() && line < first_use,
                    "mode defined as code before use"
                );
            }
        }
        let [write, read] = &SCRIPTS.acquire;
        assert_ne!(write.sha(), read.sha());
    }

    #[test]
    fn every_script_defines_the_clock_and_the_grant_functions_once_and_before_their_users() {
        for body in BODIES {
            let script = assemble(body);
            assert_eq!(script.matches("local function now()").count(), 1);
            let clock_at = script.find("local function now()").unwrap();
            assert!(
                script[..clock_at].find("now()").is_none(),
                "the clock is used before it is defined"
            );
            if !body.contains(HELPERS_MARK) {
                continue;
            }
            let grant = script.matches("local function grant_next").count();
            assert_eq!(grant, 1, "grant functions spliced {grant} times");
            let helpers_at = script.find("local function purge").unwrap();
            assert!(script.find("local function first_writer").unwrap() < helpers_at);
        }
    }

    /// Every `'WORD'` in upper case in `script`: the commands and options it sends.
    fn command_words(script: &str) -> Vec<&str> {
        let mut words = Vec::new();
        let mut rest = script;
        while let Some(open) = rest.find('\'') {
            rest = &rest[open + 1..];
            let len = rest.bytes().take_while(u8::is_ascii_uppercase).count();
            if len >= 2 && rest[len..].starts_with('\'') {
                words.push(&rest[..len]);
            }
        }
        words
    }

    /// Redis 6.2 is still widely deployed: every command and option word the scripts use must
    /// exist in Redis 5.0 (the first to replicate scripts by effects). Newer words (PEXPIRE's
    /// GT, SET's KEEPTTL, GETDEL, ZRANGE's BYSCORE, ...) fail this list on purpose.
    #[test]
    fn the_scripts_use_only_redis_5_commands_and_options() {
        const REDIS_5: [&str; 29] = [
            "DEL",
            "EXISTS",
            "GET",
            "HDEL",
            "HEXISTS",
            "HGET",
            "HINCRBY",
            "HMGET",
            "HSET",
            "HVALS",
            "INCR",
            "PEXPIRE",
            "PEXPIREAT",
            "PTTL",
            "PUBLISH",
            "TIME",
            "UNLINK",
            "ZADD",
            "ZCARD",
            "ZCOUNT",
            "ZPOPMIN",
            "ZRANGE",
            "ZRANGEBYSCORE",
            "ZREM",
            "ZREMRANGEBYSCORE",
            "ZSCORE",
            "NX",
            "WITHSCORES",
            "LIMIT",
        ];
        assert_eq!(
            command_words("redis.call('PEXPIRE', W, ttl, 'GT')"),
            ["PEXPIRE", "GT"]
        );
        let mut seen = 0;
        for body in BODIES {
            for word in command_words(&assemble(body)) {
                assert!(REDIS_5.contains(&word), "'{word}' is not in Redis 5.0");
                seen += 1;
            }
        }
        assert!(seen > 100, "only {seen} command words found");
    }
}
