"""Early stopping, measured: the same run stopped where patience ran out vs the run to its end.

The stopping rule (what a user's ``EarlyStopping`` callback does, here on the smoothed curve): after
``min_points`` points, stop at the first point where the metric has not improved on its best by more than
``min_delta`` (relative) for ``patience`` consecutive points. The saving is read off the run's own clock:
``end_s − stop_s`` seconds, and the metric given up is how much the best value at the end beats the value at
the stop, as a share of the run's whole improvement (first value to best): a loss that falls toward 0 would
make a share of the value itself meaningless. It is **kept** when it stops before the end and gives up no
more than ``tolerance`` of that improvement, on every seed (the median saving and the worst share given up
are reported, and the absolute amount).

With ``seed_noise`` (runs to the script's own end, several seeds), the metric given up is also set against the
seeds' own spread at the end (max − min of their final values; MLPerf's reference-convergence idea): a loss
inside that spread is no loss, so it is kept when every seed stops early and either gives up no more than the
tolerance or, against the value its run ended at, no more than the spread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from advisors.quality.curve import Curve, Goal

PATIENCE_SHARE = 0.1  # patience = this share of the run's points (at least MIN_PATIENCE)
MIN_PATIENCE = 5
MIN_DELTA = 0.01  # an improvement must beat the best by 1 % to count
TOLERANCE = 0.02  # kept when the metric given up is at most 2 % of the run's improvement


@dataclass(frozen=True)
class StopPoint:
    """One run stopped early: where, what it saved, what it gave up."""

    stop_s: float | None  # None: patience never ran out, the run went to its end
    stop_step: int | None
    end_s: float
    value_at_stop: float | None
    best_at_end: float
    first: float = float("nan")
    at_end: float = float("nan")  # the (smoothed) value the run ended at

    def given_up_at_end(self, goal: Goal) -> float:
        """Metric lost by stopping against where the run ended (≥ 0): what the user's run would have had."""
        if self.value_at_stop is None or self.at_end != self.at_end:
            return 0.0
        return max(self.value_at_stop - self.at_end if goal == "min" else self.at_end - self.value_at_stop, 0.0)

    @property
    def saved_s(self) -> float:
        return self.end_s - self.stop_s if self.stop_s is not None else 0.0

    @property
    def saved_share(self) -> float:
        return self.saved_s / self.end_s if self.end_s > 0 else 0.0

    def given_up_abs(self, goal: Goal) -> float:
        """Metric lost by stopping (≥ 0), in the metric's own unit."""
        if self.value_at_stop is None:
            return 0.0
        diff = self.value_at_stop - self.best_at_end if goal == "min" else self.best_at_end - self.value_at_stop
        return max(diff, 0.0)

    def given_up(self, goal: Goal) -> float:
        """The metric lost by stopping as a share of the run's whole improvement (first value → best)."""
        gained = abs(self.first - self.best_at_end)
        return self.given_up_abs(goal) / gained if gained > 0 else 0.0


def patience_for(points: int) -> int:
    return max(MIN_PATIENCE, int(points * PATIENCE_SHARE))


def stop_point(curve: Curve, goal: Goal, patience: int | None = None, min_delta: float = MIN_DELTA) -> StopPoint:
    """Where early stopping with ``patience`` would have ended ``curve`` (smoothed already)."""
    vals = list(curve.values)
    if not vals:
        return StopPoint(None, None, curve.end_s, None, float("nan"))
    wait = patience if patience is not None else patience_for(len(vals))
    best_end = min(vals) if goal == "min" else max(vals)
    best, since = vals[0], 0
    for i, v in enumerate(vals[1:], start=1):
        better = v < best - min_delta * abs(best) if goal == "min" else v > best + min_delta * abs(best)
        if better:
            best, since = v, 0
        else:
            since += 1
        if since >= wait:
            return StopPoint(curve.times_s[i], curve.steps[i], curve.end_s, v, best_end, vals[0], vals[-1])
    return StopPoint(None, None, curve.end_s, None, best_end, vals[0], vals[-1])


@dataclass(frozen=True)
class EarlyStopping:
    """The measured verdict over an arm's seeds."""

    points: tuple[StopPoint, ...]
    patience: int
    min_delta: float
    tolerance: float
    goal: Goal
    kept: bool
    reason: str
    noise: float | None = None  # the seeds' spread of their final values (max − min), when judged against it

    @property
    def saved_s(self) -> float:
        return float(np.median([p.saved_s for p in self.points])) if self.points else 0.0

    @property
    def saved_share(self) -> float:
        return float(np.median([p.saved_share for p in self.points])) if self.points else 0.0

    @property
    def given_up(self) -> float:
        return max((p.given_up(self.goal) for p in self.points), default=0.0)

    @property
    def given_up_abs(self) -> float:
        return max((p.given_up_abs(self.goal) for p in self.points), default=0.0)

    def to_json(self) -> dict[str, object]:
        return {"patience_points": self.patience, "min_delta": self.min_delta, "tolerance": self.tolerance,
                "saved_s": self.saved_s, "saved_share": self.saved_share, "metric_given_up": self.given_up_abs,
                "metric_given_up_share": self.given_up,
                "per_seed": [{"stop_s": p.stop_s, "stop_step": p.stop_step, "end_s": p.end_s,
                              "value_at_stop": p.value_at_stop, "best_at_end": p.best_at_end}
                             for p in self.points], "seed_noise": self.noise, "kept": self.kept,
                "reason": self.reason}


def final_spread(curves: Sequence[Curve]) -> float | None:
    """The seeds' spread at the end: max − min of their last values (``None`` with fewer than 2 seeds)."""
    ends = [c.values[-1] for c in curves if len(c)]
    return float(max(ends) - min(ends)) if len(ends) >= 2 else None


def measure(curves: Sequence[Curve], goal: Goal, patience: int | None = None, min_delta: float = MIN_DELTA,
            tolerance: float = TOLERANCE, seed_noise: bool = False) -> EarlyStopping:
    """Early stopping on every seed's curve; kept when every seed stops early within ``tolerance`` (or, with
    ``seed_noise``, within the seeds' own spread at the end when that is larger)."""
    wait = patience if patience is not None else patience_for(min((len(c) for c in curves), default=0))
    points = tuple(stop_point(c, goal, wait, min_delta) for c in curves)
    rule = f"patience {wait} points, min_delta {min_delta:.0%}"
    stopped = [p for p in points if p.stop_s is not None]
    noise = final_spread(curves) if seed_noise else None
    probe = EarlyStopping(points, wait, min_delta, tolerance, goal, False, "", noise)
    if noise is not None and points and len(stopped) == len(points) and probe.given_up > tolerance:
        lost = max(p.given_up_at_end(goal) for p in points)
        inside = lost <= noise
        text = (f"stopping ({rule}) saves {probe.saved_s:.3g} s ({probe.saved_share:.0%} of the run, median over "
                f"{len(points)} seeds) and gives up {lost:.3g} of the metric against where the run ended (at most, "
                f"over seeds; {probe.given_up:.1%} of the run's improvement against its best point), "
                f"{'inside' if inside else 'outside'} the seeds' own spread at the end ({noise:.3g})")
        return EarlyStopping(points, wait, min_delta, tolerance, goal, inside,
                             f"kept: {text}: no loss beyond seed-to-seed noise" if inside else f"rejected: {text}",
                             noise)
    if not points:
        reason = "no run to measure early stopping on"
    elif len(stopped) < len(points):
        reason = (f"rejected: patience never ran out in {len(points) - len(stopped)} of {len(points)} runs "
                  f"({rule}): the metric was still improving, stopping early saves nothing")
    elif probe.given_up > tolerance:
        reason = (f"rejected: stopping ({rule}) saves {probe.saved_s:.3g} s ({probe.saved_share:.0%}) but gives up "
                  f"{probe.given_up_abs:.3g} of the metric ({probe.given_up:.1%} of the run's improvement), above the "
                  f"{tolerance:.0%} tolerance")
    else:
        spread = f"; the seeds' spread at the end is {noise:.3g}" if noise is not None else ""
        return EarlyStopping(points, wait, min_delta, tolerance, goal, True,
                             f"kept: stopping at the plateau ({rule}) saves {probe.saved_s:.3g} s "
                             f"({probe.saved_share:.0%} of the run, median over {len(points)} seed(s)) and gives up "
                             f"{probe.given_up_abs:.3g} of the metric ({probe.given_up:.1%} of the run's improvement; "
                             f"tolerance {tolerance:.0%}){spread}", noise)
    return EarlyStopping(points, wait, min_delta, tolerance, goal, False, reason, noise)
