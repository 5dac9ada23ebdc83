"""A steady training loop that times its own steps (for ``benchmarks/watch_overhead.py``): ``--width`` sets the
step's cost; each step's wall time (batch drawn, forward, backward, optimizer) goes to ``--out`` as JSON, measured
by the script itself so a bare run and a watched one are timed the same way, with the CPU time of the whole process
(every thread: the agent's writer thread too, when watched) over the steps after the first ``SETTLE``, and in all."""

import argparse
import json
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--width", type=int, default=512)
parser.add_argument("--steps", type=int, default=300)
parser.add_argument("--out", required=True)
args = parser.parse_args()

torch.manual_seed(0)
x = torch.randn(64 * 16, args.width)
loader = DataLoader(TensorDataset(x, torch.randint(0, 10, (64 * 16,))), batch_size=64, shuffle=True)
model = torch.nn.Sequential(
    torch.nn.Linear(args.width, args.width),
    torch.nn.ReLU(),
    torch.nn.Linear(args.width, args.width),
    torch.nn.ReLU(),
    torch.nn.Linear(args.width, 10),
)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
SETTLE = 10
walls = []
done = 0
cpu_from = 0.0
t = time.perf_counter()
while done < args.steps:
    for xb, yb in loader:
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        now = time.perf_counter()
        walls.append((now - t) * 1000.0)
        t = now
        done += 1
        if done == SETTLE:
            cpu_from = time.process_time()
        if done >= args.steps:
            break
cpu_end = time.process_time()
with open(args.out, "w") as fh:
    json.dump(
        {
            "walls": walls,
            "cpu_ms_per_step": (cpu_end - cpu_from) * 1000.0 / max(len(walls) - SETTLE, 1),
            "cpu_s": cpu_end,
        },
        fh,
    )
