"""MEM003 — the caching allocator keeps going back to the driver."""

from __future__ import annotations

from advisors.facts import Facts
from advisors.verdict import Bottleneck, Finding
from advisors.rules.base import Example, Rule, pct, ramp
from advisors.synthetic import observation


class AllocatorChurn(Rule):
    """``cudaMalloc``/``cudaFree`` (or HIP) calls inside steps. A warm caching allocator makes none; calls every
    step mean it cannot reuse its blocks (fragmentation, or memory so tight it frees cached blocks and
    retries), and each call synchronises the device.

    Severity: calls per step × ``call_cost_us`` (100 µs: the call plus the pipeline drain) over step time.
    Thresholds: ``min_calls_per_step`` (2); ``high_calls_per_step`` (20) for full confidence.

    Fix: ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` and steadier shapes; if memory is tight, a
    smaller micro-batch.
    """

    id, name, bottleneck = "MEM003", "allocator-churn", Bottleneck.MEMORY
    cause = "host_gaps"
    thresholds = {"min_calls_per_step": 2.0, "high_calls_per_step": 20.0, "call_cost_us": 100.0}
    fix_id = "expandable_segments"
    fires = (
        Example(
            "12 cudaMalloc/cudaFree per step",
            lambda: observation({"gpu_compute": 0.8}, syncs={"malloc_free": 12.0}),
            fix="expandable_segments",
            severity=0.012,
        ),
    )
    passes = (Example("warm allocator", lambda: observation({"gpu_compute": 0.8})),)

    def missing(self, f: Facts) -> str | None:
        if not f.has_steps:
            return "no profiled steps to measure"
        return (
            None
            if f.device == "gpu"
            else "no GPU runtime events: allocator calls are a CUDA/HIP signal"
        )

    def check(self, f: Facts) -> Finding | None:
        calls = f.malloc_free_per_step
        if calls < self.t["min_calls_per_step"] or f.step_ms <= 0:
            return None
        share = min(calls * self.t["call_cost_us"] / 1e3 / f.step_ms, 1.0)
        return self.finding(
            f,
            severity=share,
            confidence=ramp(calls, self.t["min_calls_per_step"], self.t["high_calls_per_step"]),
            message=f"{calls:.0f} cudaMalloc/cudaFree calls per step (about {pct(share)} of it): enable "
            "expandable segments and keep shapes steady so the allocator reuses its blocks.",
            evidence={
                "malloc_free_per_step": calls,
                "estimated_share": share,
                "profiled_step_time_ms": f.step_ms,
            },
        )
