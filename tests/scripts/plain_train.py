"""A plain training loop: its own DataLoader, model and optimizer."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
data = TensorDataset(torch.randn(4096, 128), torch.randint(0, 10, (4096,)))
loader = DataLoader(data, batch_size=64, shuffle=True)
model = nn.Sequential(nn.Linear(128, 512), nn.ReLU(), nn.Linear(512, 10))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for epoch in range(1000):
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
