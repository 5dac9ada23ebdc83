"""A data-bound training script, written the way many are: a map-style dataset that reads each image from
slow storage (a fixed latency per read, as from network storage), decodes the JPEG and takes a random crop;
a default DataLoader (no worker processes); a small CNN. Stepwise never edits it: the benchmark optimises it
as it is. The images are made in memory at start-up (no download).

    python benchmarks/scripts/photos_train.py [--latency-ms 8] [--images 512] [--batch 32]
"""

import argparse
import io
import random
import time

import numpy as np
import torch
import torch.nn as nn
from PIL import Image
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser()
parser.add_argument("--latency-ms", type=float, default=8.0)
parser.add_argument("--images", type=int, default=512)
parser.add_argument("--batch", type=int, default=32)
parser.add_argument("--epochs", type=int, default=100)
args = parser.parse_args()


def encode(seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 255, (16, 16, 3), dtype=np.uint8)
    img = Image.fromarray(base).resize(
        (144, 144), Image.BILINEAR
    )  # smooth: compresses like a photo
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=90)
    return buf.getvalue()


class Photos(Dataset):
    def __init__(self, n: int, latency_s: float) -> None:
        self.blobs = [encode(i) for i in range(n)]
        self.latency_s = latency_s

    def __len__(self) -> int:
        return len(self.blobs)

    def __getitem__(self, i: int):
        time.sleep(self.latency_s)  # the read from storage
        img = (
            np.asarray(Image.open(io.BytesIO(self.blobs[i])).convert("RGB"), dtype=np.float32)
            / 255.0
        )
        top, left = random.randint(0, 16), random.randint(0, 16)
        x = torch.from_numpy(img[top : top + 128, left : left + 128]).permute(2, 0, 1).contiguous()
        if random.random() < 0.5:
            x = x.flip(2)
        return x, i % 10


loader = DataLoader(
    Photos(args.images, args.latency_ms / 1000.0), batch_size=args.batch, shuffle=True
)
model = nn.Sequential(
    nn.Conv2d(3, 16, 3, stride=2, padding=1),
    nn.ReLU(),
    nn.Conv2d(16, 32, 3, stride=2, padding=1),
    nn.ReLU(),
    nn.AdaptiveAvgPool2d(4),
    nn.Flatten(),
    nn.Linear(512, 10),
)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for epoch in range(args.epochs):
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"epoch {epoch}: loss {loss.item():.4f}")
