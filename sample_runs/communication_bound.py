"""``communication_bound``: DDP over 2 ranks, a parameter-heavy but cheap model and a small per-rank batch.

Each step all-reduces every gradient (tens of MB) for a few milliseconds of compute, so communication
dominates. Fixes: accumulate over more samples per all-reduce (``grad_accum_steps`` with ``ddp_no_sync`` and a
larger ``batch_size``) or send half the bytes (``grad_compression``).
"""

from __future__ import annotations

from typing import Any, Mapping

from torch import nn

from profilers.spec import TrainingSpec
from sample_runs.base import Parts, Size, Workload, cross_entropy, teacher_classification


def build(spec: TrainingSpec, p: Mapping[str, Any], rank: int) -> Parts:
    data = teacher_classification(p["samples"], p["dim"], p["classes"], seed=spec.seed)
    hidden: list[nn.Module] = []
    for _ in range(p["depth"]):
        hidden += [nn.Linear(p["width"], p["width"]), nn.ReLU()]
    model = nn.Sequential(nn.Linear(p["dim"], p["width"]), nn.ReLU(), *hidden, nn.Linear(p["width"], p["classes"]))
    return Parts(model=model, dataset=data, loss_fn=cross_entropy)


WORKLOAD = Workload(
    name="communication_bound",
    description="DDP over 2 ranks: many parameters, small per-rank batch, all-reduce dominates.",
    intended_bottleneck="communication",
    default_params={"samples": 4096, "dim": 256, "width": 1024, "depth": 12, "classes": 10},
    sizes={
        "tiny": Size(params={"samples": 512, "dim": 64, "width": 256, "depth": 4}, spec={"steps": 10}),
        "bench": Size(params={}, spec={"steps": 40}),
    },
    builder=build,
    base_spec={"world_size": 2, "batch_size": 4},
)
