"""``python -m advisors optimize --to-quality [--target X] [--budget STEPS|SECONDS] [--seeds K] [--metric REGEX
--goal min|max] WORKLOAD | -- python train.py ARGS…``: judge changes by the time to the same quality.

One stored experiment (mode ``to_quality``) holds every arm's runs (hidden from ``profilers list``); its
``report.json`` is the printed JSON, which the Advisor page's time-to-quality panel draws.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from advisors.experiments.to_quality import (
    AppliedFn,
    QualityRun,
    QualitySpec,
    store_curve_runner,
    to_quality,
)
from advisors.experiments.to_quality_report import quality_json, quality_table
from advisors.fixes import FIXES
from advisors.quality import candidates as cands
from advisors.quality.curve import Goal
from advisors.quality.target import Budget
from profilers.errors import SpecError
from profilers.store import experiments as stored
from profilers.store.runs import RunStore

DEFAULT_BUDGET = (
    "60s"  # wall-clock seconds: a budget in steps gives accumulation × k a k-th of the passes
)
MODE = "to_quality"


def add_arguments(o: Any) -> None:
    o.add_argument(
        "--to-quality",
        action="store_true",
        help="judge changes by the time until training reaches the same quality (K seeds per arm)",
    )
    o.add_argument(
        "--target",
        dest="quality_target",
        type=float,
        help="the quality to reach (default: the baseline's own value at 80%% of its budget; early "
        "stopping's: the script's own target when it carries one, e.g. --target_loss)",
    )
    o.add_argument(
        "--budget",
        default=DEFAULT_BUDGET,
        help="how far an arm may run: seconds (90s, 2m; default 60s) or steps (300)",
    )
    o.add_argument(
        "--whole-run",
        dest="whole_run",
        help="early stopping is judged on the baseline run to its own end; give steps or seconds to "
        "stop it sooner (past its plateau)",
    )
    o.add_argument(
        "--no-noise-scale",
        dest="noise_scale",
        action="store_false",
        help="keep the fixed batch × 4 candidates (no noise scale, no throughput probe)",
    )
    o.add_argument(
        "--seeds", type=int, default=3, help="seeds per arm (MLPerf: drop fastest and slowest)"
    )
    o.add_argument(
        "--metric",
        help="REGEX with one (number) group read from the script's printed lines "
        "(default: the training loss, EMA-smoothed)",
    )
    o.add_argument(
        "--goal",
        choices=("min", "max"),
        default=None,
        help="min (a loss) or max (an accuracy); default min",
    )
    o.add_argument(
        "--full-run-steps", type=int, help="project the whole run's hours at this many steps"
    )
    o.add_argument(
        "--price-per-hour", type=float, help="price per device-hour, for the projection's cost"
    )


def main(
    args: argparse.Namespace, spec: QualitySpec, workload: str | None = None
) -> dict[str, Any]:
    """``spec``: the script's run, a user's or a sample ``workload``'s (then named)."""
    try:
        budget = Budget.parse(args.budget)
    except ValueError as err:
        raise SpecError(str(err)) from None
    if args.seeds < 1:
        raise SpecError(f"--seeds must be at least 1, got {args.seeds}")
    goal: Goal = "max" if args.goal == "max" else "min"
    if args.metric is not None:
        from advisors.quality.curve import compile_metric

        try:
            compile_metric(args.metric)
        except ValueError as err:
            raise SpecError(str(err)) from None
    from advisors.experiments.script_strategy import ScriptStrategy
    from profilers.run import interpreter
    from profilers.run.launch import interpreter_for

    from advisors.quality.script_candidates import templates

    cuda = interpreter.probe(interpreter_for(list(spec.command), spec.python)).get("cuda_available")
    strategy = ScriptStrategy(spec, "cuda" if cuda else "cpu", forced=tuple(args.fix))
    candidates = [
        cands.Candidate(
            f,
            FIXES[f].title,
            "a step-time fix, re-judged by the time to the same quality",
            {"fix": f},
        )
        for f in args.fix
    ] + templates()

    own = not getattr(args, "inject", False)
    bases: list[Any] = []  # the baseline as its runs recorded it (read once it has run)

    def resolve(cand: cands.Candidate, runs: Sequence[QualityRun]) -> cands.Candidate:
        from advisors.experiments.quality_knobs import in_own_terms
        from advisors.quality import script_candidates

        if not bases:
            base = script_candidates.read_baseline(runs)
            bases.append(base if base is None or own else replace(base, config={}))
        resolved = script_candidates.same_as_fix(
            script_candidates.resolve(cand, bases[0]), args.fix
        )
        return in_own_terms(resolved, bases[0], spec)

    def apply(s: QualitySpec, cand: cands.Candidate) -> QualitySpec:
        assert cand.patch is not None
        if "fix" in cand.patch:
            return strategy.apply(s, FIXES[str(cand.patch["fix"])])
        from advisors.experiments.quality_knobs import quality_patched

        # a convergence change (advisors.quality.script_candidates): the script's own flags when it has them
        return quality_patched(s, cand, bases[0] if bases else None)

    applied: AppliedFn = script_applied
    label = workload or spec.name
    store = RunStore(args.store)
    record = stored.start(
        store,
        None,
        "ladder",
        f"Time to quality on {label}",  # the mode is told in about:
        {"mode": MODE, "rounds": len(candidates), "seeds": args.seeds, "budget": budget.describe()},
    )
    say = None if args.json else (lambda text: print(text, file=sys.stderr, flush=True))
    try:
        whole = _whole_budget(args, budget, workload)
        plan = None
        if getattr(args, "noise_scale", True):
            from advisors.experiments.to_quality_goodput import planner, store_probe

            plan = planner(store_probe(store, record.run_id), budget.steps, on_progress=say)
        ladder = to_quality(
            spec,
            candidates,
            store_curve_runner(store, budget, args.metric, record.run_id),
            budget,
            args.seeds,
            goal,
            args.quality_target,
            args.metric,
            apply=apply,
            on_progress=say,
            resolve=resolve,
            applied=applied,
            planner=plan,
            run_whole=store_curve_runner(store, whole, args.metric, record.run_id),
            whole_budget=whole,
            whole_label=_whole_label(args, whole, workload),
        )
        out = quality_json(ladder, args.metric, args.full_run_steps, args.price_per_hour)
    except BaseException as err:
        stored.finish(store, record.run_id, None, error=f"{type(err).__name__}: {err}")
        raise
    out["experiment_id"] = record.run_id
    out["table"] = quality_table(out).splitlines()
    from reports.quality import html_page, markdown

    from advisors.experiments.results.quality_record import quality_record
    from advisors.experiments.results.stored_view import quality_view

    rec = quality_record(
        out
    )  # the one record every surface renders: the panel, the reports, --json's record
    out["record"] = quality_view(rec)["quality"]
    stored.finish(
        store,
        record.run_id,
        quality_view(rec),
        reports={
            "json": json.dumps(out).encode(),
            "html": html_page(rec, out),
            "md": markdown(rec).encode(),
        },
    )
    return out


def _whole_budget(args: argparse.Namespace, budget: Budget, workload: str | None) -> Budget:
    """Where early stopping is judged: ``--whole-run``, else the run to its own end: a script until it ends (at
    most the launcher's step limit); a sample workload, whose arms run as long as their budget asks, the arms'
    budget."""
    if getattr(args, "whole_run", None):
        try:
            return Budget.parse(args.whole_run)
        except ValueError as err:
            raise SpecError(str(err).replace("--budget", "--whole-run")) from None
    if workload is not None:
        return budget
    from profilers.run.script_spec import MAX_STEPS

    return Budget(steps=MAX_STEPS)


def _whole_label(args: argparse.Namespace, whole: Budget, workload: str | None) -> str:
    if getattr(args, "whole_run", None):
        return f"{whole.describe()} (--whole-run)"
    if workload is not None:
        return f"the budget's end ({whole.describe()}; a sample workload runs as long as its budget asks)"
    return f"its own end (the launcher stops it at {whole.describe()} at most)"


def script_resolve(cand: cands.Candidate, baseline: Sequence[QualityRun]) -> cands.Candidate:
    """A script's convergence candidate made concrete from what its baseline run built."""
    from advisors.quality import script_candidates

    return script_candidates.resolve(cand, script_candidates.read_baseline(baseline))


def script_applied(
    cand: cands.Candidate, run: QualityRun
) -> tuple[dict[str, Any] | None, str | None]:
    """From a candidate run's ``injected.json``: what was injected, and why it did not act (``None``: it did)."""
    from advisors.experiments.script_fixes import why_not_applied as fix_not_applied
    from advisors.quality import script_candidates
    from profilers.store.files import read_json

    raw = read_json(Path(run.run_dir) / "injected.json") if run.run_dir else None
    injected = raw if isinstance(raw, dict) else None
    record = script_candidates.applied_record(cand, injected)
    if cand.patch is not None and "fix" in cand.patch:
        fix = FIXES[str(cand.patch["fix"])]
        record = {"knobs": (injected or {}).get("knobs") or {}, "sites": {}} if injected else None
        return record, (fix_not_applied(fix, injected) if injected is not None else None)
    return record, script_candidates.why_not_applied(cand, injected)


def stored_reports(store: RunStore) -> list[tuple[str, Path]]:
    """``(experiment id, report.json)`` of every stored time-to-quality experiment, newest first."""
    found = []
    for rec in store.list("experiment"):
        if stored.about(store, rec.run_id).get("mode") == MODE:
            path = store.path(rec.run_id) / "report.json"
            if path.is_file():
                found.append((rec.run_id, path))
    return found
