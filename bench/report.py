"""Merges the bench fragments of one run (bench/FRAGMENTS.md) into bench/results/<date>.json,
<date>.md (a table of the goals, then the series of each) and <date>.png (latency per library
for every fragment with samples, and the throughput medians relative to ours). Prints the
markdown. Standard library only, plus matplotlib for the chart (skipped without it).

    python bench/report.py FRAGMENT_DIR --out bench/results --date YYYY-MM-DD[-N] [--machine "text"]
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

DASH = "\u2013"  # en dash: ranges, and "no value"

# -- reading -----------------------------------------------------------------------------------


def warn(message: str) -> None:
    print(f"report.py: {message}", file=sys.stderr)


def number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return None if math.isnan(value) or math.isinf(value) else float(value)


def goal_key(fragment: dict) -> tuple:
    goal = str(fragment.get("goal", ""))
    match = re.fullmatch(r"[Pp](\d+)(.*)", goal)
    title = str(fragment.get("title", ""))
    if match:
        return (0, int(match[1]), match[2], title, fragment.get("_file", ""))
    return (1, 0, goal, title, fragment.get("_file", ""))


def clean_series(series) -> dict | None:
    """One series with median/min/max filled in from its runs where they are missing."""
    if not isinstance(series, dict):
        return None
    s = dict(series)
    s["library"] = str(s.get("library", "?"))
    runs = [v for v in (number(r) for r in s.get("runs") or []) if v is not None]
    for key, fn in (("median", statistics.median), ("min", min), ("max", max)):
        if number(s.get(key)) is None and runs:
            s[key] = fn(runs)
    if not isinstance(s.get("latency_us"), dict):
        s.pop("latency_us", None)
    if not isinstance(s.get("extra"), dict):
        s.pop("extra", None)
    return s


def load(directory: Path) -> list[dict]:
    fragments = []
    for path in sorted(directory.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            warn(f"skipping {path.name}: {e}")
            continue
        if not isinstance(data, dict) or "goal" not in data:
            warn(f"skipping {path.name}: not a fragment (no goal)")
            continue
        series = data.get("series") if isinstance(data.get("series"), list) else []
        data["series"] = [s for s in (clean_series(x) for x in series) if s is not None]
        if not isinstance(data.get("headline"), dict):
            data["headline"] = {}
        data["_file"] = path.name
        fragments.append(data)
    fragments.sort(key=goal_key)
    return fragments


# -- the machine -------------------------------------------------------------------------------


def read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def ping_rtts(fragments: list[dict]) -> list[float]:
    """PING round-trip p50s (µs) that fragments give: top-level ping_rtt_us ({p50} or a
    number), or a series extra ping_rtt_p50_us."""
    found = []
    for f in fragments:
        ping = f.get("ping_rtt_us")
        value = number(ping.get("p50")) if isinstance(ping, dict) else number(ping)
        if value is None:
            for s in f["series"]:
                value = number((s.get("extra") or {}).get("ping_rtt_p50_us"))
                if value is not None:
                    break
        if value is not None:
            found.append(value)
    return found


def machine(fragments: list[dict], text: str | None) -> dict:
    info: dict = {}
    if text:
        info["description"] = text
    cpu = re.search(r"^model name\s*:\s*(.+)$", read("/proc/cpuinfo"), re.M)
    info["cpu"] = cpu[1].strip() if cpu else platform.processor() or platform.machine()
    info["cores"] = os.cpu_count()
    mem = re.search(r"^MemTotal:\s*(\d+)\s*kB", read("/proc/meminfo"), re.M)
    if mem:
        info["memory_gib"] = round(int(mem[1]) / 2**20, 1)
    info["kernel"] = f"{platform.system()} {platform.release()}"
    binary = shutil.which("redis-server")
    if binary:
        try:
            out = subprocess.run(
                [binary, "--version"], capture_output=True, text=True, timeout=10
            ).stdout
            version = re.search(r"v=(\S+)", out)
            info["redis_server"] = version[1] if version else out.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    pings = ping_rtts(fragments)
    if pings:
        info["ping_rtt_p50_us"] = round(statistics.median(pings), 1)
    return info


# -- markdown ----------------------------------------------------------------------------------


def fmt(value) -> str:
    if value is None:
        return DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10000 else str(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return DASH
        a = abs(value)
        if a >= 10000:
            return f"{value:,.0f}"
        if a >= 100:
            return f"{value:.0f}"
        if a >= 10:
            return f"{value:.1f}"
        if a >= 1 or a == 0:
            return f"{value:.2f}"
        return f"{value:.3g}"
    return cell(value)


def cell(value) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def mark(met) -> str:
    return "✅" if met is True else "❌" if met is False else DASH


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


FIRST_EXTRAS = [
    "handoff_p50_rtt",
    "wait_p50_ms",
    "wait_p99_ms",
    "wait_max_ms",
    "hand_changes",
    "redis_cmds_per_section",
]


def markdown(date: str, info: dict, fragments: list[dict], png: str | None) -> str:
    lines = [f"# Bench results {date}", ""]
    bits = [info.get("description")]
    bits += [
        info.get("cpu"),
        f"{info['cores']} cores" if info.get("cores") else None,
        f"{info['memory_gib']} GiB" if info.get("memory_gib") else None,
        info.get("kernel"),
        f"redis-server {info['redis_server']}" if info.get("redis_server") else None,
        f"PING p50 {fmt(info['ping_rtt_p50_us'])} µs" if info.get("ping_rtt_p50_us") else None,
    ]
    lines += ["Machine: " + cell(", ".join(b for b in bits if b)), ""]
    if not fragments:
        return "\n".join([*lines, "No fragments.", ""])
    rows = []
    for f in fragments:
        h = f["headline"]
        rows.append(
            [
                cell(f.get("goal", "?")),
                cell(f.get("title", f["_file"])),
                cell(f.get("target", DASH)),
                cell(h.get("label", DASH)),
                fmt(number(h.get("value"))),
                mark(h.get("met")),
            ]
        )
    lines += table(["goal", "comparison", "target", "headline", "value", "met"], rows)
    if png:
        lines += ["", f"![chart]({png})"]
    for f in fragments:
        lines += ["", f"## {cell(f.get('goal', '?'))}: {cell(f.get('title', f['_file']))}", ""]
        h = f["headline"]
        parts = [f"Target {cell(f['target'])}"] if f.get("target") else []
        if h.get("label") or number(h.get("value")) is not None:
            parts.append(
                f"{cell(h.get('label', 'headline'))} = {fmt(number(h.get('value')))} "
                f"{mark(h.get('met'))}"
            )
        lines.append("; ".join([*parts, f"`{f['_file']}`"]))
        if f.get("notes"):
            lines += ["", f"_{cell(f['notes'])}_"]
        if not f["series"]:
            continue
        metrics = {str(s.get("metric", "")) for s in f["series"]}
        metric = next(iter(metrics)) if len(metrics) == 1 else ""
        better = {s.get("better") for s in f["series"]}
        arrow = {"higher": " ↑", "lower": " ↓"}.get(better.pop()) if len(better) == 1 else ""
        extras = [k for k in FIRST_EXTRAS if any(k in (s.get("extra") or {}) for s in f["series"])]
        for s in f["series"]:
            extras += [k for k in s.get("extra") or {} if k not in extras]
        has_latency = any(s.get("latency_us") for s in f["series"])
        header = [
            "library",
            f"{metric or 'value'} median{arrow or ''}".strip(),
            f"min{DASH}max",
            "runs",
        ]
        if has_latency:
            header += ["p50 µs", "p99 µs"]
        header += extras
        rows = []
        for s in f["series"]:
            lo, hi = number(s.get("min")), number(s.get("max"))
            row = [
                cell(s["library"]) + ("" if metric else f" ({cell(s.get('metric', '?'))})"),
                fmt(number(s.get("median"))),
                f"{fmt(lo)}{DASH}{fmt(hi)}" if lo is not None or hi is not None else DASH,
                str(len(s.get("runs") or [])),
            ]
            if has_latency:
                lat = s.get("latency_us") or {}
                row += [fmt(number(lat.get("p50"))), fmt(number(lat.get("p99")))]
            extra = s.get("extra") or {}
            row += [fmt(extra.get(k)) for k in extras]
            rows.append(row)
        lines += ["", *table(header, rows)]
    return "\n".join(lines) + "\n"


# -- chart -------------------------------------------------------------------------------------


def samples_of(series: dict) -> list[float]:
    lat = series.get("latency_us") or {}
    raw = lat.get("samples") if isinstance(lat.get("samples"), list) else []
    return [v for v in (number(x) for x in raw) if v is not None]


def chart(fragments: list[dict], path: Path, title: str) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        warn("matplotlib is not installed: no chart")
        return False
    with_samples = [f for f in fragments if any(samples_of(s) for s in f["series"])]
    bars = [
        f
        for f in fragments
        if f["series"]
        and number(f["series"][0].get("median"))
        and any(number(s.get("median")) is not None for s in f["series"])
    ]
    ncols = 2 if len(with_samples) > 1 else 1
    nrows = math.ceil(len(with_samples) / ncols) + (1 if bars else 0)
    if nrows == 0:
        warn("no latency samples nor medians: no chart")
        return False
    width = 7.5 * ncols if not bars else max(7.5 * ncols, min(20, 3 + 0.55 * bar_count(bars)))
    fig = plt.figure(figsize=(width, 4.6 * nrows))
    grid = fig.add_gridspec(nrows, ncols)
    fig.suptitle(title, fontsize=13)
    for i, f in enumerate(with_samples):
        latency_panel(fig.add_subplot(grid[i // ncols, i % ncols]), f)
    if bars:
        throughput_panel(fig.add_subplot(grid[nrows - 1, :]), bars)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def bar_count(fragments: list[dict]) -> int:
    return sum(len(f["series"]) + 1 for f in fragments)


def wrap(text: str, width: int) -> str:
    return "\n".join(textwrap.wrap(text, width)) or text


def latency_panel(ax, fragment: dict) -> None:
    series = [s for s in fragment["series"] if samples_of(s)]
    data = [samples_of(s) for s in series]
    positive = [v for d in data for v in d if v > 0]
    log = bool(positive) and max(positive) / min(positive) > 10  # a wide spread: log scale
    if log:
        data = [[v for v in d if v > 0] or [min(positive)] for d in data]
    ax.boxplot(
        data,
        whis=(1, 99),
        widths=0.6,
        medianprops={"color": "black"},
        flierprops={"marker": ".", "markersize": 2, "alpha": 0.3},
        patch_artist=True,
        boxprops={"facecolor": "#cfe0f3"},
    )
    ax.set_xticks(range(1, len(series) + 1), [wrap(s["library"], 14) for s in series])
    if log:
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: fmt(float(v))))
        ax.yaxis.set_minor_formatter(NullFormatter())
    for i, d in enumerate(data, start=1):
        p50 = statistics.median(d)
        ax.text(
            i + 0.33,
            p50,
            fmt(p50),
            fontsize=8,
            va="center",
        )
    for patch in ax.patches[:1]:  # ours first
        patch.set_facecolor("#4c8bd6")
    ax.set_ylabel("µs" + (" (log)" if log else ""))
    goal = fragment.get("goal", "?")
    ax.set_title(
        wrap(f"{goal}: {fragment.get('title', fragment['_file'])}", 60)
        + f"\nlatency per library (box p25{DASH}p75, whiskers p1{DASH}p99)",
        fontsize=10,
    )
    ax.grid(axis="y", alpha=0.3)


def throughput_panel(ax, fragments: list[dict]) -> None:
    """Every series' median relative to the fragment's first series (ours), min-max as error
    bars, one group of bars per fragment."""
    x = 0.0
    ticks, labels, groups = [], [], []
    for f in fragments:
        base = number(f["series"][0].get("median"))
        start = x
        for i, s in enumerate(f["series"]):
            median = number(s.get("median"))
            if median is None:
                ticks.append(x)
                labels.append(wrap(s["library"], 14) + "\n(no median)")
                x += 1
                continue
            lo = number(s.get("min"))
            hi = number(s.get("max"))
            lo = median if lo is None else lo
            hi = median if hi is None else hi
            rel = median / base
            err = [[max(0.0, (median - lo) / base)], [max(0.0, (hi - median) / base)]]
            ax.bar(x, rel, 0.8, color="#4c8bd6" if i == 0 else "#b9c3cf", edgecolor="#333")
            ax.errorbar(x, rel, yerr=err, fmt="none", ecolor="black", capsize=3, lw=1)
            ax.annotate(
                fmt(rel),
                (x, max(rel, hi / base)),
                xytext=(0, 2),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize=7,
            )
            ticks.append(x)
            labels.append(wrap(s["library"], 14))
            x += 1
        metric = f["series"][0].get("metric", "")
        better = {"higher": "↑", "lower": "↓"}.get(f["series"][0].get("better"), "")
        groups.append(((start + x - 1) / 2, f"{f.get('goal', '?')} {metric} {better}".strip()))
        x += 1
    ax.axhline(1.0, color="#4c8bd6", lw=0.8, ls="--")
    ax.set_xticks(ticks, labels, rotation=35, ha="right", fontsize=8)
    ax.set_xlim(-0.7, x - 1.3)
    top = ax.get_ylim()[1]
    ax.set_ylim(0, top * 1.12)
    for center, label in groups:
        ax.text(center, top * 1.06, label, ha="center", va="bottom", fontsize=9, fontweight="bold")
    ax.set_ylabel(f"median / ours (min{DASH}max bars)")
    ax.set_title("throughput medians relative to ours, per goal", fontsize=10)
    ax.grid(axis="y", alpha=0.3)


def dumps(data) -> str:
    """JSON with an indent, but every list of numbers (runs, samples) on one line."""
    text = json.dumps(data, indent=1, ensure_ascii=False)
    return NUMBER_LIST.sub(
        lambda m: "[" + ", ".join(x.strip() for x in m[1].split(",")) + "]", text
    )


NUMBER_LIST = re.compile(r"\[\s*((?:-?[\d.eE+-]+,\s*)*-?[\d.eE+-]+)\s*\]")

# -- main --------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fragments", type=Path, help="directory of *.json fragments")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    parser.add_argument(
        "--date",
        default=datetime.date.today().isoformat(),
        help="YYYY-MM-DD, or YYYY-MM-DD-N for the Nth run of a day (names the files)",
    )
    parser.add_argument("--machine", help="a description of the machine, as text")
    args = parser.parse_args()
    day, nth = args.date[:10], args.date[10:]
    try:
        datetime.date.fromisoformat(day)
        if nth and not (nth[0] == "-" and nth[1:].isdigit()):
            raise ValueError
    except ValueError:
        parser.error(f"--date {args.date!r} is not YYYY-MM-DD or YYYY-MM-DD-N")
    if not args.fragments.is_dir():
        parser.error(f"{args.fragments} is not a directory")
    fragments = load(args.fragments)
    if not fragments:
        warn(f"no fragments in {args.fragments}")
    info = machine(fragments, args.machine)
    args.out.mkdir(parents=True, exist_ok=True)
    merged = {
        "date": day,
        "machine": info,
        "fragments": [{k: v for k, v in f.items() if k != "_file"} for f in fragments],
    }
    (args.out / f"{args.date}.json").write_text(dumps(merged), encoding="utf-8")
    png = args.out / f"{args.date}.png"
    drawn = chart(fragments, png, f"redlock-sdk bench {args.date}") if fragments else False
    if not drawn:
        png.unlink(missing_ok=True)  # not a stale chart of an earlier report for that date
    text = markdown(args.date, info, fragments, png.name if drawn else None)
    (args.out / f"{args.date}.md").write_text(text, encoding="utf-8")
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(encoding="utf-8")
    print(text, end="")


if __name__ == "__main__":
    main()
