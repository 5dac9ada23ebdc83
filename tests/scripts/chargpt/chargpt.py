"""A stand-in for minGPT's ``projects/chargpt/chargpt.py``, written for these tests: a character-level GPT on a
local text (made up front when missing), configured by minGPT-style overrides (``--trainer.batch_size=32``,
``--model.n_layer=2``) and seeded once at the top, as it is."""

import os
import random
import sys

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import Dataset

from trainer import CfgNode, Trainer


def set_seed(seed):
    random.seed(seed)
    torch.manual_seed(seed)


class CharDataset(Dataset):
    def __init__(self, text, block_size):
        chars = sorted(set(text))
        self.stoi = {c: i for i, c in enumerate(chars)}
        self.vocab_size, self.block_size = len(chars), block_size
        self.data = text

    def __len__(self):
        return len(self.data) - self.block_size

    def __getitem__(self, idx):
        dix = [self.stoi[s] for s in self.data[idx:idx + self.block_size + 1]]
        return torch.tensor(dix[:-1], dtype=torch.long), torch.tensor(dix[1:], dtype=torch.long)


class GPT(nn.Module):
    def __init__(self, vocab_size, block_size, n_layer=2, n_embd=128, n_head=4):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab_size, n_embd), nn.Embedding(block_size, n_embd)
        layer = nn.TransformerEncoderLayer(n_embd, n_head, 4 * n_embd, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, n_layer)
        self.head = nn.Linear(n_embd, vocab_size)

    def forward(self, idx, targets=None):
        t = idx.size(1)
        mask = nn.Transformer.generate_square_subsequent_mask(t, device=idx.device)
        x = self.blocks(self.tok(idx) + self.pos(torch.arange(t, device=idx.device)), mask=mask, is_causal=True)
        logits = self.head(x)
        loss = None if targets is None else F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


if __name__ == "__main__":
    config = CfgNode(system=CfgNode(seed=3407), model=CfgNode(n_layer=2, n_embd=128, n_head=4, block_size=64),
                     trainer=Trainer.get_default_config())
    config.merge_from_args(sys.argv[1:])
    set_seed(config.system.seed)
    if not os.path.exists("input.txt"):
        words = ["stepwise", "measures", "training", "before", "after", "the", "loss", "falls", "slowly", "fast"]
        rng = random.Random(0)
        open("input.txt", "w").write(" ".join(rng.choice(words) for _ in range(40_000)))
    text = open("input.txt").read()
    train_dataset = CharDataset(text, config.model.block_size)
    model = GPT(train_dataset.vocab_size, config.model.block_size, config.model.n_layer, config.model.n_embd,
                config.model.n_head)
    trainer = Trainer(config.trainer, model, train_dataset)
    trainer.run()
