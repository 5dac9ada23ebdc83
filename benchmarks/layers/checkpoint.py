"""What checkpointing the held-in script's blocks costs a step, in one process: the model of
``tests/scripts/mlp_blocks_train.py`` and a copy whose ``blocks.*`` the agent's
``checkpoint_modules`` wrapper runs under ``torch.utils.checkpoint``, stepped alternately (the
order flipped every round) so both see the same machine; the medians of their step times and
their ratio. The A/B across processes is ``optimize --fix activation_checkpointing`` (see
benchmarks/results/checkpoint-layers-2026-12-02.md).

    PYTHONPATH=. python benchmarks/layers/checkpoint.py [ROUNDS]
"""

from __future__ import annotations

import copy
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.nn import functional as F

from stepwise_agent.inject.checkpoint import CheckpointInjection
from stepwise_agent.inject.report import InjectionReport

SCRIPT = Path(__file__).resolve().parents[2] / "tests" / "scripts" / "mlp_blocks_train.py"
KNOBS = {"checkpoint_modules": "blocks.*"}


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    spec = importlib.util.spec_from_file_location("mlp_blocks_train", SCRIPT)
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    torch.manual_seed(0)
    plain = script.Net(128, 1024, 6)
    checkpointed = copy.deepcopy(plain)
    CheckpointInjection(dict(KNOBS), InjectionReport(dict(KNOBS))).on_model(checkpointed)
    nets = {"plain": plain, "checkpointed": checkpointed}
    opts = {k: torch.optim.AdamW(n.parameters(), lr=1e-3) for k, n in nets.items()}
    x, y = torch.randn(256, 128), torch.randn(256, 1)

    def step(name: str) -> float:
        t = time.perf_counter()
        loss = F.mse_loss(nets[name](x), y)
        opts[name].zero_grad(set_to_none=True)
        loss.backward()
        opts[name].step()
        return (time.perf_counter() - t) * 1000

    for name in (*nets, *nets):  # warm-up: the optimizer's state, the allocator's pools
        step(name)
    times: dict[str, list[float]] = {name: [] for name in nets}
    for i in range(rounds):
        for name in list(nets) if i % 2 == 0 else list(nets)[::-1]:
            times[name].append(step(name))
    print(f"load average {os.getloadavg()[0]:.2f}, {torch.get_num_threads()} threads")
    for name, ms in times.items():
        q = statistics.quantiles(ms, n=4)
        print(f"{name:>13}: median {statistics.median(ms):.1f} ms (IQR {q[0]:.1f}-{q[2]:.1f})")
    ratio = statistics.median(times["checkpointed"]) / statistics.median(times["plain"])
    print(f"checkpointed / plain median step: {ratio:.2f}")


if __name__ == "__main__":
    main()
