//! The Lua scripts, each one round trip. Loaded once per server and called by SHA
//! (`redis::Script` falls back to loading on `NOSCRIPT`). Only keys and arguments vary:
//! no caller text is ever spliced into a script.

use std::sync::LazyLock;

use redis::Script;

const PRELUDE: &str = include_str!("prelude.lua");
const CLOCK: &str = include_str!("clock.lua");
const GRANT: &str = include_str!("grant.lua");
const HELPERS: &str = include_str!("helpers.lua");
const GRANT_MARK: &str = "--[[grant]]";
const HELPERS_MARK: &str = "--[[helpers]]";

pub(crate) struct Scripts {
    pub acquire: Script,
    pub release: Script,
    pub extend: Script,
    pub renew: Script,
    pub state: Script,
    pub inspect: Script,
    pub force_unlock: Script,
    pub unregister_waiter: Script,
}

/// The prelude, then `body` with the clock, the grant functions and the helpers spliced in, in
/// that order (each uses the ones before): all three where the body says `--[[helpers]]`, or
/// the clock and the grant functions earlier where it says `--[[grant]]` (ahead of a fast path
/// that grants). A body with neither mark gets the clock right after the prelude.
fn assemble(body: &str) -> String {
    let body = if body.contains(GRANT_MARK) {
        body.replacen(GRANT_MARK, &format!("{CLOCK}\n{GRANT}"), 1)
            .replacen(HELPERS_MARK, HELPERS, 1)
    } else if body.contains(HELPERS_MARK) {
        body.replacen(HELPERS_MARK, &format!("{CLOCK}\n{GRANT}\n{HELPERS}"), 1)
    } else {
        format!("{CLOCK}\n{body}")
    };
    format!("{PRELUDE}\n{body}")
}

fn with_prelude(body: &str) -> Script {
    Script::new(&assemble(body))
}

pub(crate) static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    acquire: with_prelude(include_str!("acquire.lua")),
    release: with_prelude(include_str!("release.lua")),
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

    #[test]
    fn every_script_defines_the_clock_and_the_grant_functions_once_and_before_their_users() {
        for body in [
            include_str!("acquire.lua"),
            include_str!("release.lua"),
            include_str!("extend.lua"),
            include_str!("renew.lua"),
            include_str!("state.lua"),
            include_str!("inspect.lua"),
            include_str!("force_unlock.lua"),
            include_str!("unregister_waiter.lua"),
        ] {
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
}
