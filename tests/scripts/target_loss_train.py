"""A user's regression script that carries its own metric target: ``--target_loss`` (the loss it calls good
enough) and ``--early_stopping_patience`` (a count, not a target). It trains until ``--steps``."""

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=40)
p.add_argument("--lr", type=float, default=0.05)
p.add_argument("--target_loss", type=float, default=0.55, help="stop worrying once the loss is below this")
p.add_argument("--early_stopping_patience", type=int, default=5)
args = p.parse_args()
g = torch.Generator().manual_seed(7)
x_all = torch.randn(2048, 8, generator=g)
y_all = x_all @ torch.randn(8, 1, generator=g) + 0.5 * torch.randn(2048, 1, generator=g)
loader = DataLoader(TensorDataset(x_all, y_all), batch_size=32, shuffle=True)
model = nn.Linear(8, 1)
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
