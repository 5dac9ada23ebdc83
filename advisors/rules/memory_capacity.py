"""MEM001 — peak memory close to the device's (or the run's budget's) capacity."""

from __future__ import annotations

from typing import Mapping

from advisors.facts import Facts
from advisors.model import Bottleneck, Finding
from advisors.rules.base import Example, Rule, pct, ramp
from advisors.synthetic import observation, run_facts


class NearCapacity(Rule):
    """Peak allocated/reserved memory against capacity: the device total from the trace's ``[memory]`` events
    and ``deviceProperties``, or a stored run's measured peak against its ``memory_budget_mb``.

    Near the limit the caching allocator starts freeing and retrying, a larger batch cannot fit, and the next
    longer sequence fails. It costs little step time until it fails, so the severity starts low —
    ``near_stake`` (0.10) at ``near_share`` — and grows linearly to ``full_stake`` (0.60) at ``full_share``:
    a run one longer batch away from failing outranks most speed findings.

    Thresholds: ``near_share`` (0.90) of capacity; ``full_share`` (0.98), also full confidence.

    Fix: a smaller micro-batch with gradient accumulation (same samples per optimizer step).
    """

    id, name, bottleneck = "MEM001", "near-memory-capacity", Bottleneck.MEMORY
    thresholds = {"near_share": 0.90, "full_share": 0.98, "near_stake": 0.10, "full_stake": 0.60}
    fix_id = "grad_accumulation"
    fires = (
        Example("device peak 95% of total", lambda: observation({"gpu_compute": 0.9}, memory_peak=0.95)),
        Example("run peak 930 of a 1000 MB budget, no trace",
                lambda: observation(no_trace=True, run=run_facts(peak_memory_mb=930.0, memory_budget_mb=1000.0))),
    )
    passes = (Example("device peak 40%", lambda: observation({"gpu_compute": 0.9}, memory_peak=0.4)),)

    def missing(self, f: Facts) -> str | None:
        if self._peak_share(f) is None:
            return "no memory events in the trace and no budget to compare the run's peak with"
        return None

    def _peak_share(self, f: Facts) -> float | None:
        if f.memory_peak_share is not None:
            return f.memory_peak_share
        run = f.run
        if run and run.peak_memory_mb and run.memory_budget_mb:
            return run.peak_memory_mb / run.memory_budget_mb
        return None

    def check(self, f: Facts) -> Finding | None:
        share = self._peak_share(f)
        if share is None or share < self.t["near_share"] or (f.run and f.run.status == "out_of_memory"):
            return None
        severity = capacity_stake(share, self.t)
        return self.finding(
            f, severity=severity, confidence=ramp(share, self.t["near_share"], self.t["full_share"]),
            message=f"Peak memory reaches {pct(share)} of capacity: shrink the micro-batch and accumulate gradients "
                    "before a longer input runs out of memory.",
            evidence={"peak_share_of_capacity": share,
                      "peak_memory_mb": f.run.peak_memory_mb if f.run else None,
                      "capacity_mb": f.run.memory_budget_mb if f.run and f.memory_peak_share is None else
                      _mb(f.b.memory.device_capacity_bytes) if f.b else None})


def capacity_stake(share: float, t: Mapping[str, float]) -> float:
    """Severity of memory at ``share`` of capacity: ``near_stake`` at ``near_share``, rising linearly to
    ``full_stake`` at ``full_share`` and above (the thresholds MEM001 and MEM005 share)."""
    closeness = min((share - t["near_share"]) / (t["full_share"] - t["near_share"]), 1.0)
    return t["near_stake"] + closeness * (t["full_stake"] - t["near_stake"])


def _mb(n: int | None) -> float | None:
    return None if n is None else n / 1024**2
