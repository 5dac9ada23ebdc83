"""HOST002 — frequent host<->device synchronisations."""

from __future__ import annotations

from advisors.facts import Facts
from advisors.verdict import Bottleneck, Finding
from advisors.rules.base import Example, Rule, pct, ramp
from advisors.synthetic import observation


class FrequentSyncs(Rule):
    """``.item()``/``bool(tensor)``, ``cudaStreamSynchronize``, ``cudaDeviceSynchronize`` and event syncs inside
    steps. Each one makes the host wait until the GPU's queue is empty; afterwards the GPU waits for the host
    to refill it, so the pipeline drains once per sync.

    Severity: syncs per step × ``bubble_us`` (20 µs, a typical refill gap) over step time, at most the GPU's
    idle share. Thresholds: ``min_syncs_per_step`` (10); ``high_syncs_per_step`` (100).

    Fix: keep values on the device (accumulate losses as tensors, log every N steps, avoid data-dependent
    Python branches on tensors).
    """

    id, name, bottleneck = "HOST002", "frequent-syncs", Bottleneck.HOST
    cause = "host_gaps"
    thresholds = {"min_syncs_per_step": 10.0, "high_syncs_per_step": 100.0, "bubble_us": 20.0}
    fix_id = "avoid_syncs"
    fires = (
        Example(
            "57 .item() calls per 15 ms step",
            lambda: observation(
                {"gpu_compute": 0.4}, syncs={"item": 57.0, "stream_sync": 10.0}, step_ms=15
            ),
            fix="avoid_syncs",
            severity=0.0893,
        ),
    )
    passes = (
        Example(
            "one .item() per step", lambda: observation({"gpu_compute": 0.4}, syncs={"item": 1.0})
        ),
        Example(
            "CPU run", lambda: observation({"forward": 0.9}, device="cpu", syncs={"item": 50.0})
        ),
    )

    def missing(self, f: Facts) -> str | None:
        if not f.has_steps:
            return "no profiled steps to measure"
        return None if f.device == "gpu" else "no GPU: host-device synchronisation does not apply"

    def check(self, f: Facts) -> Finding | None:
        n = f.syncs_per_step
        if n < self.t["min_syncs_per_step"] or f.step_ms <= 0:
            return None
        share = min(n * self.t["bubble_us"] / 1e3 / f.step_ms, 1.0 - (f.gpu_busy or 0.0))
        return self.finding(
            f,
            severity=share,
            confidence=ramp(n, self.t["min_syncs_per_step"], self.t["high_syncs_per_step"]),
            message=f"{n:.0f} host-device synchronisations per step drain the GPU queue (about {pct(share)} of the "
            "step): keep values on the device and log less often.",
            evidence={
                "syncs_per_step": n,
                "estimated_share": share,
                "profiled_step_time_ms": f.step_ms,
            },
        )
