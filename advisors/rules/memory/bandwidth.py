"""MEM004 — memory-bandwidth-bound kernels dominate a busy device."""

from __future__ import annotations

from typing import Mapping

from advisors.facts import Facts
from advisors.fit import mixed_precision_on
from advisors.verdict import Bottleneck, Finding
from advisors.rules.base import Example, Rule, pct, ramp
from advisors.synthetic import observation


class BandwidthBound(Rule):
    """A busy GPU whose kernel time is mostly elementwise and normalization kernels, with few GEMMs. Those
    kernels do a handful of operations per byte: they run at memory bandwidth, not at compute throughput, so
    faster math does not help — moving fewer bytes does (fusion, lower-precision activations).

    Severity: pointwise kernel time (share of step) × ``recoverable`` (0.5, what fusing chains of pointwise
    ops typically saves). Thresholds: ``min_gpu_busy`` (0.5) — otherwise the host binds first;
    ``min_pointwise_share`` (0.5) and ``high_pointwise_share`` (0.8) of kernel time; ``max_matmul_share``
    (0.45) of kernel time.

    Fix: ``torch.compile`` (fuses pointwise chains) for an eager model; if already compiled, bf16 activations
    (autocast) unless mixed precision is on already; if both, no cheap fix — fewer bytes then takes a different
    algorithm (hand-fused kernels, smaller activations).
    """

    id, name, bottleneck = "MEM004", "bandwidth-bound-kernels", Bottleneck.MEMORY
    cause = "pointwise_time"
    thresholds = {
        "min_gpu_busy": 0.5,
        "min_pointwise_share": 0.5,
        "high_pointwise_share": 0.8,
        "max_matmul_share": 0.45,
        "recoverable": 0.5,
    }
    fix_id = "torch_compile"
    fires = (
        Example(
            "elementwise adds fill 91% of a busy device",
            lambda: observation({"gpu_compute": 0.91}, kernels={"elementwise": 0.91}),
            fix="torch_compile",
            severity=0.455,
        ),
        Example(
            "LLM step: 63% pointwise, 36% bf16 GEMM",
            lambda: observation(
                {"gpu_compute": 0.92},
                kernels={"elementwise": 0.58, "matmul": 0.33},
                low_precision=1.0,
            ),
            fix="torch_compile",
            severity=0.29,
        ),
        Example(
            "compiled (Triton kernels) fp32 model, pointwise 70%: bf16 activations",
            lambda: observation({"gpu_compute": 0.9}, kernels={"triton": 0.63, "matmul": 0.2}),
            fix="bf16_autocast",
            severity=0.315,
        ),
        Example(
            "compiled and bf16 already: no cheap fix, never 'compile' or 'bf16' again",
            lambda: observation(
                {"gpu_compute": 0.9}, kernels={"triton": 0.63, "matmul": 0.2}, low_precision=1.0
            ),
            fix=None,
            severity=0.315,
        ),
    )
    passes = (
        Example(
            "GEMM-heavy CNN",
            lambda: observation(
                {"gpu_compute": 0.7},
                kernels={"matmul": 0.45, "elementwise": 0.15, "normalization": 0.1},
            ),
        ),
        Example(
            "idle device", lambda: observation({"gpu_compute": 0.1}, kernels={"elementwise": 0.1})
        ),
    )

    def missing(self, f: Facts) -> str | None:
        if not f.has_steps:
            return "no profiled steps to measure"
        return (
            None
            if f.device == "gpu"
            else "no GPU kernels: bandwidth-bound kernels are read from kernel time"
        )

    def check(self, f: Facts) -> Finding | None:
        if not bandwidth_bound(f, self.t):
            return None
        pointwise = f.kernel_mix.get("elementwise", 0.0) + f.kernel_mix.get("normalization", 0.0)
        matmul = f.kernel_mix.get("matmul", 0.0)
        step_share = min(
            f.kernel_step_share.get("elementwise", 0.0)
            + f.kernel_step_share.get("normalization", 0.0),
            f.gpu_busy or 0.0,
        )
        fix = self.fix_id if not f.compiled else None if mixed_precision_on(f) else "bf16_autocast"
        how = {
            "torch_compile": "fuse them with torch.compile.",
            "bf16_autocast": "keep activations in bf16.",
            None: "no cheap fix: already compiled and in low precision; fewer bytes take a different algorithm "
            "(hand-fused kernels, smaller activations).",
        }
        return self.finding(
            f,
            severity=step_share * self.t["recoverable"],
            confidence=ramp(
                pointwise, self.t["min_pointwise_share"], self.t["high_pointwise_share"]
            ),
            message=f"Elementwise and normalization kernels take {pct(pointwise)} of kernel time against "
            f"{pct(matmul)} for GEMMs: the device is bandwidth-bound; " + how[fix],
            evidence={
                "pointwise_share_of_kernel_time": pointwise,
                "matmul_share_of_kernel_time": matmul,
                "pointwise_share_of_step": step_share,
                "gpu_busy_share": f.gpu_busy,
                "compiled": f.compiled,
            },
            fix_id=fix,
        )


def bandwidth_bound(f: Facts, t: Mapping[str, float]) -> bool:
    """A busy GPU whose kernel time is mostly pointwise with few GEMMs (MEM004's test; COMP002 defers to it)."""
    if f.device != "gpu" or (f.gpu_busy or 0.0) < t["min_gpu_busy"]:
        return False
    pointwise = f.kernel_mix.get("elementwise", 0.0) + f.kernel_mix.get("normalization", 0.0)
    return (
        pointwise >= t["min_pointwise_share"]
        and f.kernel_mix.get("matmul", 0.0) <= t["max_matmul_share"]
    )
