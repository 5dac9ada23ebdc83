"""The gradient noise scale's predictions against measurement: for each case, the baseline's B_simple (with its
interval, steps and overhead), then batch × k for k = 2, 4, 8 (the rate by the optimizer's rule), each predicted
from B_simple and the throughput probe, then run (K seeds) and timed to the same target.

    .venv/bin/python benchmarks/time_to_quality.py --only noise_digits,noise_compute_bound,noise_script,noise_script_val

Every case goes through :func:`advisors.experiments.to_quality.to_quality` with the planner of ``optimize
--to-quality`` (:mod:`advisors.experiments.to_quality_goodput`); the only difference is that all three k are run
whatever the plan chose (the plan's choice is printed), so a wrong prediction shows.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from advisors.experiments.to_quality import QualityRun, QualitySpec, store_curve_runner, to_quality
from advisors.experiments.to_quality_goodput import planner, store_probe
from advisors.experiments.results.quality_words import noise_line
from advisors.experiments.to_quality_report import quality_json
from advisors.quality import candidates as cands
from advisors.quality.goodput import GoodputPlan
from advisors.quality.script_candidates import templates
from advisors.quality.target import Budget
from profilers.run.script_spec import ScriptSpec
from profilers.store.runs import RunStore
from cli.workloads import workload_spec
from profilers.run.script_spec import MAX_STEPS

KS = (2, 4, 8)
SCRIPT = Path(__file__).resolve().parents[1] / "tests" / "scripts" / "noisy_regression_train.py"
#: the same kind of problem judged on the validation loss it prints (not the training batch's noise)
VAL_SCRIPT = SCRIPT.with_name("regression_val_train.py")
VAL_METRIC = r"val_loss=([0-9.]+)"


def _every_k(inner: Any, spec: QualitySpec, budget: Budget) -> Any:
    """The product's planner, but every k is run (its choice kept for the printout)."""

    def make(s: QualitySpec, runs: Sequence[QualityRun]) -> GoodputPlan | None:
        got: GoodputPlan | None = inner(s, runs)
        if got is None:
            return None
        if isinstance(s, ScriptSpec):
            every = tuple(templates(k)[0] for k in KS)
        else:
            rule: cands.Scaling = "sqrt" if s.optimizer in ("adam", "adamw") else "linear"
            every = tuple(cands.batch_scaled(s, k, rule, budget.steps) for k in KS)
        return replace(got, candidates=every)

    return make


def case(name: str, store: RunStore) -> tuple[QualitySpec, Budget, Any, Any, Any, str | None]:
    """``(spec, budget, apply, resolve, applied, metric)``."""
    from cli.optimize_quality import script_applied, script_resolve

    def inject(s: QualitySpec, cand: cands.Candidate) -> QualitySpec:
        assert cand.patch is not None
        return s.patch(inject=dict(cand.patch))

    if name in ("noise_script", "noise_script_val"):
        val = name == "noise_script_val"
        spec = ScriptSpec(
            command=(sys.executable, str(VAL_SCRIPT if val else SCRIPT)), cwd=str(SCRIPT.parents[2])
        )

        # budgets in steps: the target (80 % of it) on the falling curve, whatever the load. The training loss of
        # noisy_regression_train.py reaches its floor within ~500 steps; 6 s (thousands of steps) put the target on
        # that floor, where the steps part of a prediction does not hold (advisors.quality.fair.on_floor;
        # benchmarks/results/quality-load-2026-11-29.md)
        return (
            spec,
            Budget(steps=3000) if val else Budget(steps=300),
            inject,
            script_resolve,
            script_applied,
            VAL_METRIC if val else None,
        )
    workload = workload_spec(
        store.root, name.removeprefix("noise_"), measure_steps=MAX_STEPS, seeded=True
    )
    return workload, Budget(seconds=8.0), inject, script_resolve, script_applied, None


def run(name: str, store: RunStore, seeds: int) -> None:
    spec, budget, apply, resolve, applied, metric = case(name, store)
    t0 = time.time()

    def say(s: str) -> None:
        print(f"  … {s}", file=sys.stderr, flush=True)

    plan = _every_k(planner(store_probe(store), budget.steps, KS, on_progress=say), spec, budget)
    ladder = to_quality(
        spec,
        [],
        store_curve_runner(store, budget, metric),
        budget,
        seeds,
        metric=metric,
        apply=apply,
        on_progress=say,
        resolve=resolve,
        applied=applied,
        planner=plan,
    )
    out = quality_json(ladder, metric)
    t = out["target"]
    print(
        f"## {name} — target {t['metric']} ≤ {t['value']:.4f} ({t['source']}); budget {out['budget']['stated']} "
        f"per arm; {seeds} seeds; {time.time() - t0:.0f} s of runs"
    )
    ns = out["noise_scale"]
    print(noise_line(ns) if ns else "noise scale: none")
    if ns and ns.get("probe_step_ms"):
        print(
            "probe step time (ms) per k: "
            + ", ".join(
                f"×{k}: {'—' if v is None else f'{v:.2f}'}" for k, v in ns["probe_step_ms"].items()
            )
        )
    print(
        f"{'k':>3} {'batch':>6} {'pred steps':>10} {'meas steps':>10} {'pred time':>9} {'meas time':>9} "
        f"{'meas [95% interval]':>22}  before → after (s, MLPerf mean [seed spread])  verdict"
    )
    for r in out["rounds"]:
        p, m, tt = r["predicted"] or {}, r["measured"] or {}, r["time_to_target"]
        if tt is None:
            print(f"  {r['fix']}: {r['reason']}")
            continue
        iv = tt["interval"]
        meas_iv = (
            "—"
            if not iv or tt["ratio"] is None
            else f"[{1 / iv[1] if iv[1] else 0:.2f}, {1 / iv[0] if iv[0] else float('inf'):.2f}]"
        )
        print(
            f"{p.get('k', '?'):>3} {p.get('batch', '?'):>6} {_f(p.get('steps_ratio')):>10} "
            f"{_f(m.get('steps_ratio')):>10} {_f(p.get('time_ratio')):>9} {_f(m.get('time_ratio')):>9} "
            f"{meas_iv:>22}  {_arm(tt['before'])} → {_arm(tt['after'])}  {'KEPT' if r['kept'] else 'rejected'}"
        )
    print()
    sys.stdout.flush()


def _f(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}"


def _arm(a: dict[str, Any]) -> str:
    if a["failed"]:
        return f"FAILED ({a['seeds'] - a['reached']}/{a['seeds']} never)"
    lo, hi = a["spread_s"]
    return f"{a['seconds']:.2f} [{lo:.2f}–{hi:.2f}]"
