"""Redis' own cost per uncontended acquire+release cycle: our scripts against the raw minimum.

Runs one call at a time, as a lock user does, on a throwaway redis-server (loopback, free port;
or $REDIS_URL, whose command statistics it resets), and reads Redis' time from INFO
commandstats (the top-level commands; calls inside a script are part of its time). It isolates
what the server costs from what a client costs; bench/run.sh measures the whole cycle. Run with
the bench venv (bench/python/run.sh builds it):

    .venv-bench/bin/python bench/python/script_cost.py [cycles]
    .venv-bench/bin/python bench/python/script_cost.py --instructions [cycles]

Times on a shared 2-core machine move by +-30 % between repetitions. --instructions counts
instead the CPU instructions Redis executes inside the commands (valgrind's callgrind, one
redis-server per variant): the same figure in every run, so a change of a few % in a script
shows (a cycle of ours: ~86k instructions, ~30 µs here).

Variants:
  raw          SET key token NX PX + EVALSHA compare-and-delete (1 key, 1 argument)
  ours         core/src/lock/acquire.lua + release.lua as the core sends them (6 keys, 5 and 3
               arguments), a writer with a 10 s lease and nobody waiting
  same calls   the redis.call()s our fast paths make, in a bare script with the same keys and
               arguments: what the bookkeeping around them (prelude, argument parsing) costs
  fenced min   the least any script-based fenced lock does: INCR of a counter + SET NX PX of
               the token, then GET + DEL (no metadata, fairness, reentrancy or hold count),
               with our keys and arguments: the floor of the "ours" design
  empty        two scripts that call nothing, with our keys and arguments: the price of a
               script call itself
  contended    (per section, not per cycle) two owners hand the lock to each other: each
               section is one attempt that finds the lock held (and announces the waiter) and
               one release that grants it to that waiter, whose client listens
  contended 4  the same with four owners, as in P4: the release grants the lock to the head of
               a queue of three, and the releaser's next attempt joins the queue behind the
               other two (their writers' queue exists when it announces)
"""

import contextlib
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python-demo"))
from _server import redis_url

LOCK_DIR = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "core", "src", "lock"
)


def lock_script(name: str, mode: str = "w") -> str:
    """A script as core/src/lock/scripts.rs assembles it (the write one of a per-mode script)."""
    prelude, clock, grant, helpers, body = (
        Path(LOCK_DIR, part).read_text()
        for part in ("prelude.lua", "clock.lua", "grant.lua", "helpers.lua", name)
    )
    if "--[[grant]]" in body:
        body = body.replace("--[[grant]]", clock + "\n" + grant, 1)
        body = body.replace("--[[helpers]]", helpers, 1)
    elif "--[[clock]]" in body:
        body = body.replace("--[[clock]]", clock, 1)
        body = body.replace("--[[helpers]]", grant + "\n" + helpers, 1)
    elif "--[[helpers]]" in body:
        body = body.replace("--[[helpers]]", clock + "\n" + grant + "\n" + helpers, 1)
    else:
        body = clock + "\n" + body
    body = body.replace("--[[mode]]", f"local mode = '{mode}'", 1)
    return prelude + "\n" + body


SAME_CALLS_ACQUIRE = """
if redis.call('EXISTS', KEYS[1], KEYS[3], KEYS[4]) == 0 then
  local fence = string.format('%d', redis.call('INCR', KEYS[6]))
  redis.call('HSET', KEYS[1], 'wo', ARGV[1], 'wc', '1', 'wf', fence, 'wm', ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return fence .. ':1'
end
return -2"""
SAME_CALLS_RELEASE = """
local s = redis.call('HMGET', KEYS[1], 'wo', 'wc', 'wf', 'q')
if s[1] == ARGV[3] and s[2] == '1' and not s[4] then
  redis.call('DEL', KEYS[1])
  return s[3]
end
return -1"""
FENCED_MIN_ACQUIRE = """
local fence = string.format('%d', redis.call('INCR', KEYS[6]))
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return fence .. ':1' end
return -2"""
FENCED_MIN_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[3] then
  redis.call('DEL', KEYS[1])
  return 0
end
return -1"""
COMPARE_AND_DELETE = (
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
)


def main() -> None:
    args = sys.argv[1:]
    if args and args[0] == "--instructions":
        count_instructions(int(args[1]) if len(args) > 1 else 2000)
        return
    if args and args[0] == "--run":  # one variant, unmeasured (for --instructions)
        run_one(args[1], int(args[2]), int(args[3]))
        return
    cycles = int(args[0]) if args else 4000
    with redis_url() as url:
        measure(redis.Redis.from_url(url), cycles)


STATE = "redlock:{bench}"
KEYS = [STATE, STATE + ":exp", STATE + ":ww", STATE + ":wr", STATE + ":wi", "redlock:fence:{x}"]
CHANNEL = STATE + ":ch"
TOKEN = "0f8e3c52-96a1-4b7e-9b52-6b1f4c2d9e01:client-1"
META = '{"host":"bench-host","pid":12345,"thread":"main","at":1790000000000}'
ACQUIRE_ARGS = [TOKEN, 10_000, META, 0, ""]
RELEASE_ARGS = [CHANNEL, 2_000, TOKEN]
VARIANTS = ["raw", "ours", "same calls", "fenced min", "empty", "contended", "contended 4"]


def variants(r: redis.Redis, only: str | None = None) -> dict:
    """Each variant (or only one) as a function that runs one cycle (contended: one section)
    from a free lock; the contended one starts with its holder in and cleans up once done."""

    def pair(acquire: str, release: str):
        a, b = r.script_load(acquire), r.script_load(release)

        def cycle():
            r.evalsha(a, 6, *KEYS, *ACQUIRE_ARGS)
            r.evalsha(b, 6, *KEYS, *RELEASE_ARGS)

        return cycle

    def raw():
        cad = r.script_load(COMPARE_AND_DELETE)

        def cycle():
            r.set("raw", TOKEN, nx=True, px=10_000)
            r.evalsha(cad, 1, "raw", TOKEN)

        return cycle

    factories = {
        "raw": raw,
        "ours": lambda: pair(lock_script("acquire.lua"), lock_script("release.lua")),
        "same calls": lambda: pair(SAME_CALLS_ACQUIRE, SAME_CALLS_RELEASE),
        "fenced min": lambda: pair(FENCED_MIN_ACQUIRE, FENCED_MIN_RELEASE),
        "empty": lambda: pair("return '1:1'", "return 0"),
        "contended": lambda: contended(r),
        "contended 4": lambda: contended(r, owners=4),
    }
    made = {name: make() for name, make in factories.items() if only in (None, name)}
    # A cycle that failed would measure something else: check each once.
    for name, run in made.items():
        if name == "ours" or is_contended(name):
            repeat(name, run, 1)
    assert r.exists(*KEYS[:5]) == 0
    return made


def is_contended(name: str) -> bool:
    return name.startswith("contended")


def contended(r: redis.Redis, owners: int = 2):
    """One hand-off per section: the holder's release grants the lock to the first waiter
    (whose client listens on its grant channel), and an attempt that finds the lock held
    announces a waiter. Two owners: the waiter attempts, then the holder releases. More: the
    others queue first; each section the holder releases, then attempts again behind them."""
    acquire_sha = r.script_load(lock_script("acquire.lua"))
    release_sha = r.script_load(lock_script("release.lua"))
    names = "abcd"[:owners]
    tokens = {o: o + TOKEN[1:] for o in names}
    listener = r.pubsub()
    listener.subscribe(*(f"{CHANNEL}:c{o}" for o in names))
    state = {"seq": 0}

    def attempt(owner: str):
        state["seq"] += 1
        waiter = f"c{owner}-{state['seq']}:{tokens[owner]}"
        return r.evalsha(acquire_sha, 6, *KEYS, tokens[owner], 10_000, META, 1_000, waiter)

    def release(owner: str) -> bool:
        """Whether the owner's last hold ended (the reply is then text: its fence, and
        ":client" when it granted the lock)."""
        reply = r.evalsha(release_sha, 6, *KEYS, CHANNEL, 2_000, tokens[owner])
        return isinstance(reply, bytes)

    def drain():
        while listener.get_message(timeout=0):
            pass

    def sections(count: int):
        assert attempt(names[0]).endswith(b":1")
        holder, queue = names[0], list(names[1:])
        if owners > 2:
            for waiter in queue:
                assert attempt(waiter) > 0
        for _ in range(count):
            if owners == 2:
                assert attempt(queue[0]) > 0  # busy: retry after ms, and announced
            assert release(holder)  # granted to the queue's head
            if owners > 2:
                assert attempt(holder) > 0  # the releaser queues again, last
            queue.append(holder)
            holder = queue.pop(0)
            drain()
        assert r.hget(STATE, "wo").decode() == tokens[holder]
        # Hand the lock down the rest of the queue, then free it.
        for _ in range(len(queue) if owners > 2 else 0):
            assert release(holder)
            holder = queue.pop(0)
            assert r.hget(STATE, "wo").decode() == tokens[holder]
        assert release(holder)
        drain()
        assert r.exists(*KEYS[:5]) == 0

    return sections


def measure(r: redis.Redis, cycles: int) -> None:
    run_of = variants(r)
    usec: dict[str, list[float]] = {name: [] for name in run_of}
    for _ in range(3):  # interleaved repetitions
        for name, run in run_of.items():
            r.config_resetstat()
            repeat(name, run, cycles)
            stats = r.info("commandstats")
            total = sum(stats.get(c, {}).get("usec", 0) for c in ("cmdstat_evalsha", "cmdstat_set"))
            usec[name].append(total / cycles)
    print(f"Redis time per acquire+release cycle ({cycles} cycles x 3 reps, one call a time)")
    for name, values in usec.items():
        spread = " ".join(f"{v:.1f}" for v in values)
        unit = "µs per section" if is_contended(name) else "µs"
        print(f"  {name:11s} median {statistics.median(values):5.1f} {unit}   ({spread})")


def repeat(name: str, run, cycles: int) -> None:
    if is_contended(name):
        run(cycles)  # (plus one acquire and one release around them)
    else:
        for _ in range(cycles):
            run()


def run_one(name: str, port: int, cycles: int) -> None:
    repeat(name, variants(redis.Redis(port=port), name)[name], cycles)


def count_instructions(cycles: int) -> None:
    """Instructions Redis executes inside EVALSHA and SET, per cycle, one server per variant."""
    for tool in ("valgrind", "redis-server"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} not found (scripts/setup.sh installs both)")
    print(f"Redis instructions per acquire+release cycle (callgrind, {cycles} cycles)")
    for name in VARIANTS:
        # The one-off part (script loads, the checks) is subtracted: a run of no cycles.
        total = instructions(name, cycles) - instructions(name, 0)
        unit = "per section" if is_contended(name) else "per cycle"
        print(f"  {name:11s} {total / cycles:9.0f} instructions {unit}")


def instructions(name: str, cycles: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        server = subprocess.Popen(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
             "--toggle-collect=evalShaCommand", "--toggle-collect=setCommand",
             "redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", tmp],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            wait_for(port)
            run = [sys.executable, __file__, "--run", name, str(port), str(cycles)]
            subprocess.run(run, check=True)
        finally:
            # (ConnectionError: the shutdown's own reply, or a server that is gone.)
            with contextlib.suppress(redis.ConnectionError):
                redis.Redis(port=port).shutdown(nosave=True)
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()
                raise
        return callgrind_total(out)


def wait_for(port: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            redis.Redis(port=port).ping()
            return
        except redis.ConnectionError:
            time.sleep(0.1)
    raise SystemExit("redis-server under valgrind did not start")


def callgrind_total(path: str) -> int:
    with open(path) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise SystemExit(f"no totals in {path}")


if __name__ == "__main__":
    main()
