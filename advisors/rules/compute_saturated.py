"""COMP002 — the device is saturated with matrix math."""

from __future__ import annotations

from advisors.facts import Facts
from advisors.model import Bottleneck, Finding
from advisors.rules.base import Example, Rule, pct, ramp
from advisors.synthetic import observation


class GemmSaturated(Rule):
    """The GPU is busy nearly all the step and GEMM/convolution/attention kernels make most of its work: the
    step is compute-bound in the plain sense. Only cheaper math shortens it — lower precision if the GEMMs are
    still fp32, otherwise compilation (better kernels, fused epilogues) or less work per step.

    Severity: GEMM time (share of step) × ``recoverable`` (0.3, the headroom compilation and kernel choice
    typically leave once the math is already low precision). Thresholds: ``min_gpu_busy`` (0.8);
    ``min_gemm_share`` (0.5) and ``high_gemm_share`` (0.9) of kernel time; ``max_low_precision`` (0.1) decides
    which fix is proposed.

    Fix: bf16 autocast when the GEMMs are fp32, else ``torch.compile``.
    """

    id, name, bottleneck = "COMP002", "gemm-saturated-device", Bottleneck.COMPUTE
    thresholds = {"min_gpu_busy": 0.8, "min_gemm_share": 0.5, "high_gemm_share": 0.9, "max_low_precision": 0.1,
                  "recoverable": 0.3}
    fix_id = "torch_compile"
    fires = (Example("bf16 GEMM micro-benchmark: busy 98%, all GEMM",
                     lambda: observation({"gpu_compute": 0.98}, kernels={"matmul": 0.98}, low_precision=1.0)),)
    passes = (Example("busy but pointwise-dominated",
                      lambda: observation({"gpu_compute": 0.9}, kernels={"elementwise": 0.7, "matmul": 0.2})),
              Example("GEMMs with the device half idle",
                      lambda: observation({"gpu_compute": 0.5}, kernels={"matmul": 0.45})))

    def missing(self, f: Facts) -> str | None:
        if not f.has_steps:
            return "no profiled steps to measure"
        return None if f.device == "gpu" else "no GPU kernels to measure saturation"

    def check(self, f: Facts) -> Finding | None:
        if self.missing(f) or (f.gpu_busy or 0.0) < self.t["min_gpu_busy"]:
            return None
        gemm = f.kernel_mix.get("matmul", 0.0)
        if gemm < self.t["min_gemm_share"]:
            return None
        low = f.gemm_low_precision
        fp32 = low is not None and low < self.t["max_low_precision"]
        step_share = min(f.kernel_step_share.get("matmul", 0.0), f.gpu_busy or 0.0)
        return self.finding(
            f, severity=step_share * self.t["recoverable"],
            confidence=ramp(gemm, self.t["min_gemm_share"], self.t["high_gemm_share"]),
            message=f"The GPU is busy {pct(f.gpu_busy or 0.0)} of the step, {pct(gemm)} of it in GEMMs: the step is "
                    + ("compute-bound in fp32; use bf16 autocast." if fp32
                       else "compute-bound; compile the model for better kernels or do less math per step."),
            evidence={"gpu_busy_share": f.gpu_busy, "gemm_share_of_kernel_time": gemm,
                      "gemm_share_of_step": step_share, "gemm_low_precision_share": low},
            fix_id="bf16_autocast" if fp32 else self.fix_id)
