"""A compute-bound training script configured by its own flags, as many public scripts are: ``--amp`` turns on
its bf16 autocast, ``-j/--workers`` is its DataLoader's ``num_workers``. Stepwise measures a fix it has a flag for
by running this command with the flag; ``optimize --inject`` measures the same fix injected instead.

    python benchmarks/scripts/flags_train.py [--width 2048] [--batch 256] [--amp] [--workers N]
"""

import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--width", type=int, default=2048)
parser.add_argument("--batch", type=int, default=256)
parser.add_argument("--epochs", type=int, default=100)
parser.add_argument("-j", "--workers", type=int, default=0, help="data loading workers")
parser.add_argument("--amp", action="store_true", help="bf16 mixed precision")
args = parser.parse_args()

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)
features = torch.randn(16384, 1024)
labels = (features[:, :8].sum(dim=1) > 0).long() + 2 * (features[:, 8:16].sum(dim=1) > 0).long()
loader = DataLoader(
    TensorDataset(features, labels), batch_size=args.batch, shuffle=True, num_workers=args.workers
)
model = nn.Sequential(
    nn.Linear(1024, args.width),
    nn.GELU(),
    nn.Linear(args.width, args.width),
    nn.GELU(),
    nn.Linear(args.width, 4),
).to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for epoch in range(args.epochs):
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=args.amp):
            loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"epoch {epoch}: loss {loss.item():.4f}")
