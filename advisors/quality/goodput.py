"""Predictions from the gradient noise scale: steps and time to the target at batch k·B₀, the goodput-best batch,
and which batch-scaling candidates are worth running.

McCandlish et al. 2018 (eq. 2.11): the steps to a given loss at batch B follow ``S(B) = S_min (1 + B_noise/B)``,
so relative to the batch the script runs now, ``S(B)/S(B₀) = (1 + B_noise/B)/(1 + B_noise/B₀)``. B_noise is
read as B_simple (their practical estimate; the critical batch B_crit ≈ B_noise). The time to the target is steps
× step time, the step time at each batch measured by a short throughput probe (not a full run), so
``T(B)/T(B₀) = S(B)/S(B₀) × t(B)/t(B₀)``. Pollux (Qiao et al., OSDI'21) calls ``(B_noise + B₀)/(B_noise + B)``
the statistical efficiency (progress per sample relative to B₀) and goodput = throughput × efficiency: the batch
with the best goodput is the one with the smallest predicted time.

Gradient accumulation × k has the large batch's steps ratio, and (on one device, where it only adds micro-batch
passes) k times the step time when it is not probed: its predicted time is never better than the batch's.

**Choice**: when B₀ is already at or above the critical batch, no batch scaling is tried ("above the critical
batch" with the numbers: a bigger batch cannot save many steps). Otherwise every k up to the goodput-best one
whose predicted time beats now by :data:`MIN_PREDICTED_GAIN`; none when none does (the step time grows faster
than the steps fall), again saying so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from advisors.quality.candidates import Candidate
from advisors.quality.noise_scale import NoiseScale

KS = (2, 4, 8)
MIN_PREDICTED_GAIN = 0.05  # a k is worth a run when its predicted time is at least 5 % shorter


def steps_ratio(batch: float, batch0: float, b_noise: float) -> float:
    """S(B)/S(B₀) (see the module docs)."""
    return (1 + b_noise / batch) / (1 + b_noise / batch0)


def efficiency(batch: float, batch0: float, b_noise: float) -> float:
    """Pollux's statistical efficiency at ``batch`` relative to ``batch0``: progress per sample, 1 at B₀."""
    return (b_noise + batch0) / (b_noise + batch)


@dataclass(frozen=True)
class Prediction:
    """At ``k`` × the batch: the steps ratio, the step time (measured, or ``None``), the time ratio (after / before:
    below 1 reaches the target sooner), ``speedup`` = 1 / time ratio (comparable with the measured time-to-target
    ratio), Pollux's efficiency and the goodput relative to now."""

    k: int
    batch: int
    steps_ratio: float
    step_ms: float | None
    time_ratio: float | None
    efficiency: float
    goodput: float | None

    @property
    def speedup(self) -> float | None:
        return 1 / self.time_ratio if self.time_ratio else None

    @property
    def step_time_ratio(self) -> float | None:
        """The time-per-step part: time ratio = steps ratio × this (after / before, from the probe)."""
        return self.time_ratio / self.steps_ratio if self.time_ratio and self.steps_ratio else None

    def to_json(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "batch": self.batch,
            "steps_ratio": self.steps_ratio,
            "step_time_ratio": self.step_time_ratio,
            "step_ms": self.step_ms,
            "time_ratio": self.time_ratio,
            "speedup": self.speedup,
            "efficiency": self.efficiency,
            "goodput": self.goodput,
        }


def predict(
    batch0: int,
    b_noise: float,
    step_ms: Mapping[int, float | None],
    ks: Sequence[int] = KS,
    accumulate: bool = False,
) -> list[Prediction]:
    """One :class:`Prediction` per k (``step_ms[1]`` is now's step time; ``accumulate``: the same batch made of k
    micro-batches, its step time k × now's unless probed)."""
    base = step_ms.get(1)
    out = []
    for k in ks:
        b = batch0 * k
        s = steps_ratio(b, batch0, b_noise)
        ms = step_ms.get(k) if not accumulate else (step_ms.get(-k) or (k * base if base else None))
        t = s * ms / base if ms and base else None
        eff = efficiency(b, batch0, b_noise)
        out.append(Prediction(k, b, s, ms, t, eff, (k * base / ms) * eff if ms and base else None))
    return out


@dataclass(frozen=True)
class Plan:
    """The noise scale's verdict on batch scaling: the predictions, the ks to run, why."""

    b_simple: float | None
    batch0: int
    predictions: tuple[Prediction, ...]
    chosen: tuple[int, ...]
    reason: str

    @property
    def best(self) -> Prediction | None:
        timed = [p for p in self.predictions if p.time_ratio is not None]
        return min(timed, key=lambda p: p.time_ratio or 0.0) if timed else None

    @property
    def efficiency_now(self) -> float | None:
        """The current batch's statistical efficiency: progress per sample relative to a very small batch,
        ``E_min/E(B₀) = B_noise/(B_noise + B₀)`` (McCandlish et al.; Pollux's efficiency with M₀ → 0)."""
        return self.b_simple / (self.b_simple + self.batch0) if self.b_simple else None

    def prediction(self, k: int) -> Prediction | None:
        return next((p for p in self.predictions if p.k == k), None)

    def to_json(self) -> dict[str, Any]:
        best = self.best
        return {
            "b_simple": self.b_simple,
            "batch": self.batch0,
            "critical_batch": self.b_simple,
            "above_critical": self.b_simple is not None and self.batch0 >= self.b_simple,
            "statistical_efficiency": self.efficiency_now,
            "goodput_best_batch": best.batch
            if best and (best.time_ratio or 1) < 1
            else self.batch0,
            "predictions": [p.to_json() for p in self.predictions],
            "chosen": list(self.chosen),
            "reason": self.reason,
        }


def plan(
    batch0: int,
    b_noise: float | None,
    step_ms: Mapping[int, float | None],
    ks: Sequence[int] = KS,
    min_gain: float = MIN_PREDICTED_GAIN,
) -> Plan:
    """Which ks to run (see the module docs), with the reason in words."""
    if b_noise is None:
        return Plan(
            None,
            batch0,
            (),
            (),
            "no noise scale: the mean |G|² over the baseline was not positive "
            "(its gradient is all noise at this batch), so no prediction; batch scaling not chosen",
        )
    preds = tuple(predict(batch0, b_noise, step_ms, ks))
    if batch0 >= b_noise:
        s2 = preds[0].steps_ratio if preds else 1.0
        return Plan(
            b_noise,
            batch0,
            preds,
            (),
            f"none: batch {batch0} is already at or above the critical batch "
            f"(B_noise ≈ {b_noise:.3g}): doubling it would still take {s2:.0%} of the steps, so a larger "
            "batch cannot reach the target much sooner",
        )
    timed = [p for p in preds if p.time_ratio is not None]
    if not timed:
        return Plan(
            b_noise, batch0, preds, (), "no step time was measured at a larger batch: no prediction"
        )
    best = min(timed, key=lambda p: p.time_ratio or 0.0)
    chosen = tuple(p.k for p in timed if p.k <= best.k and (p.time_ratio or 1.0) < 1 - min_gain)
    if not chosen:
        return Plan(
            b_noise,
            batch0,
            preds,
            (),
            f"none: below the critical batch (B_noise ≈ {b_noise:.3g} > "
            f"{batch0}) but the step time grows about as fast as the steps fall (best: × {best.k} at "
            f"{best.time_ratio:.2f} of the time), so no k is predicted {min_gain:.0%} sooner",
        )
    return Plan(
        b_noise,
        batch0,
        preds,
        chosen,
        f"batch {batch0} is below the critical batch (B_noise ≈ "
        f"{b_noise:.3g}): predicted time to target × {best.time_ratio:.2f} at × {best.k} (the goodput-best "
        f"batch {best.batch}); running k = {', '.join(map(str, chosen))}",
    )


_KIND_K = re.compile(r"^(batch|grad_accum)_x(\d+)")


@dataclass(frozen=True)
class GoodputPlan:
    """What ``optimize --to-quality`` knows before it runs a batch candidate: the baseline's noise scale, the step
    time per batch factor from the throughput probe (``step_ms[k]``), the :class:`Plan` and the batch-scaling
    candidates it chose (replacing the fixed × 4 ones); ``reason`` when there is no plan."""

    noise: NoiseScale | None
    step_ms: Mapping[int, float | None]
    plan: Plan | None
    candidates: tuple[Candidate, ...]
    reason: str = ""
    probe_pairs: Mapping[int, Mapping[str, Any]] | None = (
        None  # each k's paired probe: × 1 and × k, their loads
    )

    def predicted(self, cand_id: str) -> Prediction | None:
        """The prediction for a batch or accumulation candidate (by its id: ``batch_x4_…``, ``grad_accum_x4_…``)."""
        m = _KIND_K.match(cand_id)
        if m is None or self.plan is None or self.plan.b_simple is None:
            return None
        k = int(m.group(2))
        got = predict(
            self.plan.batch0,
            self.plan.b_simple,
            self.step_ms,
            (k,),
            accumulate=m.group(1) != "batch",
        )
        return got[0] if got else None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = (
            self.noise.to_json()
            if self.noise
            else {"b_simple": None, "interval": None, "steps": 0, "overhead": None}
        )
        out.update(
            plan=self.plan.to_json() if self.plan else None,
            probe_step_ms={str(k): v for k, v in self.step_ms.items()},
            probe_pairs={str(k): dict(v) for k, v in (self.probe_pairs or {}).items()},
            chosen=[c.id for c in self.candidates],
            reason=self.plan.reason if self.plan else self.reason,
        )
        return out
