"""A PyTorch Lightning script as people write it: a LightningModule with its own ``train_dataloader()`` and
``configure_optimizers()``, synthetic data. Used by the framework tests."""

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Classifier(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(128, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("loss", loss)
        return loss

    def train_dataloader(self):
        g = torch.Generator().manual_seed(0)
        data = TensorDataset(torch.randn(4096, 128, generator=g), torch.randint(0, 10, (4096,), generator=g))
        return DataLoader(data, batch_size=64, shuffle=True)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


trainer = L.Trainer(max_epochs=1000, accelerator="cpu" if not torch.cuda.is_available() else "auto", devices=1,
                    logger=False, enable_checkpointing=False, enable_progress_bar=False,
                    enable_model_summary=False)
trainer.fit(Classifier())
