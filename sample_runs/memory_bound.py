"""``memory_bound``: a deep, narrow MLP on a large batch, whose saved activations overflow its memory budget.

At the default batch the activations alone exceed ``memory_budget_mb`` (the size's settings carry the budget,
which is the launcher's memory limit for the run, so the baseline ends ``out_of_memory``). Micro-batching
(``--grad-accum-steps``) divides the live activations by the number of micro-batches at almost no cost per
sample: each micro-batch is still thousands of rows.

On CPU the budget is checked against RSS, which glibc's heap inflates above the live tensors (freed holes
between long-lived tensors). Each block is a residual gated unit, ``x + gelu(h) * sigmoid(h) / sqrt(depth)``
with ``h = linear(x)``: four saved activations of one size per matmul (x, h, gelu(h), sigmoid(h)), so memory
is large next to compute, and the residual path lets the loss fall. ``activation_checkpointing`` is
honoured, but under glibc it lowers RSS far less than live memory, so budgets are set for micro-batching.

On CUDA the budget caps the caching allocator (live tensors, no heap inflation), so the CPU depth would fit
in it. There the model is ``cuda_depth`` blocks deep, derived from each size's batch and budget by
``sample_runs.memory_sizing`` so that the full batch needs ~1.4 × the budget and half of it ~0.7 ×. The
depth depends on the size, not on the run's ``memory_budget_mb``, so the budget-lifted reference run of an
experiment trains the same model. An explicit ``params.depth`` is used as given on either device.
"""

from __future__ import annotations

import math
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
from sample_runs.memory_sizing import cuda_depth


class GatedBlock(nn.Module):
    """``x + gelu(h) * sigmoid(h) / sqrt(depth)``, ``h = linear(x)``: one matmul, four saved activations."""

    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        self.linear, self.scale = nn.Linear(width, width), 1.0 / math.sqrt(depth)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.linear(x)
        return x + nn.functional.gelu(h) * torch.sigmoid(h) * self.scale


def build(p: Mapping[str, Any], ctx: BuildContext, rank: int) -> Parts:
    data = teacher_classification(p["samples"], p["dim"], p["classes"], seed=ctx.seed)
    depth = p["cuda_depth"] if ctx.device == "cuda" and "depth" not in ctx.explicit else p["depth"]
    blocks = [GatedBlock(p["width"], depth) for _ in range(depth)]
    model = nn.Sequential(
        nn.Linear(p["dim"], p["width"]), *blocks, nn.Linear(p["width"], p["classes"])
    )
    names = tuple(str(i) for i in range(1, depth + 1))
    return Parts(model=model, dataset=data, loss_fn=cross_entropy, checkpoint_blocks=names)


DEFAULTS = {"samples": 65536, "dim": 64, "width": 128, "depth": 16, "classes": 10}
TINY = {"batch_size": 32768, "memory_budget_mb": 1500}
BENCH = {"batch_size": 32768, "memory_budget_mb": 1850}


def _cuda_depth(size: Mapping[str, Any]) -> int:
    return cuda_depth(
        size["memory_budget_mb"],
        size["batch_size"],
        DEFAULTS["dim"],
        DEFAULTS["width"],
        DEFAULTS["classes"],
    )


WORKLOAD = Workload(
    name="memory_bound",
    description="Deep narrow MLP on a large batch: saved activations exceed the memory budget.",
    intended_bottleneck="memory",
    # Saved activations ≈ 4 × batch × width × 4 bytes per block: tiny 768 MB, bench 1 GB, above the ~390 MB an
    # instrumented worker holds before its first step. CPU budgets sit between the measured RSS peaks of the
    # full batch and of half of it (grad_accum_steps=2); on CUDA the depth is cuda_depth (module docs).
    default_params={**DEFAULTS, "cuda_depth": _cuda_depth(BENCH)},
    sizes={
        # The measured RSS peaks of each size: benchmarks/results/workload-shares-2026-11.md. The bench budget
        # sits near the middle of the gap between full and half batch, so neither side is marginal.
        "tiny": Size(
            params={"depth": 12, "cuda_depth": _cuda_depth(TINY)}, settings={**TINY, "steps": 10}
        ),
        "bench": Size(params={}, settings={**BENCH, "steps": 20}),
    },
    builder=build,
)
