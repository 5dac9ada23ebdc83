"""A training script whose batch size and learning rate are its own flags: ``--batch-size`` is its DataLoader's
``batch_size``, ``--lr`` its AdamW's rate. A time-to-quality batch × k arm runs this command with both changed."""

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser(description="a small classifier")
parser.add_argument("--epochs", type=int, default=1000)
parser.add_argument("--batch-size", type=int, default=16, help="training batch")
parser.add_argument("--lr", type=float, default=1e-3, help="AdamW learning rate")
args = parser.parse_args()

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
x = torch.randn(4096, 32, generator=g)
data = TensorDataset(x, (x[:, :4].sum(1) > 0).long())
loader = DataLoader(data, batch_size=args.batch_size, shuffle=True)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 2))
opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
for epoch in range(args.epochs):
    for xb, yb in loader:
        loss = nn.functional.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
