//! The Lua scripts, each one round trip. Loaded once per server and called by SHA
//! (`redis::Script` falls back to loading on `NOSCRIPT`). Only keys and arguments vary:
//! no caller text is ever spliced into a script.

use std::sync::LazyLock;

use redis::Script;

const PRELUDE: &str = include_str!("prelude.lua");
const HELPERS: &str = include_str!("helpers.lua");
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

fn with_prelude(body: &str) -> Script {
    Script::new(&format!(
        "{PRELUDE}\n{}",
        body.replacen(HELPERS_MARK, HELPERS, 1)
    ))
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
