"""COMP005 — on a CPU, fp32 matmuls dominate the step."""

from __future__ import annotations

from advisors.facts import Facts
from advisors.fit import cpu_bf16_basis, mixed_precision_on, precision_phrase
from advisors.verdict import Bottleneck, Finding
from advisors.rules.base import Example, Rule, pct, ramp
from advisors.synthetic import observation


class CpuFp32Matmul(Rule):
    """CPU training whose step is mostly matmul/convolution ops with fp32 inputs (from the ops' recorded input
    types). CPUs with AVX-512 BF16 / AMX run bf16 matmuls much faster than fp32, and autocast on CPU keeps
    the numerically sensitive ops in fp32. A CPU without them (AVX2 alone) runs bf16 matmuls far slower (measured
    on this project's AVX2 machine: 1024² bf16 2.35 s vs fp32 45 ms): when the run's calibration measured bf16
    slower than fp32, or its flags lack both, the rule is silent; an uploaded trace (nothing known of its CPU)
    gets the advice with that condition stated.

    Severity: fp32 matmul time (share of step) × ``bf16_saving`` (0.5). Thresholds: ``min_fp32_share`` (0.3)
    and ``high_fp32_share`` (0.7) of step time; ``max_low_precision`` (0.1) of typed matmul time already in
    bf16/fp16 (then mixed precision is on, and the rule is silent).

    Fix: ``torch.autocast("cpu", dtype=torch.bfloat16)``.
    """

    id, name, bottleneck = "COMP005", "cpu-fp32-matmul", Bottleneck.COMPUTE
    cause = "cpu_matmul"
    thresholds = {
        "min_fp32_share": 0.3,
        "high_fp32_share": 0.7,
        "max_low_precision": 0.1,
        "bf16_saving": 0.5,
    }
    fix_id = "bf16_autocast"
    fires = (
        Example(
            "CPU MLP: fp32 matmuls 75% of the step",
            lambda: observation(
                {"forward": 0.4, "backward": 0.5}, device="cpu", cpu_matmul={"fp32": 0.75}
            ),
            fix="bf16_autocast",
            severity=0.375,
        ),
    )
    passes = (
        Example(
            "already bf16",
            lambda: observation(
                {"forward": 0.4, "backward": 0.5},
                device="cpu",
                cpu_matmul={"low": 0.6, "fp32": 0.05},
            ),
        ),
        Example(
            "matmuls a small part",
            lambda: observation({"dataloader": 0.8}, device="cpu", cpu_matmul={"fp32": 0.1}),
        ),
    )

    def missing(self, f: Facts) -> str | None:
        if not f.has_steps:
            return "no profiled steps to measure"
        if f.device != "cpu":
            return None  # a GPU trace is judged by COMP001/COMP002
        if f.cpu_matmul_untyped > f.cpu_matmul_fp32 + f.cpu_matmul_low:
            return "matmul input types were not recorded (profile with record_shapes=True)"
        return None

    def check(self, f: Facts) -> Finding | None:
        if f.device != "cpu" or f.cpu_matmul_fp32 < self.t["min_fp32_share"]:
            return None
        typed = f.cpu_matmul_fp32 + f.cpu_matmul_low
        if f.cpu_matmul_low / typed >= self.t["max_low_precision"] or mixed_precision_on(f):
            return None
        if (
            f.cpu_bf16_fast is False
        ):  # this CPU's bf16 matmuls are slower than fp32: autocast would not help
            return None
        return self.finding(
            f,
            severity=f.cpu_matmul_fp32 * self.t["bf16_saving"],
            at_stake=f.cpu_matmul_fp32,
            confidence=ramp(f.cpu_matmul_fp32, self.t["min_fp32_share"], self.t["high_fp32_share"]),
            message=f"fp32 matmuls take {pct(f.cpu_matmul_fp32)} of the CPU step: {precision_phrase(f)}.",
            evidence={
                "fp32_matmul_share_of_step": f.cpu_matmul_fp32,
                "low_precision_matmul_share_of_step": f.cpu_matmul_low,
                "cpu_bf16": cpu_bf16_basis(f),
            },
        )
