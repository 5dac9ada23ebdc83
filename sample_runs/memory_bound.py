"""``memory_bound``: a deep, narrow MLP on a large batch, whose saved activations overflow its memory budget.

At the default batch the activations alone exceed ``memory_budget_mb`` (the spec carries the budget, so the
baseline ends ``out_of_memory``). Micro-batching (``grad_accum_steps``) divides the live activations by the
number of micro-batches at almost no cost per sample; ``activation_checkpointing`` keeps only block inputs
and recomputes the rest in the backward pass.
"""

from __future__ import annotations

from typing import Any, Mapping

from torch import nn

from profilers.spec import TrainingSpec
from sample_runs.base import Parts, Size, Workload, cross_entropy, teacher_classification


class Block(nn.Module):
    """Linear → LayerNorm → GELU: three saved activations per block for one matmul's worth of compute."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.linear, self.norm, self.act = nn.Linear(width, width), nn.LayerNorm(width), nn.GELU()

    def forward(self, x):  # type: ignore[no-untyped-def]
        return self.act(self.norm(self.linear(x)))


def build(spec: TrainingSpec, p: Mapping[str, Any], rank: int) -> Parts:
    data = teacher_classification(p["samples"], p["dim"], p["classes"], seed=spec.seed)
    blocks = [Block(p["width"]) for _ in range(p["depth"])]
    model = nn.Sequential(nn.Linear(p["dim"], p["width"]), *blocks, nn.Linear(p["width"], p["classes"]))
    names = tuple(str(i) for i in range(1, p["depth"] + 1))
    return Parts(model=model, dataset=data, loss_fn=cross_entropy, checkpoint_blocks=names)


WORKLOAD = Workload(
    name="memory_bound",
    description="Deep narrow MLP, large batch: saved activations exceed the memory budget.",
    intended_bottleneck="memory",
    # Saved activations ≈ 3 × batch × width × 4 bytes per block: tiny ≈ 400 MB, bench ≈ 770 MB, on top of the
    # ~390 MB an instrumented worker holds before its first step. Each budget sits between the full batch
    # and half of it (grad_accum_steps=2), with ≥ 100 MB of margin each side; activation checkpointing fits too.
    default_params={"samples": 32768, "dim": 64, "width": 256, "depth": 16, "classes": 10},
    sizes={
        "tiny": Size(params={"samples": 16384, "width": 128, "depth": 32},
                     spec={"batch_size": 8192, "steps": 10, "memory_budget_mb": 700}),
        "bench": Size(params={}, spec={"batch_size": 16384, "steps": 20, "memory_budget_mb": 1000}),
    },
    builder=build,
)
