"""An accelerator the peak table cannot know (MTIA: no deviceProperties, its processes named
"MTIA ...") is named from the trace, with its peak unknown, and never called a GPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import profilers.trace.json_events as trace_json
import profilers.trace.parallel as parallel
from profilers.efficiency.accelerator import accelerator_family
from profilers.trace.breakdown import breakdown
from profilers.trace.load import load_trace
from tests.test_analyze_contract import analyze
from tests.trace_factory import kernel, step, write, x

pytestmark = pytest.mark.real_parse  # every load parses (the session's shared-trace memo stays out)

SHAPES = {"Input Dims": [[256, 256], [256, 256]], "Input type": ["float", "float"]}


def meta(name: str, pid: int, key: str, value: str) -> dict:
    return {"name": name, "ph": "M", "ts": 0, "pid": pid, "tid": 0, "args": {key: value}}


def device_trace(
    path: Path,
    label: str | None,
    backend: str,
    cat: str = "kernel",
    steps: int = 3,
    ops: int = 4,
    **top,
) -> Path:
    """Steps of matmuls with a device kernel each, the device's process labelled ``label``."""
    evs: list[dict] = []
    for s in range(steps):
        t0 = s * 1000.0
        evs.append(step(s + 1, t0, 900))
        for i in range(ops):
            corr = s * ops + i
            evs.append(x("aten::mm", t0 + i * 200, 20, correlation=corr, **SHAPES))
            k = kernel(f"mtia_fused_mm_{i}", t0 + i * 200 + 30, 150, correlation=corr)
            evs.append({**k, "cat": cat})
    evs += [
        meta("process_name", 100, "name", "python3"),
        meta("process_labels", 100, "labels", "CPU"),
    ]
    if label is not None:
        evs += [meta("process_name", 0, "name", label), meta("process_labels", 0, "labels", label)]
    info = {"backend": backend, "rank": 0, "world_size": 1}
    return write(path, evs, deviceProperties=[], distributedInfo=info, **top)


@pytest.mark.parametrize(
    "processes, backend, family",
    [
        (["python3", "MTIA 0"], "gloo", "MTIA"),
        (["python3", "mtia:0 (MTIA Device)"], None, "MTIA"),
        (["python3"], "mtia", "MTIA"),  # the backend alone
        (["python3", "GPU 0"], "nccl", None),
        (["python3", "Spans", "Traces"], "gloo", None),
        (["HPU 3"], "hccl", "HPU"),
    ],
)
def test_family_from_processes_or_backend(
    processes: list[str], backend: str | None, family: str | None
):
    assert accelerator_family(processes, backend) == family


@pytest.mark.parametrize("cat", ["kernel", "mtia_ccp_events"])
def test_mtia_trace_is_named_mtia_with_peak_unknown(tmp_path: Path, cat: str):
    tr = load_trace(device_trace(tmp_path / "mtia.json", "MTIA 0", "gloo", cat=cat))
    assert tr.devices == () and tr.device_name == "MTIA"
    b = breakdown(tr)
    assert b.device == "gpu" and len(b.kernels)  # device-side work, analysed as such
    assert b.device_name == "MTIA" and b.gpu_arch is None
    assert b.device_label == "MTIA accelerator (peak unknown)" and "GPU" not in b.device_label


def test_a_gpu_trace_without_device_properties_stays_a_gpu(tmp_path: Path):
    b = breakdown(load_trace(device_trace(tmp_path / "gpu.json", "GPU 0", "nccl")))
    assert b.device_name == "GPU" and "MTIA" not in b.device_label


@pytest.mark.parametrize("workers", [0, 2])
def test_named_by_every_reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int):
    """Read in pieces (the process names at the file's end, as Kineto writes them), on workers."""
    path = device_trace(tmp_path / "mtia.json", "MTIA 0", "gloo", steps=400, ops=20)
    monkeypatch.setattr(trace_json, "WHOLE_LIMIT", 64 * 1024)
    monkeypatch.setattr(trace_json, "CHUNK_BYTES", 64 * 1024)
    monkeypatch.setenv(parallel.WORKERS_ENV, str(workers))
    assert path.stat().st_size > 8 * trace_json.WHOLE_LIMIT
    assert load_trace(path).device_name == "MTIA"


def test_analyze_says_mtia_and_peak_unknown(tmp_path: Path):
    path = device_trace(tmp_path / "mtia.json", "MTIA 0", "gloo")
    result = json.loads(analyze(str(path), "--json").stdout)
    assert result["device_name"] == "MTIA" and result["device_arch"] is None
    reason = result["efficiency"]["reason"]
    assert "peak unknown" in reason and result["efficiency"]["mfu"] is None, reason
    text = analyze(str(path))
    assert text.returncode == 0, text.stderr
    first = text.stdout.splitlines()[0]
    assert first.startswith("MTIA accelerator (peak unknown) · ranks") and "GPU" not in first
