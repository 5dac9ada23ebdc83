"""Linear regression with heavy label noise at a small batch (4, SGD): its gradient noise scale is far above its
batch, so a larger batch (the rate scaled linearly) reaches the same loss in many fewer steps at about the same
step time. ``--batch-size`` and ``--steps`` for the benchmark; the launcher injects the changes otherwise."""

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, default=4)
p.add_argument("--lr", type=float, default=0.004)
p.add_argument("--steps", type=int, default=3000)
p.add_argument("--noise", type=float, default=2.0, help="the labels' noise (0: none, B_simple = 33 at any weights)")
args = p.parse_args()
g = torch.Generator().manual_seed(99)  # the same data for every seed; the launcher seeds the rest
x_all = torch.randn(65536, 32, generator=g)
y_all = x_all @ torch.randn(32, 1, generator=g) + args.noise * torch.randn(65536, 1, generator=g)
loader = DataLoader(TensorDataset(x_all, y_all), batch_size=args.batch_size, shuffle=True)
model = nn.Linear(32, 1)
opt = torch.optim.SGD(model.parameters(), lr=args.lr)
step = 0
while step < args.steps:
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if step >= args.steps:
            break
