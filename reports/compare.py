"""Compare two analyses (runs or traces): step time, breakdown deltas, the kernels/ops that moved most, and
the regression gate's verdict on the pair.

All times are ms **per step** (per (rank, step) row of the breakdown), so a 5-step trace and a 50-step run
compare fairly. A positive ``delta_ms`` means B spends more than A. The deltas and the verdict come from
:mod:`advisors.compare.movers` and :mod:`advisors.compare.regression`: the dashboard, the exports and ``python -m advisors
compare`` say the same thing about the same pair.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from advisors.compare import movers
from advisors.compare.environment import Environment, EnvironmentDiff, environment_diff
from advisors.compare.regression import DEFAULT_MAX_SLOWDOWN, RegressionCheck, check
from advisors.compare.sides import side_of
from advisors.compare.step_samples import run_samples, trace_samples
from advisors.analysis import Analysis
from stepwise_agent import steady

TOP_DELTAS = movers.TOP_DELTAS
_UNKNOWN = Environment(device=None, world_size=None, batch=None)


@dataclass(frozen=True)
class Comparison:
    """``categories``: category, a_ms, b_ms, delta_ms. ``kernels``/``ops``: name, a_ms, b_ms, delta_ms (largest
    moves first). ``step_ms``: the per-step samples of each side (see :func:`step_samples`). ``environment``:
    what differs between the two sides' environments (device, world size, batch, torch, CUDA)."""

    label_a: str
    label_b: str
    step_ms_a: tuple[float, ...]
    step_ms_b: tuple[float, ...]
    categories: pd.DataFrame
    kernels: pd.DataFrame
    ops: pd.DataFrame
    environment: EnvironmentDiff = field(
        default_factory=lambda: EnvironmentDiff(_UNKNOWN, _UNKNOWN, ())
    )

    @property
    def speedup(self) -> float | None:
        """A's time per step over B's (> 1: B is faster): the inverse of the gate's ratio, and for
        equal batches the samples/s ratio an Apply judges
        (:func:`stepwise_agent.steady.time_per_step`)."""
        a, b = steady.time_per_step(self.step_ms_a), steady.time_per_step(self.step_ms_b)
        return a / b if a and b else None


def step_samples(a: Analysis) -> tuple[float, ...]:
    """Per-step times in ms, the ones the regression gate judges: a run's measured steps (after warm-up, slowest
    rank; its trace's steps when it measured none), else the trace's profiled steps per rank."""
    found = run_samples(a.steps, a.run.spec, a.run.measured_window) if a.run is not None else None
    found = found or trace_samples(a.breakdown)
    return tuple(round(v, 4) for v in found.ms) if found is not None else ()


def compare(a: Analysis, b: Analysis) -> Comparison:
    """A vs B (see :class:`Comparison`)."""
    ba, bb = a.breakdown, b.breakdown
    return Comparison(
        label_a=a.label,
        label_b=b.label,
        step_ms_a=step_samples(a),
        step_ms_b=step_samples(b),
        categories=movers.category_deltas(ba, bb),
        kernels=movers.kernel_deltas(ba, bb),
        ops=movers.op_deltas(ba, bb),
        environment=environment_diff(a, b),
    )


def regression_check(
    base: Analysis, new: Analysis, max_slowdown: float = DEFAULT_MAX_SLOWDOWN
) -> RegressionCheck:
    """The gate's verdict on two analyses (StepwiseError when a side cannot be compared: a run that did not end
    ``ok``, a memory snapshot, no steps)."""
    return check(side_of(base), side_of(new), max_slowdown)
