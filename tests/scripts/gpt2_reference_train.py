"""A stand-in for llm.c's PyTorch reference loop (``train_gpt2.py``), written for these tests in its conventions: its
own argparse flags (``--dtype`` float32|float16|bfloat16 read into ``ptdtype``, ``--compile`` as an int), an
autocast context ``ctx`` built from ``ptdtype`` and live only on CUDA, a tokens file read by its own loader (no torch
DataLoader: batches the launcher cannot see), the learning rate written into every param group each step, and
``optimizer.zero_grad()`` after ``optimizer.step()``. A tiny GPT from a config; tokens made up front when the file
is missing."""

import argparse
import math
import os
from contextlib import nullcontext

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


class Block(nn.Module):
    def __init__(self, n_embd: int, n_head: int) -> None:
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
        self.attn = nn.MultiheadAttention(n_embd, n_head, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = x.size(1)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool, device=x.device), 1)
        h = self.ln_1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int, block: int, n_layer: int, n_embd: int, n_head: int) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, n_embd), nn.Embedding(block, n_embd)
        self.blocks = nn.ModuleList(Block(n_embd, n_head) for _ in range(n_layer))
        self.ln_f, self.lm_head = nn.LayerNorm(n_embd), nn.Linear(n_embd, vocab, bias=False)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for b in self.blocks:
            x = b(x)
        logits = self.lm_head(self.ln_f(x))
        loss = None if targets is None else F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss

    def configure_optimizers(self, weight_decay: float, learning_rate: float, device_type: str):
        decay = [p for p in self.parameters() if p.dim() >= 2]
        no_decay = [p for p in self.parameters() if p.dim() < 2]
        groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
        use_fused = device_type == "cuda"  # as the reference does: fused AdamW on CUDA only
        return torch.optim.AdamW(groups, lr=learning_rate, betas=(0.9, 0.95), fused=use_fused)


class TokenLoader:
    """Batches of (B, T) tokens read in order from a flat uint16 file, as the reference's own loader does."""

    def __init__(self, path: str, B: int, T: int) -> None:
        self.tokens = np.memmap(path, dtype=np.uint16, mode="r")
        self.B, self.T, self.pos = B, T, 0

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        n = self.B * self.T + 1
        if self.pos + n > len(self.tokens):
            self.pos = 0
        buf = torch.from_numpy(self.tokens[self.pos:self.pos + n].astype(np.int64))
        self.pos += self.B * self.T
        return buf[:-1].view(self.B, self.T), buf[1:].view(self.B, self.T)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--input_bin", type=str, default="tokens.bin")
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--sequence_length", type=int, default=64)
    parser.add_argument("--num_iterations", type=int, default=1000)
    parser.add_argument("--learning_rate", type=float, default=6e-4)
    parser.add_argument("--warmup_iters", type=int, default=10)
    parser.add_argument("--weight_decay", type=float, default=0.1)
    parser.add_argument("--dtype", type=str, default="float32", choices=("float32", "float16", "bfloat16"))
    parser.add_argument("--compile", type=int, default=0)
    parser.add_argument("--device", type=str, default="")
    args = parser.parse_args()

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    device_type = "cuda" if "cuda" in device else "cpu"
    torch.manual_seed(42)
    if not os.path.exists(args.input_bin):
        np.random.default_rng(0).integers(0, 512, 200_000).astype(np.uint16).tofile(args.input_bin)
    ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[args.dtype]
    ctx = torch.amp.autocast(device_type=device_type, dtype=ptdtype) if device_type == "cuda" else nullcontext()

    model = GPT(vocab=512, block=args.sequence_length, n_layer=4, n_embd=128, n_head=4).to(device)
    if args.compile:
        model = torch.compile(model)
    loader = TokenLoader(args.input_bin, args.batch_size, args.sequence_length)
    optimizer = model.configure_optimizers(args.weight_decay, args.learning_rate, device_type)

    def get_lr(it: int) -> float:
        if it < args.warmup_iters:
            return args.learning_rate * (it + 1) / args.warmup_iters
        ratio = (it - args.warmup_iters) / max(args.num_iterations - args.warmup_iters, 1)
        return args.learning_rate * 0.1 + 0.45 * args.learning_rate * (1 + math.cos(math.pi * ratio))

    for step in range(args.num_iterations):
        model.train()
        x, y = loader.next_batch()
        x, y = x.to(device), y.to(device)
        with ctx:
            _, loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        lr = get_lr(step)
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        print(f"step {step + 1}/{args.num_iterations} | train loss {loss.item():.6f} | lr {lr:.2e}")


if __name__ == "__main__":
    main()
