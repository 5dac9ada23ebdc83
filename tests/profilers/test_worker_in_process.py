"""The worker's run-folder contract with ``worker.main`` called in this process (fast lane): a tiny run's files,
a workload that raises, a bad spec. ``os._exit`` is replaced by ``SystemExit`` so a failed run unwinds instead
of ending pytest. ``test_worker.py`` runs the same contract in real subprocesses (slow), with the cases that
need a process of their own: the memory budget on RSS, a step timeout, torchrun, a live reader."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from profilers.run import worker
from profilers.run.spec import TrainingSpec
from profilers.run.tb_export import STEP_SCALARS
from sample_runs import WORKLOADS
from tests.profilers.test_worker import MISBEHAVING, RESULT_KEYS, profiler_steps, read_jsonl, tb_scalars, trace_of


@pytest.fixture
def in_process(monkeypatch: pytest.MonkeyPatch):
    """``worker.main`` on a run folder holding ``spec``: its exit code (a failed run's ``os._exit`` code)."""
    import os

    for key in [k for k in os.environ if k.startswith("STEPWISE_")]:
        monkeypatch.delenv(key)

    def exit_now(code: int) -> None:
        raise SystemExit(code)

    monkeypatch.setattr(worker.os, "_exit", exit_now)

    def run(run_dir: Path, spec: TrainingSpec) -> int:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "spec.json").write_text(spec.to_json())
        try:
            return worker.main([str(run_dir)])
        except SystemExit as ended:
            return int(ended.code or 0)
    return run


def test_a_tiny_run_writes_every_file_of_the_contract(in_process, tmp_path: Path) -> None:
    spec = WORKLOADS["digits"].spec("tiny", steps=7)  # 3 warm-up, 1 wait, 1 warm-up, 2 profiled
    spec = spec.patch(profile_active=2)
    assert in_process(tmp_path, spec) == worker.EXIT_OK
    result = json.loads((tmp_path / "result.json").read_text())
    assert RESULT_KEYS <= set(result) and result["status"] == "ok" and result["error"] is None
    assert result["steps_done"] == 7 and result["world_size"] == 1 and result["device"] == "cpu"
    assert result["step_time_ms"] > 0 and result["samples_per_s"] > 0 and result["rank_step_time_ms"]
    assert result["telemetry_source"] in ("host", "nvml") and result["instrumented"] is True

    steps = read_jsonl(tmp_path / "steps.jsonl")
    assert [s["step"] for s in steps] == list(range(7))
    assert [s["step"] for s in steps if s["profiled"]] == [4, 5, 6]  # the profiler's warm-up step, then 2 active
    assert sorted(profiler_steps(trace_of(tmp_path, 0))) == [5, 6]  # ProfilerStep#N is the run's step N
    progress = json.loads((tmp_path / "progress.json").read_text())
    assert progress["step"] == 7 == progress["total_steps"] and progress["status"] == "ok"
    assert tb_scalars(tmp_path) == {tag: list(range(7)) for tag in STEP_SCALARS}
    assert (tmp_path / "telemetry.jsonl").exists()


def test_a_workload_that_raises_is_failed_with_its_steps(in_process, tmp_path: Path) -> None:
    spec = TrainingSpec(workload=MISBEHAVING.name, params={"mode": "raise", "at": 4}, batch_size=8, steps=10)
    assert in_process(tmp_path, spec) == worker.EXIT_FAILED
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["status"] == "failed" and result["steps_done"] == 4
    assert result["error"].startswith("RuntimeError: boom at forward call 5")
    assert [s["step"] for s in read_jsonl(tmp_path / "steps.jsonl")] == [0, 1, 2, 3]
    assert json.loads((tmp_path / "progress.json").read_text())["status"] == "failed"
    assert tb_scalars(tmp_path) == {tag: [0, 1, 2, 3] for tag in STEP_SCALARS}


def test_a_bad_spec_fails_with_a_one_line_error(in_process, tmp_path: Path) -> None:
    assert in_process(tmp_path, TrainingSpec(workload="no_such_workload")) == worker.EXIT_FAILED
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["status"] == "failed" and "known workloads: communication_bound" in result["error"]
    assert "\n" not in result["error"]


def test_the_worker_needs_exactly_one_run_folder(capsys: pytest.CaptureFixture[str]) -> None:
    assert worker.main([]) == 2 and "usage: python -m profilers.run.worker RUN_DIR" in capsys.readouterr().err


def test_finish_abnormally_puts_every_scalar_on_disk_before_the_process_dies(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """In process, with a slow event writer (a loaded machine, a network disk): what is on disk at ``os._exit``
    must be every step's scalars, not only those the writer thread happened to reach."""
    from tensorboard.summary.writer.record_writer import RecordWriter

    from profilers.run import trainer_dist
    from profilers.run.trainer import StepRecord
    from profilers.run.trainer_record import RunRecorder

    write = RecordWriter.write
    monkeypatch.setattr(RecordWriter, "write", lambda self, data: (time.sleep(0.05), write(self, data))[1])
    state = worker.RunState(tmp_path, trainer_dist.DistInfo())
    state.spec = TrainingSpec(workload=MISBEHAVING.name, batch_size=8, steps=10)
    state.recorder = RunRecorder(tmp_path, 0, 10, tensorboard=True, leader=True)
    for step in range(4):
        state.recorder.record(StepRecord(step, 5.0, 1.0, 8, time.time_ns()), profiled=False)
    on_disk: dict[str, list[int]] = {}

    def exit_now(code: int) -> None:  # the moment the process would end: look at the disk, then unwind
        on_disk.update(tb_scalars(tmp_path))
        raise SystemExit(code)

    monkeypatch.setattr(worker.os, "_exit", exit_now)
    with pytest.raises(SystemExit):
        state.finish_abnormally("failed", "boom", worker.EXIT_FAILED)
    assert on_disk == {tag: [0, 1, 2, 3] for tag in STEP_SCALARS}
