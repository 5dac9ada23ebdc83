"""torch.compile: fused pointwise chains and better kernels, for a one-off compile."""

from __future__ import annotations

from advisors.bounds import Reach
from advisors.facts import Facts
from advisors.fixes.base import ON_CPU, FixExample, FixSpec, Injection, const
from advisors.verdict import Bottleneck

DOCS = "https://pytorch.org/docs/stable/generated/torch.compile.html"
COMPILE_SCRIPT = """import argparse
import torch
parser = argparse.ArgumentParser()
parser.add_argument("--compile", action="store_true")
args = parser.parse_args()
model = torch.nn.Linear(2, 2)
if args.compile:
    model = torch.compile(model)
"""


def fusable(f: Facts) -> Reach | None:
    """On a GPU, the unfused elementwise/normalization kernels' time (Triton kernels are fused already) plus the
    launch gaps (``Facts.launch_idle``), *if fusion made those kernels free and the gaps vanished*; on a CPU, the
    operators' time outside matmuls (where fusion acts)."""
    if not f.has_steps or f.b is None:
        return None
    if f.device == "gpu":
        pointwise = f.kernel_step_share.get("elementwise", 0.0) + f.kernel_step_share.get(
            "normalization", 0.0
        )
        unfused = (
            pointwise
            * (
                1.0
                - min(
                    f.triton_kernel_share
                    / max(
                        sum(f.kernel_mix.get(k, 0.0) for k in ("elementwise", "normalization")),
                        1e-9,
                    ),
                    1.0,
                )
            )
            if f.triton_kernel_share
            else pointwise
        )
        gaps = max(f.launch_idle, 0.0)
        return Reach(
            unfused + gaps,
            f"unfused elementwise/normalization kernels ({100 * unfused:.1f}% of the step) "
            f"cost nothing once fused, and the launch gaps ({100 * gaps:.1f}%) vanish",
        )
    rest = max(f.device_work - (f.cpu_matmul_fp32 + f.cpu_matmul_low + f.cpu_matmul_untyped), 0.0)
    return Reach(
        rest,
        f"the operators outside matmuls ({100 * rest:.1f}% of the step) cost nothing once fused",
    )


FIX = FixSpec(
    id="torch_compile",
    title="torch.compile",
    bottleneck=Bottleneck.COMPUTE,
    applies_to="any",
    explanation="Fuses chains of pointwise ops into single kernels and picks better ones; pays a one-off compile.",
    snippet="model = torch.compile(model)",
    docs=DOCS,
    effort="config",
    settings={"compile": True},
    alternatives=("bf16_autocast", "channels_last"),
    injection=Injection(const(compile=True), "compile", "model_call"),
    done=lambda f: f.compiled,
    bound=fusable,
    examples=(
        FixExample(ON_CPU, knobs={"compile": True}),
        FixExample(ON_CPU, script=COMPILE_SCRIPT, argv=(), changed=("--compile",)),
    ),
)
