"""A Hugging Face ``Trainer`` script as people write it: a tiny GPT-2 built from a config, a synthetic dataset,
no downloads. Used by the framework tests (``optimize -- ENV/bin/python hf_trainer_train.py``)."""

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


config = GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=512, n_positions=64, bos_token_id=0, eos_token_id=0)
model = GPT2LMHeadModel(config)
args = TrainingArguments(
    output_dir=os.environ.get("TRAINER_OUT", "trainer-out"),
    per_device_train_batch_size=8,
    max_steps=10_000,
    learning_rate=1e-3,
    logging_steps=1_000,
    save_strategy="no",
    report_to=[],
    disable_tqdm=True,
    use_cpu=not torch.cuda.is_available(),
)
trainer = Trainer(model=model, args=args, train_dataset=Tokens(4096, 32, 512))
trainer.train()
