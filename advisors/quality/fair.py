"""Fair arms for ``optimize --to-quality``: seeds that really differ, a target clear of the start's noise, no
target reached before an arm's first real optimizer step, and other programs' load checked by the A/B rule.

- **One run, K times.** When every seed's curve of an arm is the same (the script pinned its seed in a way the
  agent could not offset: ``stepwise_agent.seeding``), the seeds are one run: their spread is not noise, it is
  nothing. :func:`one_run` says so, and the verdicts then use the stated :data:`ONE_RUN_TOLERANCE` instead.
- **A target clear of the start.** The baseline's raw values over its first :data:`START_POINTS` points are its
  own noise before it has learnt anything; a target inside that band (``≤`` its highest value for a loss) can be
  "reached" by a lucky first batch. :func:`start_noise` gives the band, :func:`clear_of_start` the verdict.
- **A target off the floor.** Read at 80% of a budget that outlasts the curve's fall, the target sits on its floor,
  where which arm reaches it first is decided by the curve's noise more than by the change (a larger batch's
  smoother curve crosses a level just above its floor later than a noisy one dips under it), and the noise scale's
  steps part, which assumes a falling curve, cannot hold: measured 0.61/0.41/0.27 against 0.51/0.26/0.14 predicted
  for batch × 2/4/8 with a target 0.17 above the floor, 0.55/0.33/0.23 against 0.54/0.31/0.19 with one on the fall
  (``benchmarks/results/quality-load-2026-11-29.md``). :func:`on_floor` says so (the verdicts still stand: they
  are measured).
- **A real optimizer step first.** With gradient accumulation over k micro-batches the first k points are one
  optimizer step's worth of micro-batches: the first value that follows a real update is at step k + 1.
  :func:`first_counted_step` is that step for an arm; a time to target before it does not count.
- **Contention.** Each run's other-programs load over its steps (the A/B trials' record,
  :func:`advisors.experiments.trial_load.trial_load` — read in :mod:`advisors.experiments.to_quality`) and
  :func:`contention_verdict`: the A/B pairs' rule (:func:`advisors.compare.contention.holds_beyond_contention`)
  applied to the time-to-target ratio.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from advisors.compare.contention import CONTENDED_CORES, holds_beyond_contention
from advisors.quality.curve import Curve, Goal
from stepwise_agent.trigger import MAD_TO_SIGMA

START_POINTS = 5  # the baseline's first points: its noise before it has learnt anything
ONE_RUN_TOLERANCE = (
    0.05  # seeds that are one run: a ratio within 5 % of 1 is no difference, said as such
)


def one_run(curves: Sequence[Curve]) -> bool:
    """Whether two or more seeds' curves are the same values at the same steps (one run, K times)."""
    shown = [c for c in curves if len(c)]
    if len(shown) < 2:
        return False
    first = shown[0]
    return all(
        c.steps == first.steps and np.allclose(c.values, first.values, rtol=0, atol=1e-12)
        for c in shown[1:]
    )


def start_noise(raw: Sequence[Curve], points: int = START_POINTS) -> tuple[float, float] | None:
    """The band of the baseline's raw values over each seed's first ``points`` points (``None``: no points)."""
    vals = [v for c in raw for v in c.values[:points]]
    return (float(min(vals)), float(max(vals))) if vals else None


def clear_of_start(value: float, goal: Goal, band: tuple[float, float] | None) -> str | None:
    """Why ``value`` is not clear of the start's noise (``None``: it is): a loss target must lie below the band,
    a metric to raise above it."""
    if band is None:
        return None
    low, high = band
    inside = value >= low if goal == "min" else value <= high
    if not inside:
        return None
    return (
        f"the target {value:.4g} lies inside the baseline's own noise at its start ({low:.4g} … {high:.4g} over "
        f"its first {START_POINTS} points): a first batch can reach it by chance"
    )


FLOOR_WINDOWS = (
    (0.4, 0.6),
    (0.8, 1.0),
)  # the curve's mean over these shares of its time: has it still fallen?
FLOOR_NEAR = (
    2.0  # a target within this many of the last window's spreads of its level is on the floor
)


def on_floor(curves: Sequence[Curve], value: float, goal: Goal) -> str | None:
    """Why the target ``value`` sits on the baseline's floor (``None``: it does not): over most of its seeds the
    smoothed curve's mean over the last fifth of its time moved less, toward the goal, than the spread of its values
    there (MAD-based) since the fifth around its middle, and the target lies within :data:`FLOOR_NEAR` such
    spreads of that last level."""
    said = []
    for c in curves:
        if len(c) < 20:
            continue
        times, values = np.asarray(c.times_s, dtype=float), np.asarray(c.values, dtype=float)
        span = times[-1] - times[0]
        if span <= 0:
            continue
        windows = [
            values[(times >= times[0] + a * span) & (times <= times[0] + b * span)]
            for a, b in FLOOR_WINDOWS
        ]
        if min(len(w) for w in windows) < 5:
            continue
        middle, last = windows
        level = float(np.median(last))
        spread = MAD_TO_SIGMA * float(np.median(np.abs(last - level)))
        fallen = (
            float(np.mean(middle) - np.mean(last))
            if goal == "min"
            else float(np.mean(last) - np.mean(middle))
        )
        above = value - level if goal == "min" else level - value
        said.append((fallen < spread and above < FLOOR_NEAR * spread, fallen, spread, level))
    flat = [x for x in said if x[0]]
    if not said or len(flat) * 2 <= len(said):
        return None
    fallen, spread, level = (float(np.median([x[i] for x in flat])) for i in (1, 2, 3))
    return (
        f"the target {value:.4g} sits on the baseline's floor: over the last fifth of its run its curve moved "
        f"{fallen:+.3g} toward it since the middle, within its own spread of ±{spread:.3g}, and ended near "
        f"{level:.4g} ({len(flat)} of {len(said)} seeds): which arm reaches it first is decided by the curve's "
        "noise more than by the change, and the steps part of a batch prediction (which assumes a falling "
        "curve) does not hold; a --target on the fall or a shorter --budget judges the change itself"
    )


def first_counted_step(patch: Mapping[str, Any] | None) -> int:
    """The first step whose value follows a real optimizer update: k + 1 with accumulation over k (its micro-
    batches are counted as steps), else 2 (step 1's loss is computed before any update)."""
    knobs = dict(patch or {})
    k = knobs.get("grad_accum") or knobs.get("accumulation_steps") or 1
    try:
        return int(k) + 1
    except (TypeError, ValueError):
        return 2


def after_first_update(curve: Curve, first_step: int, printed: bool = False) -> Curve:
    """``curve`` without its points before ``first_step`` (their time still passed: the clock is kept). A printed
    metric's point carries the steps done before it was printed, so it follows the first update one step sooner;
    a curve without step counts (all 0) cannot be cut."""
    if not any(curve.steps):
        return curve
    least = first_step - 1 if printed else first_step
    keep = [i for i, s in enumerate(curve.steps) if s >= least]
    return Curve(
        tuple(curve.times_s[i] for i in keep),
        tuple(curve.values[i] for i in keep),
        tuple(curve.steps[i] for i in keep),
        curve.end_s,
        curve.smoothed,
    )


def contended(others_cores: float | None) -> bool:
    """Whether other programs took the A/B trials' contended share of the machine during a run."""
    return others_cores is not None and others_cores >= CONTENDED_CORES


@dataclass(frozen=True)
class ArmLoad:
    """Other programs' mean cores over each seed's run of an arm (``None``: the run recorded no host figures)."""

    per_seed: tuple[float | None, ...]
    cores: int | None

    @property
    def mean(self) -> float | None:
        got = [x for x in self.per_seed if x is not None]
        return float(np.mean(got)) if got else None

    @property
    def contended(self) -> tuple[int, ...]:
        """The seeds (0-based) other programs took :data:`CONTENDED_CORES` or more during."""
        return tuple(i for i, x in enumerate(self.per_seed) if contended(x))

    def text(self) -> str:
        shown = ", ".join("?" if x is None else f"{x:.2f}" for x in self.per_seed)
        return f"{shown} of {self.cores or '?'} cores"

    def to_json(self) -> dict[str, object]:
        return {
            "others_cores": list(self.per_seed),
            "cores": self.cores,
            "mean": self.mean,
            "contended_seeds": list(self.contended),
        }


def contention_verdict(
    ratio: float, kept: bool, slower: bool, before: ArmLoad, after: ArmLoad, edge: float
) -> str | None:
    """Why the verdict cannot stand against other programs' load (``None``: it stands). A kept change (``ratio``
    beyond ``edge``) must hold with the most the neighbour could have slowed the baseline taken out; a rejection
    as slower (ratio short of 1) with the most it could have slowed the change taken out. Neither claim: the
    rule has nothing to overturn."""
    b, a = before.mean, after.mean
    if b is None or a is None or not (kept or slower):
        return None
    cores = before.cores or after.cores
    holds = holds_beyond_contention(ratio, b, a, cores, edge if kept else 1.0, faster=kept)
    if holds:
        return None
    return (
        f"other programs took {b:.2f} of {cores or '?'} cores during the baseline's seeds and {a:.2f} during "
        f"the change's ({before.text()} / {after.text()}): that difference alone could explain "
        f"{ratio:.2f}×"
    )
