"""Redis' own time per uncontended acquire+release cycle: our scripts against the raw minimum.

Runs one call at a time, as a lock user does, on a throwaway redis-server (loopback, free port;
or $REDIS_URL, whose command statistics it resets), and reads Redis' time from INFO
commandstats (the top-level commands; calls inside a script are part of its time). It isolates
what the server costs from what a client costs; bench/run.sh measures the whole cycle. Run with
the bench venv (bench/python/run.sh builds it):

    .venv-bench/bin/python bench/python/script_cost.py [cycles]

Variants:
  raw          SET key token NX PX + EVALSHA compare-and-delete (1 key, 1 argument)
  ours         core/src/lock/acquire.lua + release.lua as the core sends them (6 keys, 6 and 4
               arguments), a writer with a 10 s lease and nobody waiting
  same calls   the redis.call()s our fast paths make, in a bare script with the same keys and
               arguments: what the bookkeeping around them (prelude, argument parsing) costs
  fenced min   the least any script-based fenced lock does: INCR of a counter + SET NX PX of
               the token, then GET + DEL (no metadata, fairness, reentrancy or hold count),
               with our keys and arguments: the floor of the "ours" design
  empty        two scripts that call nothing, with our keys and arguments: the price of a
               script call itself
"""

import os
import statistics
import sys
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python-demo"))
from _server import redis_url

LOCK_DIR = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "core", "src", "lock"
)


def lock_script(name: str) -> str:
    """A script as core/src/lock/scripts.rs assembles it."""
    prelude, clock, grant, helpers, body = (
        Path(LOCK_DIR, part).read_text()
        for part in ("prelude.lua", "clock.lua", "grant.lua", "helpers.lua", name)
    )
    if "--[[grant]]" in body:
        body = body.replace("--[[grant]]", clock + "\n" + grant, 1)
        body = body.replace("--[[helpers]]", helpers, 1)
    elif "--[[helpers]]" in body:
        body = body.replace("--[[helpers]]", clock + "\n" + grant + "\n" + helpers, 1)
    else:
        body = clock + "\n" + body
    return prelude + "\n" + body


SAME_CALLS_ACQUIRE = """
if redis.call('EXISTS', KEYS[1], KEYS[3], KEYS[4]) == 0 then
  local fence = redis.call('INCR', KEYS[6])
  redis.call('HSET', KEYS[1], 'wo', ARGV[2], 'wc', 1, 'wf', fence, 'wm', ARGV[4])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return fence .. ':1'
end
return -2"""
SAME_CALLS_RELEASE = """
local s = redis.call('HMGET', KEYS[1], 'wo', 'wc')
local others = s[1] == ARGV[2] and s[2] == '1'
  and redis.call('EXISTS', KEYS[2], KEYS[4], KEYS[4], KEYS[3], KEYS[3], KEYS[3], KEYS[3])
if others == 0 then
  redis.call('DEL', KEYS[1])
  return 0
end
return -1"""
FENCED_MIN_ACQUIRE = """
local fence = redis.call('INCR', KEYS[6])
if redis.call('SET', KEYS[1], ARGV[2], 'NX', 'PX', ARGV[3]) then return fence .. ':1' end
return -2"""
FENCED_MIN_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[2] then
  redis.call('DEL', KEYS[1])
  return 0
end
return -1"""
COMPARE_AND_DELETE = (
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
)


def main() -> None:
    cycles = int(sys.argv[1]) if len(sys.argv) > 1 else 4000
    with redis_url() as url:
        measure(redis.Redis.from_url(url), cycles)


def measure(r: redis.Redis, cycles: int) -> None:
    state = "redlock:{bench}"
    keys = [
        state,
        state + ":exp",
        state + ":ww",
        state + ":wr",
        state + ":wi",
        "redlock:fence:{x}",
    ]
    token = "0f8e3c52-96a1-4b7e-9b52-6b1f4c2d9e01:client-1"
    meta = '{"host":"bench-host","pid":12345,"thread":"main","at":1790000000000}'
    acquire_args = ["w", token, 10_000, meta, 0, ""]
    release_args = ["w", token, state + ":ch", 2_000]

    def pair(acquire: str, release: str):
        a, b = r.script_load(acquire), r.script_load(release)

        def cycle():
            r.evalsha(a, 6, *keys, *acquire_args)
            r.evalsha(b, 6, *keys, *release_args)

        return cycle

    ours = pair(lock_script("acquire.lua"), lock_script("release.lua"))
    same_calls = pair(SAME_CALLS_ACQUIRE, SAME_CALLS_RELEASE)
    fenced_min = pair(FENCED_MIN_ACQUIRE, FENCED_MIN_RELEASE)
    empty = pair("return '1:1'", "return 0")
    cad = r.script_load(COMPARE_AND_DELETE)

    def raw():
        r.set("raw", token, nx=True, px=10_000)
        r.evalsha(cad, 1, "raw", token)

    # A cycle that failed would measure something else: check each once.
    assert r.evalsha(r.script_load(lock_script("acquire.lua")), 6, *keys, *acquire_args)
    assert r.evalsha(r.script_load(lock_script("release.lua")), 6, *keys, *release_args) == 0
    variants = {
        "raw": raw,
        "ours": ours,
        "same calls": same_calls,
        "fenced min": fenced_min,
        "empty": empty,
    }
    usec: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(3):  # interleaved repetitions
        for name, cycle in variants.items():
            r.config_resetstat()
            for _ in range(cycles):
                cycle()
            stats = r.info("commandstats")
            total = sum(stats.get(c, {}).get("usec", 0) for c in ("cmdstat_evalsha", "cmdstat_set"))
            usec[name].append(total / cycles)
    print(f"Redis time per acquire+release cycle ({cycles} cycles x 3 reps, one call a time)")
    for name, values in usec.items():
        spread = " ".join(f"{v:.1f}" for v in values)
        print(f"  {name:11s} median {statistics.median(values):5.1f} µs   ({spread})")


if __name__ == "__main__":
    main()
