"""What watching costs: ``python benchmarks/watch_overhead.py [--widths 256 1024] [--repeats 5] [--steps 300]``.

Two measurements, written to ``benchmarks/results/watch-overhead-<date>.{json,md}``:

1. **The agent's own cost per step**, in this process: :meth:`stepwise_agent.watch.WatchRecorder.on_step` (the
   row, memory read, trigger, buffered write) called ``--calls`` times on a steady clock, median of 5 rounds, in
   microseconds and as a share of a 10 ms step.
2. **Whole runs, bare vs watched**, interleaved (bare, watched, watched, bare, … per repeat, per width): the same
   steady script (``benchmarks/scripts/watch_steps.py``) times its own steps either way; a run's figure is the
   median of its steps after the first 10; the overhead is the median over repeats of watched ÷ bare − 1 of the
   runs paired in the same repeat, with the smallest and largest such ratio as its spread. Both arms get the
   same ``OMP_NUM_THREADS=1`` and ``OMP_WAIT_POLICY=PASSIVE`` (the runner's default) so only watching differs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SCRIPT = ROOT / "benchmarks" / "scripts" / "watch_steps.py"
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}


def agent_cost_us(calls: int) -> list[tuple[float, float]]:
    """µs inside ``on_step`` of the watch recorder per step — the median call, and the mean (the rare call that waits for the writer, and
    whatever preemption a busy machine adds) — five rounds; each simulated step lasts 1 ms (a busy wait), captures
    refused."""
    from stepwise_agent.trigger import RateLimit
    from stepwise_agent.watch import WatchRecorder

    rounds = []
    for _ in range(5):
        with tempfile.TemporaryDirectory() as tmp:
            # no capture (a busy machine's jitter can fire a rule): only the recording and the rules are timed
            rec = WatchRecorder(Path(tmp), limit_mb=100_000.0, rate=RateLimit(per_hour=0))
            rec.data_ms = lambda: 0.1
            rec.start()
            inside = []
            for _ in range(calls):
                until = time.perf_counter() + 1e-3
                while time.perf_counter() < until:
                    pass
                t = time.perf_counter()
                rec.on_step(1.0, 64)
                inside.append((time.perf_counter() - t) * 1e6)
            rounds.append((statistics.median(inside), statistics.mean(inside)))
            rec.stop()
    return rounds


def one_run(width: int, steps: int, watched: bool, store: Path) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "walls.json"
        script = [sys.executable, str(SCRIPT), "--width", str(width), "--steps", str(steps), "--out", str(out)]
        command = [sys.executable, "-m", "stepwise", "watch", "--store", str(store), "--", *script] if watched \
            else script
        subprocess.run(command, check=True, capture_output=True, env=ENV, cwd=ROOT, timeout=1800)
        walls = json.loads(out.read_text())
    return statistics.median(walls[10:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--widths", type=int, nargs="+", default=[256, 768])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--calls", type=int, default=3_000)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--agent-only", action="store_true", help="measure the agent's cost alone (no runs)")
    args = parser.parse_args()
    cost = agent_cost_us(args.calls)
    medians, means = [c[0] for c in cost], [c[1] for c in cost]
    said = (f"Agent's own cost per step: median call **{statistics.median(medians):.1f} µs** (rounds "
            f"{', '.join(f'{c:.1f}' for c in medians)}), mean **{statistics.median(means):.1f} µs** (flushes and "
            f"preemption included; rounds {', '.join(f'{c:.1f}' for c in means)}) = "
            f"{statistics.median(means) / 100:.2f}% of a 10 ms step; 5 rounds of {args.calls} calls.")
    print(said)
    runs: dict[int, dict[str, list[float]]] = {w: {"bare": [], "watched": []} for w in args.widths}
    with tempfile.TemporaryDirectory() as store:
        for r in range(0 if args.agent_only else args.repeats):
            for w in args.widths:
                order = (False, True) if r % 2 == 0 else (True, False)
                for watched in order:
                    ms = one_run(w, args.steps, watched, Path(store))
                    runs[w]["watched" if watched else "bare"].append(ms)
                    print(f"repeat {r + 1} width {w} {'watched' if watched else 'bare   '}: {ms:.3f} ms/step", flush=True)
    rows = []
    for w, arms in ({} if args.agent_only else runs).items():
        ratios = [b / a - 1.0 for a, b in zip(arms["bare"], arms["watched"])]
        rows.append({"width": w, "bare_ms": arms["bare"], "watched_ms": arms["watched"],
                     "bare_median_ms": statistics.median(arms["bare"]),
                     "watched_median_ms": statistics.median(arms["watched"]),
                     "overhead_median": statistics.median(ratios), "overhead_min": min(ratios),
                     "overhead_max": max(ratios)})
    stamp = dt.date.today().isoformat()
    doc = {"date": stamp, "cpu_count": os.cpu_count(), "steps": args.steps, "repeats": args.repeats,
           "agent_us_median_call": medians, "agent_us_mean": means, "runs": rows}
    args.out.mkdir(parents=True, exist_ok=True)
    stamp += "-agent" if args.agent_only else ""
    (args.out / f"watch-overhead-{stamp}.json").write_text(json.dumps(doc, indent=2))
    lines = [f"# Watch overhead, {stamp} ({os.cpu_count()} cores, {args.repeats} interleaved repeats, "
             f"{args.steps} steps a run)", "",
             said,
             "", "| width | bare ms/step (median) | watched ms/step (median) | overhead median | min | max |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['width']} | {r['bare_median_ms']:.3f} | {r['watched_median_ms']:.3f} | "
              f"{r['overhead_median']:+.2%} | {r['overhead_min']:+.2%} | {r['overhead_max']:+.2%} |" for r in rows]
    (args.out / f"watch-overhead-{stamp}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
