"""A small SGD training loop for ``optimize --to-quality``: its own DataLoader (batch 16) and SGD optimizer; it
clears gradients with ``model.zero_grad()``, so gradient accumulation cannot be injected (said, not measured)."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

g = torch.Generator().manual_seed(1234)  # the same data for every seed; the launcher seeds the rest
w_true = torch.randn(32, 4, generator=g)
x_all = torch.randn(4096, 32, generator=g)
y_all = (x_all @ w_true + 0.5 * torch.randn(4096, 4, generator=g)).argmax(dim=1)
loader = DataLoader(TensorDataset(x_all, y_all), batch_size=16, shuffle=True)
model = nn.Sequential(nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.02)
for epoch in range(1000):
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        model.zero_grad()
        loss.backward()
        opt.step()
