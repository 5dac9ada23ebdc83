"""A stand-in for Hugging Face's ``examples/pytorch/language-modeling/run_clm_no_trainer.py``, written for these
tests in its conventions: its own argparse flags, ``Accelerator(gradient_accumulation_steps=...)`` and
``accelerator.prepare(...)``, a training DataLoader built just before an evaluation one, ``set_seed(args.seed)``,
and ``optimizer.zero_grad()`` after ``optimizer.step()`` inside ``accelerator.accumulate(model)``. A tiny GPT-2
from a config (nothing downloaded) on a local text file tokenised by characters."""

import argparse
import math
import os

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.utils.data import DataLoader
from transformers import GPT2Config, GPT2LMHeadModel, default_data_collator, get_scheduler


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Train a causal language model on a text file (no Trainer).")
    parser.add_argument("--train_file", type=str, default="train.txt")
    parser.add_argument("--per_device_train_batch_size", type=int, default=8)
    parser.add_argument("--per_device_eval_batch_size", type=int, default=8)
    parser.add_argument("--learning_rate", type=float, default=5e-4)
    parser.add_argument("--weight_decay", type=float, default=0.0)
    parser.add_argument("--num_train_epochs", type=int, default=50)
    parser.add_argument("--max_train_steps", type=int, default=None)
    parser.add_argument("--gradient_accumulation_steps", type=int, default=1)
    parser.add_argument("--lr_scheduler_type", type=str, default="linear")
    parser.add_argument("--num_warmup_steps", type=int, default=0)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--block_size", type=int, default=64)
    return parser.parse_args()


def blocks(text: str, block_size: int) -> list[dict[str, torch.Tensor]]:
    vocab = {c: i for i, c in enumerate(sorted(set(text)))}
    ids = [vocab[c] for c in text]
    n = len(ids) // block_size
    return [{"input_ids": torch.tensor(ids[i * block_size:(i + 1) * block_size]),
             "labels": torch.tensor(ids[i * block_size:(i + 1) * block_size])} for i in range(n)]


def main() -> None:
    args = parse_args()
    accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps)
    set_seed(args.seed)
    if not os.path.exists(args.train_file):
        words = ["accelerate", "prepares", "the", "model", "and", "its", "loaders", "before", "training", "steps"]
        with open(args.train_file, "w") as fh:
            fh.write(" ".join(words[(i * 7 + i // 3) % len(words)] for i in range(30_000)))
    text = open(args.train_file).read()
    data = blocks(text, args.block_size)
    split = int(len(data) * 0.9)
    train_dataset, eval_dataset = data[:split], data[split:]
    config = GPT2Config(vocab_size=128, n_positions=args.block_size, n_embd=128, n_layer=2, n_head=4, bos_token_id=0,
                        eos_token_id=0)
    model = GPT2LMHeadModel(config)

    train_dataloader = DataLoader(
        train_dataset, shuffle=True, collate_fn=default_data_collator, batch_size=args.per_device_train_batch_size)
    eval_dataloader = DataLoader(
        eval_dataset, collate_fn=default_data_collator, batch_size=args.per_device_eval_batch_size)

    no_decay = ["bias", "layer_norm.weight"]
    grouped = [
        {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
         "weight_decay": args.weight_decay},
        {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(grouped, lr=args.learning_rate)
    steps_per_epoch = math.ceil(len(train_dataloader) / args.gradient_accumulation_steps)
    max_train_steps = args.max_train_steps or args.num_train_epochs * steps_per_epoch
    lr_scheduler = get_scheduler(name=args.lr_scheduler_type, optimizer=optimizer,
                                 num_warmup_steps=args.num_warmup_steps, num_training_steps=max_train_steps)
    model, optimizer, train_dataloader, eval_dataloader, lr_scheduler = accelerator.prepare(
        model, optimizer, train_dataloader, eval_dataloader, lr_scheduler)

    completed = 0
    for epoch in range(args.num_train_epochs):
        model.train()
        for batch in train_dataloader:
            with accelerator.accumulate(model):
                outputs = model(**batch)
                loss = outputs.loss
                accelerator.backward(loss)
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()
            if accelerator.sync_gradients:
                completed += 1
            if completed >= max_train_steps:
                return
        model.eval()
        losses = []
        for batch in eval_dataloader:
            with torch.no_grad():
                losses.append(model(**batch).loss.item())
        accelerator.print(f"epoch {epoch}: eval loss {sum(losses) / max(len(losses), 1):.4f}")


if __name__ == "__main__":
    main()
