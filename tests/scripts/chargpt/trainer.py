"""A stand-in for minGPT's ``mingpt/trainer.py``, written for these tests in its conventions: a Trainer whose
config (``CfgNode``-style, overridden as ``--trainer.batch_size=32``) chooses ``self.device`` as a string, a
DataLoader drawing with replacement from a RandomSampler, ``model.zero_grad()`` before each backward and the
model called as ``logits, self.loss = model(x, y)``."""

import time

import torch
from torch.utils.data.dataloader import DataLoader


class CfgNode:
    """Attributes in nested nodes, overridable from ``--node.key=value`` arguments (minGPT's own scheme)."""

    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)

    def merge_from_args(self, args):
        for arg in args:
            keyval = arg.split("=")
            assert len(keyval) == 2, f"expecting each override arg to be of form --arg=value, got {arg}"
            key, val = keyval
            try:
                val = eval(val)  # noqa: S307 - minGPT reads its literals this way
            except (NameError, SyntaxError):
                pass
            assert key[:2] == "--"
            *path, leaf = key[2:].split(".")
            obj = self
            for p in path:
                obj = getattr(obj, p)
            assert hasattr(obj, leaf), f"{key} is not an attribute that exists in the config"
            setattr(obj, leaf, val)


class Trainer:
    @staticmethod
    def get_default_config():
        return CfgNode(device="auto", num_workers=2, max_iters=None, batch_size=32, learning_rate=5e-4,
                       betas=(0.9, 0.95), weight_decay=0.1, grad_norm_clip=1.0)

    def __init__(self, config, model, train_dataset):
        self.config, self.model, self.train_dataset = config, model, train_dataset
        self.callbacks = []
        if config.device == "auto":
            self.device = "cuda" if torch.cuda.is_available() else "cpu"
        else:
            self.device = config.device
        self.model = self.model.to(self.device)
        self.iter_num, self.iter_time = 0, time.time()

    def run(self):
        model, config = self.model, self.config
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate, betas=config.betas,
                                           weight_decay=config.weight_decay)
        train_loader = DataLoader(
            self.train_dataset,
            sampler=torch.utils.data.RandomSampler(self.train_dataset, replacement=True, num_samples=int(1e10)),
            shuffle=False, pin_memory=True, batch_size=config.batch_size, num_workers=config.num_workers)
        model.train()
        data_iter = iter(train_loader)
        while True:
            try:
                batch = next(data_iter)
            except StopIteration:
                data_iter = iter(train_loader)
                batch = next(data_iter)
            x, y = [t.to(self.device) for t in batch]
            logits, self.loss = model(x, y)
            model.zero_grad(set_to_none=True)
            self.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_norm_clip)
            self.optimizer.step()
            self.iter_num += 1
            if self.iter_num % 10 == 0:
                print(f"iter {self.iter_num}: train loss {self.loss.item():.5f}")
            if config.max_iters is not None and self.iter_num >= config.max_iters:
                break
