"""An A/B experiment or an optimisation ladder (``advisors.experiment`` / ``advisors.optimize``) as chart inputs.

Pure functions from the advisor's values to plain samples, curves and tables; the before/after breakdown
reads each arm's first stored run (its trace) with :func:`reports.analysis.analyse_path`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from profilers.breakdown import CATEGORIES
from profilers.errors import StepwiseError
from reports.analysis import analyse_path


def _before(e: Any) -> Any:
    """The arm the patched one is timed against: the reference when the baseline could not be timed."""
    return e.reference if e.reference is not None else e.baseline


def arms(e: Any) -> dict[str, Any]:
    return {f"before: {_before(e).label}": _before(e), f"after: {e.fix.title}": e.patched}


def step_samples(e: Any) -> dict[str, list[float]]:
    """Every measured step time (ms) of each arm, all trials pooled."""
    return {name: [w for t in arm.trials for w in t.walls_ms] for name, arm in arms(e).items()}


def loss_curves(e: Any) -> dict[str, list[float]]:
    """Median loss per step over each arm's runs (up to the shortest run)."""
    out = {}
    for name, arm in arms(e).items():
        curves = [o.losses for o in arm.outcomes if o.losses]
        if curves:
            n = min(len(c) for c in curves)
            out[name] = [float(np.median([c[i] for c in curves])) for i in range(n)]
    return out


def breakdowns(e: Any) -> dict[str, dict[str, float]]:
    """ms per step by category of each arm's first run that left a readable trace."""
    out: dict[str, dict[str, float]] = {}
    for name, arm in arms(e).items():
        for o in arm.outcomes:
            if not o.run_dir:
                continue
            try:
                a = analyse_path(Path(o.run_dir))
            except StepwiseError:
                continue
            if a.breakdown is not None and len(a.breakdown.per_step):
                ms = a.breakdown.per_step[list(CATEGORIES)].mean() / 1e6
                out[name] = {c: float(ms[c]) for c in CATEGORIES}
                break
    return out


def summary(e: Any) -> dict[str, Any]:
    """Headline numbers: medians, speed-up with its interval, kept and why."""
    before, after = _before(e), e.patched
    return {"before_ms": before.median_step_ms, "after_ms": after.median_step_ms, "speedup": e.speedup,
            "low": e.ratio.low if e.ratio else None, "high": e.ratio.high if e.ratio else None,
            "level": e.policy.level, "kept": e.kept, "reason": e.reason, "trials": e.policy.trials,
            "spec_change": {k: v[1] for k, v in e.baseline.spec.describe_diff(e.patched.spec).items()}}


def ladder_frame(ladder: Any) -> pd.DataFrame:
    """One row per attempted fix: round, bottleneck, fix, before/after ms, speed-up [interval], the diagnosis'
    upper bound on that fix's gain, kept, reason."""
    rows = []
    for r in ladder.rungs:
        e = r.experiment
        s = summary(e)
        rows.append({"round": r.round, "bottleneck": r.bottleneck, "rule": r.rule, "fix": e.fix.title,
                     "before ms": s["before_ms"], "after ms": s["after_ms"], "speed-up": s["speedup"],
                     "interval": None if s["low"] is None else f"[{s['low']:.2f}, {s['high']:.2f}]",
                     "upper bound": getattr(r, "upper_bound", None),
                     "kept": e.kept, "cumulative": r.cumulative, "reason": e.reason})
    return pd.DataFrame(rows)


def ladder_steps(ladder: Any) -> pd.DataFrame:
    """Median step after each kept rung, from the start: ``label, step_ms`` (the ladder chart)."""
    rows = []
    if ladder.rungs:
        first = _before(ladder.rungs[0].experiment)
        rows.append({"label": "start", "step_ms": first.median_step_ms})
    for r in ladder.kept:
        rows.append({"label": f"+ {r.experiment.fix.title}", "step_ms": r.experiment.patched.median_step_ms})
    return pd.DataFrame(rows, columns=["label", "step_ms"])
