"""Is a rank really behind, or is it step-to-step noise? What the straggler chart highlights.

The breakdown names the rank with the most work per step (:attr:`profilers.trace.breakdown.Breakdown.straggler`),
however small its lead. A view must not point at a rank that is 0.16 ms ahead on one step: the lead counts only
when it stands out of the noise, measured on the ranks' own steps. ``noise_ms`` is the median over ranks of the
interquartile range of a rank's work per step (step minus exposed communication); the rank is highlighted when
its lead over the median rank exceeds ``NOISE_MULTIPLE × noise_ms`` and at least :data:`MIN_STEPS` steps per rank
were seen (with fewer, the spread of a rank's steps is unknown and nothing is highlighted).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

MIN_STEPS = 3
NOISE_MULTIPLE = 2.0


@dataclass(frozen=True)
class StragglerCall:
    """The rank with the most work, its lead over the median rank, the step-to-step noise, and the verdict."""

    rank: int | None
    lead_ms: float
    noise_ms: float | None  # None: too few steps to measure the spread
    steps: int
    beyond_noise: bool

    @property
    def reason(self) -> str:
        if self.rank is None:
            return "One rank: there is no straggler to find."
        if self.noise_ms is None:
            return (f"Rank {self.rank} does the most work ({self.lead_ms:.2f} ms above the median rank), but with "
                    f"{self.steps} step(s) per rank the step-to-step noise cannot be measured: no rank is marked "
                    f"(at least {MIN_STEPS} steps are needed).")
        if self.beyond_noise:
            return (f"Rank {self.rank} works {self.lead_ms:.2f} ms per step more than the median rank, beyond the "
                    f"step-to-step noise ({self.noise_ms:.2f} ms, the median spread of a rank's steps): it is a "
                    "straggler.")
        return (f"Rank {self.rank} leads by {self.lead_ms:.2f} ms, within the step-to-step noise "
                f"({self.noise_ms:.2f} ms over {self.steps} steps): no rank stands out.")


def straggler_call(per_step: pd.DataFrame) -> StragglerCall:
    """Judge the busiest rank against the noise of the steps (``per_step``: the breakdown's per-step frame)."""
    if per_step.empty or per_step["rank"].nunique() < 2:
        return StragglerCall(None, 0.0, None, int(len(per_step)), False)
    work = per_step.assign(work_ms=(per_step["step_ns"] - per_step["communication"]) / 1e6)
    g = work.groupby("rank")["work_ms"]
    medians = g.median()
    steps = int(g.size().min())
    rank = int(str(medians.idxmax()))
    lead = float(medians.max() - medians.median())
    if steps < MIN_STEPS:
        return StragglerCall(rank, lead, None, steps, False)
    iqr = g.quantile(0.75) - g.quantile(0.25)
    noise = float(np.median(iqr.to_numpy()))
    return StragglerCall(rank, lead, noise, steps, lead > NOISE_MULTIPLE * noise and lead > 0)
