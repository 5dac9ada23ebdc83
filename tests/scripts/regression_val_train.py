"""Linear regression (64 features) with label noise at a small batch (4, SGD): its gradient noise scale (about
d + 1 = 65 while the weights are far from the truth, more later) is far above its batch, so a larger batch with
the rate scaled linearly reaches the same loss in fewer steps at about the same step time. Every 25 steps it
prints ``val_loss=…`` on 4,096 held-out samples (a quality that is not the training batch's noise).
``--batch-size``, ``--noise`` and ``--steps`` set the rest; the launcher injects the changes otherwise."""

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, default=4)
p.add_argument("--lr", type=float, default=0.0004)
p.add_argument("--steps", type=int, default=6000)
p.add_argument("--noise", type=float, default=0.5, help="the labels' noise (0: none, B_simple = d + 1 at any weights)")
args = p.parse_args()
g = torch.Generator().manual_seed(99)  # the same data for every seed; the launcher seeds the rest
w_true = torch.randn(64, 1, generator=g)
x_all = torch.randn(65536, 64, generator=g)
y_all = x_all @ w_true + args.noise * torch.randn(65536, 1, generator=g)
x_val = torch.randn(4096, 64, generator=g)
y_val = x_val @ w_true + args.noise * torch.randn(4096, 1, generator=g)
loader = DataLoader(TensorDataset(x_all, y_all), batch_size=args.batch_size, shuffle=True)
model = nn.Linear(64, 1)
opt = torch.optim.SGD(model.parameters(), lr=args.lr)
step = 0
while step < args.steps:
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if step % 25 == 0:
            with torch.no_grad():
                print(f"step {step} val_loss={nn.functional.mse_loss(model(x_val), y_val).item():.5f}", flush=True)
        if step >= args.steps:
            break
