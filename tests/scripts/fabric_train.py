"""A Lightning Fabric loop as its users write it (the shape of the Lightning repository's ``examples/fabric``):
``L.Fabric()``, ``fabric.setup(model, optimizer)``, ``fabric.setup_dataloaders``, ``fabric.backward(loss)``;
synthetic data. Used by the framework tests."""

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    fabric = L.Fabric(accelerator="cpu" if not torch.cuda.is_available() else "auto", devices=1)
    fabric.launch()
    fabric.seed_everything(42)
    model = nn.Sequential(nn.Linear(128, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model, optimizer = fabric.setup(model, optimizer)
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(4096, 128, generator=g), torch.randint(0, 10, (4096,), generator=g))
    train_loader = fabric.setup_dataloaders(DataLoader(data, batch_size=64, shuffle=True))
    model.train()
    for epoch in range(1000):
        for x, y in train_loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            fabric.backward(loss)
            optimizer.step()


if __name__ == "__main__":
    main()
