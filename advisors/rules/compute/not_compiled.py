"""COMP003 — unfused pointwise kernels in a model that is not compiled."""

from __future__ import annotations

from advisors.facts import Facts
from advisors.verdict import Bottleneck, Finding
from advisors.rules.base import Example, Rule, pct, ramp
from advisors.synthetic import observation


class NotCompiled(Rule):
    """Elementwise kernels take a real share of kernel time and nothing in the trace is compiled (no
    ``CompiledFunction`` region, no Triton kernel; a stored run's spec has ``compile=False``). Eager mode
    launches one kernel per op, each reading and writing its tensors in full; ``torch.compile`` fuses chains
    of them into one pass.

    Severity: elementwise kernel time (share of step) × ``fusion_saving`` (0.3). Thresholds:
    ``min_elementwise_share`` (0.15) of kernel time; ``high_elementwise_share`` (0.5).

    Fix: ``torch.compile(model)``.
    """

    id, name, bottleneck = "COMP003", "not-compiled", Bottleneck.COMPUTE
    cause = "pointwise_time"
    thresholds = {
        "min_elementwise_share": 0.15,
        "high_elementwise_share": 0.5,
        "fusion_saving": 0.3,
    }
    fix_id = "torch_compile"
    fires = (
        Example(
            "eager model, elementwise 30% of kernel time",
            lambda: observation({"gpu_compute": 0.8}, kernels={"matmul": 0.5, "elementwise": 0.25}),
            fix="torch_compile",
            severity=0.075,
        ),
    )
    passes = (
        Example(
            "compiled model",
            lambda: observation(
                {"gpu_compute": 0.8},
                kernels={"matmul": 0.5, "elementwise": 0.25},
                ops={"CompiledFunction": 0.5},
            ),
        ),
        Example(
            "Triton kernels (Inductor's output), no compiled region recorded",
            lambda: observation({"gpu_compute": 0.8}, kernels={"matmul": 0.5, "triton": 0.25}),
        ),
        Example("GEMM only", lambda: observation({"gpu_compute": 0.8}, kernels={"matmul": 0.8})),
    )

    def missing(self, f: Facts) -> str | None:
        if not f.has_steps:
            return "no profiled steps to measure"
        return (
            None
            if f.device == "gpu"
            else "no GPU kernels: fusion opportunities are read from kernel time"
        )

    def check(self, f: Facts) -> Finding | None:
        if f.compiled:
            return None
        elementwise = f.kernel_mix.get("elementwise", 0.0)
        if elementwise < self.t["min_elementwise_share"]:
            return None
        step_share = min(f.kernel_step_share.get("elementwise", 0.0), f.gpu_busy or 0.0)
        return self.finding(
            f,
            severity=step_share * self.t["fusion_saving"],
            at_stake=step_share,
            confidence=ramp(
                elementwise, self.t["min_elementwise_share"], self.t["high_elementwise_share"]
            ),
            message=f"Unfused elementwise kernels take {pct(elementwise)} of kernel time in an eager model: "
            "compile it with torch.compile to fuse them.",
            evidence={
                "elementwise_share_of_kernel_time": elementwise,
                "elementwise_share_of_step": step_share,
                "compiled": False,
            },
        )
