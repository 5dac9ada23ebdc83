"""One seed of one to-quality arm (:class:`QualityRun`), the spec it runs as (:func:`arm_spec`), and what is read
off its curve: the curve itself (:func:`curve_of`), the curve the target is judged on (:func:`seen`), the steps
and seconds to the target (:func:`steps_to_target`, :func:`reached_at`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from advisors.fixes.conventions.editing import with_flag
from advisors.quality import fair
from advisors.quality.candidates import Candidate
from advisors.quality.curve import (
    Curve,
    clock_start_ns,
    loss_curve_from_steps,
    printed_curve,
    smoothed,
    time_to_target,
)
from advisors.quality.goodput import GoodputPlan
from advisors.quality.target import Budget, Target
from profilers.run.script_spec import MAX_STEPS, ScriptSpec

QualitySpec = ScriptSpec  # a sample workload's runs are its training script's
ProgressFn = Callable[[str], None]


@dataclass(frozen=True)
class QualityRun:
    """One seed of one arm: its status, its (raw) curve, its folder; ``stopped`` why it ended before its budget."""

    status: str
    curve: Curve
    run_dir: str | None = None
    error: str | None = None
    stopped: str | None = None
    median_step_ms: float | None = None
    seeding: Mapping[str, Any] | None = (
        None  # seeds.json: the script's seeding calls the agent offset
    )
    others_cores: float | None = (
        None  # other programs' mean use of the machine over its steps (trial_load)
    )
    cores: int | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok" or (self.status == "killed" and self.stopped is not None)


#: Runs one arm's spec to a :class:`QualityRun`; ``stop_at`` is the target to stop at, when known.
CurveRunFn = Callable[[QualitySpec, "Target | None"], QualityRun]
#: A candidate made concrete from the baseline's runs (a script's: its optimizer and DataLoader), or advice.
ResolveFn = Callable[[Candidate, Sequence[QualityRun]], Candidate]
#: What a candidate's run injected (for the report) and why it did not act (``None``: it acted).
AppliedFn = Callable[[Candidate, QualityRun], "tuple[Mapping[str, Any] | None, str | None]"]
#: The noise scale read off the baseline's runs, the probe's step times and the batch candidates they choose.
PlanFn = Callable[[QualitySpec, Sequence[QualityRun]], "GoodputPlan | None"]


def arm_spec(spec: QualitySpec, budget: Budget, seed: int) -> QualitySpec:
    """``spec`` as one seed of a to-quality arm: its budget's length, no profiler window. The launcher seeds torch,
    ``random`` and numpy at boot; a command that names its own ``--seed`` (a sample workload's) reseeds with it, so
    the seed goes there too."""
    steps = min(budget.steps or MAX_STEPS, MAX_STEPS)
    command = spec.command
    if any(a.split("=", 1)[0] == "--seed" for a in command):
        command = with_flag(command, ["--seed"], str(seed))
    return replace(
        spec, seed=seed, warmup_steps=0, measure_steps=steps, profile_steps=1, command=command
    )


def curve_of(run_dir: Path, steps: pd.DataFrame, metric: str | None) -> Curve:
    """The run's training loss (raw) or, with ``metric``, the value its printed lines carry."""
    loss = loss_curve_from_steps(steps)
    if metric is None:
        return loss
    from profilers.store.files import read_jsonl

    t0 = clock_start_ns(steps)
    rows = [r for r in read_jsonl(run_dir / "printed.jsonl") if isinstance(r, dict)]
    if t0 is None:
        t0 = min((int(r.get("t_unix_ns", 0)) for r in rows), default=0)
    lines = [((int(r.get("t_unix_ns", 0)) - t0) / 1e9, str(r.get("line", ""))) for r in rows]
    return printed_curve(
        [(t, ln) for t, ln in lines if t >= 0],
        metric,
        loss.end_s,
        steps_at=list(zip(loss.times_s, loss.steps)),
    )


def seen(curve: Curve, metric: str | None) -> Curve:
    """The curve the target is judged on: the loss smoothed, a printed metric as printed."""
    return smoothed(curve) if metric is None else curve


def steps_to_target(run: QualityRun, target: Target, metric: str | None) -> int | None:
    """The optimizer steps done when the run first reached the target (``None``: never)."""
    c = seen(run.curve, metric)
    t = time_to_target(c, target.value, target.goal)
    if t is None or not math.isfinite(t):
        return None
    return next(
        (s for tt, s in zip(c.times_s, c.steps) if tt >= t), c.steps[-1] if len(c) else None
    )


def reached_at(
    run: QualityRun, target: Target, metric: str | None, first_step: int = 2
) -> float | None:
    """Seconds to the target, counted only from ``first_step`` (the first value after a real optimizer update)."""
    counted = fair.after_first_update(
        seen(run.curve, metric), first_step, printed=metric is not None
    )
    t = time_to_target(counted, target.value, target.goal)
    return t if t is not None and math.isfinite(t) else None
