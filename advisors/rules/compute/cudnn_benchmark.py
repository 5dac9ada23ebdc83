"""COMP004 — convolutions on CUDA with cudnn.benchmark off."""

from __future__ import annotations

from dataclasses import replace

from advisors.facts import Facts
from advisors.verdict import Bottleneck, Finding
from advisors.rules.base import Example, Rule, pct
from advisors.synthetic import observation, run_facts
from profilers.run.run_config import RunConfig

_CONV_RUN = RunConfig(workload="resnet_small")


class CudnnBenchmarkOff(Rule):
    """A CUDA run with convolutions and ``torch.backends.cudnn.benchmark = False``: cuDNN picks a convolution
    algorithm by heuristic instead of timing the candidates once per input shape; with fixed shapes the
    autotuned choice is usually faster.

    Detectable only for stored runs (the spec says it); a trace does not record the flag.

    Severity: convolution/GEMM time (share of step) × ``autotune_saving`` (0.1). Thresholds: ``min_gemm_share``
    (0.2) of step time in GEMM/convolution kernels; ``confidence`` (0.6) — the gain depends on the shapes.

    Fix: ``torch.backends.cudnn.benchmark = True``.
    """

    id, name, bottleneck = "COMP004", "cudnn-benchmark-off", Bottleneck.COMPUTE
    cause = "gemm_time"
    thresholds = {"min_gemm_share": 0.2, "autotune_saving": 0.1, "confidence": 0.6}
    fix_id = "cudnn_benchmark"
    fires = (
        Example(
            "CUDA run with convolutions, benchmark off",
            lambda: observation(
                {"gpu_compute": 0.8},
                kernels={"matmul": 0.5},
                ops={"aten::cudnn_convolution": 0.3},
                run=run_facts(device="cuda", spec=_CONV_RUN),
            ),
            fix="cudnn_benchmark",
            severity=0.05,
        ),
    )
    passes = (
        Example(
            "benchmark on",
            lambda: observation(
                {"gpu_compute": 0.8},
                kernels={"matmul": 0.5},
                ops={"aten::cudnn_convolution": 0.3},
                run=run_facts(device="cuda", spec=replace(_CONV_RUN, cudnn_benchmark=True)),
            ),
        ),
    )

    def missing(self, f: Facts) -> str | None:
        if f.device == "gpu" and f.spec is None:
            return "cudnn.benchmark is not recorded in a trace (only a stored run's spec says it)"
        return None

    def check(self, f: Facts) -> Finding | None:
        spec = f.spec
        if spec is None or spec.cudnn_benchmark or f.device != "gpu" or not f.has_conv:
            return None
        gemm = f.kernel_step_share.get("matmul", 0.0)
        if gemm < self.t["min_gemm_share"]:
            return None
        return self.finding(
            f,
            severity=gemm * self.t["autotune_saving"],
            at_stake=gemm,
            confidence=self.t["confidence"],
            message=f"Convolutions take {pct(gemm)} of the step with cudnn.benchmark off: turn it on so cuDNN "
            "times its algorithms once per shape.",
            evidence={"gemm_conv_share_of_step": gemm, "cudnn_benchmark": False},
        )
