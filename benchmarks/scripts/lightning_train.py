"""A PyTorch Lightning script as people write it: a LightningModule with its own ``train_dataloader()``
(a dataset that pays storage latency and some decoding per sample, default DataLoader) and an MLP.
Stepwise never edits it; a fix is shown in ``L.Trainer(...)`` or the ``DataLoader(...)`` of
``train_dataloader()``.

    python benchmarks/scripts/lightning_train.py
"""

import time

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Records(Dataset):
    """Each read waits on storage (2 ms) and decodes a record into features."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        time.sleep(0.002)
        g = torch.Generator().manual_seed(i)
        x = torch.randn(512, generator=g)
        return x, int(x[:8].sum() > 0)


class Classifier(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(512, 1024), nn.GELU(), nn.Linear(1024, 1024), nn.GELU(), nn.Linear(1024, 2)
        )

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("loss", loss)
        return loss

    def train_dataloader(self):
        return DataLoader(Records(8192), batch_size=64, shuffle=True)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


trainer = L.Trainer(
    max_epochs=1000,
    accelerator="cpu" if not torch.cuda.is_available() else "auto",
    devices=1,
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
)
trainer.fit(Classifier())
