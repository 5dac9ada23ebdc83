"""A Hugging Face example script as ``examples/pytorch/*`` writes it: ``TrainingArguments`` built by
``HfArgumentParser`` from the command line, or from a JSON or YAML file given as the only argument."""

import os
import sys
from dataclasses import dataclass, field

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from torch.utils.data import Dataset
from transformers import GPT2Config, GPT2LMHeadModel, HfArgumentParser, Trainer, TrainingArguments


@dataclass
class ModelArguments:
    n_layer: int = field(default=2, metadata={"help": "transformer blocks"})


class Tokens(Dataset):
    def __init__(self, n: int, length: int, vocab: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, vocab, (n, length), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


parser = HfArgumentParser((ModelArguments, TrainingArguments))
if len(sys.argv) == 2 and sys.argv[1].endswith(".json"):
    model_args, training_args = parser.parse_json_file(json_file=os.path.abspath(sys.argv[1]))
elif len(sys.argv) == 2 and sys.argv[1].endswith((".yaml", ".yml")):
    model_args, training_args = parser.parse_yaml_file(os.path.abspath(sys.argv[1]))
else:
    model_args, training_args = parser.parse_args_into_dataclasses()
config = GPT2Config(n_layer=model_args.n_layer, n_embd=64, n_head=2, vocab_size=512, n_positions=64,
                    bos_token_id=0, eos_token_id=0)
trainer = Trainer(model=GPT2LMHeadModel(config), args=training_args, train_dataset=Tokens(4096, 32, 512))
trainer.train()
