"""A Hugging Face ``Trainer`` script as people write it: a small GPT-2 (2 layers, 128 wide) built from a config (no download),
synthetic token data, the default ``TrainingArguments``. On a CPU its cores are busy in fp32 matmuls.
Stepwise never edits it; a fix is shown as a ``TrainingArguments`` field.

    python benchmarks/scripts/hf_trainer_train.py
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from torch.utils.data import Dataset
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments


class Tokens(Dataset):
    def __init__(self, n: int, length: int, vocab: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, vocab, (n, length), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


config = GPT2Config(
    n_layer=2, n_embd=128, n_head=4, vocab_size=1024, n_positions=64, bos_token_id=0, eos_token_id=0
)
model = GPT2LMHeadModel(config)
args = TrainingArguments(
    output_dir=os.environ.get("TRAINER_OUT", "trainer-out"),
    per_device_train_batch_size=16,
    max_steps=100_000,
    learning_rate=3e-4,
    logging_steps=10_000,
    save_strategy="no",
    report_to=[],
    disable_tqdm=True,
    use_cpu=not torch.cuda.is_available(),
)
trainer = Trainer(model=model, args=args, train_dataset=Tokens(8192, 64, 1024))
trainer.train()
