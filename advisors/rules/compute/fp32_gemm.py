"""COMP001 — a busy GPU runs its GEMMs in fp32, without Tensor Cores."""

from __future__ import annotations

from advisors.facts import Facts
from advisors.fit import mixed_precision_on, precision_fix, precision_phrase
from advisors.verdict import Bottleneck, Finding
from advisors.rules.base import Example, Rule, pct, ramp
from advisors.synthetic import observation


class Fp32Gemms(Rule):
    """GEMM/convolution kernels carry much of a busy device's time and (almost) none of them is a Tensor Core
    / bf16 / fp16 kernel, by kernel name and by the matmul ops' recorded input types. Low-precision GEMMs run
    several times faster on any GPU since Volta, so about half of that time can be won back.

    Mixed precision that is partly on (some GEMMs already low precision) is *not* reported as off: the rule
    stays silent once ``max_low_precision`` of GEMM time is low precision.

    Severity: fp32 GEMM time (share of step) × ``tensor_core_saving`` (0.5). Thresholds: ``min_gpu_busy``
    (0.5) — below it the device waits for something else first; ``min_gemm_share`` (0.3) of kernel time;
    ``high_gemm_share`` (0.7); ``max_low_precision`` (0.1) of GEMM time.

    Fix: bf16 autocast (fp16 with a GradScaler where bf16 is missing); TF32 for what stays fp32.
    """

    id, name, bottleneck = "COMP001", "fp32-gemms-no-tensor-cores", Bottleneck.COMPUTE
    cause = "gemm_time"
    thresholds = {
        "min_gpu_busy": 0.5,
        "min_gemm_share": 0.3,
        "high_gemm_share": 0.7,
        "max_low_precision": 0.1,
        "tensor_core_saving": 0.5,
    }
    fix_id = "bf16_autocast"
    fires = (
        Example(
            "ResNet in fp32: GEMM/conv 65% of kernel time, GPU busy 72%",
            lambda: observation(
                {"gpu_compute": 0.72},
                kernels={"matmul": 0.47, "normalization": 0.11, "elementwise": 0.11},
            ),
            fix="bf16_autocast",
            severity=0.235,
        ),
    )
    passes = (
        Example(
            "mixed precision partly on: 40% of GEMM time in bf16",
            lambda: observation(
                {"gpu_compute": 0.72},
                kernels={"matmul": 0.47, "elementwise": 0.2},
                low_precision=0.4,
            ),
        ),
        Example(
            "fp32 GEMMs but the device mostly idle",
            lambda: observation({"gpu_compute": 0.2, "dataloader": 0.7}, kernels={"matmul": 0.15}),
        ),
    )

    def missing(self, f: Facts) -> str | None:
        if not f.has_steps:
            return "no profiled steps to measure"
        return (
            None
            if f.device == "gpu"
            else "no GPU kernels (the CPU rule COMP005 reads host matmuls)"
        )

    def check(self, f: Facts) -> Finding | None:
        if (f.gpu_busy or 0.0) < self.t["min_gpu_busy"]:
            return None
        gemm = f.kernel_mix.get("matmul", 0.0)
        low = f.gemm_low_precision
        if (
            gemm < self.t["min_gemm_share"]
            or low is None
            or low >= self.t["max_low_precision"]
            or mixed_precision_on(f)
        ):  # a spec already in bf16/fp16 is not told to use it
            return None
        fp32_step = f.kernel_step_share.get("matmul", 0.0) * (1.0 - low)
        return self.finding(
            f,
            severity=min(fp32_step, f.gpu_busy or 0.0) * self.t["tensor_core_saving"],
            at_stake=min(fp32_step, f.gpu_busy or 0.0),
            confidence=ramp(gemm, self.t["min_gemm_share"], self.t["high_gemm_share"]),
            message=f"GEMMs take {pct(gemm)} of kernel time and {pct(1 - low)} of them run in fp32 without Tensor "
            f"Cores: {precision_phrase(f)}.",
            evidence={
                "gemm_share_of_kernel_time": gemm,
                "gemm_low_precision_share": low,
                "fp32_gemm_share_of_step": fp32_step,
                "gpu_busy_share": f.gpu_busy,
            },
            fix_id=precision_fix(f),
        )
