"""``communication_bound``: DDP over 2 ranks, a parameter-heavy but cheap model and a small per-rank batch.

Almost all parameters sit in one wide input projection (think embedding-heavy recommender): its gradient is
the cheapest in FLOPs yet is tens of MB, and it is produced *last* in backward, so its all-reduce cannot hide
behind any compute — every step ends waiting for communication. Fixes: more samples per all-reduce
(``grad_accum_steps`` with ``ddp_no_sync`` and a larger ``batch_size``) or fewer bytes (``grad_compression``).
"""

from __future__ import annotations

from typing import Any, Mapping

import torch
from torch import nn

from sample_runs.base import (
    BuildContext,
    Parts,
    Size,
    Workload,
    cross_entropy,
    teacher_classification,
)


class WideProjection(nn.Module):
    """``dim → width`` as ``chunks`` column blocks. Why chunks: one 50 MB gradient would be mmapped and
    page-faulted afresh every step by glibc (> 32 MB), which costs more than the all-reduce on a VM; blocks
    under 16 MB are reused from the heap, so the step measures communication, not page faults."""

    def __init__(self, dim: int, width: int, chunks: int) -> None:
        super().__init__()
        self.parts = nn.ModuleList(nn.Linear(dim, width // chunks) for _ in range(chunks))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([part(x) for part in self.parts], dim=1)


def build(p: Mapping[str, Any], ctx: BuildContext, rank: int) -> Parts:
    data = teacher_classification(p["samples"], p["dim"], p["classes"], seed=ctx.seed)
    model = nn.Sequential(  # blocks "0" and "1" are checkpointable units
        nn.Sequential(
            WideProjection(p["dim"], p["width"], p["chunks"]), nn.ReLU()
        ),  # dim × width parameters
        nn.Sequential(nn.Linear(p["width"], p["hidden"]), nn.ReLU()),
        nn.Linear(p["hidden"], p["classes"]),
    )
    return Parts(model=model, dataset=data, loss_fn=cross_entropy, checkpoint_blocks=("0", "1"))


WORKLOAD = Workload(
    name="communication_bound",
    description="DDP over 2 ranks: a wide, parameter-heavy projection and a small per-rank batch; "
    "the all-reduce dominates.",
    intended_bottleneck="communication",
    # bench: 3072 × 4096 ≈ 12.6 M parameters = 50 MB of fp32 gradients per step for 4 samples per rank.
    default_params={
        "samples": 2048,
        "dim": 3072,
        "width": 4096,
        "chunks": 4,
        "hidden": 256,
        "classes": 10,
    },
    sizes={
        # tiny: 1 MB gradient blocks (chunks 8): communication leads forward+backward more steadily than with
        # 4 MB blocks (chunks 2). Shares measured: benchmarks/results/workload-shares-2026-11.md;
        # tests/advisors/experiments/test_real_runs.py judges it over 8 profiled steps.
        "tiny": Size(
            params={"samples": 512, "dim": 1024, "width": 2048, "chunks": 8, "hidden": 64},
            settings={"steps": 10},
        ),
        "bench": Size(params={}, settings={"steps": 40}),
    },
    builder=build,
    base_settings={"world_size": 2, "batch_size": 4},
)
