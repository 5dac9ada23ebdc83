"""``data_bound``: a small CNN fed by a per-sample JPEG decode + augmentation pipeline that dominates the step.

The images are few (``images`` per rank is seen several times in a bench run), so the natural fixes both pay
off: DataLoader workers overlap decoding with training, and ``cache_decoded`` makes every epoch after the
first almost free.
"""

from __future__ import annotations

from typing import Any, Mapping

from torch import nn

from sample_runs.base import BuildContext, Parts, Size, Workload, cross_entropy
from sample_runs.jpeg_data import JpegDataset, encode_images


def small_cnn(classes: int, width: int) -> nn.Sequential:
    """A 4×4 patchify convolution, one strided convolution and a linear head: cheap next to decoding its input.
    Each convolution with its ReLU is a checkpointable block (``"0"``, ``"1"``)."""
    return nn.Sequential(
        nn.Sequential(nn.Conv2d(3, width, 4, stride=4), nn.ReLU()),
        nn.Sequential(nn.Conv2d(width, 2 * width, 3, stride=2, padding=1), nn.ReLU()),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(2 * width, classes),
    )


def build(p: Mapping[str, Any], ctx: BuildContext, rank: int) -> Parts:
    blobs, labels = encode_images(p["images"], p["classes"], p["source_size"], seed=ctx.seed)
    dataset = JpegDataset(blobs, labels, out_size=p["image_size"], seed=ctx.seed, blur=p["blur"])
    return Parts(
        model=small_cnn(p["classes"], p["width"]),
        dataset=dataset,
        loss_fn=cross_entropy,
        checkpoint_blocks=("0", "1"),
        channels_last=True,
        decodes_samples=True,
    )


WORKLOAD = Workload(
    name="data_bound",
    description="Small CNN on JPEG images decoded and augmented per sample in Dataset.__getitem__.",
    intended_bottleneck="data",
    default_params={
        "images": 128,
        "classes": 10,
        "source_size": 256,
        "image_size": 64,
        "blur": 1.5,
        "width": 16,
    },
    sizes={
        # bench: 128 images, 4 steps per epoch, 48 steps = 12 epochs, so a decoded-sample cache pays off.
        # tiny: large source JPEGs keep decoding clearly ahead of the model even when the CPU is contended.
        "tiny": Size(
            params={"images": 48, "source_size": 384}, settings={"batch_size": 16, "steps": 10}
        ),
        "bench": Size(params={}, settings={"batch_size": 32, "steps": 48}),
    },
    builder=build,
)
