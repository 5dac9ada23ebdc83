"""Every real trace in ../shared/traces loads, and its breakdown agrees with figures computed here
independently, with the standard library only (plain json, plain interval sweeps)."""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path

import pytest

from profilers.breakdown import CATEGORIES, breakdown
from profilers.trace_load import load_trace
from tests.conftest import SHARED_TRACES

FILES = sorted(str(p.relative_to(SHARED_TRACES)) for p in SHARED_TRACES.rglob("*.json*"))
FOLDERS = ["communication/param_dlrm_8_ranks", "communication/hta_sampled_128_ranks"]
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}
HOST_STEP_CATS = {"cpu_op", "user_annotation", "operator"}


def _events(path: Path) -> list[dict]:
    raw = path.read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    return [e for e in doc["traceEvents"] if e.get("ph") == "X"]


def _union_len(spans: list[tuple[float, float]], lo: float, hi: float) -> float:
    total, reach = 0.0, lo
    for s, e in sorted((max(s, lo), min(e, hi)) for s, e in spans):
        if e <= s:
            continue
        if s > reach:
            total, reach = total + e - s, e
        elif e > reach:
            total, reach = total + e - reach, e
    return total


def independent(paths: list[Path]) -> dict:
    """Step spans, GPU busy share and raw DataLoader share, per the MANIFEST's method."""
    step_ids, step_durs, busy, dl, total = set(), [], 0.0, 0.0, 0.0
    for path in paths:
        ev = _events(path)
        steps = {}
        for e in ev:
            name = e["name"]
            if name.startswith("ProfilerStep#") and str(e.get("cat", "")).lower() in HOST_STEP_CATS:
                steps.setdefault(int(name.split("#")[1]), (e["ts"], e["ts"] + e["dur"]))
        if not steps:  # whole window is one step
            steps = {0: (min(e["ts"] for e in ev), max(e["ts"] + e["dur"] for e in ev))}
        gpu = [(e["ts"], e["ts"] + e["dur"]) for e in ev if str(e.get("cat", "")).lower() in GPU_CATS]
        loader = [(e["ts"], e["ts"] + e["dur"]) for e in ev if "dataloader" in e["name"].lower()]
        for n, (lo, hi) in steps.items():
            step_ids.add(n)
            step_durs.append(hi - lo)
            busy += _union_len(gpu, lo, hi)
            dl += _union_len(loader, lo, hi)
            total += hi - lo
    return {"steps": len(step_ids), "median_ms": statistics.median(step_durs) / 1000,
            "busy": busy / total, "dataloader_raw": dl / total}


@pytest.mark.parametrize("rel", FILES + FOLDERS)
def test_trace_loads_and_breakdown_matches_independent_figures(rel: str, shared_traces: Path):
    path = shared_traces / rel
    b = breakdown(load_trace(path))
    files = sorted(path.glob("*.json*")) if path.is_dir() else [path]
    ref = independent(files)
    assert b.n_steps == ref["steps"]
    assert b.step_time_ms == pytest.approx(ref["median_ms"], rel=1e-4, abs=1e-3)
    assert b.gpu_busy_share == pytest.approx(ref["busy"], abs=2e-3)
    shares = b.shares()
    assert sum(shares.values()) == pytest.approx(1.0, abs=1e-9)
    assert all(v >= 0 for v in shares.values())
    rows = b.per_step
    assert (rows[list(CATEGORIES)].sum(axis=1) == rows["step_ns"]).all()
    # The device categories together are exactly the device's busy time (priority makes them disjoint).
    device = sum(shares[c] for c in ("gpu_compute", "gpu_memcpy", "gpu_memset")) + (
        shares["communication"] if b.device == "gpu" else 0.0)
    assert device == pytest.approx(b.gpu_busy_share, abs=1e-6)
    # Exposed loader time can only be part of the loader's whole span (CPU ranks also count
    # data-phase annotations such as "## data_load ##", which this plain reading does not).
    if b.device == "gpu":
        assert shares["dataloader"] <= ref["dataloader_raw"] + 1e-6


def test_dataloader_share_falls_from_about_40_to_about_1_percent(shared_traces: Path):
    before_path = shared_traces / "data/kineto_resnet50_num_workers_0.pt.trace.json.gz"
    after_path = shared_traces / "compute/kineto_resnet50_num_workers_4.pt.trace.json.gz"
    before, after = independent([before_path]), independent([after_path])
    assert before["dataloader_raw"] == pytest.approx(0.40, abs=0.03)
    assert after["dataloader_raw"] == pytest.approx(0.01, abs=0.01)
    exposed_before = breakdown(load_trace(before_path)).share("dataloader")
    exposed_after = breakdown(load_trace(after_path)).share("dataloader")
    assert exposed_before > 0.30 and exposed_after < 0.02
    assert exposed_before / exposed_after > 20


def test_multi_rank_folder_counts_a_step_once(shared_traces: Path):
    b = breakdown(load_trace(shared_traces / "communication/param_dlrm_8_ranks"))
    assert b.ranks == tuple(range(8)) and b.n_steps == 1
    assert b.per_rank["step_ms"].min() == pytest.approx(12.5, abs=0.2)
    assert b.per_rank["step_ms"].max() == pytest.approx(20.1, abs=0.2)


def test_edge_cases(shared_traces: Path):
    cpu = load_trace(shared_traces / "edge/hta_cpu_only_gloo_rank-34.pt.trace.json.gz")
    assert not cpu.has_gpu and cpu.ranks == (34,) and cpu.world_size == 300 and cpu.backend == "gloo"
    assert breakdown(cpu).device == "cpu" and len(cpu.steps) == 5
    assert load_trace(shared_traces / "edge/hta_no_rank_info.json.gz").ranks == (0,)
    big = load_trace(shared_traces / "edge/hta_two_events_large_integers.pt.trace.json.gz")
    assert big.n_events == 2 and big.steps_inferred
    amd = breakdown(load_trace(shared_traces / "edge/hta_amd_mi250_rocm_minitoy.json.gz"))
    assert amd.device == "gpu" and amd.kernel_total_ns > 0 and "AMD" in amd.device_name
    old = load_trace(shared_traces / "edge/kineto_old_schema_gpu_metrics.json")
    assert set(old.events["kind"].unique()) >= {"cpu_op", "runtime", "kernel", "memcpy"}
    assert old.total_device_memory and old.total_device_memory > 30 * 2**30
