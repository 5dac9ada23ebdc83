"""Evidence from a comparison's structure: categories whose per-step time moved in (nearly) every step.

The interval of the times per step (:func:`advisors.stats.mean_ratio`) reads each side's steps as a
bag of numbers: with few steps, two outlier steps on one side widen it until a real slowdown hides
inside. The breakdown says more: when NEW's DataLoader time is ~29 ms above BASE's in every one of
its steps, while BASE's DataLoader time varies by under a millisecond from step to step, the change
is not noise, whatever the outliers of the *total* did.

**The rule.** For each category of the breakdown (per (rank, step) rows, ms), the step-to-step spread is the
larger of the two sides' interquartile ranges (at least :data:`FLOOR_SHARE` of BASE's median step, so a
category that is constant in both traces does not count a rounding difference). The category *moved* when
at least :data:`NEARLY_ALL` of the slower side's steps lie beyond the faster side's median by more than that
spread, in the same direction as the median's change. Such categories are evidence of a change only together:
their median deltas must add up to more than the tolerance of the faster side's median step (a consistent
0.1 ms is real but not a regression at 5 %). Each side needs :data:`MIN_STRUCTURE_STEPS` steps: with three,
every step of one side above every step of the other happens by chance one time in ten.

:func:`detectable_ratio` states, for a ``same`` or ``inconclusive`` answer, the smallest slowdown
the interval could have shown with these steps: NEW's steps scaled to BASE's time per step,
resampled the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from advisors.stats import mean_ratio
from profilers.trace.breakdown import CATEGORIES, Breakdown

NEARLY_ALL = (
    0.8  # share of the slower side's steps that must lie beyond the spread: 5 of 6, 8 of 10
)
MIN_STRUCTURE_STEPS = (
    5  # per side; complete separation of 5 against 5 happens by chance 1 time in 126
)
FLOOR_SHARE = 0.005  # the least spread counted, as a share of BASE's median step


@dataclass(frozen=True)
class CategoryMove:
    """A category whose per-step time moved beyond its step-to-step spread in (nearly) every step."""

    name: str
    base_ms: float  # median per step
    new_ms: float
    spread_ms: float
    steps_moved: (
        int  # of the slower side's steps, those beyond the faster side's median ± the spread
    )
    steps: int

    @property
    def delta_ms(self) -> float:
        return self.new_ms - self.base_ms


@dataclass(frozen=True)
class StructureEvidence:
    """The categories that moved consistently toward ``direction`` (+1: NEW slower, −1: NEW faster) and whether,
    together, they carry a change beyond the tolerance."""

    direction: int
    moves: tuple[CategoryMove, ...]
    total_ms: float  # the moved categories' median deltas, summed (signed as NEW − BASE)
    decisive: bool


def _per_step_ms(b: Breakdown | None) -> dict[str, np.ndarray] | None:
    if b is None or len(b.per_step) < MIN_STRUCTURE_STEPS:
        return None
    return {c: b.per_step[c].to_numpy(dtype=float) / 1e6 for c in CATEGORIES if c in b.per_step}


def _iqr(v: np.ndarray) -> float:
    q1, q3 = np.percentile(v, [25, 75])
    return float(q3 - q1)


def category_moves(
    base: Breakdown | None, new: Breakdown | None, direction: int, base_step_ms: float
) -> tuple[CategoryMove, ...]:
    """The categories that moved toward ``direction`` in (nearly) every step of the slower side (module docs)."""
    a, b = _per_step_ms(base), _per_step_ms(new)
    if a is None or b is None:
        return ()
    floor = FLOOR_SHARE * base_step_ms
    out = []
    for name in CATEGORIES:
        if name not in a or name not in b:
            continue
        mid_a, mid_b = float(np.median(a[name])), float(np.median(b[name]))
        spread = max(_iqr(a[name]), _iqr(b[name]), floor)
        # the slower side's steps against the faster side's median, in the direction of the change
        slow, fast_mid = (b[name], mid_a) if direction > 0 else (a[name], mid_b)
        moved = int(np.sum(slow > fast_mid + spread))
        if (mid_b - mid_a) * direction > 0 and moved >= math.ceil(NEARLY_ALL * len(slow)):
            out.append(CategoryMove(name, mid_a, mid_b, spread, moved, len(slow)))
    return tuple(sorted(out, key=lambda m: -abs(m.delta_ms)))


def structure_evidence(
    base: Breakdown | None,
    new: Breakdown | None,
    base_step_ms: float,
    new_step_ms: float,
    max_slowdown: float,
) -> StructureEvidence:
    """Evidence toward whichever side's median step is slower: decisive when the categories that moved in
    (nearly) every step carry more than ``max_slowdown`` of the faster side's median step between them."""
    direction = 1 if new_step_ms >= base_step_ms else -1
    moves = category_moves(base, new, direction, base_step_ms)
    total = sum(m.delta_ms for m in moves)
    fast_ms = base_step_ms if direction > 0 else new_step_ms
    return StructureEvidence(
        direction, moves, total, bool(moves) and abs(total) > max_slowdown * fast_ms
    )


def detectable_ratio(base_ms: Sequence[float], new_ms: Sequence[float]) -> float | None:
    """The smallest ratio NEW / BASE the interval of the times per step would have told from noise
    with these steps: NEW's steps are scaled to BASE's time per step (no change), and a change is
    seen once the ratio times the interval's lower end of that no-change pair clears 1. ``None``
    when a side is empty."""
    if not len(base_ms) or not len(new_ms):
        return None
    scaled = np.asarray(new_ms, dtype=float) * (np.mean(base_ms) / np.mean(new_ms))
    low = mean_ratio(base_ms, scaled.tolist()).low
    return float(1 / low) if low > 0 else math.inf
