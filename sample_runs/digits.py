"""``digits``: scikit-learn's bundled 8×8 handwritten digits (real data, shipped with sklearn, no download)."""

from __future__ import annotations

from typing import Any, Mapping

import torch
from torch import nn

from sample_runs.base import (
    BuildContext,
    Parts,
    Size,
    TensorPairs,
    Workload,
    cross_entropy,
    generator,
)


def digits_dataset(seed: int, limit: int | None) -> TensorPairs:
    """The 1,797 digits as (1, 8, 8) float images scaled to [0, 1], in a seeded shuffled order."""
    from sklearn.datasets import load_digits  # imported here: sklearn costs ~1 s to import

    bunch = load_digits()
    x = torch.tensor(bunch.images, dtype=torch.float32).unsqueeze(1) / 16.0
    y = torch.tensor(bunch.target, dtype=torch.long)
    order = torch.randperm(len(y), generator=generator(seed, stream=4))
    if limit is not None:
        order = order[:limit]
    return TensorPairs(x[order].contiguous(), y[order].contiguous())


def build(p: Mapping[str, Any], ctx: BuildContext, rank: int) -> Parts:
    w = p["width"]
    model = nn.Sequential(
        nn.Sequential(nn.Conv2d(1, w, 3, padding=1), nn.ReLU()),
        nn.Sequential(nn.Conv2d(w, 2 * w, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)),
        nn.Flatten(),
        nn.Linear(2 * w * 16, 64),
        nn.ReLU(),
        nn.Linear(64, 10),
    )
    return Parts(
        model=model,
        dataset=digits_dataset(ctx.seed, p["limit"]),
        loss_fn=cross_entropy,
        checkpoint_blocks=("0", "1"),
        channels_last=True,
    )


WORKLOAD = Workload(
    name="digits",
    description="Small CNN on scikit-learn's bundled 8x8 handwritten digits (real data).",
    intended_bottleneck=None,
    default_params={"width": 16, "limit": None},
    sizes={
        # tiny: bench's width, so forward+backward clearly lead the ~2 ms of Python per step (at width 8 they
        # did not; shares measured: benchmarks/results/workload-shares-2026-11.md).
        "tiny": Size(params={"limit": 512}, settings={"batch_size": 32, "steps": 10, "lr": 0.1}),
        "bench": Size(params={}, settings={"batch_size": 64, "steps": 60, "lr": 0.1}),
    },
    builder=build,
)
