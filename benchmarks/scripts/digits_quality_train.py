"""A plain training script for time-to-quality measurements: a small CNN on scikit-learn's bundled 8x8 digits
(real data, no download), SGD, a held-back validation split, validation accuracy printed every ``--eval-every``
steps as ``step N val_acc=0.9123``.

    python benchmarks/scripts/digits_quality_train.py [--batch-size 32] [--lr 0.05] [--steps 300]
"""

from __future__ import annotations

import argparse

import torch
from sklearn.datasets import load_digits
from torch import nn


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--eval-every", type=int, default=10)
    args = p.parse_args()
    torch.set_num_threads(1)
    d = load_digits()
    x = torch.tensor(d.images, dtype=torch.float32).unsqueeze(1) / 16.0
    y = torch.tensor(d.target)
    g = torch.Generator().manual_seed(
        1234
    )  # the split is fixed; the training seed comes from outside
    order = torch.randperm(len(y), generator=g)
    val, train = order[:400], order[400:]
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(x[train], y[train]),
        batch_size=args.batch_size,
        shuffle=True,
        drop_last=True,
    )
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 16, 64),
        nn.ReLU(),
        nn.Linear(64, 10),
    )
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    step = 0
    while step < args.steps:
        for xb, yb in loader:
            loss = nn.functional.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if step % args.eval_every == 0:
                with torch.no_grad():
                    acc = (model(x[val]).argmax(1) == y[val]).float().mean().item()
                print(f"step {step} loss={loss.item():.4f} val_acc={acc:.4f}", flush=False)
            if step >= args.steps:
                break


if __name__ == "__main__":
    main()
