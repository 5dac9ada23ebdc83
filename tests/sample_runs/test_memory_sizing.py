"""memory_bound's memory model and its CUDA depth, checked on the CPU: the model matches what autograd saves and
the live peak the profiler records, and the derived depth makes each size's budget bind on CUDA."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from profilers.trace.breakdown import breakdown
from profilers.trace.load import load_trace
from sample_runs import WORKLOADS
from sample_runs.memory_sizing import MB, cuda_depth, peak_bytes, saved_bytes

W = WORKLOADS["memory_bound"]
SHAPE = {"dim": 64, "width": 128, "classes": 10}


def _parts(batch: int, depth: int):  # type: ignore[no-untyped-def]
    return W.build("tiny", {"samples": batch, "depth": depth})


@pytest.mark.parametrize("depth", [1, 3])
def test_saved_bytes_is_what_autograd_saves(depth: int) -> None:
    parts = _parts(256, depth)
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        if (
            t.dim() and len(t) == 256
        ):  # per-sample activations; weights are saved as views of the parameters
            storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    x, y = parts.dataset.__getitems__(list(range(256)))  # type: ignore[attr-defined]
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        parts.loss_fn(parts.model(x), y)
    assert sum(storages.values()) == saved_bytes(256, depth=depth, **SHAPE)


@pytest.mark.parametrize("depth", [2, 6])
def test_peak_bytes_matches_the_live_peak_in_a_profiled_step(depth: int, tmp_path: Path) -> None:
    """The CPU allocator's ``[memory]`` events count live tensors as CUDA's allocator does (from the profiler's
    start, so the second step is profiled: momentum exists, gradients were set to None)."""
    batch = 4096
    parts = _parts(batch, depth)
    opt = torch.optim.SGD(parts.model.parameters(), lr=0.01, momentum=0.9)
    idx = list(range(batch))

    def step() -> None:
        x, y = parts.dataset.__getitems__(idx)  # type: ignore[attr-defined]
        parts.loss_fn(parts.model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    step()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    prof.export_chrome_trace(str(tmp_path / "trace.json"))
    measured = breakdown(load_trace(tmp_path / "trace.json")).memory.host_allocated_bytes
    assert measured is not None
    assert 0.97 < measured / peak_bytes(batch, depth=depth, **SHAPE) < 1.1  # measured 1.01-1.06


@pytest.mark.parametrize("size", ["tiny", "bench"])
def test_on_cuda_the_full_batch_overflows_the_budget_and_half_of_it_fits(size: str) -> None:
    settings = W.settings(size)
    p = W.resolve_params(size)
    budget, batch = settings["memory_budget_mb"] * MB, settings["batch_size"]
    assert p["cuda_depth"] == cuda_depth(settings["memory_budget_mb"], batch, **SHAPE)
    # Why CUDA needs its own depth: at the CPU depth the live tensors of the full batch fit the budget.
    assert peak_bytes(batch, depth=p["depth"], **SHAPE) < 0.8 * budget
    full = peak_bytes(batch, depth=p["cuda_depth"], **SHAPE)
    half = peak_bytes(batch // 2, depth=p["cuda_depth"], **SHAPE)
    quarter = peak_bytes(batch // 4, depth=p["cuda_depth"], **SHAPE)
    assert full > 1.35 * budget and half < 0.75 * budget and quarter < 0.4 * budget


def _depth(device: str, explicit: dict | None = None) -> int:  # type: ignore[type-arg]
    return len(
        W.build("tiny", {"samples": 64, **(explicit or {})}, device=device).checkpoint_blocks
    )


def test_the_model_takes_the_cuda_depth_only_where_it_will_run_on_cuda() -> None:
    tiny = W.resolve_params("tiny")
    assert _depth("cpu") == tiny["depth"] == 12
    assert (
        _depth("cuda") == tiny["cuda_depth"] > tiny["depth"]
    )  # the script builds it for where it trains
    assert (
        _depth("cuda", {"depth": 3}) == _depth("cpu", {"depth": 3}) == 3
    )  # an explicit depth is taken as given
    assert W.resolve_params("bench")["cuda_depth"] == len(
        W.build("bench", {"samples": 64}, device="cuda").checkpoint_blocks
    )
