"""``resnet_small``: a ResNet-style CNN (BasicBlocks with batch norm) on synthetic, learnable 32×32 images."""

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


class BasicBlock(nn.Module):
    """Two 3×3 convolutions with a (projected when the shape changes) shortcut."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(cin, cout, 3, stride, 1, bias=False),
            nn.BatchNorm2d(cout),
            nn.ReLU(inplace=True),
            nn.Conv2d(cout, cout, 3, 1, 1, bias=False),
            nn.BatchNorm2d(cout),
        )
        self.short = (
            nn.Identity()
            if stride == 1 and cin == cout
            else nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.short(x))


class ResNetSmall(nn.Module):
    def __init__(self, width: int, blocks_per_stage: int, classes: int) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU()
        )
        stages, cin = [], width
        for i in range(3):
            cout = width * 2**i
            for j in range(blocks_per_stage):
                stages.append(BasicBlock(cin, cout, 2 if (j == 0 and i > 0) else 1))
                cin = cout
        self.blocks = nn.Sequential(*stages)
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.stem(x)))


def synthetic_images(n: int, classes: int, size: int, seed: int) -> TensorPairs:
    """Class templates (smooth random patterns) plus noise: a CNN can learn them, a constant guess cannot."""
    g = generator(seed, stream=2)
    templates = torch.nn.functional.interpolate(
        torch.randn(classes, 3, 4, 4, generator=g), size=size, mode="bilinear", align_corners=False
    )
    y = torch.randint(0, classes, (n,), generator=g)
    x = templates[y] + 0.8 * torch.randn(n, 3, size, size, generator=g)
    return TensorPairs(x, y)


def build(p: Mapping[str, Any], ctx: BuildContext, rank: int) -> Parts:
    data = synthetic_images(p["samples"], p["classes"], p["image_size"], seed=ctx.seed)
    model = ResNetSmall(p["width"], p["blocks_per_stage"], p["classes"])
    names = tuple(f"blocks.{i}" for i in range(len(model.blocks)))
    return Parts(
        model=model,
        dataset=data,
        loss_fn=cross_entropy,
        checkpoint_blocks=names,
        channels_last=True,
    )


WORKLOAD = Workload(
    name="resnet_small",
    description="ResNet-style CNN (3 stages of BasicBlocks) on synthetic 32x32 images.",
    intended_bottleneck=None,
    default_params={
        "samples": 2048,
        "classes": 10,
        "image_size": 32,
        "width": 32,
        "blocks_per_stage": 2,
    },
    sizes={
        "tiny": Size(
            params={"samples": 256, "width": 8, "blocks_per_stage": 1},
            settings={"batch_size": 16, "steps": 10},
        ),
        "bench": Size(params={}, settings={"batch_size": 64, "steps": 30}),
    },
    builder=build,
)
