"""A compute-bound training script: a wide MLP in fp32 on in-memory features, default DataLoader, AdamW.
On a CPU its cores are saturated in forward and backward matmuls. Stepwise never edits it.

    python benchmarks/scripts/mlp_train.py [--width 2048] [--batch 256]
"""

import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--width", type=int, default=2048)
parser.add_argument("--batch", type=int, default=256)
parser.add_argument("--epochs", type=int, default=100)
args = parser.parse_args()

torch.manual_seed(0)
features = torch.randn(16384, 1024)
labels = (features[:, :8].sum(dim=1) > 0).long() + 2 * (features[:, 8:16].sum(dim=1) > 0).long()
loader = DataLoader(TensorDataset(features, labels), batch_size=args.batch, shuffle=True)
model = nn.Sequential(
    nn.Linear(1024, args.width),
    nn.GELU(),
    nn.Linear(args.width, args.width),
    nn.GELU(),
    nn.Linear(args.width, 4),
)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for epoch in range(args.epochs):
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"epoch {epoch}: loss {loss.item():.4f}")
