"""Expert-parallel kernels (DeepEP's dispatch/combine) are communication; hidden under compute on
their own stream, they leave the verdict compute-bound, and exposed, they make it
communication-bound."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_analyze_contract import analyze
from tests.trace_factory import kernel, step, write, x

DISPATCH = "void dpsk::ep::internode::dispatch<false, 8, 4, 2>(int4*, float*, int*)"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n"
COMBINE = "void dpsk::ep::internode::combine<__nv_bfloat16, 8, 4>(int4*, float*)"


def moe_trace(path: Path, overlapped: bool, steps: int = 6) -> Path:
    """Per 1 ms step: 900 µs of GEMMs on stream 7 and 300 µs of dispatch + combine on stream 20,
    either inside the GEMMs' time (overlapped) or after it, with the compute then shorter
    (exposed)."""
    evs: list[dict] = []
    for s in range(steps):
        t0 = s * 1000.0
        evs.append(step(s + 1, t0, 1000))
        gemm_us = 900 if overlapped else 600
        for i in range(3):
            corr = s * 10 + i
            evs.append(x("cudaLaunchKernel", t0 + i * 5, 3, cat="cuda_runtime", correlation=corr))
            evs.append(kernel(GEMM, t0 + 10 + i * gemm_us / 3, gemm_us / 3, correlation=corr))
        comm_at = t0 + 100 if overlapped else t0 + 10 + gemm_us
        for j, name in enumerate((DISPATCH, COMBINE)):
            corr = s * 10 + 5 + j
            launch = x("cudaLaunchKernel", t0 + 20 + j * 5, 3, cat="cuda_runtime", correlation=corr)
            evs.append(launch)
            evs.append(kernel(name, comm_at + j * 150, 150, stream=20, correlation=corr))
    h800 = {"id": 0, "name": "NVIDIA H800", "totalGlobalMem": 85 * 2**30}
    return write(
        path,
        evs,
        deviceProperties=[h800],
        distributedInfo={"backend": "nccl", "rank": 0, "world_size": 1},
    )


@pytest.mark.parametrize("overlapped, verdict", [(True, "compute"), (False, "communication")])
def test_expert_parallel_share_and_verdict(tmp_path: Path, overlapped: bool, verdict: str):
    done = analyze(str(moe_trace(tmp_path / "moe.json", overlapped)), "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["kernel_classes"]["communication"] > 0.2
    comm = result["communication"]
    assert comm["total_ms"] == pytest.approx(0.3, abs=0.01)
    if overlapped:
        assert comm["exposed_ms"] == pytest.approx(0.0, abs=0.01)
    else:
        assert comm["exposed_ms"] == pytest.approx(0.3, abs=0.01)
    assert result["bottleneck"] == verdict, result["bottleneck"]
