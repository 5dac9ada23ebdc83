"""The per-step times a comparison rests on, for a stored run or a trace.

A run: every measured step of its ``steps.jsonl`` — the steps after the spec's warm-up, without the profiled
ones when enough remain, each the slowest rank's wall time (:func:`advisors.experiments.trials.measured_trial`, the
figures the run's own ``step_time_ms`` is the median of). A launched script has no spec: its first step
(lazy initialisation) is its warm-up, as :func:`profilers.run.records.summarise_steps` counts it; a script run
that asked for timed steps (``boot.json``: ``warmup`` then ``measure`` steps without profiler) is measured on
exactly those, as the script experiments measure it (:func:`advisors.experiments.trials.script_outcome`).

A trace: every profiled step on every rank (one sample per (rank, step) row of the breakdown), the samples
its ``step_time_ms`` is the median of.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import pandas as pd

from advisors.experiments.trials import measured_trial
from profilers.trace.breakdown import Breakdown
from profilers.run.run_config import RunConfig

WARMUP_WITHOUT_SPEC = 1  # a launched script: its first step pays the lazy initialisation
SampleKind = Literal["run", "trace"]


@dataclass(frozen=True)
class StepSamples:
    """Step times in ms and what one of them is (said in the verdict, so a reader knows what was compared)."""

    ms: tuple[float, ...]
    kind: SampleKind
    what: str


def run_samples(
    steps: pd.DataFrame, spec: RunConfig | None, window: tuple[int, int] | None = None
) -> StepSamples | None:
    """A run's measured steps, or ``None`` when it measured none. ``window``: a script run's timed steps."""
    if window is not None and not steps.empty:
        first, end = window
        timed = steps[(steps["step"] >= first) & (steps["step"] < end)].assign(profiled=False)
        trial = measured_trial(timed, first)
        if trial is not None:
            return StepSamples(
                ms=trial.walls_ms,
                kind="run",
                what=f"{len(trial.walls_ms)} timed steps after {first} warm-up step{_s(first)}",
            )
    warmup = spec.warmup_steps if spec is not None else WARMUP_WITHOUT_SPEC
    trial = measured_trial(steps, warmup)
    if trial is None:
        return None
    return StepSamples(
        ms=trial.walls_ms,
        kind="run",
        what=f"{len(trial.walls_ms)} measured steps after {warmup} warm-up step{_s(warmup)}",
    )


def trace_samples(b: Breakdown | None) -> StepSamples | None:
    """A trace's profiled steps, one per (rank, step), or ``None`` when it has no step with time in it."""
    if b is None or not len(b.per_step):
        return None
    ms = tuple(float(v) / 1e6 for v in b.per_step["step_ns"] if math.isfinite(float(v)) and v > 0)
    if not ms:
        return None
    ranks = len(b.ranks) or 1
    per = f" on {ranks} ranks" if ranks > 1 else ""
    return StepSamples(ms=ms, kind="trace", what=f"{len(ms)} profiled step{_s(len(ms))}{per}")


def _s(n: int) -> str:
    return "" if n == 1 else "s"
