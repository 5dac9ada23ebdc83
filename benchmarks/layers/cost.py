"""What the agent's per-module record costs the profiled steps: the same model trained under the
recorder's profiler configuration, its profiled steps timed with the layer hooks on and off, in
alternating trials (ABAB: a load that comes and goes touches both sides alike).

    python benchmarks/layers/cost.py [--trials 8] [--steps 6] \
        [--out benchmarks/results/layers-cost-DATE.md]

Two models: the tests' tiny GPT (2 blocks, d=64) and a larger one (4 blocks, d=256, 128 tokens),
on this machine's CPU (a GPU when there is one). The cost is the median over trials of (median
profiled step with layers) / (median profiled step without) - 1, on the main thread's CPU time
(one torch thread: what the hooks add is the main thread's work, and CPU time is what a loaded
machine's contention touches least) with the wall time beside it; the time to turn the window's
events into ``layers.json`` (after the window, outside the steps) is reported apart.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from stepwise_agent.layers import LayerRecorder, layer_rows  # noqa: E402

SCRIPT = REPO / "tests" / "scripts" / "tiny_gpt.py"
MODELS = {
    "tiny GPT (2 blocks, d=64, 8x64 tokens)": dict(d=64, heads=4, n_blocks=2, batch=(8, 64)),
    "GPT (4 blocks, d=256, 8x128 tokens)": dict(d=256, heads=8, n_blocks=4, batch=(8, 128)),
}


def _gpt() -> Any:
    spec = importlib.util.spec_from_file_location("tiny_gpt_bench", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def one_window(
    model: Any, opt: Any, batch: tuple[int, int], steps: int, layers: bool, device: str
) -> tuple[float, float, float]:
    """Median profiled step of one profiler window (main thread CPU ms, wall ms), and the ms to
    build the layer rows."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    rec = LayerRecorder()
    built: list[float] = []

    def ready(prof: Any) -> None:
        if layers:
            rec.stop()
            t0 = time.perf_counter()
            layer_rows(rec, prof.events(), device == "cuda", None)
            built.append((time.perf_counter() - t0) * 1000)

    walls, cpus = [], []
    schedule = torch.profiler.schedule(wait=0, warmup=1, active=steps, repeat=1)
    with torch.profiler.profile(
        activities=activities,
        profile_memory=True,
        record_shapes=True,
        schedule=schedule,
        on_trace_ready=ready,
    ) as prof:
        for i in range(steps + 1):
            if i == 1 and layers:
                rec.start()
            t0, c0 = time.perf_counter(), time.thread_time()
            idx = torch.randint(0, 128, batch, device=device)
            loss = torch.nn.functional.cross_entropy(model(idx).flatten(0, 1), idx.flatten())
            loss.backward()
            opt.step()
            opt.zero_grad()
            if device == "cuda":
                torch.cuda.synchronize()
            if i >= 1:
                walls.append((time.perf_counter() - t0) * 1000)
                cpus.append((time.thread_time() - c0) * 1000)
                rec.next_step()
            prof.step()
    return statistics.median(cpus), statistics.median(walls), (built[0] if built else 0.0)


def measure(name: str, cfg: dict[str, Any], trials: int, steps: int, device: str) -> dict[str, Any]:
    gpt = _gpt()
    torch.manual_seed(0)
    model = gpt.TinyGPT(d=cfg["d"], heads=cfg["heads"], n_blocks=cfg["n_blocks"]).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    one_window(model, opt, cfg["batch"], 2, False, device)  # warm the allocator and the profiler
    ratios, plain, with_layers, build, wall_ratios = [], [], [], [], []
    for t in range(trials):
        order = (False, True) if t % 2 == 0 else (True, False)
        got = {on: one_window(model, opt, cfg["batch"], steps, on, device) for on in order}
        plain.append(got[False][0])
        with_layers.append(got[True][0])
        build.append(got[True][2])
        ratios.append(got[True][0] / got[False][0])
        wall_ratios.append(got[True][1] / got[False][1])
    return {
        "model": name,
        "plain_ms": statistics.median(plain),
        "layers_ms": statistics.median(with_layers),
        "cost": statistics.median(ratios) - 1,
        "ratios": ratios,
        "build_ms": statistics.median(build),
        "wall_cost": statistics.median(wall_ratios) - 1,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.set_num_threads(1)
    load_before = os.getloadavg()
    rows = [measure(n, c, args.trials, args.steps, device) for n, c in MODELS.items()]
    load_after = os.getloadavg()
    lines = [
        f"# Layer recording cost, {dt.date.today().isoformat()}",
        "",
        f"`python benchmarks/layers/cost.py --trials {args.trials} --steps {args.steps}` on "
        f"{device} ({os.cpu_count()} cores, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads); load average before {load_before[0]:.1f}, "
        f"after {load_after[0]:.1f}.",
        "",
        "| model | profiled step CPU, plain (ms) | with layers (ms) | cost, CPU (median of "
        "pairs) | CPU pair ratios | cost, wall | layer rows built after the window (ms) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ratios = ", ".join(f"{x:.3f}" for x in r["ratios"])
        lines.append(
            f"| {r['model']} | {r['plain_ms']:.2f} | {r['layers_ms']:.2f} | "
            f"{r['cost']:+.1%} | {ratios} | {r['wall_cost']:+.1%} | "
            f"{r['build_ms']:.1f} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out is not None:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
