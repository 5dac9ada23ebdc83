"""Run folders and a memory snapshot saved from a real H100 (``benchmarks/gpu/on_device.py``; the figures are in
``benchmarks/results/gpu-2026-11-26-h100.md``), read back here on a CPU as a user's upload would be.

compute_fp32 / compute_tf32: ``compute_bound --size gpu`` (4096-wide Linear layers) with and without TF32 on
torch 2.11+cu130; memory_oom: ``memory_bound --size bench``, out of memory at its 1.81 GiB allocator budget;
snapshot.pickle: ``torch.cuda.memory._dump_snapshot`` of a 4-layer transformer encoder's first 4 steps
(torch reported a peak of 1526.7 MiB allocated).
"""

from __future__ import annotations

import contextlib
import io
import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from advisors.fixes import already_done
from cli.advisors import main

H100 = Path(__file__).resolve().parents[1] / "fixtures" / "h100"


def analyze(target: Path) -> dict[str, Any]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["analyze", str(target), "--json"]) == 0
    return json.loads(out.getvalue())


@pytest.fixture(scope="module")
def fp32() -> dict[str, Any]:
    return analyze(H100 / "compute_fp32")


@pytest.fixture(scope="module")
def tf32() -> dict[str, Any]:
    return analyze(H100 / "compute_tf32")


def test_an_fp32_h100_run_is_compute_bound_at_its_fp32_peak(fp32: dict[str, Any]) -> None:
    assert fp32["device"] == "gpu" and "H100" in fp32["device_name"]
    assert fp32["bottleneck"] == "compute"
    eff = fp32["efficiency"]
    assert (
        eff["dtype"] == "fp32"
        and eff["peak_tflops"] == 67.0
        and "without TF32" in eff["peak_basis"]
    )
    assert (
        0.5 < eff["mfu"] < 0.8 and not eff["clamped"]
    )  # 44.5 of 67 TFLOP/s: SIMT sgemm kernels, no TF32
    assert eff["achieved_tflops"] == pytest.approx(44.45, rel=0.02)


def test_tf32_kernels_are_measured_against_the_tf32_peak_and_tf32_is_not_advised_again(
    tf32: dict[str, Any],
) -> None:
    """The ops' tensors are fp32, but cuBLAS ran sm90_xmma_gemm_f32f32_tf32f32 kernels: 175 TFLOP/s against the
    fp32 peak of 67 was clamped to the busy share (0.78) before; against TF32's 494.7 it is 0.35."""
    eff = tf32["efficiency"]
    assert eff["dtype"] == "tf32" and eff["peak_tflops"] == 494.7
    assert not eff["clamped"] and eff["mfu"] == pytest.approx(175.1 / 494.7, rel=0.02)
    assert "tf32" not in tf32["ranking"]["fix_order"]


def test_a_trace_whose_matmuls_are_tf32_counts_as_tf32_on_without_a_spec(tmp_path: Path) -> None:
    from advisors.facts import derive
    from advisors.observation import observe

    obs = observe(
        H100 / "compute_tf32" / "tb"
    )  # the trace alone, as an upload: no spec says tf32=True
    facts = derive(obs)
    assert facts.spec is None and already_done("tf32", facts)
    fp32_facts = derive(observe(H100 / "compute_fp32" / "tb"))
    assert not already_done("tf32", fp32_facts)


def test_nvml_telemetry_is_stored_at_10_hz_and_shows_the_gpu_busy_while_the_steps_run() -> None:
    run = H100 / "compute_fp32"
    rows = [json.loads(line) for line in (run / "telemetry.jsonl").read_text().splitlines()]
    gpu = [r for r in rows if r["source"] == "nvml"]
    steps = [json.loads(line) for line in (run / "steps.jsonl").read_text().splitlines()]
    lo = min(s["t_unix_ns"] - s["wall_ms"] * 1e6 for s in steps)
    hi = max(s["t_unix_ns"] for s in steps)
    during = [r["gpu_util_pct"] for r in gpu if lo <= r["t_unix_ns"] <= hi]
    before = [r["gpu_util_pct"] for r in gpu if r["t_unix_ns"] < lo]
    assert len(gpu) / ((gpu[-1]["t_unix_ns"] - gpu[0]["t_unix_ns"]) / 1e9) >= 9.5
    assert len(during) >= 10 and statistics.median(during) > 50 and statistics.median(before) < 5
    result = json.loads((run / "result.json").read_text())
    assert result["telemetry_source"] == "nvml"


def test_a_cuda_out_of_memory_run_is_named_as_memory_bound() -> None:
    result = json.loads((H100 / "memory_oom" / "result.json").read_text())
    assert result["status"] == "out_of_memory" and "CUDA out of memory" in result["error"]
    a = analyze(H100 / "memory_oom")
    assert a["bottleneck"] == "memory"


def test_a_real_cuda_snapshot_reads_back_its_peak_and_python_sites() -> None:
    snap = analyze(H100 / "snapshot.pickle")["memory_snapshot"]
    assert snap["peak_allocated_gib"] == pytest.approx(
        1526.7 / 1024, abs=0.005
    )  # torch.cuda.max_memory_allocated
    sites = [s["where"] for s in snap["top_sites"]]
    assert sites[0] == "snapshot_train.py:26 main"  # the forward line: its activations are the peak
    assert "backward: AddmmBackward0" in sites  # autograd's thread has C++ frames only
    assert not any("unwind" in s or s.startswith("??") for s in sites)
