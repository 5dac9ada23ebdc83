"""A LightningCLI script as people write it: the model's and the Trainer's arguments come from the command line
(``fit --trainer.precision bf16-mixed``) or a config file (``fit --config lightning_cli.yaml``), parsed by
jsonargparse; synthetic data."""

import torch
from lightning.pytorch import LightningModule
from lightning.pytorch.cli import LightningCLI
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Classifier(LightningModule):
    def __init__(self, width: int = 512, lr: float = 1e-3) -> None:
        super().__init__()
        self.lr = lr
        self.net = nn.Sequential(nn.Linear(128, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                                 nn.Linear(width, 10))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def train_dataloader(self):
        g = torch.Generator().manual_seed(0)
        data = TensorDataset(torch.randn(4096, 128, generator=g), torch.randint(0, 10, (4096,), generator=g))
        return DataLoader(data, batch_size=64, shuffle=True)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.lr)


if __name__ == "__main__":
    LightningCLI(Classifier,  # the config is saved as config.yaml in the working directory (logger=False)
                 trainer_defaults={"logger": False, "enable_checkpointing": False, "enable_progress_bar": False,
                                   "enable_model_summary": False})
