"""``memory_bound``: a deep, narrow MLP on a large batch, whose saved activations overflow its memory budget.

At the default batch the activations alone exceed ``memory_budget_mb`` (the spec carries the budget, so the
baseline ends ``out_of_memory``). Micro-batching (``grad_accum_steps``) divides the live activations by the
number of micro-batches at almost no cost per sample: each micro-batch is still thousands of rows.

On CPU the budget is checked against RSS, which glibc's heap inflates above the live tensors (freed holes
between long-lived tensors). Each block is a residual gated unit, ``x + gelu(h) * sigmoid(h) / sqrt(depth)``
with ``h = linear(x)``: four saved activations of one size per matmul (x, h, gelu(h), sigmoid(h)), so memory
is large next to compute, and the residual path lets the loss fall. ``activation_checkpointing`` is
honoured, but under glibc it lowers RSS far less than live memory, so budgets are set for micro-batching.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import torch
from torch import nn

from profilers.spec import TrainingSpec
from sample_runs.base import Parts, Size, Workload, cross_entropy, teacher_classification


class GatedBlock(nn.Module):
    """``x + gelu(h) * sigmoid(h) / sqrt(depth)``, ``h = linear(x)``: one matmul, four saved activations."""

    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        self.linear, self.scale = nn.Linear(width, width), 1.0 / math.sqrt(depth)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.linear(x)
        return x + nn.functional.gelu(h) * torch.sigmoid(h) * self.scale


def build(spec: TrainingSpec, p: Mapping[str, Any], rank: int) -> Parts:
    data = teacher_classification(p["samples"], p["dim"], p["classes"], seed=spec.seed)
    blocks = [GatedBlock(p["width"], p["depth"]) for _ in range(p["depth"])]
    model = nn.Sequential(nn.Linear(p["dim"], p["width"]), *blocks, nn.Linear(p["width"], p["classes"]))
    names = tuple(str(i) for i in range(1, p["depth"] + 1))
    return Parts(model=model, dataset=data, loss_fn=cross_entropy, checkpoint_blocks=names)


WORKLOAD = Workload(
    name="memory_bound",
    description="Deep narrow MLP on a large batch: saved activations exceed the memory budget.",
    intended_bottleneck="memory",
    # Saved activations ≈ 4 × batch × width × 4 bytes per block (the scalar multiply saves one more): tiny
    # 768 MB, bench 1 GB, above the ~390 MB an instrumented worker holds before its first step. Budgets sit
    # between the measured RSS peaks of the full batch and of half of it (grad_accum_steps=2).
    default_params={"samples": 65536, "dim": 64, "width": 128, "depth": 16, "classes": 10},
    sizes={
        # Measured RSS peaks (instrumented worker, 2026-11, torch 2.13 CPU): tiny full 1780 / half 1228 /
        # checkpointed 1383 MB; bench full 2068-2366 / half 1332-1500 (once 1711 on a loaded machine) /
        # quarter 934 MB. The bench budget sits near the middle of the gap, so neither side is marginal.
        "tiny": Size(params={"depth": 12}, spec={"batch_size": 32768, "steps": 10, "memory_budget_mb": 1500}),
        "bench": Size(params={}, spec={"batch_size": 32768, "steps": 20, "memory_budget_mb": 1850}),
    },
    builder=build,
)
