"""A saturated device is never ``none``: hand-written CPU and GPU traces (and a stored CPU run with host
telemetry) whose device works nearly the whole step are diagnosed ``compute``, with the evidence and the next
lever that fits (bf16 when the matmuls are fp32, torch.compile when eager, else honestly no cheap fix)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.advisors import main
from profilers.store.runs import RunStore
from tests.app.fake_runs import fake_run
from tests.trace_factory import kernel, step, write, x

MS = 1_000_000
STEP_US = 20_000.0
FP32 = {"Input type": ["float", "float", "float"]}
BF16 = {"Input type": ["c10::BFloat16", "c10::BFloat16"]}


def _cpu_steps(
    n: int = 4, loader_us: float = 0.0, dtype: dict | None = None, compiled: bool = False
) -> list[dict]:
    """A CPU training step of ``STEP_US``: optional loader, forward (matmul), backward, optimizer; ~92% ops."""
    dtype = FP32 if dtype is None else dtype
    events: list[dict] = []
    for i in range(n):
        t = i * STEP_US
        events.append(step(i, t, STEP_US))
        if loader_us:
            events.append(
                x("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t + 50, loader_us)
            )
        t0 = t + 100 + loader_us
        fwd = 0.3 * (STEP_US - loader_us)
        events += [
            x("CompiledFunction" if compiled else "aten::linear", t0, fwd),
            x("aten::addmm", t0 + 10, fwd - 100, **dtype),
        ]
        t1 = t0 + fwd + 50
        bwd = 0.52 * (STEP_US - loader_us)
        events += [
            x("autograd::engine::evaluate_function: AddmmBackward0", t1, bwd),
            x("aten::mm", t1 + 10, bwd - 200, **dtype),
        ]
        t2 = t1 + bwd + 50
        events.append(x("Optimizer.step#SGD.step", t2, 0.1 * (STEP_US - loader_us)))
    return events


def _analyze(path: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(["analyze", str(path), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_uploaded_cpu_trace_with_saturated_operators_is_compute(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _analyze(write(tmp_path / "cpu.pt.trace.json", _cpu_steps()), capsys)
    assert out["device"] == "cpu" and out["bottleneck"] == "compute"
    first = out["findings"][0]
    assert first["rule"] == "COMP002" and first["fix"]["id"] == "bf16_autocast"
    ev = first["evidence"]
    assert (
        ev["device_work_share"] > 0.85
        and ev["fp32_matmul_share_of_step"] > 0.5
        and ev["compiled"] is False
    )
    assert "compute-bound" in first["message"] and "bf16" in first["message"]


def test_cpu_without_recorded_matmul_types_gets_compile_and_is_told_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A launched script profiles without record_shapes: precision unknown, so the lever is compilation."""
    out = _analyze(write(tmp_path / "cpu.pt.trace.json", _cpu_steps(dtype={})), capsys)
    first = out["findings"][0]
    assert out["bottleneck"] == "compute" and first["fix"]["id"] == "torch_compile"
    assert (
        first["evidence"]["fp32_matmul_share_of_step"] is None
        and "record_shapes" in first["message"]
    )


def test_compiled_low_precision_cpu_says_no_cheap_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _analyze(
        write(tmp_path / "cpu.pt.trace.json", _cpu_steps(dtype=BF16, compiled=True)), capsys
    )
    first = out["findings"][0]
    assert out["bottleneck"] == "compute" and first["rule"] == "COMP002" and first["fix"] is None
    assert "no cheap fix" in first["message"] and "algorithm or more devices" in first["message"]


def test_a_small_single_process_loader_does_not_outrank_a_saturated_cpu(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The MLP-over-in-memory-tensors case: 5% of the step in a default DataLoader, operators the rest."""
    out = _analyze(write(tmp_path / "cpu.pt.trace.json", _cpu_steps(loader_us=1_000.0)), capsys)
    assert out["bottleneck"] == "compute"
    assert out["breakdown"]["dataloader"]["share"] == pytest.approx(0.05, abs=0.01)


def test_stored_cpu_run_with_busy_cores_is_compute(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run folder: its trace shows operators filling ~76% of the step (Python between them), its host
    telemetry both cores 98% busy: saturated, compute, with the cores in the evidence."""
    events = [e for e in _cpu_steps(dtype={}) if not e["name"].startswith("Optimizer")]  # ops 82%
    events = [
        dict(e, dur=e["dur"] * 0.92) if not e["name"].startswith("ProfilerStep") else e
        for e in events
    ]
    trace = write(tmp_path / "t.pt.trace.json", events)
    rec = fake_run(RunStore(tmp_path / "runs"), steps=40, trace=trace)
    run_dir = Path(rec.run_dir)
    (run_dir / "tb" / "rank0.1.pt.trace.json.gz").rename(run_dir / "tb" / "rank0.1.pt.trace.json")
    steps = [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]
    with open(run_dir / "telemetry.jsonl", "w") as fh:
        for t in range(steps[0]["t_unix_ns"], steps[-1]["t_unix_ns"] + 100 * MS, 100 * MS):
            fh.write(
                json.dumps(
                    {
                        "t_unix_ns": t,
                        "source": "host",
                        "cpu_pct": 196.0,
                        "system_cpu_pct": 98.0,
                        "cpu_count": 2,
                        "rss_mb": 300.0,
                    }
                )
                + "\n"
            )
    out = _analyze(run_dir, capsys)
    assert out["bottleneck"] == "compute", [(f["rule"], f["severity"]) for f in out["findings"]]
    ev = out["findings"][0]["evidence"]
    assert 0.7 <= ev["device_work_share"] < 0.8 and ev["host_cpu_busy"] == pytest.approx(
        0.98
    )  # telemetry decides
    assert ev["cpu_count"] == 2


def test_saturated_gpu_with_overlapped_collectives_is_compute(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """GPU busy ~99% in bf16 GEMMs; an NCCL all-reduce on its own stream runs under them (none exposed)."""
    events: list[dict] = []
    for i in range(3):
        t = i * STEP_US
        events += [step(i, t, STEP_US), x("aten::linear", t + 10, 300, tid=1)]
        events += [
            kernel("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn", t + 100 + k * 1_980, 1_975)
            for k in range(10)
        ]
        events.append(
            kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", t + 2_000, 12_000, stream=20)
        )
    out = _analyze(write(tmp_path / "gpu.pt.trace.json", events), capsys)
    assert out["device"] == "gpu" and out["bottleneck"] == "compute"
    first = out["findings"][0]
    assert first["rule"] == "COMP002" and first["evidence"]["exposed_comm_share"] < 0.01
    assert first["evidence"]["comm_total_share"] > 0.5 and first["fix"]["id"] == "torch_compile"
    assert "overlapped" in first["message"]


def test_no_matmuls_is_not_unknown_precision() -> None:
    """A saturated compiled CPU step with no matmul at all: nothing to put in bf16, so 'no cheap fix' — not
    'precision not recorded'."""
    from advisors.diagnosis import diagnose
    from advisors.rules.compute.saturated import NO_CHEAP_FIX
    from advisors.synthetic import observation

    d = diagnose(
        observation({"forward": 0.4, "backward": 0.5}, device="cpu", ops={"CompiledFunction": 0.4})
    )
    assert d.binding is not None and d.binding.rule == "COMP002" and d.binding.fix_id is None
    assert NO_CHEAP_FIX in d.binding.message and "record_shapes" not in d.binding.message
