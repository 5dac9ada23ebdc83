"""Batch-size predictions against measurement in two parts, quiet and beside a bursty CPU hog (issue 43).

    .venv/bin/python benchmarks/quality_load.py [--case noise_script] [--seeds 3] [--hog] [--budget 300]

For the case (:func:`benchmarks.time_to_quality_noise.case`: the repository's own to-quality benchmark scripts),
every k in 2, 4, 8 is predicted (steps-to-target ratio from B_simple × step-time ratio from the paired throughput
probe) and then run, interleaved with the baseline's seeds, to the same target; the table prints both in the same
two parts and whether the prediction's time ratio lies within 1.5× of the measured one. ``--hog`` runs a bursty
CPU hog throughout: one busy-looping process, 2 s on and 2 s off, started before the baseline.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from advisors.experiments.to_quality import store_curve_runner, to_quality  # noqa: E402
from advisors.experiments.to_quality_goodput import planner, store_probe  # noqa: E402
from advisors.experiments.to_quality_report import quality_json  # noqa: E402
from advisors.quality.target import Budget  # noqa: E402
from benchmarks.time_to_quality_noise import KS, _every_k, case  # noqa: E402
from profilers.store.runs import RunStore  # noqa: E402

WITHIN = 1.5  # the target: each prediction within 1.5× of the measurement


def _hog(on_s: float = 2.0, off_s: float = 2.0) -> None:
    while True:
        end = time.time() + on_s
        while time.time() < end:
            pass
        time.sleep(off_s)


def _f(x: Any) -> str:
    return "—" if x is None else f"{x:.2f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--case", default="noise_script")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--hog", action="store_true")
    p.add_argument(
        "--budget",
        default=None,
        help="the arms' budget instead of the case's: '300' steps or '6s' "
        "(the target is the baseline's value at 80%% of it: in steps, the load cannot move it; '6s' "
        "was noise_script's own until 2026-11-29, which put it on the curve's floor)",
    )
    p.add_argument("--json-out", type=Path, default=None, help="also write the ladder's JSON here")
    args = p.parse_args(argv)
    hog = mp.Process(target=_hog, daemon=True) if args.hog else None
    if hog is not None:
        hog.start()
    try:
        store = RunStore(Path(tempfile.mkdtemp(prefix="quality-load-")))
        spec, budget, apply, resolve, applied, metric = case(args.case, store)
        if args.budget:
            budget = Budget.parse(args.budget)

        def say(s: str) -> None:
            print(f"  … {s}", file=sys.stderr, flush=True)

        t0 = time.time()
        plan = _every_k(
            planner(store_probe(store), budget.steps, KS, on_progress=say), spec, budget
        )
        ladder = to_quality(
            spec,
            [],
            store_curve_runner(store, budget, metric),
            budget,
            args.seeds,
            metric=metric,
            apply=apply,
            on_progress=say,
            resolve=resolve,
            applied=applied,
            planner=plan,
        )
        out = quality_json(ladder, metric)
        if args.json_out is not None:
            args.json_out.write_text(json.dumps(out, indent=1, default=str))
    finally:
        if hog is not None:
            hog.terminate()
    load = os.getloadavg()
    print(
        f"## {args.case}, {'beside a bursty hog (1 process, 2 s on / 2 s off)' if args.hog else 'no hog'}; "
        f"{args.seeds} seeds; budget {out['budget']['stated']}; target {out['target']['value']:.4g}; "
        f"{time.time() - t0:.0f} s; load average at the end {load[0]:.1f}"
    )
    ns = out["noise_scale"] or {}
    print(
        f"B_simple {_f(ns.get('b_simple'))}; probe pairs: "
        + "; ".join(
            f"×{k}: {_f(v.get('step_ms_x1'))} → {_f(v.get('step_ms'))} ms, others {_f(v.get('others_cores_x1'))}/"
            f"{_f(v.get('others_cores'))} cores{' (probed again)' if v.get('probed_again') else ''}"
            for k, v in (ns.get("probe_pairs") or {}).items()
        )
    )
    print(
        "| k | predicted steps × step time = time | measured steps × step time → time | pred/meas time | "
        f"within {WITHIN}× | load before/after (cores) | outcome |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in out["rounds"]:
        pr, m = r.get("predicted") or {}, r.get("measured") or {}
        ratio = (
            pr.get("time_ratio") / m["time_ratio"]
            if pr.get("time_ratio") and m.get("time_ratio")
            else None
        )
        ok = "—" if ratio is None else ("yes" if 1 / WITHIN <= ratio <= WITHIN else "NO")
        ld = r.get("load") or {}
        loads = "/".join(
            ",".join(_f(x) for x in ld.get(side) or []) for side in ("before", "after")
        )
        print(
            f"| {pr.get('k', r['fix'])} | {_f(pr.get('steps_ratio'))} × {_f(pr.get('step_time_ratio'))} = "
            f"{_f(pr.get('time_ratio'))} | {_f(m.get('steps_ratio'))} × {_f(m.get('step_time_ratio'))} → "
            f"{_f(m.get('time_ratio'))} | {_f(ratio)} | {ok} | {loads} | {r['outcome']} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
