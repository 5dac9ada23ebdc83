"""A training script as users write them, whose data gets expensive part-way: the first shard is stored as small
raw images, the later one as large zlib-compressed images that each sample must decompress and shrink
(``--change-at`` the sample where the second shard starts; ``--steady`` keeps every sample in the first form)."""

import argparse
import zlib

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=120)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--change-at", type=int, default=60, help="the step where the large images begin")
parser.add_argument("--steady", action="store_true")
parser.add_argument("--big", type=int, default=384, help="the side of a large image")
args = parser.parse_args()


class Shards(Dataset):
    """Two shards: raw 3x32x32 images, then compressed 3xBIGxBIG images decoded and pooled to 3x32x32."""

    def __init__(self, n: int, first_shard: int, big: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.n, self.first_shard = n, first_shard
        self.small = torch.rand(64, 3, 32, 32, generator=g)
        raw = (torch.rand(3, big, big, generator=g) * 255).to(torch.uint8)
        self.big, self.blob = big, zlib.compress(bytes(raw.flatten().tolist()), 1)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        label = i % 10
        if i < self.first_shard:
            return self.small[i % 64], label
        data = zlib.decompress(self.blob)  # the later shard: decode every sample
        img = torch.frombuffer(bytearray(data), dtype=torch.uint8).view(3, self.big, self.big).float() / 255
        return nn.functional.adaptive_avg_pool2d(img, 32), label


first = args.steps * args.batch_size if args.steady else args.change_at * args.batch_size
loader = DataLoader(Shards(args.steps * args.batch_size, first, args.big), batch_size=args.batch_size,
                    shuffle=False, num_workers=0)
model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
                      nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step, (x, y) in enumerate(loader):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 20 == 0:
        print(f"step {step} loss {loss.item():.3f}", flush=True)
print("done")
