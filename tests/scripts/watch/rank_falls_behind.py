"""A DDP training script as users write them (run it under ``torchrun --nproc_per_node 2``), where one rank falls
behind part-way: from ``--change-at`` on, rank ``--slow-rank`` reads each batch's extra features from a slow
share (a sleep of ``--delay-ms`` in its step, before the forward pass); the other ranks wait for it in the
gradients' all-reduce. ``--steady``: no rank slows."""

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=120)
parser.add_argument("--change-at", type=int, default=40)
parser.add_argument("--slow-rank", type=int, default=1)
parser.add_argument("--delay-ms", type=float, default=100.0)
parser.add_argument("--steady", action="store_true")
args = parser.parse_args()

torch.set_num_threads(1)
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
n = args.steps * 64 * dist.get_world_size()
data = TensorDataset(torch.randn(n, 256), torch.randint(0, 10, (n,)))
loader = DataLoader(data, batch_size=64, sampler=DistributedSampler(data, shuffle=False))
model = DDP(nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step, (x, y) in enumerate(loader):
    if not args.steady and rank == args.slow_rank and step >= args.change_at:
        time.sleep(args.delay_ms / 1000.0)  # this rank's extra features come from a slow share
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if rank == 0 and step % 20 == 0:
        print(f"step {step} loss {loss.item():.4f}", flush=True)
dist.destroy_process_group()
if rank == 0:
    print("done", flush=True)
