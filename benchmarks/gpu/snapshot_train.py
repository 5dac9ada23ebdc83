"""Record a real CUDA allocator's history while a small transformer trains, and dump it as a snapshot pickle
(``torch.cuda.memory._dump_snapshot``), the file users upload to Stepwise. Needs a CUDA device.

    python benchmarks/gpu/snapshot_train.py OUT.pickle [--steps 4]
"""

import argparse

import torch
from torch import nn


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=4)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("needs a CUDA device")
    torch.cuda.memory._record_memory_history(max_entries=20000)
    layer = nn.TransformerEncoderLayer(d_model=512, nhead=8, dim_feedforward=2048, batch_first=True)
    model = nn.TransformerEncoder(layer, num_layers=4).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(32, 256, 512, device="cuda")
    for _ in range(a.steps):
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    torch.cuda.memory._dump_snapshot(a.out)
    torch.cuda.memory._record_memory_history(enabled=None)
    print(
        f"peak allocated {torch.cuda.max_memory_allocated() / 2**20:.1f} MiB; snapshot at {a.out}"
    )


if __name__ == "__main__":
    main()
