"""TF32 matmuls: fp32 GEMMs on Tensor Cores with a 10-bit mantissa, one flag."""

from __future__ import annotations

from advisors.facts import Facts
from advisors.fixes.base import ON_CPU, ON_CUDA, FixExample, FixSpec, Injection, const
from advisors.verdict import Bottleneck


def _tf32_on(f: Facts) -> bool:
    """The spec asks for TF32 or a lower precision, or the trace's matmul kernels are TF32 ones."""
    return (f.spec is not None and (f.spec.tf32 or f.spec.precision != "fp32")) or (
        f.efficiency is not None and f.efficiency.dtype == "tf32"
    )


FIX = FixSpec(
    id="tf32",
    title="TF32 matmuls",
    bottleneck=Bottleneck.COMPUTE,
    applies_to="cuda",
    explanation="fp32 GEMMs on Tensor Cores with a 10-bit mantissa: no code change beyond one flag.",
    snippet="torch.backends.cuda.matmul.allow_tf32 = True\ntorch.backends.cudnn.allow_tf32 = True",
    docs="https://pytorch.org/docs/stable/notes/cuda.html#tensorfloat-32-tf32-on-ampere-and-later-devices",
    effort="config",
    settings={"tf32": True},
    injection=Injection(const(matmul_precision="high"), "matmul_precision"),
    done=_tf32_on,
    examples=(
        FixExample(ON_CUDA, knobs={"matmul_precision": "high"}),
        FixExample(ON_CPU, skipped="CUDA only"),
    ),
)
