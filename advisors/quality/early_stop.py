"""Early stopping as a trade-off: the same run stopped at each point vs the run to its end.

The stopping rule (what a user's ``EarlyStopping`` callback does, here on the smoothed curve): after
``min_points`` points, stop at the first point where the metric has not improved on its best by more than
``min_delta`` (relative) for ``patience`` consecutive points. The saving is read off the run's own clock:
``end_s − stop_s`` seconds, and the metric given up is how much the best value at the end beats the value at
the stop, as a share of the run's whole improvement (first value to best): a loss that falls toward 0 would
make a share of the value itself meaningless. For every run the **trade-off curve** says, point by point, the share of the run's time saved by stopping there
against the metric given up (the value there against the best the run reached), with the patience rule's point
marked. Whether that is worth it is the user's target's question, not a tolerance's:

- with a target (``--target VALUE``, or the script's own printed metric's), the verdict is the earliest point that
  still reaches it: kept when every seed reaches it before its end (the saving is the time after that point);
  rejected when a seed never reaches it, or only at its end;
- without one, the trade-off at the patience rule's point in one line ("stopping at step 321 saves 82% of the
  time and ends at 0.550 instead of 0.496") and the decision left to the user (outcome ``trade-off``); rejected
  only when patience never ran out (the metric still improving: stopping saves nothing).

Seeds that are one run (the same curve: the script's seed could not be varied) are said to be one run.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from advisors.experiments.results.outcome import WORD_OF, Why
from advisors.quality.curve import Curve, Goal

PATIENCE_SHARE = 0.1  # patience = this share of the run's points (at least MIN_PATIENCE)
MIN_PATIENCE = 5
MIN_DELTA = 0.01  # an improvement must beat the best by 1 % to count
TRADEOFF_POINTS = 40  # points of each run's trade-off curve kept for the page and the report


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
        return max(
            self.value_at_stop - self.at_end if goal == "min" else self.at_end - self.value_at_stop,
            0.0,
        )

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
        diff = (
            self.value_at_stop - self.best_at_end
            if goal == "min"
            else self.best_at_end - self.value_at_stop
        )
        return max(diff, 0.0)

    def given_up(self, goal: Goal) -> float:
        """The metric lost by stopping as a share of the run's whole improvement (first value → best)."""
        gained = abs(self.first - self.best_at_end)
        return self.given_up_abs(goal) / gained if gained > 0 else 0.0


def patience_for(points: int) -> int:
    return max(MIN_PATIENCE, int(points * PATIENCE_SHARE))


def stop_point(
    curve: Curve, goal: Goal, patience: int | None = None, min_delta: float = MIN_DELTA
) -> StopPoint:
    """Where early stopping with ``patience`` would have ended ``curve`` (smoothed already)."""
    vals = list(curve.values)
    if not vals:
        return StopPoint(None, None, curve.end_s, None, float("nan"))
    wait = patience if patience is not None else patience_for(len(vals))
    best_end = min(vals) if goal == "min" else max(vals)
    best, since = vals[0], 0
    for i, v in enumerate(vals[1:], start=1):
        better = (
            v < best - min_delta * abs(best) if goal == "min" else v > best + min_delta * abs(best)
        )
        if better:
            best, since = v, 0
        else:
            since += 1
        if since >= wait:
            return StopPoint(
                curve.times_s[i], curve.steps[i], curve.end_s, v, best_end, vals[0], vals[-1]
            )
    return StopPoint(None, None, curve.end_s, None, best_end, vals[0], vals[-1])


@dataclass(frozen=True)
class TradeOff:
    """Stopping one run at ``step`` (``t_s`` of its clock): the share of its time saved, the value there and what
    that gives up against the best the run reached (≥ 0, the metric's own unit)."""

    step: int
    t_s: float
    saved_share: float
    value: float
    given_up: float

    def to_json(self) -> dict[str, float | int]:
        return {
            "step": self.step,
            "t_s": self.t_s,
            "saved_share": self.saved_share,
            "value": self.value,
            "given_up": self.given_up,
        }


def tradeoff(curve: Curve, goal: Goal, points: int = TRADEOFF_POINTS) -> tuple[TradeOff, ...]:
    """The run's trade-off curve (smoothed ``curve``), at most ``points`` points evenly over its length."""
    n = len(curve)
    if n == 0 or curve.end_s <= 0:
        return ()
    best = min(curve.values) if goal == "min" else max(curve.values)
    idx = sorted({int(i) for i in np.linspace(0, n - 1, min(n, points))})
    return tuple(
        TradeOff(
            curve.steps[i],
            curve.times_s[i],
            max(curve.end_s - curve.times_s[i], 0.0) / curve.end_s,
            curve.values[i],
            max(curve.values[i] - best if goal == "min" else best - curve.values[i], 0.0),
        )
        for i in idx
    )


def first_reaching(curve: Curve, target: float, goal: Goal) -> StopPoint | None:
    """The run stopped at the earliest point that reaches ``target`` (``None``: it never does)."""
    vals = list(curve.values)
    best_end = (min(vals) if goal == "min" else max(vals)) if vals else float("nan")
    for i, v in enumerate(vals):
        if (v <= target) if goal == "min" else (v >= target):
            return StopPoint(
                curve.times_s[i], curve.steps[i], curve.end_s, v, best_end, vals[0], vals[-1]
            )
    return None


@dataclass(frozen=True)
class EarlyStopping:
    """The verdict over an arm's seeds: ``points`` where the patience rule stops each seed, ``at_target`` where
    each first reaches the target (with one), each seed's trade-off curve, and the outcome word."""

    points: tuple[StopPoint, ...]
    patience: int
    min_delta: float
    goal: Goal
    kept: bool
    reason: str
    why: Why = Why.NO_RUN  # the reason code; its word: kept, rejected, or trade-off (no target)
    target: float | None = None
    at_target: tuple[StopPoint | None, ...] = ()
    curves: tuple[tuple[TradeOff, ...], ...] = ()
    noise: float | None = (
        None  # the seeds' spread of their final values (max − min); None for one run
    )
    one_run: bool = False
    target_from: str | None = (
        None  # where the target came from: "--target", "the script's --target_loss", …
    )

    @property
    def outcome(self) -> str:
        """The verdict's word: kept, rejected, or trade-off."""
        return WORD_OF[self.why].value

    @property
    def chosen(self) -> tuple[StopPoint, ...]:
        """The stop the verdict is about: the first point at the target with one, the patience rule's without."""
        if self.target is not None:
            return tuple(p for p in self.at_target if p is not None)
        return self.points

    @property
    def saved_s(self) -> float:
        got = self.chosen
        return float(np.median([p.saved_s for p in got])) if got else 0.0

    @property
    def saved_share(self) -> float:
        got = self.chosen
        return float(np.median([p.saved_share for p in got])) if got else 0.0

    @property
    def given_up(self) -> float:
        return max((p.given_up(self.goal) for p in self.chosen), default=0.0)

    @property
    def given_up_abs(self) -> float:
        return max((p.given_up_abs(self.goal) for p in self.chosen), default=0.0)

    def to_json(self) -> dict[str, object]:
        return {
            "patience_points": self.patience,
            "min_delta": self.min_delta,
            "outcome": self.outcome,
            "target": self.target,
            "target_from": self.target_from,
            "saved_s": self.saved_s,
            "saved_share": self.saved_share,
            "metric_given_up": self.given_up_abs,
            "metric_given_up_share": self.given_up,
            "goal": self.goal,
            "per_seed": [_stop_json(p, self.goal) for p in self.points],
            "at_target": [None if p is None else _stop_json(p, self.goal) for p in self.at_target],
            "tradeoff": [[t.to_json() for t in c] for c in self.curves],
            "seed_noise": self.noise,
            "one_run": self.one_run,
            "kept": self.kept,
            "reason": self.reason,
        }


def _stop_json(p: StopPoint, goal: Goal) -> dict[str, object]:
    return {
        "stop_s": p.stop_s,
        "stop_step": p.stop_step,
        "end_s": p.end_s,
        "value_at_stop": p.value_at_stop,
        "best_at_end": p.best_at_end,
        "saved_share": p.saved_share,
        "given_up": p.given_up_abs(goal),
    }


def final_spread(curves: Sequence[Curve]) -> float | None:
    """The seeds' spread at the end: max − min of their last values (``None`` with fewer than 2 seeds)."""
    ends = [c.values[-1] for c in curves if len(c)]
    return float(max(ends) - min(ends)) if len(ends) >= 2 else None


def measure(
    curves: Sequence[Curve],
    goal: Goal,
    patience: int | None = None,
    min_delta: float = MIN_DELTA,
    target: float | None = None,
    one_run: bool = False,
) -> EarlyStopping:
    """Early stopping on every seed's (smoothed) curve: judged against ``target`` when there is one, else the
    trade-off said and left to the user (see the module docs)."""
    wait = (
        patience if patience is not None else patience_for(min((len(c) for c in curves), default=0))
    )
    points = tuple(stop_point(c, goal, wait, min_delta) for c in curves)
    rule = f"patience {wait} points, min_delta {min_delta:.0%}"
    seeds = (
        f"the {len(points)} seeds are one run" if one_run else f"median over {len(points)} seed(s)"
    )
    probe = EarlyStopping(
        points,
        wait,
        min_delta,
        goal,
        False,
        "",
        target=target,
        curves=tuple(tradeoff(c, goal) for c in curves),
        noise=None if one_run else final_spread(curves),
        one_run=one_run,
    )
    if not points:
        return replace(probe, reason="no run to measure early stopping on", why=Why.NO_RUN)
    if target is not None:
        at = tuple(first_reaching(c, target, goal) for c in curves)
        probe = replace(probe, at_target=at)
        missed = sum(p is None for p in at)
        if missed:
            bests = [(min(c.values) if goal == "min" else max(c.values)) for c in curves if len(c)]
            return replace(
                probe,
                why=Why.NEVER_REACHES,
                reason=f"rejected: {missed} of {len(at)} run(s) never reach the target "
                f"{target:.4g} (best {', '.join(f'{b:.4g}' for b in bests)}): "
                "stopping earlier cannot reach it either",
            )
        step = int(np.median([p.stop_step or 0 for p in probe.chosen]))
        if probe.saved_share <= 0:
            return replace(
                probe,
                why=Why.REACHES_AT_END,
                reason=f"rejected: the run first reaches the target {target:.4g} only "
                "at its end: stopping early saves nothing",
            )
        return replace(
            probe,
            kept=True,
            why=Why.STOPS_AT_TARGET,
            reason=f"kept: stopping at the first point that reaches the target {target:.4g} (step {step}, "
            f"{seeds}) saves {probe.saved_s:.3g} s ({probe.saved_share:.0%} of the run)",
        )
    stopped = [p for p in points if p.stop_s is not None]
    if len(stopped) < len(points):
        return replace(
            probe,
            why=Why.STILL_IMPROVING,
            reason=f"rejected: patience never ran out in "
            f"{len(points) - len(stopped)} of {len(points)} runs ({rule}): the "
            "metric was still improving, stopping early saves nothing",
        )
    step = int(np.median([p.stop_step or 0 for p in points]))
    at_stop = float(np.median([p.value_at_stop for p in points if p.value_at_stop is not None]))
    best = float(np.median([p.best_at_end for p in points]))
    return replace(
        probe,
        why=Why.TRADE_OFF,
        reason=f"trade-off: stopping at step {step} ({rule}; {seeds}) saves {probe.saved_share:.0%} of "
        f"the time and ends at {at_stop:.4g} instead of {best:.4g}; whether that is worth it is "
        "your call (give --target VALUE to decide against your target)",
    )
