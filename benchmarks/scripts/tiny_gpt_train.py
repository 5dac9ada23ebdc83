"""A minGPT-sized character model (4 layers, 128 wide, 64 tokens, batch 16) trained on random text with AdamW,
printing each iteration's time as minGPT does. Its operators are many and small: on a CPU each one splits over
torch's intra-op threads and waits for the last, so it slows down sharply when those threads outnumber the free
cores. Stepwise never edits it.

    python benchmarks/scripts/tiny_gpt_train.py [--iters 200] [--layers 4] [--width 128]
"""

import argparse
import time

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--iters", type=int, default=200)
parser.add_argument("--layers", type=int, default=4)
parser.add_argument("--width", type=int, default=128)
parser.add_argument("--block", type=int, default=64)
parser.add_argument("--batch", type=int, default=16)
args = parser.parse_args()

VOCAB = 65


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, 4, batch_first=True)
        self.mlp = nn.Sequential(
            nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width)
        )

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(VOCAB, args.width), nn.Embedding(args.block, args.width)
        self.blocks = nn.ModuleList(Block(args.width) for _ in range(args.layers))
        self.ln, self.head = nn.LayerNorm(args.width), nn.Linear(args.width, VOCAB, bias=False)
        self.register_buffer(
            "mask", torch.triu(torch.ones(args.block, args.block, dtype=torch.bool), 1)
        )

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        for b in self.blocks:
            x = b(x, self.mask)
        return self.head(self.ln(x))


torch.manual_seed(0)
text = torch.randint(0, VOCAB, (200_000,))
model = GPT()
opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
for it in range(args.iters):
    t0 = time.perf_counter()
    starts = torch.randint(0, len(text) - args.block - 1, (args.batch,))
    x = torch.stack([text[s : s + args.block] for s in starts])
    y = torch.stack([text[s + 1 : s + args.block + 1] for s in starts])
    logits = model(x)
    loss = nn.functional.cross_entropy(logits.view(-1, VOCAB), y.view(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(
        f"iter {it}: loss {loss.item():.4f}, iter_dt {1e3 * (time.perf_counter() - t0):.1f}ms",
        flush=True,
    )
