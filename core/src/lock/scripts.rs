//! The Lua scripts, each one round trip. Loaded once per server and called by SHA
//! (`redis::Script` falls back to loading on `NOSCRIPT`). Only keys and arguments vary:
//! no caller text is ever spliced into a script.

use std::sync::LazyLock;

use redis::Script;

const PRELUDE: &str = include_str!("prelude.lua");
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

/// The prelude, then `body` with the helpers spliced in. The helpers use the grant functions,
/// which go where the body says `--[[grant]]` (ahead of a fast path that grants) or else just
/// before the helpers.
fn assemble(body: &str) -> String {
    let body = if body.contains(GRANT_MARK) {
        body.replacen(GRANT_MARK, GRANT, 1)
            .replacen(HELPERS_MARK, HELPERS, 1)
    } else {
        body.replacen(HELPERS_MARK, &format!("{GRANT}\n{HELPERS}"), 1)
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
    fn every_script_defines_the_grant_functions_once_and_before_the_helpers() {
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
            if !body.contains(HELPERS_MARK) {
                continue;
            }
            let script = assemble(body);
            let grant = script.matches("local function grant_next").count();
            assert_eq!(grant, 1, "grant functions spliced {grant} times");
            let helpers_at = script.find("local function purge").unwrap();
            assert!(script.find("local function first_writer").unwrap() < helpers_at);
        }
    }
}
