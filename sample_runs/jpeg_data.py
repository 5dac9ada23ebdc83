"""Synthetic labelled images, JPEG-encoded in memory, decoded and augmented per sample in ``__getitem__``.

This is the shape of a real image pipeline (bytes on "disk" → PIL decode → augmentation → tensor) without a
download: each class has its own colour and stripe pattern, so a small CNN can learn it. Augmentation is
seeded by ``(seed, index)``, which makes a sample the same on every epoch, worker and rank — so caching the
decoded + transformed sample (``cache_decoded``) changes the cost, never the data.
"""

from __future__ import annotations

import io
import random

import numpy as np
import torch
from PIL import Image, ImageEnhance, ImageFilter
from torch.utils.data import Dataset


def _make_image(label: int, classes: int, size: int, rng: np.random.Generator) -> Image.Image:
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
    angle = np.pi * label / classes
    stripes = np.sin((xx * np.cos(angle) + yy * np.sin(angle)) * (6 + label) * np.pi)
    hue = np.array([np.sin(label), np.cos(label), np.sin(2 * label)], dtype=np.float32) * 60
    img = 128 + stripes[..., None] * 50 + hue + rng.normal(0, 25, (size, size, 3))
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8), "RGB")


def encode_images(
    n: int, classes: int, size: int, seed: int, quality: int = 90
) -> tuple[list[bytes], list[int]]:
    """``n`` JPEG byte strings and their labels, deterministic from ``seed``."""
    rng = np.random.default_rng(seed)
    blobs: list[bytes] = []
    labels = [int(v) for v in rng.integers(0, classes, n)]
    for label in labels:
        buf = io.BytesIO()
        _make_image(label, classes, size, rng).save(buf, format="JPEG", quality=quality)
        blobs.append(buf.getvalue())
    return blobs, labels


class JpegDataset(Dataset[tuple[torch.Tensor, int]]):
    """Decode + random-resized-crop + flip + colour jitter + blur + normalise, per sample, on the CPU."""

    MEAN, STD = 128.0, 64.0

    def __init__(
        self, blobs: list[bytes], labels: list[int], out_size: int, seed: int, blur: float
    ) -> None:
        self.blobs, self.labels = blobs, labels
        self.out_size, self.seed, self.blur = out_size, seed, blur

    def __len__(self) -> int:
        return len(self.blobs)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        rnd = random.Random(
            self.seed * 1_000_003 + i
        )  # per-sample: identical wherever it is computed
        img = Image.open(io.BytesIO(self.blobs[i])).convert("RGB")
        w, h = img.size
        scale = rnd.uniform(0.6, 1.0)
        cw, ch = int(w * scale), int(h * scale)
        left, top = rnd.randint(0, w - cw), rnd.randint(0, h - ch)
        img = img.crop((left, top, left + cw, top + ch)).resize(
            (self.out_size, self.out_size), Image.Resampling.BICUBIC
        )
        if rnd.random() < 0.5:
            img = img.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        img = ImageEnhance.Color(img).enhance(rnd.uniform(0.7, 1.3))
        img = ImageEnhance.Contrast(img).enhance(rnd.uniform(0.7, 1.3))
        if self.blur > 0:
            img = img.filter(ImageFilter.GaussianBlur(self.blur))
        arr = np.asarray(img, dtype=np.float32)
        x = torch.from_numpy((arr - self.MEAN) / self.STD).permute(2, 0, 1).contiguous()
        return x, self.labels[i]
