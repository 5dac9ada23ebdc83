"""The downsampled timeline adds up to the breakdown, stays small, and memory keeps its peak."""

from __future__ import annotations

import numpy as np
import pytest

from profilers.trace.breakdown import CATEGORIES, breakdown
from profilers.trace.load import load_trace
from profilers.frames.timeline import category_timeline, memory_series, step_spans
from tests.trace_factory import kernel, memory, step, write, x


@pytest.mark.parametrize(
    "name",
    [
        "data/kineto_resnet50_num_workers_0.pt.trace.json.gz",
        "communication/param_dlrm_8_ranks",
        "edge/hta_cpu_only_gloo_rank-34.pt.trace.json.gz",
    ],
)
def test_timeline_sums_to_breakdown_per_rank(shared_traces, name: str) -> None:
    trace = load_trace(shared_traces / name)
    b = breakdown(trace)
    tl = category_timeline(trace, buckets=300)
    assert len(tl) == 300 * len(trace.ranks)
    for rank, g in tl.groupby("rank"):
        rows = b.per_step[b.per_step["rank"] == rank]
        for cat in CATEGORIES:
            assert g[cat].sum() == pytest.approx(rows[cat].sum() / 1e6, abs=1e-3), cat


def test_timeline_places_categories_in_time(tmp_path) -> None:
    # 0..100 µs step: loader 0..40, kernel 50..90 (its launch at 45), nothing else.
    events = [
        step(1, 0, 100),
        x("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", 0, 40),
        x("cudaLaunchKernel", 45, 2, cat="cuda_runtime", correlation=1),
        kernel("volta_sgemm", 50, 40, correlation=1),
        memory(10, 100 * 1024**2, 200 * 1024**2),
    ]
    trace = load_trace(write(tmp_path / "t.json", events))
    tl = category_timeline(trace, buckets=10)
    assert tl["width_ms"].tolist() == [0.01] * 10
    assert tl["dataloader"].round(6).tolist()[:4] == [0.01] * 4
    assert tl["gpu_compute"].round(6).tolist()[5:9] == [0.01] * 4
    spans = step_spans(trace)
    assert spans[["step", "start_ms", "end_ms"]].values.tolist() == [[1, 0.0, 0.1]]
    mem = memory_series(trace)
    assert mem["allocated_mb"].max() == 100 and mem["reserved_mb"].max() == 200


def test_memory_downsampling_keeps_the_peak(shared_traces) -> None:
    trace = load_trace(shared_traces / "communication/hta_v100_2rank_216k_events.json.gz")
    mem = memory_series(trace, max_points=200)
    dev = trace.memory[trace.memory["device_type"] != 0]
    assert len(mem) <= 2 * 200
    assert mem["allocated_mb"].max() == pytest.approx(dev["total_allocated"].max() / 1024**2)
    assert np.all(np.diff(mem[mem["device"] == "device"]["t_ms"]) >= 0)
