"""``python -m profilers.run.worker RUN_DIR``: the run-folder contract, end to end, in real subprocesses.

The misbehaving workloads below are loaded by the worker as ``tests.profilers.test_worker:NAME`` (the
registry's ``module:ATTR`` form), so they never appear in ``sample_runs.WORKLOADS``.

Slow: each test trains in a process of its own (~3-15 s on 2 cores). The fast lane runs the contract with
``worker.main`` in process (``test_worker_in_process.py``).
"""

from __future__ import annotations

import gzip
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Mapping

import pytest
import torch
from torch import nn

from profilers.run.spec import TrainingSpec
from profilers.run.tb_export import STEP_SCALARS
from profilers.run.worker import EXIT_OUT_OF_MEMORY
from sample_runs import WORKLOADS, Parts, Size, Workload
from sample_runs.base import cross_entropy, teacher_classification

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
RESULT_KEYS = {"status", "error", "steps_done", "step_time_ms", "step_time_iqr_ms", "samples_per_s",
               "peak_memory_mb", "final_loss", "device", "device_name", "world_size", "telemetry_source",
               "telemetry_note", "warnings", "started_unix", "finished_unix"}


class Misbehaving(nn.Module):
    """A linear model that, from forward call ``at``, raises / leaks 100 MB per call / sleeps."""

    def __init__(self, mode: str, at: int) -> None:
        super().__init__()
        self.linear, self.mode, self.at, self.calls, self.hoard = nn.Linear(16, 4), mode, at, 0, []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls > self.at:
            if self.mode == "raise":
                raise RuntimeError(f"boom at forward call {self.calls}")
            if self.mode == "leak":
                self.hoard.append(torch.ones(25 * 1024 * 1024))  # 100 MB, pages touched
            if self.mode == "sleep":
                time.sleep(30)
        return self.linear(x)


def _build(spec: TrainingSpec, p: Mapping[str, Any], rank: int) -> Parts:
    data = teacher_classification(256, 16, 4, seed=spec.seed)
    return Parts(model=Misbehaving(p["mode"], p["at"]), dataset=data, loss_fn=cross_entropy)


MISBEHAVING = Workload(name="tests.profilers.test_worker:MISBEHAVING", description="test only",
                       intended_bottleneck=None, default_params={"mode": "raise", "at": 3},
                       sizes={"tiny": Size(params={})}, builder=_build)


def run_worker(run_dir: Path, spec: TrainingSpec, env: dict[str, str] | None = None,
               timeout: float = 150) -> subprocess.CompletedProcess[str]:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "spec.json").write_text(spec.to_json())
    full_env = {**{k: v for k, v in os.environ.items() if not k.startswith("STEPWISE_")}, **(env or {})}
    return subprocess.run([sys.executable, "-m", "profilers.run.worker", str(run_dir)], cwd=REPO, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def trace_of(run_dir: Path, rank: int) -> dict[str, Any]:
    files = sorted((run_dir / "tb").glob(f"rank{rank}.*.pt.trace.json.gz"))
    assert len(files) == 1, files
    with gzip.open(files[0], "rt") as fh:
        return json.load(fh)


def profiler_steps(trace: dict[str, Any]) -> dict[int, tuple[float, float]]:
    """``{N: (start_us, end_us)}`` of the ``ProfilerStep#N`` spans, on the trace's ``ts`` clock."""
    return {int(e["name"].split("#")[1]): (e["ts"], e["ts"] + e["dur"]) for e in trace["traceEvents"]
            if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#")}


def test_a_run_writes_every_file_of_the_contract(tmp_path: Path) -> None:
    spec = WORKLOADS["data_bound"].spec("tiny")  # steps ~tens of ms: telemetry samples land inside steps
    proc = run_worker(tmp_path, spec, env={"STEPWISE_TELEMETRY_INTERVAL_S": "0.01"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((tmp_path / "result.json").read_text())
    assert RESULT_KEYS <= set(result) and result["status"] == "ok" and result["error"] is None
    assert result["steps_done"] == spec.steps and result["world_size"] == 1 and result["device"] == "cpu"
    assert result["telemetry_source"] in ("host", "nvml") and result["telemetry_note"]
    assert result["step_time_ms"] > 0 and result["samples_per_s"] > 0 and result["peak_memory_mb"] > 50

    steps = read_jsonl(tmp_path / "steps.jsonl")
    assert [s["step"] for s in steps] == list(range(spec.steps))
    assert all(set(s) == {"rank", "step", "wall_ms", "loss", "samples", "profiled", "t_unix_ns", "data_ms"}
               for s in steps)
    assert all(0 <= s["data_ms"] <= s["wall_ms"] for s in steps)  # the step's time drawing batches
    profiled = [s["step"] for s in steps if s["profiled"]]
    assert profiled == list(range(spec.warmup_steps + spec.profile_wait,
                                  spec.warmup_steps + spec.profile_wait + spec.profile_warmup + spec.profile_active))
    progress = json.loads((tmp_path / "progress.json").read_text())
    assert progress["step"] == spec.steps == progress["total_steps"] and progress["status"] == "ok"

    trace = trace_of(tmp_path, 0)
    spans = profiler_steps(trace)
    active = profiled[spec.profile_warmup:]
    assert sorted(spans) == active  # ProfilerStep#N numbers are the run's step numbers
    names = {e.get("name", "") for e in trace["traceEvents"]}
    assert any(n.startswith("enumerate(DataLoader)#") for n in names)
    assert list((tmp_path / "tb").glob("events.out.tfevents.*"))  # TensorBoard scalars

    # Telemetry on the trace clock: a sample taken inside step N lies inside ProfilerStep#N.
    telemetry = read_jsonl(tmp_path / "telemetry.jsonl")
    assert {"cpu_pct", "rss_mb", "read_mb_s", "write_mb_s", "t_trace_us"} <= set(telemetry[-1])
    base_ns = int(trace["baseTimeNanoseconds"])
    checked = 0
    for s in steps:
        if s["step"] not in spans:
            continue
        start, end = s["t_unix_ns"], s["t_unix_ns"] + s["wall_ms"] * 1e6
        for t in telemetry:
            if start + 2e6 < t["t_unix_ns"] < end - 2e6:  # clear of the step's edges
                assert t["t_trace_us"] == pytest.approx((t["t_unix_ns"] - base_ns) / 1000, abs=1)
                lo, hi = spans[s["step"]]
                assert lo <= t["t_trace_us"] <= hi
                checked += 1
    assert checked > 0


def test_a_workload_that_raises_leaves_a_failed_result_and_its_steps(tmp_path: Path) -> None:
    spec = TrainingSpec(workload=MISBEHAVING.name, params={"mode": "raise", "at": 4}, batch_size=8, steps=10)
    proc = run_worker(tmp_path, spec)
    assert proc.returncode == 1
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["status"] == "failed" and result["steps_done"] == 4
    assert result["error"].startswith("RuntimeError: boom at forward call 5")
    assert "Traceback" not in result["error"].splitlines()[0]
    assert [s["step"] for s in read_jsonl(tmp_path / "steps.jsonl")] == [0, 1, 2, 3]
    assert json.loads((tmp_path / "progress.json").read_text())["status"] == "failed"


def tb_scalars(run_dir: Path) -> dict[str, list[int]]:
    """``{tag: [step, …]}`` of the TensorBoard scalars on disk in ``run_dir/tb``, read as TensorBoard reads them."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / "tb"))
    acc.Reload()
    return {tag: [e.step for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_a_failed_run_keeps_its_tensorboard_scalars(tmp_path: Path) -> None:
    """The worker ends a failed run with os._exit: its scalars must reach the disk first (the writer buffers)."""
    spec = TrainingSpec(workload=MISBEHAVING.name, params={"mode": "raise", "at": 4}, batch_size=8, steps=10)
    assert run_worker(tmp_path, spec).returncode == 1
    assert tb_scalars(tmp_path) == {tag: [0, 1, 2, 3] for tag in STEP_SCALARS}


def test_exceeding_the_memory_budget_is_out_of_memory_with_exit_75(tmp_path: Path) -> None:
    # Leaks 100 MB per step from step 3: the budget is passed a few steps in, whatever the base RSS.
    spec = TrainingSpec(workload=MISBEHAVING.name, params={"mode": "leak", "at": 3}, batch_size=8, steps=40,
                        memory_budget_mb=1200)
    proc = run_worker(tmp_path, spec)
    assert proc.returncode == EXIT_OUT_OF_MEMORY, proc.stderr[-2000:]
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["status"] == "out_of_memory" and "memory_budget_mb=1200" in result["error"]
    assert result["peak_memory_mb"] > 1200
    steps = read_jsonl(tmp_path / "steps.jsonl")
    assert 3 <= len(steps) < 40 and result["steps_done"] >= len(steps) - 1


def test_a_step_over_step_timeout_fails_naming_the_step(tmp_path: Path) -> None:
    spec = TrainingSpec(workload=MISBEHAVING.name, params={"mode": "sleep", "at": 2}, batch_size=8, steps=10,
                        step_timeout_s=5.0)  # step 2 sleeps 30 s; 5 s leaves the first steps room on a slow machine
    proc = run_worker(tmp_path, spec)
    assert proc.returncode == 1
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["status"] == "failed" and result["error"] == "step 2 exceeded step_timeout_s=5.0"
    assert len(read_jsonl(tmp_path / "steps.jsonl")) == 2
    assert tb_scalars(tmp_path)[STEP_SCALARS[0]] == [0, 1]  # flushed by the watchdog's thread, step 2 still stuck


def test_bare_mode_times_steps_without_profiler_or_telemetry(tmp_path: Path) -> None:
    proc = run_worker(tmp_path, WORKLOADS["digits"].spec("tiny"), env={"STEPWISE_BARE": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["status"] == "ok" and result["instrumented"] is False and result["telemetry_source"] is None
    assert not (tmp_path / "tb").exists() and not (tmp_path / "telemetry.jsonl").exists()
    assert len(read_jsonl(tmp_path / "steps.jsonl")) == 10


def test_a_bad_spec_fails_with_a_one_line_error(tmp_path: Path) -> None:
    proc = run_worker(tmp_path, TrainingSpec(workload="no_such_workload"))
    assert proc.returncode == 1
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["status"] == "failed" and "known workloads: communication_bound" in result["error"]
    assert "\n" not in result["error"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_two_ranks_under_torchrun_with_no_sync_and_bf16_compression(tmp_path: Path) -> None:
    spec = WORKLOADS["communication_bound"].spec("tiny", batch_size=16, grad_accum_steps=2, ddp_no_sync=True,
                                                   grad_compression="bf16", steps=8)
    (tmp_path / "spec.json").write_text(spec.to_json())
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", "--nproc_per_node=2",
           "--master_addr=127.0.0.1", f"--master_port={_free_port()}", "-m", "profilers.run.worker", str(tmp_path)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=170)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["status"] == "ok" and result["world_size"] == 2 and result["backend"] == "gloo"
    assert len(result["rank_step_time_ms"]) == 2 and result["slowest_rank"] in (0, 1)
    steps = read_jsonl(tmp_path / "steps.jsonl")
    assert result["samples_per_s"] > 0  # its formula: tests/stepwise_agent/test_steady.py
    for rank in (0, 1):
        assert [s["step"] for s in steps if s["rank"] == rank] == list(range(8))
        assert profiler_steps(trace_of(tmp_path, rank))
    # DDP keeps the replicas identical, so both ranks see the same loss trend on different shards.
    assert all(s["loss"] > 0 for s in steps)


def test_progress_is_readable_live_by_another_process(tmp_path: Path) -> None:
    spec = WORKLOADS["digits"].spec("tiny", steps=60)
    (tmp_path / "spec.json").write_text(spec.to_json())
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEPWISE_")}
    proc = subprocess.Popen([sys.executable, "-m", "profilers.run.worker", str(tmp_path)], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen: list[dict[str, Any]] = []
    try:
        while proc.poll() is None and not any(0 < p["step"] < 60 for p in seen):
            try:
                seen.append(json.loads((tmp_path / "progress.json").read_text()))  # never half-written
            except FileNotFoundError:
                pass
            time.sleep(0.005)
        assert proc.wait(timeout=150) == 0
    finally:
        proc.kill()
    running = [p for p in seen if p["status"] == "running"]
    assert running and all(p["total_steps"] == 60 for p in running)
    assert any(0 < p["step"] < 60 and p["eta_s"] is not None for p in running)
    assert json.loads((tmp_path / "progress.json").read_text())["status"] == "ok"
