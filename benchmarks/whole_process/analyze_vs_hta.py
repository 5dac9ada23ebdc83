"""Issue 32: the whole command a user runs, ``stepwise analyze TRACE --json``, against HTA's load + temporal
breakdown in its own process, on the 216k-event shared trace. Fresh processes, interleaved, medians.

Each round runs every contender once, in a fresh process, in an order that alternates from round to round
(ABC, CBA, ...), so the machine's load falls on all of them alike. Wall time is the whole process, interpreter
start to exit, as this parent sees it; CPU time (user + sys, the process and the children it waited for, its parse
workers included) comes from ``wait4``. A warm-up run of each contender is not counted (bytecode compiled, file
in the page cache). Stepwise's output is checked to be the ``analyze --json`` document; the summary cache is off
(``STEPWISE_SUMMARY_CACHE=off``; it applies to folders of ranks only, never to one trace file, so this changes
nothing here but says so).

    python benchmarks/whole_process/analyze_vs_hta.py [--repeats 7] [--before /path/to/other/checkout] [--floor]
        [--out FILE]

``--before`` adds a second Stepwise contender run from another checkout (the code before a change), so that
before/after and HTA share the same rounds. HTA runs under the python of ``.venv-bench``
(``benchmarks/_hta_env.sh``; ``--hta-python`` names another).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO.parent / "shared" / "traces" / "communication" / "hta_v100_2rank_216k_events.json.gz"
HTA_SCRIPT = (
    "import sys\nfrom hta.trace_analysis import TraceAnalysis\n"
    "TraceAnalysis(trace_dir=sys.argv[1]).get_temporal_breakdown(visualize=False)\n"
)
TARGET = 8.0
FLOOR_TRACE = REPO.parent / "shared" / "traces" / "edge" / "hta_amd_mi250_rocm_minitoy.json.gz"
FLOOR = "stepwise, a tiny trace (fixed cost)"


def run_once(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, bytes]:
    """(wall s, CPU s of the process and its waited-for children, stdout) of one fresh process."""
    with tempfile.TemporaryFile() as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=str(cwd), env=env, stdout=out, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        err = proc.stderr.read() if proc.stderr else b""
        code = os.waitstatus_to_exitcode(status)
        proc.returncode = code
        if code != 0:
            raise RuntimeError(f"{cmd[:4]} exited {code}: {err.decode(errors='replace')[-400:]}")
        out.seek(0)
        return wall, usage.ru_utime + usage.ru_stime, out.read()


def check_analyze(stdout: bytes) -> str:
    doc = json.loads(stdout)
    if not isinstance(doc, dict) or "steps" not in doc or "bottleneck" not in doc:
        raise ValueError("no analyze --json document on stdout")
    return f"{doc['steps']} steps, ranks {doc['ranks']}, bottleneck {doc['bottleneck']}, step {doc['step_time_ms']} ms"


def spread(xs: list[float]) -> str:
    q = statistics.quantiles(xs, n=4) if len(xs) >= 2 else [xs[0]] * 3
    return (
        f"{statistics.median(xs):.3f} s  [min {min(xs):.3f}, IQR {q[0]:.3f}-{q[2]:.3f}, max {max(xs):.3f}] "
        f"n={len(xs)}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", type=Path, default=TRACE)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument(
        "--before", type=Path, help="another checkout whose `stepwise analyze` runs as 'before'"
    )
    ap.add_argument("--python", default=sys.executable, help="the python that runs Stepwise")
    ap.add_argument("--hta-python", default=str(REPO / ".venv-bench" / "bin" / "python"))
    ap.add_argument("--out", type=Path, help="also write the report here")
    ap.add_argument(
        "--skip-hta", action="store_true", help="Stepwise only (a quick before/after with --before)"
    )
    ap.add_argument(
        "--floor",
        action="store_true",
        help="also time the same command on a trace of a few hundred events (FLOOR_TRACE): its fixed cost "
        "(interpreter, imports, rules, output), which no faster parse can remove",
    )
    ap.add_argument(
        "--no-bytecode-cache",
        action="store_true",
        help="Stepwise compiles its sources on every run (PYTHONDONTWRITEBYTECODE=1), as in a checkout "
        "where bytecode is never written",
    )
    args = ap.parse_args()

    env = {**os.environ, "STEPWISE_SUMMARY_CACHE": "off"}
    env.pop("PYTHONPATH", None)  # each checkout's own code: `python -m` from its root puts it first
    hta_env = dict(env)
    if not args.no_bytecode_cache:
        # Bytecode cached, as in any installed package (pip compiles it) and in a checkout after its first run;
        # HTA's site-packages were compiled by pip. Kept in a folder of its own, so no checkout is written to.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(Path(tempfile.gettempdir()) / "stepwise-wp-pycache")
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    work = Path(tempfile.mkdtemp(prefix="stepwise-wp-"))
    hta_dir = work / "hta"
    hta_dir.mkdir()
    (hta_dir / "rank-0.json.gz").symlink_to(args.trace.resolve())
    analyze = [args.python, "-m", "stepwise", "analyze", str(args.trace), "--json"]
    contenders: dict[str, tuple[list[str], Path]] = {"stepwise (this checkout)": (analyze, REPO)}
    if args.before is not None:
        contenders["stepwise (before)"] = (analyze, args.before.resolve())
    if args.floor:
        contenders[FLOOR] = (
            [args.python, "-m", "stepwise", "analyze", str(FLOOR_TRACE), "--json"],
            REPO,
        )
    if not args.skip_hta:
        contenders["HTA load + temporal breakdown"] = (
            [args.hta_python, "-c", HTA_SCRIPT, str(hta_dir)],
            REPO,
        )
    envs = {name: hta_env if name.startswith("HTA") else env for name in contenders}

    lines: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    load0 = os.getloadavg()
    say(f"trace: {args.trace} ({args.trace.stat().st_size / 2**20:.1f} MiB on disk)")
    say(
        "Stepwise's bytecode: "
        + (
            "not cached (compiled on every run)"
            if args.no_bytecode_cache
            else f"cached in {env['PYTHONPYCACHEPREFIX']} (written by the warm-up run)"
        )
    )
    say(
        f"machine: {os.cpu_count()} cores; load average at start {load0[0]:.2f} / {load0[1]:.2f} / {load0[2]:.2f} "
        "(1/5/15 min)"
    )
    for name, (cmd, cwd) in contenders.items():
        say(f"{name}: {' '.join(cmd[:2] + ['...'] if name.startswith('HTA') else cmd)}  (in {cwd})")
    for name, (cmd, cwd) in contenders.items():  # warm-up, not counted; checks the output once
        _, _, stdout = run_once(cmd, cwd, envs[name])
        say(f"warm-up {name}: " + (check_analyze(stdout) if "stepwise" in name else "done"))
    walls: dict[str, list[float]] = {n: [] for n in contenders}
    cpus: dict[str, list[float]] = {n: [] for n in contenders}
    names = list(contenders)
    for r in range(args.repeats):
        order = names if r % 2 == 0 else names[::-1]
        row = []
        for name in order:
            cmd, cwd = contenders[name]
            wall, cpu, stdout = run_once(cmd, cwd, envs[name])
            if "stepwise" in name:
                check_analyze(stdout)
            walls[name].append(wall)
            cpus[name].append(cpu)
            row.append(
                f"{name.split(' ')[0] if 'HTA' in name else name} {wall:.3f} s (cpu {cpu:.3f})"
            )
        say(f"round {r + 1}/{args.repeats} (load {os.getloadavg()[0]:.2f}): " + "; ".join(row))
    load1 = os.getloadavg()
    say("")
    say(
        "whole process, wall time (median [min, IQR, max]) and CPU time (median, user+sys incl. parse workers):"
    )
    for name in names:
        say(f"  {name:<32} {spread(walls[name])}; cpu {statistics.median(cpus[name]):.3f} s")
    if args.floor:
        fixed, whole = statistics.median(walls[FLOOR]), statistics.median(walls[names[0]])
        say(
            f"fixed cost: {fixed:.3f} s of this checkout's {whole:.3f} s is the command on a tiny trace; reading and "
            f"analysing the events takes the other {whole - fixed:.3f} s"
            + (
                ""
                if args.skip_hta
                else f"; even a parse that took no time would leave HTA / stepwise at "
                f"{statistics.median(walls[names[-1]]) / fixed:.2f}x"
            )
        )
    if len(names) == 2 and args.skip_hta:
        after, before = names
        say(
            f"before / after: {statistics.median(walls[before]) / statistics.median(walls[after]):.3f}x by median "
            f"wall time, {statistics.median(cpus[before]) / statistics.median(cpus[after]):.3f}x by CPU time"
        )
    hta = names[-1]
    for name in [] if args.skip_hta else [n for n in names[:-1] if n != FLOOR]:
        ratio = statistics.median(walls[hta]) / statistics.median(walls[name])
        cpu_ratio = statistics.median(cpus[hta]) / statistics.median(cpus[name])
        per_round = sorted(h / s for h, s in zip(walls[hta], walls[name]))
        say(
            f"HTA / {name}: {ratio:.2f}x by median wall time (per-round ratios {per_round[0]:.2f}-"
            f"{per_round[-1]:.2f}, median {statistics.median(per_round):.2f}), {cpu_ratio:.2f}x by CPU time; "
            f"target >= {TARGET:.0f}x: {'MET' if ratio >= TARGET else 'MISSED'}"
        )
    say(
        f"load average at end {load1[0]:.2f} / {load1[1]:.2f} / {load1[2]:.2f}; summary cache off "
        "(it applies to folders of ranks only)"
    )
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
