"""A training script as users write them that, part-way, starts keeping every step's features for a later plot —
without ``.detach()``, so each kept tensor holds its step's autograd graph too: memory creeps up a step at a time
(``--change-at`` the step it starts; ``--steady`` never keeps anything)."""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=160)
parser.add_argument("--change-at", type=int, default=70)
parser.add_argument("--steady", action="store_true")
args = parser.parse_args()

torch.manual_seed(0)
encoder = nn.Sequential(nn.Linear(256, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU())
head = nn.Linear(2048, 10)
opt = torch.optim.SGD([*encoder.parameters(), *head.parameters()], lr=0.01)
kept = []
for step in range(args.steps):
    x, y = torch.randn(256, 256), torch.randint(0, 10, (256,))
    features = encoder(x)
    loss = nn.functional.cross_entropy(head(features), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if not args.steady and step >= args.change_at:
        kept.append(features)  # for the embedding plot at the end
    if step % 20 == 0:
        print(f"step {step} loss {loss.item():.3f} kept {len(kept)}", flush=True)
print("done")
