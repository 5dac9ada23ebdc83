"""TRAIN001 — training kept going after the loss stopped improving."""

from __future__ import annotations

import numpy as np

from advisors.facts import Facts
from advisors.verdict import Bottleneck, Finding
from advisors.rules.base import Example, Rule, pct, ramp
from advisors.synthetic import observation, run_facts

_FLAT = tuple([2.0 - 0.1 * i for i in range(10)] + [1.0] * 30)
_FALLING = tuple(2.0 * 0.97**i for i in range(40))


class LossPlateau(Rule):
    """From a stored run's per-step losses: the step after which the (smoothed) loss never again improves by
    more than ``min_rel_improvement`` (2%), and the compute spent after it. The steps do not get faster, so
    the severity is 0 — this never binds a step-time diagnosis — but the evidence says how much run time early
    stopping would have saved.

    Smoothing: trailing mean over ``smooth_fraction`` (0.1) of the run (at least 3 steps). Thresholds:
    ``min_steps`` (20) losses; ``min_wasted_share`` (0.25) of the run after the plateau; ``high_wasted_share``
    (0.6).

    Fix: early stopping on a validation metric with patience.
    """

    id, name, bottleneck = "TRAIN001", "loss-plateau", Bottleneck.COMPUTE
    cause = "plateau"
    thresholds = {"min_steps": 20, "min_rel_improvement": 0.02, "smooth_fraction": 0.1, "min_wasted_share": 0.25,
                  "high_wasted_share": 0.6}
    fix_id = "early_stopping"
    fires = (Example("loss flat for the last 30 of 40 steps",
                     lambda: observation(no_trace=True, run=run_facts(losses=_FLAT, steps_done=40)),
                     fix="early_stopping", severity=0.0),)
    passes = (Example("loss still falling", lambda: observation(no_trace=True,
                                                                run=run_facts(losses=_FALLING, steps_done=40))),
              Example("uploaded trace", lambda: observation({"gpu_compute": 0.9})))

    def missing(self, f: Facts) -> str | None:
        if f.run is None:
            return None  # a trace has no loss curve; nothing to say
        if len(f.run.losses) < self.t["min_steps"]:
            return f"fewer than {int(self.t['min_steps'])} logged losses: too short to call a plateau"
        return None

    def check(self, f: Facts) -> Finding | None:
        run = f.run
        if run is None:
            return None
        plateau = plateau_step(run.losses, self.t["min_rel_improvement"], self.t["smooth_fraction"])
        n = len(run.losses)
        wasted = (n - 1 - plateau) / n
        if wasted < self.t["min_wasted_share"]:
            return None
        saved_steps = n - 1 - plateau
        saved_s = saved_steps * run.step_time_ms / 1e3 if run.step_time_ms else None
        return self.finding(
            f, severity=0.0, confidence=ramp(wasted, self.t["min_wasted_share"], self.t["high_wasted_share"]),
            message=f"The loss stopped improving after step {plateau}: early stopping would have saved "
                    f"{saved_steps} of {n} steps ({pct(wasted)} of the run's compute).",
            evidence={"plateau_step": plateau, "steps_logged": n, "saved_steps": saved_steps,
                      "saved_share": wasted, "saved_seconds": saved_s, "loss_at_plateau": run.losses[plateau],
                      "final_loss": run.losses[-1]})


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
