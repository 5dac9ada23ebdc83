"""MLPerf-style time to target for an arm of K seeds, the ratio of two arms with its interval, and the verdict.

Aggregation (MLPerf Training's rule): an arm's seeds are sorted by time to target, the fastest and the slowest
are dropped and the rest averaged. A seed that never reached the target counts as the slowest (it is the one
dropped); two such seeds make the arm **fail**: it has no time to target. With fewer than three seeds nothing
can be dropped and the mean of all is used (then one miss already fails the arm), and the result says so.

Ratio: ``before_s / after_s`` — above 1 the change reaches the same target sooner. Its interval is a percentile
bootstrap over seeds: each arm's per-seed times are resampled with replacement and aggregated by the same
rule; a resample in which an arm fails counts as an infinitely slow arm. A change is **kept** only when both
arms reach the target and the interval's lower bound exceeds ``1 + min_gain``: faster to the same quality.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from advisors.experiments.results.outcome import Why
from advisors.stats import LEVEL, N_BOOT, SEED

MIN_GAIN = 0.03
FAILED_MISSES = 2  # this many seeds that never reach the target fail the arm (MLPerf)


@dataclass(frozen=True)
class ArmTime:
    """One arm's seeds: ``times_s[i]`` is seed i's time to target, ``None`` when it never reached it."""

    times_s: tuple[float | None, ...]

    @property
    def seeds(self) -> int:
        return len(self.times_s)

    @property
    def reached(self) -> int:
        return sum(t is not None for t in self.times_s)

    @property
    def failed(self) -> bool:
        misses = self.seeds - self.reached
        return self.seeds == 0 or misses >= FAILED_MISSES or (self.seeds < 3 and misses > 0)

    @property
    def olympic_s(self) -> float | None:
        """The MLPerf aggregate (see the module docs); ``None`` when the arm failed."""
        return olympic(self.times_s)

    @property
    def spread(self) -> tuple[float, float] | None:
        """Fastest and slowest seed that reached the target."""
        got = [t for t in self.times_s if t is not None]
        return (min(got), max(got)) if got else None

    def to_json(self) -> dict[str, object]:
        return {
            "seconds": self.olympic_s,
            "per_seed_s": list(self.times_s),
            "reached": self.reached,
            "seeds": self.seeds,
            "failed": self.failed,
            "spread_s": list(self.spread) if self.spread else None,
        }


def olympic(times: Sequence[float | None]) -> float | None:
    arr = [math.inf if t is None else float(t) for t in times]
    if (
        not arr
        or sum(math.isinf(t) for t in arr) >= FAILED_MISSES
        or (len(arr) < 3 and any(map(math.isinf, arr)))
    ):
        return None
    arr.sort()
    kept = arr[1:-1] if len(arr) >= 3 else arr
    return float(np.mean(kept))


@dataclass(frozen=True)
class TimeToTarget:
    """The comparison of two arms at one target (the JSON's ``time_to_target``)."""

    before: ArmTime
    after: ArmTime
    ratio: float | None  # before_s / after_s: > 1 reaches the target sooner
    interval: tuple[float, float] | None
    level: float
    kept: bool
    reason: str
    why: Why  # the verdict's reason code (gain, no_gain, slower, change_missed, …)

    def to_json(self) -> dict[str, object]:
        return {
            "before_s": self.before.olympic_s,
            "after_s": self.after.olympic_s,
            "ratio": self.ratio,
            "interval": [_finite(x) for x in self.interval] if self.interval else None,
            "level": self.level,
            "seeds": self.before.seeds,
            "reached_before": self.before.reached,
            "reached_after": self.after.reached,
            "before": self.before.to_json(),
            "after": self.after.to_json(),
            "kept": self.kept,
            "reason": self.reason,
        }


def compare(
    before: ArmTime,
    after: ArmTime,
    min_gain: float = MIN_GAIN,
    n_boot: int = N_BOOT,
    level: float = LEVEL,
    seed: int = SEED,
) -> TimeToTarget:
    """Judge ``after`` against ``before`` at the same target (see the module docs)."""
    b, a = before.olympic_s, after.olympic_s
    note = (
        ""
        if min(before.seeds, after.seeds) >= 3
        else " (fewer than 3 seeds: nothing dropped, the mean of all, and one miss fails the arm)"
    )
    if b is None and a is None:
        return TimeToTarget(
            before,
            after,
            None,
            None,
            level,
            False,
            f"neither arm reached the target: before {_miss(before)}, after {_miss(after)}{note}",
            Why.NEITHER_REACHED,
        )
    if a is None:
        return TimeToTarget(
            before,
            after,
            None,
            None,
            level,
            False,
            f"the change failed: {_miss(after)} never reached the target, so it is not faster "
            f"to the same quality{note}",
            Why.CHANGE_MISSED,
        )
    if b is None:
        return TimeToTarget(
            before,
            after,
            None,
            None,
            level,
            False,
            f"the baseline failed ({_miss(before)} never reached the target) while the change "
            f"reached it in {a:.3g} s: no ratio can be measured; raise the budget or lower the "
            f"target to time both{note}",
            Why.BASELINE_MISSED,
        )
    if (
        a <= 0 or b <= 0
    ):  # reached at its first point: its loss reads differently (a framework's accumulation
        which = "the change" if a <= 0 else "the baseline"  # divides it), no time to compare
        return TimeToTarget(
            before,
            after,
            None,
            None,
            level,
            False,
            f"{which} was at the target from its first step: no ratio can be measured (its loss may "
            f"be on another scale, e.g. divided by the accumulation steps){note}",
            Why.AT_TARGET_AT_START,
        )
    ratio = b / a
    low, high = _interval(before.times_s, after.times_s, n_boot, level, seed)
    kept = low > 1 + min_gain
    how = (
        f"reaches the target in {a:.3g} s instead of {b:.3g} s: {ratio:.2f}× sooner "
        f"[{_fmt(low)}, {_fmt(high)}]"
    )
    why = Why.GAIN if kept else Why.SLOWER if high < 1 else Why.NO_GAIN
    if kept:
        reason = f"kept: {how}, interval above {1 + min_gain:.2f}{note}"
    elif high < 1:
        reason = f"rejected: slower to the same quality, {how}{note}"
    elif ratio < 1:
        reason = (
            f"rejected: not faster to the same quality (slower by the point estimate, the interval spans 1), "
            f"{how}{note}"
        )
    else:
        reason = f"rejected: {how}, the interval does not clear {1 + min_gain:.2f}{note}"
    return TimeToTarget(before, after, ratio, (low, high), level, kept, reason, why)


def _interval(
    before: Sequence[float | None],
    after: Sequence[float | None],
    n_boot: int,
    level: float,
    seed: int,
) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    bs, as_ = list(before), list(after)
    ratios = np.empty(n_boot)
    for i in range(n_boot):
        b = olympic([bs[j] for j in rng.integers(0, len(bs), len(bs))])
        a = olympic([as_[j] for j in rng.integers(0, len(as_), len(as_))])
        if a is None:
            ratios[i] = 0.0 if b is not None else 1.0
        elif b is None:
            ratios[i] = math.inf
        else:
            ratios[i] = b / a
    tail = (1 - level) / 2 * 100
    # the order statistics themselves (no interpolation): a resample can be infinitely slow, and inf − inf is nan
    low, high = np.percentile(ratios, [tail, 100 - tail], method="inverted_cdf")
    return float(low), float(high)


def _miss(arm: ArmTime) -> str:
    return f"{arm.seeds - arm.reached} of {arm.seeds} seeds"


def _fmt(x: float) -> str:
    return "∞" if math.isinf(x) else f"{x:.2f}"


def _finite(x: float) -> float | None:
    """JSON has no infinity: an unbounded end of an interval is ``null``."""
    return x if math.isfinite(x) else None
