"""Run ``optimize`` on the sample workloads at bench size on this machine and print each ladder, then a
side-by-side summary against the targets of issue 4.

    .venv/bin/python benchmarks/fixes.py [--workloads data_bound,compute_bound,...] [--rounds 2] [--trials 3]
                                         [--steps memory_bound=12] [--json bench-out/fixes.json]

Targets (per-sample throughput, measured A/B with interleaved trials): data_bound >= 2.0x, compute_bound
>= 1.5x, communication_bound >= 1.5x, memory_bound from out_of_memory to ok within its budget at no more than
15% cost per sample (against the same spec with the budget lifted). Every run is kept in the run store
(``--store``, default a fresh temporary folder), so each number can be traced to its run folder.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from advisors.experiments.experiment import Policy
from advisors.experiments.results.ladder_report import ladder_json, ladder_table
from advisors.experiments.results.recording import ladder_record
from advisors.experiments.optimize import Ladder, optimize
from advisors.experiments.script_strategy import ScriptStrategy
from advisors.experiments.trials import script_runner
from cli.workloads import workload_spec
from profilers.store.runs import RunStore

TARGETS: dict[str, tuple[str, float]] = {  # workload -> (what, threshold)
    "data_bound": ("speedup", 2.0),
    "compute_bound": ("speedup", 1.5),
    "communication_bound": ("speedup", 1.5),
    "memory_bound": ("oom_to_ok_cost", 0.15),
}
DEFAULT_STEPS = {
    "memory_bound": 12
}  # its bench steps take seconds each; 12 in all leaves 5 timed steps per trial


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--workloads", default=",".join(TARGETS), help="comma-separated (default: the four targets)"
    )
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--size", default="bench")
    p.add_argument(
        "--steps",
        action="append",
        default=[],
        metavar="WORKLOAD=N",
        help="override a workload's steps",
    )
    p.add_argument("--store", type=Path, help="run store (default: a new temporary folder)")
    p.add_argument("--json", type=Path, help="also write every ladder as JSON here")
    return p.parse_args(argv)


def verdict(name: str, ladder: Ladder) -> tuple[str, str]:
    """(measured figure, target met?) for the summary table."""
    what, threshold = TARGETS.get(name, ("speedup", 1.0))
    if what == "oom_to_ok_cost":
        first = ladder.rungs[0].experiment if ladder.rungs else None
        if first is None or first.baseline.outcomes[0].status != "out_of_memory":
            return "baseline did not run out of memory", "n/a"
        fix = next(
            (r.experiment for r in ladder.rungs if r.experiment.kept and r.experiment.reference),
            None,
        )
        if fix is None or fix.speedup is None:
            return "still out_of_memory", "NO"
        cost = 1 / fix.speedup - 1
        return f"out_of_memory -> ok, cost {cost:+.1%}/sample", "yes" if cost <= threshold else "NO"
    total = ladder.total_speedup
    return f"{total:.2f}x per-sample throughput", "yes" if total >= threshold else "NO"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    steps = {**DEFAULT_STEPS, **{k: int(v) for k, v in (s.split("=", 1) for s in args.steps)}}
    store = RunStore(args.store or Path(tempfile.mkdtemp(prefix="stepwise-fixes-")))
    print(
        f"# benchmarks/fixes.py · {platform.processor() or platform.machine()} · {os.cpu_count()} cores · "
        f"trials {args.trials} per arm · rounds {args.rounds} · store {store.root}"
    )
    results: dict[str, Any] = {}
    summary: list[tuple[str, str, str, str, float]] = []
    for name in args.workloads.split(","):
        spec = workload_spec(
            store.root, name, args.size, steps=steps.get(name)
        )  # the workload's script
        t0 = time.monotonic()
        ladder = optimize(
            spec,
            script_runner(store),
            rounds=args.rounds,
            policy=Policy(trials=args.trials),
            device="cpu",
            on_progress=_progress(name),
            strategy=ScriptStrategy(spec, "cpu"),
        )
        minutes = (time.monotonic() - t0) / 60
        print(f"\n## {name} ({args.size}, {spec.total_steps} steps, {minutes:.1f} min)")
        rec = ladder_record(ladder, args.rounds)
        print("\n".join(ladder_table(ladder, rec)))
        figure, met = verdict(name, ladder)
        target = TARGETS.get(name, ("", 0.0))
        summary.append((name, figure, f"{target[0]} {target[1]:g}", met, minutes))
        results[name] = ladder_json(ladder, rec)
    print("\n## summary (side by side)")
    print(f"{'workload':<22}{'measured':<46}{'target':<22}{'met':<5}{'minutes':>8}")
    for name, figure, target, met, minutes in summary:
        print(f"{name:<22}{figure:<46}{target:<22}{met:<5}{minutes:>8.1f}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1, default=str))
    return 0


def _progress(name: str):  # type: ignore[no-untyped-def]
    def show(event: dict[str, Any]) -> None:
        if event.get("phase") == "experiment":
            print(
                f"  [{name}] round {event['round']}: trying {event['fix']}",
                file=sys.stderr,
                flush=True,
            )

    return show


if __name__ == "__main__":
    sys.exit(main())
