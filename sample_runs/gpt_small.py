"""``gpt_small``: a small GPT-style decoder (pre-norm blocks, causal self-attention) on synthetic tokens.

Tokens come from a fixed random Markov chain (deterministic from the seed), so the next token is
predictable and the loss falls below ``log(vocab)``.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch
from torch import nn

from sample_runs.base import (
    BuildContext,
    Parts,
    Size,
    TensorPairs,
    Workload,
    cross_entropy,
    generator,
)


class Block(nn.Module):
    """Pre-norm transformer block: causal multi-head attention, then a 4× GELU MLP."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = (
            self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        )
        att = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class GPTSmall(nn.Module):
    def __init__(self, vocab: int, block_size: int, dim: int, heads: int, layers: int) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(block_size, dim)
        self.blocks = nn.Sequential(*[Block(dim, heads) for _ in range(layers)])
        self.ln_f, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.size(1), device=idx.device)
        return self.head(self.ln_f(self.blocks(self.tok(idx) + self.pos(pos))))


def markov_tokens(n: int, block_size: int, vocab: int, seed: int) -> TensorPairs:
    """``n`` sequences from a sparse random Markov chain; targets are the inputs shifted by one."""
    g = generator(seed, stream=3)
    logits = torch.randn(vocab, vocab, generator=g) * 3.0  # peaked transitions: learnable structure
    probs = torch.softmax(logits, dim=1)
    seq = torch.empty(n, block_size + 1, dtype=torch.long)
    seq[:, 0] = torch.randint(0, vocab, (n,), generator=g)
    for t in range(block_size):
        seq[:, t + 1] = torch.multinomial(probs[seq[:, t]], 1, generator=g).squeeze(1)
    return TensorPairs(seq[:, :-1].contiguous(), seq[:, 1:].contiguous())


def build(p: Mapping[str, Any], ctx: BuildContext, rank: int) -> Parts:
    data = markov_tokens(p["samples"], p["block_size"], p["vocab"], seed=ctx.seed)
    model = GPTSmall(p["vocab"], p["block_size"], p["dim"], p["heads"], p["layers"])
    names = tuple(f"blocks.{i}" for i in range(p["layers"]))
    return Parts(model=model, dataset=data, loss_fn=cross_entropy, checkpoint_blocks=names)


WORKLOAD = Workload(
    name="gpt_small",
    description="Small GPT-style transformer (causal attention) on synthetic Markov-chain tokens.",
    intended_bottleneck=None,
    default_params={
        "samples": 2048,
        "vocab": 256,
        "block_size": 128,
        "dim": 256,
        "heads": 4,
        "layers": 4,
    },
    sizes={
        "tiny": Size(
            params={
                "samples": 256,
                "vocab": 64,
                "block_size": 32,
                "dim": 64,
                "heads": 2,
                "layers": 2,
            },
            settings={"batch_size": 16, "steps": 10, "optimizer": "adamw", "lr": 0.003},
        ),
        "bench": Size(
            params={}, settings={"batch_size": 32, "steps": 30, "optimizer": "adamw", "lr": 0.001}
        ),
    },
    builder=build,
)
