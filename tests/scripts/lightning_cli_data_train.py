"""A LightningCLI script with a LightningDataModule as people write it: the loader's worker count is the data
module's own argument (``fit --data.num_workers 4``), stored by ``save_hyperparameters()`` and passed to its
``DataLoader``; the model's and the Trainer's arguments come from the command line too; synthetic data."""

import torch
from lightning.pytorch import LightningDataModule, LightningModule
from lightning.pytorch.cli import LightningCLI
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Classifier(LightningModule):
    def __init__(self, width: int = 256, lr: float = 1e-3) -> None:
        super().__init__()
        self.lr = lr
        self.net = nn.Sequential(nn.Linear(128, width), nn.ReLU(), nn.Linear(width, 10))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.lr)


class Synthetic(LightningDataModule):
    def __init__(self, batch_size: int = 64, num_workers: int = 0) -> None:
        super().__init__()
        self.save_hyperparameters()

    def train_dataloader(self):
        g = torch.Generator().manual_seed(0)
        data = TensorDataset(torch.randn(4096, 128, generator=g), torch.randint(0, 10, (4096,), generator=g))
        return DataLoader(data, batch_size=self.hparams.batch_size, shuffle=True,
                          num_workers=self.hparams.num_workers)


if __name__ == "__main__":
    LightningCLI(Classifier, Synthetic,
                 trainer_defaults={"logger": False, "enable_checkpointing": False, "enable_progress_bar": False,
                                   "enable_model_summary": False})
