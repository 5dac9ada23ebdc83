"""Oversubscribed threads on a busy machine: a CPU hog beside a training script, which thread fix works, and the
fix as ``optimize`` finds and measures it.

    .venv/bin/python benchmarks/verdicts/threads.py [--hogs 1] [--iters 40] [--skip 5] [--repeats 3]
                                                    [--trials 3] [--steps 10] [--fix FIX_ID] [--store DIR]
                                                    [--skip-direct] [--skip-optimize] [--json OUT]

Part 1, direct: ``benchmarks/scripts/tiny_gpt_train.py`` (minGPT-sized) run alone, its own ``iter_dt`` lines
read, the first ``--skip`` iterations dropped, in four set-ups interleaved ``--repeats`` times: torch's default
threads beside the hog; ``OMP_NUM_THREADS=1`` in its environment (what the launcher gives it); a wrapper that
imports torch, calls ``torch.set_num_threads(1)`` and runs the script (what the agent does at boot, after torch
sized its pool); and default threads on the machine without the hog, for reference.

A fifth set-up, default threads under ``OMP_WAIT_POLICY=PASSIVE``: waiting threads sleep instead of spinning,
which hides most of the oversubscription's cost. Stepwise's launcher sets no policy: that is the
``omp_passive_waits`` fix, measured in part 2 with ``--fix omp_passive_waits``.

Part 2, ``python -m advisors optimize --json --rounds 1 --trials T --steps S -- python tiny_gpt_train.py`` while
the hog runs: the baseline's diagnosis (HOST004 expected, with its evidence), the fix it tries and the measured
speed-up with its 95% interval (after ÷ before samples/s, interleaved trials); ``--wait-policy`` sets the policy
the runs start with (the caller's environment otherwise: none, libgomp's spinning default).

The hog is ``--hogs`` processes each spinning on one core, started here and stopped by their pids at the end.
The machine is shared: the load average at start and end is printed, and other programs count as load too.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SCRIPT = HERE.parent / "scripts" / "tiny_gpt_train.py"
ITER = re.compile(r"iter_dt ([0-9.]+)ms")
#: the direct set-up with passive waits (what the omp_passive_waits fix gives its patched arm)
PASSIVE = "default threads, OMP_WAIT_POLICY=PASSIVE"
WRAPPER = (
    "import runpy, sys, torch; torch.set_num_threads(1); sys.argv = sys.argv[1:]; "
    "runpy.run_path(sys.argv[0], run_name='__main__')"
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--hogs", type=int, default=1, help="processes spinning one core each beside the script"
    )
    p.add_argument("--iters", type=int, default=40)
    p.add_argument("--skip", type=int, default=5, help="first iterations left out (warm-up)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--steps", type=int, default=10, help="timed steps per optimize trial")
    p.add_argument("--skip-optimize", action="store_true")
    p.add_argument("--skip-direct", action="store_true")
    p.add_argument(
        "--fix",
        action="append",
        default=[],
        metavar="FIX_ID",
        help="optimize --fix: the fixes to measure (default: the diagnosis' choice, in its order)",
    )
    p.add_argument(
        "--store", type=Path, help="keep optimize's runs here (default: a temporary folder)"
    )
    p.add_argument(
        "--wait-policy",
        choices=("ACTIVE", "PASSIVE"),
        help="OMP_WAIT_POLICY for optimize's runs (default: none, as a user's environment has it)",
    )
    p.add_argument("--json", type=Path)
    return p.parse_args(argv)


def start_hogs(n: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def stop_hogs(hogs: list[subprocess.Popen[bytes]]) -> None:
    for h in hogs:
        os.kill(h.pid, signal.SIGTERM)
        h.wait()


def direct(setup: str, iters: int, skip: int) -> list[float]:
    """The script's own per-iteration times (ms) in one set-up, warm-up left out."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY")
    }
    cmd = [sys.executable, str(SCRIPT), "--iters", str(iters)]
    if setup == PASSIVE:
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    elif setup == "OMP_NUM_THREADS=1":
        env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    elif setup == "torch.set_num_threads(1) after import":
        cmd = [sys.executable, "-c", WRAPPER, str(SCRIPT), "--iters", str(iters)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    return [float(m.group(1)) for m in ITER.finditer(out)][skip:]


def part1(args: argparse.Namespace) -> dict[str, list[float]]:
    """Each set-up's median iteration time per repeat (ms), the hog on except for the quiet reference."""
    setups = (
        "default threads",
        "OMP_NUM_THREADS=1",
        "torch.set_num_threads(1) after import",
        PASSIVE,
    )
    medians: dict[str, list[float]] = {s: [] for s in (*setups, "default threads, no hog")}
    for _ in range(args.repeats):
        hogs = start_hogs(args.hogs)
        try:
            time.sleep(1.0)
            for s in setups:
                medians[s].append(statistics.median(direct(s, args.iters, args.skip)))
        finally:
            stop_hogs(hogs)
        time.sleep(1.0)
        medians["default threads, no hog"].append(
            statistics.median(direct("default threads", args.iters, args.skip))
        )
    return medians


def part2(args: argparse.Namespace, store: Path) -> dict[str, Any]:
    """``optimize`` of the script while the hog runs."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY")
    }
    if args.wait_policy:
        env["OMP_WAIT_POLICY"] = args.wait_policy
    env["PATH"] = (
        f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # `python` is this one
    )
    cmd = [
        sys.executable,
        "-m",
        "advisors",
        "optimize",
        "--json",
        "--store",
        str(store),
        "--rounds",
        "1",
        "--trials",
        str(args.trials),
        "--steps",
        str(args.steps),
        *(a for f in args.fix for a in ("--fix", f)),
        "--",
        "python",
        str(SCRIPT),
        "--iters",
        "100000",
    ]
    hogs = start_hogs(args.hogs)
    started = time.monotonic()
    try:
        time.sleep(1.0)
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE.parent.parent, env=env)
    finally:
        stop_hogs(hogs)
    if proc.returncode not in (0, 3):
        return {"error": proc.stderr.strip()[-3000:]}
    out = json.loads(proc.stdout)
    out["seconds"] = round(time.monotonic() - started, 1)
    return out


def report(
    p1: dict[str, list[float]] | None,
    p2: dict[str, Any] | None,
    args: argparse.Namespace,
    load: tuple[float, float],
) -> list[str]:
    lines = [
        f"# threads on a busy machine ({os.cpu_count()} cores, {args.hogs} hog process(es) beside the script)",
        f"load average 1 min: {load[0]:.2f} at start, {load[1]:.2f} at end",
        "",
    ]
    if p1:
        base = statistics.median(p1["default threads"])
        lines += [
            f"## direct: {SCRIPT.name}, median iter_dt (ms) of iterations {args.skip}..{args.iters - 1}, "
            f"{args.repeats} repeats interleaved",
            f"{'set-up':<42}{'median':>9}{'min':>9}{'max':>9}  speed-up",
        ]
        for s, values in p1.items():
            med = statistics.median(values)
            lines.append(
                f"{s:<42}{med:>9.1f}{min(values):>9.1f}{max(values):>9.1f}  {base / med:.2f}x"
            )
        lines.append("")
    if p2 and "error" in p2:
        lines += ["## optimize: failed", p2["error"]]
    elif p2:
        policy = args.wait_policy or "unset (libgomp's spinning default)"
        lines.append(
            f"## optimize --rounds 1 --trials {args.trials} --steps {args.steps}"
            f"{''.join(f' --fix {f}' for f in args.fix)}, OMP_WAIT_POLICY {policy} ({p2['seconds']} s)"
        )
        for r in p2["rounds"]:
            low, high = r.get("interval") or (None, None)
            band = f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else ""
            lines.append(
                f"round: bottleneck {r.get('bottleneck')}, fix {r['fix']}: "
                f"{(r.get('speedup') or 0):.2f}x{band}, {'kept' if r['kept'] else 'not kept'} — {r['reason']}"
            )
            knob = ((r.get("applied") or {}).get("knobs") or {}).get("num_threads")
            if knob:
                lines.append(
                    f"  num_threads: acted={knob['acted']} {'; '.join(knob['evidence']) or knob['why']}"
                )
            if r.get("before") and r.get("after"):
                lines.append(
                    f"  before {r['before'].get('samples_per_s')} samples/s "
                    f"({r['before'].get('runs')} runs), after {r['after'].get('samples_per_s')} "
                    f"({r['after'].get('runs')} runs)"
                )
        lines.append(f"total speed-up {p2.get('total_speedup')}")
    return lines


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    start = os.getloadavg()[0]
    p1 = None if args.skip_direct else part1(args)
    p2 = None
    if not args.skip_optimize:
        with tempfile.TemporaryDirectory(prefix="stepwise-threads-") as tmp:
            p2 = part2(args, args.store or Path(tmp))
    lines = report(p1, p2, args, (start, os.getloadavg()[0]))
    print("\n".join(lines))
    if args.json:
        args.json.write_text(json.dumps({"direct": p1, "optimize": p2}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
