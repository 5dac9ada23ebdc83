"""Which steps a run's time per step and samples/s are measured over — the steady, unprofiled steps
— and those two figures (standard library only): the time per step is the steps' elapsed time over
their count, the samples/s their samples over that time, so the two multiply to the batch. The
median step is kept beside them as the *typical step*, with the share of steps that stalled.

Every place that states a run's step time (the worker's ``result.json``, a launched script's result, a stored run
salvaged from its ``steps.jsonl``, an A/B trial) picks its steps here, so one run has one step time.

A step is **steady** when it is past the warm-up (at least the first step: lazy initialisation, allocator
growth, autotuning), the profiler did not collect it, and it is not next to the profiler's window: the
:data:`BEFORE_PROFILER` step before a collecting window (the profiler starts, and its warm-up phase records
into buffers) and the :data:`AFTER_PROFILER` steps after it (the trace is exported, its buffers are freed).
A dashboard walk saw those two steps at 84 and 95 ms beside steady steps of 38–43 ms, and a median of three
steps that held both.

At least :data:`MIN_STEADY` steady steps make a stable median. With fewer, the basis widens one stage at a
time — first the steps next to the profiler; the profiled steps only when fewer than :data:`MIN_USABLE`
unprofiled steps remain; then the warm-up — and the basis says which: ``steady``, ``with steps next to the profiler``, ``with profiled steps``, ``every step``. The count of
steps used is always stated beside the number.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Sequence

MIN_STEADY = 5
MIN_USABLE = (
    3  # a short run's median needs at least this many steps before the basis widens further
)
BEFORE_PROFILER = 1
AFTER_PROFILER = 2

BASIS_STEADY = "steady"
BASIS_NEAR = "with steps next to the profiler"
BASIS_PROFILED = "with profiled steps"
BASIS_ALL = "every step"


@dataclass(frozen=True)
class StepChoice:
    """Positions (into the rows given) of the steps a step time is the median of, and how they were chosen."""

    positions: tuple[int, ...]
    basis: str
    profiled: tuple[int, ...]  # positions of the profiled steps: the profiled window's own median

    @property
    def count(self) -> int:
        return len(self.positions)


def choose_steps(
    steps: Sequence[int],
    profiled: Sequence[bool],
    warmup_steps: int = 1,
    min_steady: int = MIN_STEADY,
    first_step: int | None = None,
) -> StepChoice:
    """The steps to time among ``steps`` (step indices, in order) with their ``profiled`` flags.

    ``warmup_steps`` (at least one) count from ``first_step``, by default the first step given; a caller that
    passes a window of a run gives the run's first step index (0) so the window's own first step is kept."""
    n = len(steps)
    prof = [bool(p) for p in profiled]
    profiled_pos = tuple(i for i in range(n) if prof[i])
    if n == 0:
        return StepChoice((), BASIS_STEADY, ())
    first = steps[0] if first_step is None else first_step
    skip = max(int(warmup_steps), 1)
    past_warmup = [i for i in range(n) if steps[i] - first >= skip]
    near = _near_profiler(prof)
    stages = (
        (BASIS_STEADY, [i for i in past_warmup if not prof[i] and i not in near]),
        (BASIS_NEAR, [i for i in past_warmup if not prof[i]]),
        (BASIS_PROFILED, past_warmup),
    )
    unprofiled = stages[
        :2
    ]  # profiled steps join only when fewer than MIN_USABLE unprofiled steps exist
    for basis, chosen in (
        *((b, c) for b, c in unprofiled if len(c) >= min_steady),
        *((b, c) for b, c in stages if len(c) >= MIN_USABLE),
    ):
        return StepChoice(tuple(chosen), basis, profiled_pos)
    return StepChoice(
        tuple(past_warmup) or tuple(range(n)),
        BASIS_PROFILED if past_warmup else BASIS_ALL,
        profiled_pos,
    )


def _near_profiler(prof: Sequence[bool]) -> set[int]:
    """Positions within :data:`BEFORE_PROFILER` before, or :data:`AFTER_PROFILER` after, a profiled step."""
    near: set[int] = set()
    for i, p in enumerate(prof):
        if not p:
            continue
        near.update(range(max(i - BEFORE_PROFILER, 0), i))
        near.update(range(i + 1, min(i + 1 + AFTER_PROFILER, len(prof))))
    return {i for i in near if not prof[i]}


def samples_per_s(samples: Sequence[float], walls_ms: Sequence[float]) -> float | None:
    """**The** samples/s of Stepwise, the one definition every page, report, table and JSON shows: the samples
    trained in a run's measured steps over the wall time those steps took (total ÷ total), ``None`` when nothing
    was measured. Not the batch over the median step: a prefetching loader makes some steps instant and others
    long, and only the total charges both (the two read 175 and 368 samples/s for the same trial)."""
    total_ms = float(sum(walls_ms))
    total = float(sum(samples))
    return total / total_ms * 1e3 if total_ms > 0 and total > 0 else None


# a step that took more than this many typical steps stalled (a loader's miss, a sync)
STALL_FACTOR = 2.0
# the typical step is shown beside the time per step when they differ by more than this
TYPICAL_APART = 0.10


def time_per_step(walls_ms: Sequence[float]) -> float | None:
    """**The** time per step of Stepwise: the measured steps' elapsed time over their count (ms), so
    that time per step × :func:`samples_per_s` is the batch. Every ratio, verdict and bound is read
    from it."""
    walls = [float(w) for w in walls_ms]
    return sum(walls) / len(walls) if walls and sum(walls) > 0 else None


def typical_step(walls_ms: Sequence[float]) -> float | None:
    """The median measured step: what a step that did not stall takes. Shown beside the time per
    step (as "typical step (median)") when they differ, never as the run's speed."""
    return statistics.median(float(w) for w in walls_ms) if len(walls_ms) else None


def stalled_share(walls_ms: Sequence[float]) -> float | None:
    """The share of measured steps that stalled: took more than :data:`STALL_FACTOR` typical
    steps."""
    typical = typical_step(walls_ms)
    if typical is None:
        return None
    return sum(1 for w in walls_ms if float(w) > STALL_FACTOR * typical) / len(walls_ms)


def typical_apart(per_step_ms: float | None, typical_ms: float | None) -> bool:
    """Whether the typical step differs from the time per step by more than
    :data:`TYPICAL_APART`."""
    if not per_step_ms or typical_ms is None:
        return False
    return abs(typical_ms / per_step_ms - 1.0) > TYPICAL_APART


def typical_note(per_step_ms: float | None, typical_ms: float | None, stalled: float | None) -> str:
    """``typical step (median) 2.1 ms, 12% of steps stalled`` when the typical step is apart from
    the time per step (:func:`typical_apart`), else ``""``: the words every surface puts beside a
    time per step."""
    if not typical_apart(per_step_ms, typical_ms):
        return ""
    share = f", {stalled:.0%} of steps stalled" if stalled else ""
    return f"typical step (median) {typical_ms:.4g} ms{share}"


def median_of(values: Sequence[float], positions: Sequence[int]) -> float | None:
    picked = [values[i] for i in positions if values[i] is not None and values[i] == values[i]]
    return statistics.median(picked) if picked else None


def describe(choice: StepChoice) -> str:
    """``over 12 steady steps`` / ``over 4 steps, with profiled steps (too few steady steps)``."""
    if choice.basis == BASIS_STEADY:
        return f"over {choice.count} steady step{'s' if choice.count != 1 else ''}"
    return f"over {choice.count} step{'s' if choice.count != 1 else ''}, {choice.basis} (too few steady steps)"
