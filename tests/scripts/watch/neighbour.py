"""A steady training script on a machine where, part-way, another job lands: at ``--change-at`` a neighbour starts
``--hogs`` busy processes (default: one per core) that are not the script's children — as another user's job
would be, started by its own shell — and the script's threads now share the cores with them. The neighbour is
stopped when the script ends (``--steady``: it never starts)."""

import argparse
import atexit
import os
import signal
import subprocess
import sys

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=160)
parser.add_argument("--change-at", type=int, default=70)
parser.add_argument("--hogs", type=int, default=os.cpu_count() or 2)
parser.add_argument("--steady", action="store_true")
args = parser.parse_args()

neighbours: list[int] = []


def _land() -> None:
    """Start the neighbour through a shell that exits at once: its busy loops are nobody's children here."""
    loop = f"{sys.executable} -c 'while True: pass'"
    started = subprocess.run(["sh", "-c", f"for i in $(seq {args.hogs}); do {loop} >/dev/null 2>&1 & echo $!; done"],
                             capture_output=True, text=True, check=True)
    neighbours.extend(int(pid) for pid in started.stdout.split())


@atexit.register
def _leave() -> None:
    for pid in neighbours:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(args.steps):
    if step == args.change_at and not args.steady:
        _land()
    x, y = torch.randn(1024, 512), torch.randint(0, 10, (1024,))
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 20 == 0:
        print(f"step {step} loss {loss.item():.3f}", flush=True)
print("done")
