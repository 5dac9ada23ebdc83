"""``compute_bound``: a deep, wide fp32 MLP on in-memory data, so dense matmuls are nearly the whole step.

The natural fix is lower-precision math: ``precision="bf16"`` autocast (fast on CPUs with AVX512-BF16/AMX
and on every recent GPU), or ``tf32`` on Ampere+ GPUs.
"""

from __future__ import annotations

from typing import Any, Mapping

from torch import nn

from sample_runs.base import (
    BuildContext,
    Parts,
    Size,
    Workload,
    cross_entropy,
    teacher_classification,
)


def mlp(dim: int, width: int, depth: int, classes: int) -> nn.Sequential:
    """``depth`` residual-free Linear+GELU blocks; each block is a checkpointable unit."""
    layers: list[nn.Module] = [nn.Linear(dim, width)]
    layers += [nn.Sequential(nn.Linear(width, width), nn.GELU()) for _ in range(depth)]
    layers.append(nn.Linear(width, classes))
    return nn.Sequential(*layers)


def build(p: Mapping[str, Any], ctx: BuildContext, rank: int) -> Parts:
    data = teacher_classification(p["samples"], p["dim"], p["classes"], seed=ctx.seed)
    model = mlp(p["dim"], p["width"], p["depth"], p["classes"])
    blocks = tuple(str(i) for i in range(1, p["depth"] + 1))
    return Parts(model=model, dataset=data, loss_fn=cross_entropy, checkpoint_blocks=blocks)


WORKLOAD = Workload(
    name="compute_bound",
    description="Deep, wide fp32 MLP on in-memory data: dense matmuls dominate.",
    intended_bottleneck="compute",
    default_params={"samples": 4096, "dim": 512, "width": 2048, "depth": 6, "classes": 10},
    sizes={
        "tiny": Size(
            params={"samples": 1024, "dim": 256, "width": 1024, "depth": 3},
            settings={"batch_size": 128, "steps": 10},
        ),
        "bench": Size(params={}, settings={"batch_size": 256, "steps": 40}),
        # gpu: one H100-class GPU's worth. At bench size a step is ~0.1 ms of matmuls and the launches bind;
        # here each Linear is 4096³ (≈ 3.5 TFLOP a step), so fp32 math binds and AMP/TF32 have room to show.
        "gpu": Size(
            params={"samples": 16384, "dim": 1024, "width": 4096, "depth": 8},
            settings={"batch_size": 4096, "steps": 30},
        ),
    },
    builder=build,
)
