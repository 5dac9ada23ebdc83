"""A training script configured by its own flags: ``--amp`` turns its autocast on, ``--workers`` is its
DataLoader's ``num_workers``. A fix that maps to a flag is measured by running this command with the flag changed."""

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser(description="a small classifier")
parser.add_argument("--epochs", type=int, default=1000)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("-j", "--workers", type=int, default=0, help="data loading workers")
parser.add_argument("--amp", action="store_true", help="bf16 mixed precision")
args = parser.parse_args()

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)
data = TensorDataset(torch.randn(4096, 256), torch.randint(0, 10, (4096,)))
loader = DataLoader(data, batch_size=128, shuffle=True, num_workers=args.workers)
model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
model = model.to(device)
opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
for epoch in range(args.epochs):
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=args.amp):
            loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
