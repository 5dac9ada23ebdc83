"""COMP007 — the device's own work fills most of a step that nothing else claims: compute binds, unsaturated."""

from __future__ import annotations

from typing import ClassVar

from advisors.facts import Facts
from advisors.verdict import Finding
from advisors.rules.base import (
    CONFIDENCE_AT_HIGH,
    CONFIDENCE_AT_THRESHOLD,
    MIN_BINDING_SHARE,
    Example,
    pct,
    ramp,
)
from advisors.rules.compute.saturated import SaturatedDevice
from advisors.rules.memory.bandwidth import BandwidthBound, bandwidth_bound
from advisors.synthetic import observation

_CACHED_CPU = {"forward": 0.3, "backward": 0.38, "dataloader": 0.08}
_SINGLE = {"enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__": 0.08}


class DeviceDominates(SaturatedDevice):
    """A step the device's own work makes most of, when no other finding holds a real share of it, is
    compute-bound even though the device is not saturated: a category at 8% of the step is not what binds while
    forward and backward hold 68% (a launched ``data_bound`` run with caching on read "data (62%)" from its
    in-process loading). The verdict is compute, with the levers of a saturated device (COMP002: mixed
    precision for fp32 matmuls, a fused optimizer, ``torch.compile``, else no cheap fix) and their stakes as
    severity; the small findings stay as minor ones.

    A *fallback* rule: the diagnosis considers its finding only when no other finding holds
    ``MIN_BINDING_SHARE`` (0.2, :data:`advisors.rules.base.MIN_BINDING_SHARE`) of the step, and keeps it only
    when it then binds; where a real finding exists (a loader at 34% beside a GPU busy 56%), this rule says
    nothing and that finding binds as before.

    Thresholds: ``min_device_share`` (0.5) — the device's work (``Facts.device_work``: a GPU's kernels, copies
    and sets outside exposed collectives; a CPU's operators in forward, backward and the optimizer) fills at
    least half the step; below COMP002's floors (``min_busy`` 0.85 on a GPU, ``min_cpu_busy`` 0.8 on a CPU; at
    or above them COMP002 speaks). Confidence: the usual ramp from ``min_device_share`` to that floor, times
    ``unsaturated_confidence`` (0.55 / 0.95 ≈ 0.58), so it is at most what COMP002 says at its floor (0.55) and
    0.32 at half the step: the rest of the step is time no rule could name (Python between operators, idling),
    and the verdict is less certain than a saturated device's. A pointwise-dominated GPU is left to MEM004 as in
    COMP002.
    """

    id, name = "COMP007", "device-dominates"
    thresholds = {
        **SaturatedDevice.thresholds,
        "min_device_share": 0.5,
        "unsaturated_confidence": round(CONFIDENCE_AT_THRESHOLD / CONFIDENCE_AT_HIGH, 4),
    }
    fallback = True
    fires: ClassVar[tuple[Example, ...]] = (
        Example(
            "CPU data_bound with caching on: operators 68%, in-process loading 8%",
            lambda: observation(_CACHED_CPU, device="cpu", ops=_SINGLE),
            fix="torch_compile",
            severity=0.68,
        ),
        Example(
            "GPU busy 78% in TF32 GEMMs, loading 9%",
            lambda: observation(
                {"gpu_compute": 0.78, "dataloader": 0.09},
                kernels={"matmul": 0.6, "elementwise": 0.18},
                low_precision=1.0,
            ),
            fix="torch_compile",
            severity=0.78,
        ),
        Example(
            "CPU MLP: operators 70%, fp32 matmuls 50%",
            lambda: observation(
                {"forward": 0.3, "backward": 0.4}, device="cpu", cpu_matmul={"fp32": 0.5}
            ),
            fix="bf16_autocast",
            severity=0.5,
        ),
    )
    passes: ClassVar[tuple[Example, ...]] = (
        Example(
            "CPU operators 85%: saturated, COMP002 speaks",
            lambda: observation({"forward": 0.35, "backward": 0.5}, device="cpu"),
        ),
        Example(
            "GPU busy 45% (the device does not fill the step)",
            lambda: observation({"gpu_compute": 0.45, "dataloader": 0.4}),
        ),
        Example(
            "GPU busy 75%, mostly elementwise kernels (bandwidth: MEM004's)",
            lambda: observation(
                {"gpu_compute": 0.75}, kernels={"elementwise": 0.6, "matmul": 0.15}
            ),
        ),
    )

    def check(self, f: Facts) -> Finding | None:
        work = f.device_work
        if (
            work < self.t["min_device_share"]
            or self.saturated(f)
            or bandwidth_bound(f, BandwidthBound.thresholds)
        ):
            return None
        on_cpu = f.device == "cpu"
        floor = self.t["min_cpu_busy" if on_cpu else "min_busy"]
        s = f.shares
        held = (
            f"operators fill {pct(work)} of the step (forward {pct(s.get('forward', 0.0))}, backward "
            f"{pct(s.get('backward', 0.0))}, optimizer {pct(s.get('optimizer', 0.0))})"
            if on_cpu
            else f"the GPU is busy {pct(work)} of the step"
        )
        what = (
            f"The device's own work dominates: {held}, and nothing else holds {pct(MIN_BINDING_SHARE)} of it; "
            f"not saturated (under {pct(floor)}), but it is what the step is made of"
        )
        confidence = (
            ramp(work, self.t["min_device_share"], floor) * self.t["unsaturated_confidence"]
        )
        return self.compute_finding(f, confidence, what)
