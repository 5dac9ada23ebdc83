"""A stack of identical residual MLP blocks whose activations, not its weights, fill the memory:
six blocks of LayerNorm → Linear(128 → 1024) → GELU → Linear(1024 → 128), a batch of 256 rows, so
each block keeps about 2 MB of activations for backward against 1 MB of its own weights. Synthetic
regression data, AdamW, a few tenths of a second a step on a CPU."""

import argparse

import torch
from torch import nn
from torch.nn import functional as F


class Block(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(F.gelu(self.up(self.norm(x))))


class Net(nn.Module):
    def __init__(self, dim: int, hidden: int, n_layer: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(dim, hidden) for _ in range(n_layer))
        self.head = nn.Linear(dim, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--n-layer", type=int, default=6)
    args = parser.parse_args()
    torch.manual_seed(0)
    dim, hidden = 128, 1024
    model = Net(dim, hidden, args.n_layer)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(16 * args.batch_size, dim)
    y = x[:, :1] * 0.5 + 0.1 * torch.randn(len(x), 1)
    for step in range(args.steps):
        rows = torch.randint(0, len(x), (args.batch_size,))
        loss = F.mse_loss(model(x[rows]), y[rows])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
