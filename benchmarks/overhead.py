"""Instrumentation overhead: the same spec with and without Stepwise's instrumentation, side by side.

    .venv/bin/python benchmarks/overhead.py [--workload compute_bound] [--size bench] [--trials 5]

Runs are interleaved (bare, instrumented, bare, instrumented, …) so drift on the machine hits both alike.
Throughput is samples per second of rank 0 over the same step indices in both runs: after the warm-up steps
and outside the profiler's warm-up+active window (``profilers.run.instrument.profiled_steps``), where the target
is ≥ 95% of the bare run. The steps inside the window are reported too, for information.

The verdict uses the advisor's own statistics (:func:`advisors.stats.throughput_ratio`): the geometric mean
of the pairs' ratios with a bootstrap interval over pairs and steps. On a noisy machine the interval says
whether the trials can tell the overhead from the noise at all ("not resolved" when it straddles the target).

Then, per workload, ``overhead_blocks.py`` measures the same steady-state instrumentation inside one process
(alternating ON/OFF blocks of steps, ABBA), whose interval is narrow enough to resolve a few percent; see its
docstring for what each measurement covers. ``--no-blocks`` skips it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from advisors.stats import Trial, throughput_ratio
from profilers.run import runner
from profilers.run.instrument import BARE_ENV, profiled_steps
from profilers.store.runs import RunStore
from sample_runs import get_workload

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:  # loaded by file path (the tests) as well as run as a script
    sys.path.append(_HERE)
import overhead_blocks as blocks  # noqa: E402

TARGET = 0.95


def throughput(steps: pd.DataFrame, keep: set[int]) -> float:
    rows = steps[(steps["rank"] == 0) & steps["step"].isin(keep)]
    seconds = rows["wall_ms"].sum() / 1000.0
    return float(rows["samples"].sum() / seconds) if seconds > 0 else float("nan")


def as_trial(steps: pd.DataFrame, keep: set[int]) -> Trial | None:
    """Rank 0's steps in ``keep`` as a :class:`Trial` (per-step walls, samples per step)."""
    rows = steps[(steps["rank"] == 0) & steps["step"].isin(keep)]
    walls = tuple(float(w) for w in rows["wall_ms"] if w > 0)
    return Trial(walls, float(rows["samples"].median())) if walls else None


def one_run(spec, store: RunStore, bare: bool) -> pd.DataFrame:
    env = {BARE_ENV: "1"} if bare else {}
    handle = runner.start(spec, store, label=f"overhead-{'bare' if bare else 'instrumented'}", extra_env=env)
    result = runner.follow(handle)
    if result.status != "ok":
        sys.exit(f"error: {spec.workload} run ended {result.status}: {result.error}")
    return store.read_steps(handle.run_id)


def measure(workload: str, size: str, trials: int, store: RunStore) -> list[dict[str, float]]:
    spec = get_workload(workload).spec(size)
    window = set(profiled_steps(spec))
    outside = {s for s in range(spec.warmup_steps, spec.steps) if s not in window}
    rows = []
    for trial in range(trials):
        bare = one_run(spec, store, bare=True)
        inst = one_run(spec, store, bare=False)
        rows.append({
            "trial": trial + 1,
            "bare": throughput(bare, outside),
            "instrumented": throughput(inst, outside),
            "bare_window": throughput(bare, window),
            "instrumented_window": throughput(inst, window),
            "trials": (as_trial(bare, outside), as_trial(inst, outside)),
        })
    return rows


def report(workload: str, rows: list[dict[str, float]]) -> bool:
    print(f"\n{workload}: samples/s of rank 0 (outside the profiling window | inside it)")
    print(f"{'trial':>5} {'bare':>10} {'instr.':>10} {'ratio':>7}   {'bare':>10} {'instr.':>10} {'ratio':>7}")
    ratios = []
    for r in rows:
        ratio, wratio = r["instrumented"] / r["bare"], r["instrumented_window"] / r["bare_window"]
        ratios.append(ratio)
        print(f"{r['trial']:>5} {r['bare']:>10.1f} {r['instrumented']:>10.1f} {ratio:>7.3f}   "
              f"{r['bare_window']:>10.1f} {r['instrumented_window']:>10.1f} {wratio:>7.3f}")
    med = statistics.median(ratios)
    print(f"median ratio outside the window: {med:.3f} (min {min(ratios):.3f}, max {max(ratios):.3f})")
    pairs = [r["trials"] for r in rows if None not in r["trials"]]
    est = throughput_ratio([a for a, _ in pairs], [b for _, b in pairs])
    ok = est.point >= TARGET
    resolved = est.low >= TARGET or est.high < TARGET
    print(f"paired ratio (geometric mean of {len(pairs)} pairs): {est.point:.3f}, {est.level:.0%} interval "
          f"[{est.low:.3f}, {est.high:.3f}]; target ≥ {TARGET:.2f}: {'met' if ok else 'NOT met'}"
          + ("" if resolved else " — not resolved: the interval straddles the target, the noise is larger "
                                 "than the overhead; add --trials"))
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", action="append", help="workload name (repeatable); default compute_bound, data_bound")
    ap.add_argument("--size", default="bench")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--blocks", type=int, default=48, help="ON/OFF blocks of the in-process measurement")
    ap.add_argument("--no-blocks", action="store_true", help="skip the in-process ON/OFF measurement")
    args = ap.parse_args()
    ok = True
    names = args.workload or ["compute_bound", "data_bound"]
    with tempfile.TemporaryDirectory(prefix="stepwise-overhead-") as tmp:
        store = RunStore(Path(tmp))
        for name in names:
            ok &= report(name, measure(name, args.size, args.trials, store))
    if not args.no_blocks:
        print("\nIn one process, steady-state instrumentation ON vs OFF in alternating blocks (overhead_blocks.py):")
        for name in names:
            ok &= blocks.report(in_fresh_process(name, args.size, args.blocks), TARGET)
    return 0 if ok else 1


def in_fresh_process(workload: str, size: str, n_blocks: int) -> dict:
    """``overhead_blocks.measure`` in its own interpreter (as a worker would be: fresh heap, runner's env)."""
    script = Path(__file__).with_name("overhead_blocks.py")
    out = subprocess.run([sys.executable, str(script), "--workload", workload, "--size", size,
                          "--blocks", str(n_blocks), "--json"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])[0]


if __name__ == "__main__":
    sys.exit(main())
