"""A Hydra + Lightning script as people write it: ``L.Trainer(**cfg.trainer)`` from ``hydra_conf/lightning.yaml``,
changed on the command line as ``trainer.precision=bf16-mixed``; synthetic data."""

import hydra
import lightning as L
import torch
from omegaconf import DictConfig
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Classifier(L.LightningModule):
    def __init__(self, width: int) -> None:
        super().__init__()
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
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


@hydra.main(config_path="hydra_conf", config_name="lightning", version_base=None)
def main(cfg: DictConfig) -> None:
    trainer = L.Trainer(**cfg.trainer, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False)
    trainer.fit(Classifier(cfg.model.width))


if __name__ == "__main__":
    main()
