"""``launch_boot.main`` in this process (fast lane): steps found by ``backward`` or ``optimizer.step`` calls,
N steps profiled then the script stopped, a script that raises, one without training, one shorter than the
window. ``test_launch.py`` launches the same scripts as real processes through the runner (slow), with what
needs a process of its own: DataLoader workers that must not outlive the run, stdout, the run store."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from profilers.run.agent_files import finish_launch
from stepwise_agent import boot as launch_boot
from stepwise_agent.boot import PROFILE_WAIT, PROFILE_WARMUP
from tests.profilers.run.test_launch import (
    HAND_WRITTEN_SGD,
    NO_TRAINING,
    RAISES,
    STEPS,
    _profiler_steps,
)

# A DataLoader in this process (no workers), torch.optim and gradient accumulation (2 backwards a step).
WITH_OPTIMIZER = """
import torch
from torch.utils.data import DataLoader, TensorDataset
x, y = torch.randn(512, 16), torch.randint(0, 4, (512,))
loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True, num_workers=0)
model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(50):
    for i, (xb, yb) in enumerate(loader):
        loss = torch.nn.functional.cross_entropy(model(xb), yb) / 2
        loss.backward()
        if i % 2 == 1:
            opt.step()
            opt.zero_grad()
"""


@pytest.fixture
def boot(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Runs ``source`` as ``train.py`` under ``launch_boot.main`` here; returns (exit code, result.json, run dir).
    ``sys.argv`` and ``sys.path`` (which the boot sets for the script) are restored afterwards."""
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(key, raising=False)

    def run(source: str) -> tuple[int, dict[str, Any], Path]:
        run_dir = tmp_path / "run"
        run_dir.mkdir()
        (tmp_path / "train.py").write_text(source)
        code = launch_boot.main([str(run_dir), str(STEPS), str(tmp_path / "train.py")])
        finish_launch(
            run_dir, code
        )  # the runner's part, in Stepwise's environment: result.json from the files
        return code, json.loads((run_dir / "result.json").read_text()), run_dir

    return run


def _steps(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]


@pytest.mark.parametrize(
    "source, mode, samples",
    [(WITH_OPTIMIZER, "optimizer", True), (HAND_WRITTEN_SGD, "backward", False)],
    ids=["optimizer", "hand-written-sgd"],
)
def test_a_script_is_profiled_for_n_steps_then_stopped(
    boot, source: str, mode: str, samples: bool
) -> None:
    code, result, run_dir = boot(source)
    assert code == 0 and result["status"] == "ok", result["error"]
    assert result["steps_done"] == PROFILE_WAIT + PROFILE_WARMUP + STEPS
    assert f"steps detected by {mode} calls" in result["warnings"]
    assert any(w.startswith(f"profiled {STEPS} step(s) of the script") for w in result["warnings"])
    assert _profiler_steps(run_dir) == [f"ProfilerStep#{i}" for i in range(2, 2 + STEPS)]
    steps = _steps(run_dir)
    assert [s["step"] for s in steps] == list(range(2 + STEPS)) and sum(
        s["profiled"] for s in steps
    ) == STEPS
    assert all(s["loss"] is not None for s in steps)
    assert (result["samples_per_s"] is not None) == samples
    if samples:
        assert {s["samples"] for s in steps} == {32}  # two micro-batches of 16 per optimizer step
    progress = json.loads((run_dir / "progress.json").read_text())
    assert progress["status"] == "ok" and progress["step"] == progress["total_steps"] == 2 + STEPS
    assert (run_dir / "injected.json").exists()


def test_a_script_that_raises_is_failed_with_its_steps(boot) -> None:
    code, result, run_dir = boot(RAISES)
    assert code == launch_boot.EXIT_FAILED and result["status"] == "failed"
    assert (
        "ValueError: bad batch" in result["error"]
        and result["steps_done"] == 4
        and len(_steps(run_dir)) == 4
    )


def test_a_script_without_training_is_failed(boot) -> None:
    code, result, _ = boot(NO_TRAINING)
    assert code == launch_boot.EXIT_FAILED and "no training step was detected" in result["error"]


def test_a_script_shorter_than_the_window_ends_ok_with_a_warning(boot) -> None:
    code, result, run_dir = boot(HAND_WRITTEN_SGD.replace("range(1000)", "range(3)"))
    assert code == 0 and result["status"] == "ok" and result["steps_done"] == 3
    assert any("before the 5 requested" in w for w in result["warnings"])
    assert _profiler_steps(run_dir) == ["ProfilerStep#2", "ProfilerStep#3"]
    assert any("ProfilerStep#3, is the script's ending" in w for w in result["warnings"])


def test_usage_without_a_target(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert launch_boot.main([str(tmp_path), "3"]) == 2 and "usage:" in capsys.readouterr().err


def test_progress_is_written_a_few_times_a_second_not_every_step(
    boot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its atomic write costs more than a small model's whole step: while the steps run it is written
    at the first and last step, at each phase change and at most every PROGRESS_EVERY_S between, and
    the file at the end still says the last step."""
    from stepwise_agent import recorder

    written: list[tuple[int, str]] = []
    real = recorder.write_json_atomic

    def counting(path: Path, obj: Any) -> None:
        if path.name == "progress.json":
            written.append((obj["step"], obj["phase"]))
        real(path, obj)

    monkeypatch.setattr(recorder, "write_json_atomic", counting)
    monkeypatch.setattr(recorder, "PROGRESS_EVERY_S", 3600.0)  # nothing due by the clock
    code, result, run_dir = boot(WITH_OPTIMIZER)
    assert code == 0 and result["status"] == "ok"
    steps = [s for s, _ in written]
    total = 2 + STEPS
    assert steps[0] == 1 and steps[-1] == total and len(written) < total, written
    phases = [p for _, p in written]
    assert all(a != b for a, b in zip(phases, phases[1:-1])), written  # one write per phase change
    progress = json.loads((run_dir / "progress.json").read_text())
    assert progress["step"] == total and progress["status"] == "ok"
