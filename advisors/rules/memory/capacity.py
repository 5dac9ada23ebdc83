"""MEM001 — peak memory close to the device's (or the run's budget's) capacity."""

from __future__ import annotations

from typing import Mapping

from advisors.facts import Facts
from advisors.verdict import Bottleneck, Finding
from advisors.rules.base import Example, Rule, pct, ramp
from advisors.rules.memory.activations import activation_evidence, with_clause
from advisors.synthetic import observation, run_facts
from profilers.telemetry.summary import TelemetrySummary


def _nvml(used_mb: float, total_mb: float) -> TelemetrySummary:
    return TelemetrySummary(
        source="nvml",
        samples=300,
        rate_hz=10.0,
        gpu_util_pct=88.0,
        gpu_mem_used_mb=used_mb,
        gpu_mem_total_mb=total_mb,
    )


class NearCapacity(Rule):
    """Peak allocated/reserved memory against capacity: the device total from the trace's ``[memory]`` events
    and ``deviceProperties``; else, for a stored GPU run, NVML's largest ``memory used`` against the GPU's total
    (telemetry: it counts the CUDA context and any other process on the GPU — what an allocation has left);
    else a stored run's measured peak against its ``memory_budget_mb``.

    Near the limit the caching allocator starts freeing and retrying, a larger batch cannot fit, and the next
    longer sequence fails. It costs little step time until it fails, so the severity starts low —
    ``near_stake`` (0.10) at ``near_share`` — and grows linearly to ``full_stake`` (0.60) at ``full_share``:
    a run one longer batch away from failing outranks most speed findings.

    Thresholds: ``near_share`` (0.90) of capacity; ``full_share`` (0.98), also full confidence.

    With a launched run's per-module record, the message names the layer that keeps the most
    activation memory for backward and the evidence lists the top ones
    (:mod:`advisors.rules.memory.activations`).

    Fix: a smaller micro-batch with gradient accumulation (same samples per optimizer step).
    """

    id, name, bottleneck = "MEM001", "near-memory-capacity", Bottleneck.MEMORY
    cause = "capacity"
    thresholds = {"near_share": 0.90, "full_share": 0.98, "near_stake": 0.10, "full_stake": 0.60}
    fix_id = "grad_accumulation"
    fires = (
        Example(
            "device peak 95% of total",
            lambda: observation({"gpu_compute": 0.9}, memory_peak=0.95),
            fix="grad_accumulation",
            severity=0.4125,
        ),
        Example(
            "run peak 930 of a 1000 MB budget, no trace",
            lambda: observation(
                no_trace=True, run=run_facts(peak_memory_mb=930.0, memory_budget_mb=1000.0)
            ),
            fix="grad_accumulation",
            severity=0.2875,
        ),
        Example(
            "NVML telemetry: 75.2 of 80 GB used, no memory events in the trace",
            lambda: observation(
                {"gpu_compute": 0.9}, run=run_facts(telemetry=_nvml(75_200.0, 80_000.0))
            ),
            fix="grad_accumulation",
            severity=0.35,
        ),
    )
    passes = (
        Example("device peak 40%", lambda: observation({"gpu_compute": 0.9}, memory_peak=0.4)),
        Example(
            "NVML telemetry: 30 of 80 GB used",
            lambda: observation(
                {"gpu_compute": 0.9}, run=run_facts(telemetry=_nvml(30_000.0, 80_000.0))
            ),
        ),
    )

    def missing(self, f: Facts) -> str | None:
        if self._peak_share(f) is None:
            return "no memory events in the trace, no GPU memory telemetry and no budget to compare the run's peak with"
        return None

    def _peak_share(self, f: Facts) -> float | None:
        if f.memory_peak_share is not None:
            return f.memory_peak_share
        if f.telemetry is not None and f.telemetry.gpu_mem_used_share is not None:
            return f.telemetry.gpu_mem_used_share
        run = f.run
        if run and run.peak_memory_mb and run.memory_budget_mb:
            return run.peak_memory_mb / run.memory_budget_mb
        return None

    def check(self, f: Facts) -> Finding | None:
        share = self._peak_share(f)
        if (
            share is None
            or share < self.t["near_share"]
            or (f.run and f.run.status == "out_of_memory")
        ):
            return None
        severity = capacity_stake(share, self.t)
        return self.finding(
            f,
            severity=severity,
            confidence=ramp(share, self.t["near_share"], self.t["full_share"]),
            message=with_clause(
                f"Peak memory reaches {pct(share)} of capacity",
                ": shrink the micro-batch and accumulate gradients before a longer input runs out "
                "of memory.",
                f,
            ),
            evidence={
                "peak_share_of_capacity": share,
                **self._against(f),
                **activation_evidence(f),
            },
        )

    def _against(self, f: Facts) -> dict[str, float | str | None]:
        """Which peak was compared with which capacity (trace, NVML telemetry or the run's budget)."""
        if f.memory_peak_share is not None:
            return {
                "source": "trace memory events",
                "peak_memory_mb": f.run.peak_memory_mb if f.run else None,
                "capacity_mb": _mb(f.b.memory.device_capacity_bytes) if f.b else None,
            }
        tel = f.telemetry
        if tel is not None and tel.gpu_mem_used_share is not None:
            return {
                "source": "NVML telemetry",
                "peak_memory_mb": tel.gpu_mem_used_mb,
                "capacity_mb": tel.gpu_mem_total_mb,
            }
        return {
            "source": "run budget",
            "peak_memory_mb": f.run.peak_memory_mb if f.run else None,
            "capacity_mb": f.run.memory_budget_mb if f.run else None,
        }


def capacity_stake(share: float, t: Mapping[str, float]) -> float:
    """Severity of memory at ``share`` of capacity: ``near_stake`` at ``near_share``, rising linearly to
    ``full_stake`` at ``full_share`` and above (the thresholds MEM001 and MEM005 share)."""
    closeness = min((share - t["near_share"]) / (t["full_share"] - t["near_share"]), 1.0)
    return t["near_stake"] + closeness * (t["full_stake"] - t["near_stake"])


def _mb(n: int | None) -> float | None:
    return None if n is None else n / 1024**2
