"""The same fixes judged again and again, on a quiet machine and beside a bursty CPU hog (issue 29).

    .venv/bin/python benchmarks/verdicts/contended.py [--repeats 5] [--out benchmarks/results/NAME]

Two fixes on the ``data_bound`` workload at its tiny size, each measured ``--repeats`` times in each condition,
conditions interleaved (quiet, hog, quiet, hog …) so both see the same machine otherwise:

- ``cache_decoded``: a real gain (the decode leaves the step);
- ``foreach_optimizer``: no gain there (the optimizer of a loader-bound step is a sliver of it).

The hog is one process that spins for 1–3 s, sleeps for 1–3 s, and again (random lengths, its own seed per
experiment), so some trials of a pair meet it and others do not — the case that kept a fix on one contended
trial. The verdicts, speed-ups, intervals, pair ratios and pairs left out go to a table; the rule checked is that
the no-gain fix is never kept under the hog.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from advisors.experiments.experiment import Experiment, Policy, run_experiment
from advisors.experiments.results.outcome import render
from advisors.experiments.script_strategy import ScriptStrategy
from advisors.experiments.trials import script_runner
from advisors.fixes import FIXES
from cli.workloads import workload_spec
from profilers.store.runs import RunStore

FIX_IDS = ("cache_decoded", "foreach_optimizer")


def _hog(seed: int, stop: Any) -> None:
    """Busy for 1–3 s, idle for 1–3 s, until told to stop."""
    rng = random.Random(seed)
    while not stop.is_set():
        until = time.monotonic() + rng.uniform(1.0, 3.0)
        while time.monotonic() < until and not stop.is_set():
            sum(i * i for i in range(2000))
        stop.wait(rng.uniform(1.0, 3.0))


def measure(fix_id: str, hog: bool, seed: int, store: RunStore) -> dict[str, Any]:
    spec = workload_spec(
        store.root, "data_bound", measure_steps=5
    )  # the workload's script, as optimize runs it
    stop = mp.Event()
    proc = mp.Process(target=_hog, args=(seed, stop), daemon=True) if hog else None
    if proc is not None:
        proc.start()
    started = time.time()
    try:
        how = ScriptStrategy(spec, "cpu")
        exp: Experiment[Any] = run_experiment(
            spec,
            FIXES[fix_id],
            script_runner(store, experiment=f"bench-{seed}"),
            Policy(trials=3),
            apply=how.apply,
            proof=how.proof(FIXES[fix_id]),
        )
    finally:
        if proc is not None:
            stop.set()
            proc.join(10)
    r = exp.ratio
    loads = [
        o.load.others_cores
        for o in (*exp.baseline.outcomes, *exp.patched.outcomes)
        if o.load is not None
    ]
    return {
        "fix": fix_id,
        "condition": "hog" if hog else "quiet",
        "seed": seed,
        "outcome": render(exp.outcome),
        "kept": exp.kept,
        "speedup": None if r is None else round(r.point, 3),
        "interval": None if r is None else [round(r.low, 3), round(r.high, 3)],
        "before_samples_per_s": None if r is None else round(r.before or 0, 1),
        "after_samples_per_s": None if r is None else round(r.after or 0, 1),
        "pairs": [] if r is None else [round(p, 3) for p in r.pairs],
        "runs": len(exp.baseline.outcomes) + len(exp.patched.outcomes),
        "others_cores": [round(x, 2) for x in loads],
        "seconds": round(time.time() - started, 1),
        "load_avg": round(os.getloadavg()[0], 2),
    }


def table(rows: list[dict[str, Any]]) -> list[str]:
    out = [
        "| fix | condition | # | outcome | speed-up | interval | pairs | runs | others' cores per run (mean) |",
        "|---|---|---:|---|---:|---|---|---:|---|",
    ]
    for i, r in enumerate(rows):
        word = r["outcome"] if len(r["outcome"]) < 90 else r["outcome"][:87] + "…"
        others = ", ".join(f"{x:.2f}" for x in r["others_cores"])
        out.append(
            f"| {r['fix']} | {r['condition']} | {r['seed']} | {word} | {r['speedup']} | {r['interval']} | "
            f"{', '.join(str(p) for p in r['pairs'])} | {r['runs']} | {others} |"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--fixes", default=",".join(FIX_IDS))
    p.add_argument("--out", type=Path, help="write NAME.json and NAME.md")
    args = p.parse_args(argv)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="contended-") as tmp:
        store = RunStore(Path(tmp))
        for rep in range(args.repeats):
            for fix_id in args.fixes.split(","):
                for hog in (False, True):
                    row = measure(fix_id, hog, rep, store)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    lines = [
        f"# Verdicts on a quiet machine and beside a bursty CPU hog — {time.strftime('%Y-%m-%d %H:%M')}",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}; data_bound tiny, 3 pairs per experiment (up to 5).",
        "",
        *table(rows),
        "",
    ]
    never = [
        r for r in rows if r["fix"] == "foreach_optimizer" and r["condition"] == "hog" and r["kept"]
    ]
    lines.append(
        f"no-gain fix kept under the hog: {len(never)} of "
        f"{sum(1 for r in rows if r['fix'] == 'foreach_optimizer' and r['condition'] == 'hog')}"
    )
    print("\n".join(lines))
    if args.out is not None:
        args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1))
        args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    return 1 if never else 0


if __name__ == "__main__":
    sys.exit(main())
