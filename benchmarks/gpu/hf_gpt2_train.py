"""A Hugging Face Trainer script in the example scripts' style, sized for one GPU: ``TrainingArguments`` come from
the command line through ``HfArgumentParser``, so precision is the script's own ``--bf16`` / ``--fp16`` flag.
A GPT-2 (12 layers, 768 wide, 512 tokens) is built from a config (no download) on synthetic tokens.

    python benchmarks/gpu/hf_gpt2_train.py --output_dir /tmp/hf-out --per_device_train_batch_size 16
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from torch.utils.data import Dataset
from transformers import GPT2Config, GPT2LMHeadModel, HfArgumentParser, Trainer, TrainingArguments


class Tokens(Dataset):
    def __init__(self, n: int, length: int, vocab: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, vocab, (n, length), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def main() -> None:
    (args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()
    config = GPT2Config(
        n_layer=12,
        n_embd=768,
        n_head=12,
        vocab_size=32000,
        n_positions=512,
        bos_token_id=0,
        eos_token_id=0,
    )
    trainer = Trainer(
        model=GPT2LMHeadModel(config), args=args, train_dataset=Tokens(4096, 512, 32000)
    )
    trainer.train()


if __name__ == "__main__":
    main()
