"""TRAIN001 — training kept going after the loss stopped improving."""

from __future__ import annotations

import numpy as np

from advisors.facts import Facts
from advisors.verdict import Bottleneck, Finding
from advisors.rules.base import Example, Rule, pct, ramp
from advisors.synthetic import observation, run_facts

_FLAT = tuple([2.0 - 0.1 * i for i in range(10)] + [1.0] * 30)
_FALLING = tuple(2.0 * 0.97**i for i in range(40))
# A loss still falling, slowly, under step-to-step noise: 7.39 at step 10, about 7.21 at step 26.
_SLOW_NOISY = tuple(
    8.2 - 0.08 * i if i < 10 else 7.39 - 0.0113 * (i - 10) + (0.05 if i % 2 else -0.05)
    for i in range(27)
)


class LossPlateau(Rule):
    """From a stored run's per-step losses: the step after which the (smoothed) loss never again improves by
    more than ``min_rel_improvement`` (2%), and the compute spent after it. The steps do not get faster, so
    the severity is 0 — this never binds a step-time diagnosis — but the evidence says how much run time early
    stopping would have saved.

    Only what was observed: a plateau is called only when the losses after it are not still falling (a line
    fitted to them drops less than ``max_tail_drop`` (1%) of the level, or not significantly: |t| <
    ``trend_t``); and a saving is claimed only for a run observed to its end. A run stopped before its end (a
    launched script profiled then stopped, a trial with a step limit, a run that failed or was killed) gets
    "in the N steps observed, …", no saving and no fix: the rest of the run was never seen.

    Smoothing: trailing mean over ``smooth_fraction`` (0.1) of the run (at least 3 steps). Thresholds:
    ``min_steps`` (20) losses; ``min_wasted_share`` (0.25) of the run after the plateau; ``high_wasted_share``
    (0.6).

    Fix: early stopping on a validation metric with patience.
    """

    id, name, bottleneck = "TRAIN001", "loss-plateau", Bottleneck.COMPUTE
    cause = "plateau"
    thresholds = {
        "min_steps": 20,
        "min_rel_improvement": 0.02,
        "smooth_fraction": 0.1,
        "min_wasted_share": 0.25,
        "high_wasted_share": 0.6,
        "max_tail_drop": 0.01,
        "trend_t": 2.0,
    }
    fix_id = "early_stopping"
    fires = (
        Example(
            "loss flat for the last 30 of 40 steps",
            lambda: observation(no_trace=True, run=run_facts(losses=_FLAT, steps_done=40)),
            fix="early_stopping",
            severity=0.0,
        ),
        Example(
            "loss flat in the 40 steps of a trial stopped before its end: no saving claimed",
            lambda: observation(
                no_trace=True, run=run_facts(losses=_FLAT, steps_done=40, stopped_after=40)
            ),
            fix=None,
            severity=0.0,
        ),
    )
    passes = (
        Example(
            "loss still falling",
            lambda: observation(no_trace=True, run=run_facts(losses=_FALLING, steps_done=40)),
        ),
        Example(
            "loss still falling slowly under noise (7.39 → 7.21)",
            lambda: observation(no_trace=True, run=run_facts(losses=_SLOW_NOISY, steps_done=27)),
        ),
        Example("uploaded trace", lambda: observation({"gpu_compute": 0.9})),
    )

    def missing(self, f: Facts) -> str | None:
        if f.run is None:
            return None  # a trace has no loss curve; nothing to say
        if len(f.run.losses) < self.t["min_steps"]:
            return (
                f"fewer than {int(self.t['min_steps'])} logged losses: too short to call a plateau"
            )
        return None

    def check(self, f: Facts) -> Finding | None:
        run = f.run
        if run is None:
            return None
        plateau = plateau_step(run.losses, self.t["min_rel_improvement"], self.t["smooth_fraction"])
        n = len(run.losses)
        wasted = (n - 1 - plateau) / n
        if wasted < self.t["min_wasted_share"] or still_falling(
            run.losses[plateau:], self.t["max_tail_drop"], self.t["trend_t"]
        ):
            return None
        flat_steps = n - 1 - plateau
        evidence = {
            "plateau_step": plateau,
            "steps_logged": n,
            "loss_at_plateau": run.losses[plateau],
            "final_loss": run.losses[-1],
            "observed_to_end": run.stopped_after is None,
        }
        confidence = ramp(wasted, self.t["min_wasted_share"], self.t["high_wasted_share"])
        if (
            run.stopped_after is not None
        ):  # a trial of a longer run: nothing is known of the steps never run
            return self.finding(
                f,
                severity=0.0,
                confidence=confidence,
                fix_id=None,
                message=f"In the {n} steps observed, the loss was flat after step {plateau} "
                f"({run.losses[plateau]:.4g} → {run.losses[-1]:.4g}); the run was stopped before its end, "
                "so nothing is claimed about the rest of it.",
                evidence={
                    **evidence,
                    "flat_steps": flat_steps,
                    "saved_steps": None,
                    "saved_share": None,
                    "saved_seconds": None,
                },
            )
        saved_s = flat_steps * run.step_time_ms / 1e3 if run.step_time_ms else None
        return self.finding(
            f,
            severity=0.0,
            confidence=confidence,
            message=f"The loss stopped improving after step {plateau} ({run.losses[plateau]:.4g} → "
            f"{run.losses[-1]:.4g}): early stopping would have saved {flat_steps} of {n} steps "
            f"({pct(wasted)} of the run's compute).",
            evidence={
                **evidence,
                "saved_steps": flat_steps,
                "saved_share": wasted,
                "saved_seconds": saved_s,
            },
        )


def still_falling(tail: tuple[float, ...], max_drop: float, trend_t: float) -> bool:
    """A line fitted to ``tail`` drops by more than ``max_drop`` of its level, with a t-statistic past
    ``trend_t``: the loss is still falling, whatever a smoothed minimum says."""
    y = np.asarray(tail, dtype=float)
    if len(y) < 4:
        return False
    x = np.arange(len(y), dtype=float)
    slope, intercept = np.polyfit(x, y, 1)
    resid = y - (slope * x + intercept)
    se = np.sqrt(resid.var(ddof=2) / np.sum((x - x.mean()) ** 2)) if len(y) > 2 else np.inf
    drop = -slope * (len(y) - 1) / max(abs(float(intercept)), 1e-12)
    t = slope / se if se > 0 else (-np.inf if slope < 0 else 0.0)
    return bool(drop > max_drop and t < -trend_t)


def plateau_step(losses: tuple[float, ...], rel_improvement: float, smooth_fraction: float) -> int:
    """First step after which the smoothed loss never drops more than ``rel_improvement`` below its value."""
    x = np.asarray(losses, dtype=float)
    w = max(3, int(len(x) * smooth_fraction))
    c = np.concatenate([[0.0], np.cumsum(x)])
    i = np.arange(1, len(x) + 1)
    lo = np.maximum(i - w, 0)
    smooth = (c[i] - c[lo]) / (i - lo)  # trailing mean over up to w steps
    future_min = np.minimum.accumulate(smooth[::-1])[::-1]
    ok = future_min >= smooth * (1 - rel_improvement) - 1e-12 * np.abs(smooth)
    # the plateau starts at the first step from which every later step is also "ok"
    bad = np.flatnonzero(~ok)
    return int(bad[-1] + 1) if bad.size else 0
