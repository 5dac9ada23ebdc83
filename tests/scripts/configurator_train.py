"""A nanoGPT-style script: module-level defaults, overridden by ``--key=value`` through ``configurator.py``."""

import os

import torch
from torch import nn

batch_size = 64
learning_rate = 1e-3
max_iters = 100_000
compile = False  # use PyTorch 2.0 to compile the model to be faster
exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "configurator.py")).read())

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(128, 512), nn.GELU(), nn.Linear(512, 128))
if compile:
    model = torch.compile(model)
opt = torch.optim.AdamW(model.parameters(), lr=learning_rate)
for it in range(max_iters):
    x = torch.randn(batch_size, 128)
    loss = (model(x) - x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
