"""The quality both arms must reach: :class:`Target` — given, or read off the baseline's own curve.

From the baseline (``source="baseline curve"``): each baseline seed's smoothed curve is read at
``fraction`` (:data:`BASELINE_FRACTION`, 0.8) of its budget — of its steps when the budget is steps, of its
clock when it is seconds — and the target is the median of those values. The baseline then reaches its own
target at about that fraction of its budget, leaving room to be slower or faster than itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

import numpy as np

from advisors.quality.curve import Curve, Goal

BASELINE_FRACTION = 0.8
Source = Literal["given", "baseline curve", "printed metric"]
LOSS_METRIC = "training loss (EMA, alpha 0.1)"


@dataclass(frozen=True)
class Target:
    """``metric`` reaches ``value`` (``goal`` min: at or below; max: at or above); ``source`` says where the
    value came from, ``note`` how (e.g. the fraction of the baseline's budget)."""

    metric: str
    value: float
    goal: Goal
    source: Source
    note: str = ""

    def to_json(self) -> dict[str, object]:
        return {
            "metric": self.metric,
            "value": self.value,
            "goal": self.goal,
            "source": self.source,
            "note": self.note,
        }

    def describe(self) -> str:
        sign = "≤" if self.goal == "min" else "≥"
        return f"{self.metric} {sign} {self.value:.4g} ({self.source}{': ' + self.note if self.note else ''})"


@dataclass(frozen=True)
class Budget:
    """How far an arm may run: ``steps`` optimizer steps, or ``seconds`` of its clock (one of them)."""

    steps: int | None = None
    seconds: float | None = None

    def __post_init__(self) -> None:
        if (self.steps is None) == (self.seconds is None):
            raise ValueError("a budget is steps or seconds, exactly one")
        if (self.steps is not None and self.steps < 1) or (
            self.seconds is not None and self.seconds <= 0
        ):
            raise ValueError("a budget must be positive")

    @classmethod
    def parse(cls, text: str) -> Budget:
        """``"300"`` or ``"300steps"``: steps; ``"90s"``: seconds (``"1.5m"``, ``"2h"`` too)."""
        raw = text.strip().lower()
        for suffix, scale in (("steps", None), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
            if raw.endswith(suffix):
                number = raw[: -len(suffix)]
                try:
                    return (
                        cls(steps=int(number))
                        if scale is None
                        else cls(seconds=float(number) * scale)
                    )
                except ValueError:
                    break
        try:
            return cls(steps=int(raw))
        except ValueError:
            raise ValueError(
                f"--budget {text!r}: give steps (300) or seconds (90s, 2m, 1h)"
            ) from None

    def describe(self) -> str:
        return f"{self.steps} steps" if self.steps is not None else f"{self.seconds:g} s"


def baseline_value(
    curves: Sequence[Curve], budget: Budget, fraction: float = BASELINE_FRACTION
) -> float:
    """Median over the baseline's (smoothed) curves of the value each shows at ``fraction`` of the budget."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    seen = []
    for c in curves:
        if not len(c):
            continue
        if budget.steps is not None:
            at = fraction * budget.steps
            idx = [i for i, s in enumerate(c.steps) if s <= at]
            if idx:
                seen.append(c.values[idx[-1]])
        else:
            v = c.value_at_time(fraction * float(budget.seconds or 0.0))
            if v is not None:
                seen.append(v)
    if not seen:
        raise ValueError(
            "no baseline run has a point at that fraction of its budget: no target can be read"
        )
    return float(np.median(seen))


def from_baseline(
    curves: Sequence[Curve],
    budget: Budget,
    goal: Goal,
    metric: str,
    fraction: float = BASELINE_FRACTION,
) -> Target:
    value = baseline_value(curves, budget, fraction)
    return Target(
        metric,
        value,
        goal,
        "baseline curve",
        f"median over {len(curves)} baseline seed(s) of the value at {fraction:.0%} of "
        f"{budget.describe()}",
    )
