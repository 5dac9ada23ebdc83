"""What an experiment's page draws beside its record: every measured step of each arm, the median loss curves,
and each arm's breakdown — facts of the trial runs, gathered once when the experiment ends and stored with it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from advisors.experiments.experiment import Arm, Experiment
from advisors.experiments.trials import Spec
from profilers.errors import StepwiseError
from profilers.trace.breakdown import CATEGORIES


def arms(e: Experiment[Spec]) -> dict[str, Arm[Spec]]:
    """The two arms by the names the charts give them: ``before: baseline``, ``after: <fix title>``."""
    before = e.before
    return {f"before: {before.label}": before, f"after: {e.fix.title}": e.patched}


def step_samples(e: Experiment[Spec]) -> dict[str, list[float]]:
    """Every measured step time (ms) of each arm, all trials pooled (the box plot; its line is the median)."""
    return {name: [w for t in arm.trials for w in t.walls_ms] for name, arm in arms(e).items()}


def loss_curves(e: Experiment[Spec]) -> dict[str, list[float]]:
    """Median loss per step over each arm's runs (up to the shortest run)."""
    out: dict[str, list[float]] = {}
    for name, arm in arms(e).items():
        curves = [o.losses for o in arm.outcomes if o.losses]
        if curves:
            n = min(len(c) for c in curves)
            out[name] = [float(np.median([c[i] for c in curves])) for i in range(n)]
    return out


def breakdowns(e: Experiment[Spec]) -> dict[str, dict[str, float]]:
    """ms per step by category of each arm's first run that left a readable trace."""
    from advisors.observation import observe_run

    out: dict[str, dict[str, float]] = {}
    for name, arm in arms(e).items():
        for o in arm.outcomes:
            if not o.run_dir:
                continue
            try:
                b = observe_run(Path(o.run_dir)).breakdown
            except StepwiseError:
                continue
            if b is not None and len(b.per_step):
                ms = b.per_step[list(CATEGORIES)].mean() / 1e6
                out[name] = {c: float(ms[c]) for c in CATEGORIES}
                break
    return out


def same_curves(curves: dict[str, list[float]]) -> bool:
    """True when every arm's loss curve holds the very same values (a fix that changes no arithmetic, seeds
    alike): drawn as one line, it would read as one arm missing."""
    values = list(curves.values())
    return len(values) > 1 and all(v == values[0] for v in values[1:])


def evidence(e: Experiment[Spec]) -> dict[str, Any]:
    """The charts' inputs of an Apply: step samples, breakdowns and loss curves (and whether they are the same)."""
    curves = loss_curves(e)
    return {
        "step_samples": step_samples(e),
        "breakdowns": breakdowns(e),
        "loss_curves": curves,
        "loss_identical": same_curves(curves),
    }
