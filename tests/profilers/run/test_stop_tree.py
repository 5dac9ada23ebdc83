"""Real command lines on real scripts (slow): a two-rank script that cannot find its GPUs reads
``failed`` with its own words in ``launch --json`` and ``optimize``; a script that takes too long to
its first step fails with the cause; and ``launch`` or ``optimize`` ended by SIGTERM mid-run (as
``timeout`` ends them) leave no process of the run behind — not its ranks, not its DataLoader
workers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from profilers.store.runs import RunStore

# an upper bound for a few real steps on a loaded 2-core machine, never a timing assertion
WAIT_S = 300.0
NO_GPUS = "Unable to locate sufficient 2 gpus to run this example. Exiting."
# minGPT-ddp's own check, on a machine without two GPUs: every rank prints and exits 1
MIN_GPT_LIKE = f'''
import sys
import torch
if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
    print("{NO_GPUS}")
    sys.exit(1)
'''
SLOW_START = """
import time
import torch
print("evaluating 400 batches before step 0", flush=True)
time.sleep(600)
"""
# a loop that runs until stopped, its batches from two DataLoader worker processes
WORKERS = """
import torch
from torch.utils.data import DataLoader, TensorDataset
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = DataLoader(TensorDataset(torch.randn(64, 8), torch.randn(64, 1)), batch_size=8,
                  num_workers=2, persistent_workers=True)
while True:
    for x, y in data:
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        opt.zero_grad()
"""


def _command(group: str, *args: str) -> list[str]:
    return [sys.executable, "-m", group, *args]


ENV = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}  # this checkout's code


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=WAIT_S, env=ENV)


def _script(tmp_path: Path, source: str) -> Path:
    path = tmp_path / "train.py"
    path.write_text(source)
    return path


@pytest.mark.slow
def test_a_rank_without_its_gpus_reads_failed_with_its_words(tmp_path: Path) -> None:
    script, store = _script(tmp_path, MIN_GPT_LIKE), tmp_path / "runs"
    done = _run(
        _command(
            "profilers",
            "launch",
            "--nproc-per-node",
            "2",
            "--json",
            "--store",
            str(store),
            "--",
            "python",
            str(script),
        ),
        tmp_path,
    )
    out = json.loads(done.stdout)
    assert done.returncode == 1 and out["status"] == "failed", out["error"]
    first = out["error"].splitlines()[0]
    assert first.startswith("rank ") and first.endswith(NO_GPUS), first
    done = _run(
        _command(
            "advisors",
            "optimize",
            "--rounds",
            "1",
            "--steps",
            "2",
            "--nproc-per-node",
            "2",
            "--store",
            str(store),
            "--",
            "python",
            str(script),
        ),
        tmp_path,
    )
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert done.returncode == 2 and len(errors) == 1, done.stderr
    assert errors[0].startswith("error: the baseline run failed: rank ") and NO_GPUS in errors[0]


@pytest.mark.slow
def test_no_first_step_in_time_fails_naming_the_cause(tmp_path: Path) -> None:
    """The wait counts from the start: the interpreter's start and torch's import are in it (seconds
    on a busy machine), so the tiny timeout leaves them room; the fast tests check the words on a
    fake clock."""
    script = _script(tmp_path, SLOW_START)
    done = _run(
        _command(
            "profilers",
            "launch",
            "--first-step-timeout",
            "20",
            "--store",
            str(tmp_path / "runs"),
            "--",
            "python",
            str(script),
        ),
        tmp_path,
    )
    assert done.returncode == 1
    said = "error: no first step within 20 s; the script printed: evaluating 400 batches before"
    assert said in done.stdout, done.stdout
    assert "waiting for the first step (10 s" in done.stderr  # its words by then: the fast tests


def _of_the_run(store: Path) -> list[psutil.Process]:
    """Live processes marked as the store's runs: their environment's run id, or the run folder in
    the command."""
    ids = {p.name for p in store.iterdir() if p.is_dir()} if store.is_dir() else set()
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            marked = proc.environ().get("STEPWISE_RUN_ID") in ids or str(store) in " ".join(
                proc.cmdline()
            )
        except psutil.Error:
            continue
        if marked and proc.pid != os.getpid():
            found.append(proc)
    return found


def _stepping(store: Path, steps: int) -> bool:
    for record in RunStore(store).list(limit=None):
        progress = (
            json.loads((Path(record.run_dir) / "progress.json").read_text())
            if (Path(record.run_dir) / "progress.json").is_file()
            else {}
        )
        if (progress.get("step") or 0) >= steps:
            return True
    return False


def _sigterm_mid_run(tmp_path: Path, cmd: list[str], store: Path) -> tuple[int, Any]:
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV
    )
    try:
        deadline = time.monotonic() + WAIT_S
        while not _stepping(store, 3):  # a few steps: the DataLoader's workers are running
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.2)
        workers = [p for p in _of_the_run(store) if p.pid != proc.pid]
        assert len(workers) >= 3, workers  # the script and its two workers at least
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    deadline = time.monotonic() + 10.0  # a killed process takes a moment to be reaped
    while _of_the_run(store) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _of_the_run(store), (_of_the_run(store), err)
    return proc.returncode, RunStore(store).list(limit=None)


@pytest.mark.slow
def test_launch_ended_by_sigterm_leaves_nothing_of_the_run(tmp_path: Path) -> None:
    store = tmp_path / "runs"
    code, records = _sigterm_mid_run(
        tmp_path,
        _command(
            "profilers",
            "launch",
            "--steps",
            "10000",
            "--store",
            str(store),
            "--",
            "python",
            str(_script(tmp_path, WORKERS)),
        ),
        store,
    )
    assert code == 128 + signal.SIGTERM
    assert [r.status.value for r in records] == ["killed"] and "SIGTERM" in (records[0].error or "")


@pytest.mark.slow
def test_optimize_ended_by_sigterm_leaves_nothing_of_the_run(tmp_path: Path) -> None:
    store = tmp_path / "runs"
    code, records = _sigterm_mid_run(
        tmp_path,
        _command(
            "advisors",
            "optimize",
            "--rounds",
            "1",
            "--steps",
            "10000",
            "--warmup",
            "1",
            "--store",
            str(store),
            "--",
            "python",
            str(_script(tmp_path, WORKERS)),
        ),
        store,
    )
    assert code == 128 + signal.SIGTERM
    assert any(r.status.value == "killed" and "SIGTERM" in (r.error or "") for r in records)
