"""``python -m profilers``: the JSON contract, exit codes, and one-line errors (never a traceback)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

CONTRACT = {"run_id", "run_dir", "status", "step_time_ms", "samples_per_s", "peak_memory_mb", "steps_done", "error"}
WAIT_S = 300


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "profilers", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=WAIT_S)


def _one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:"), proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    return lines[0]


@pytest.mark.parametrize("args, says", [
    (["run", "no_such_workload"], "unknown workload"),
    (["run", "compute_bound", "--set", "no_such_field=1"], "no_such_field"),
    (["run", "compute_bound", "--set", "batch_size"], "batch_size"),
    (["run", "compute_bound", "--size", "gigantic"], "gigantic"),
    (["run", "compute_bound", "--steps", "many"], "many"),
    (["launch", "--", "bash", "train.sh"], "python"),
    (["launch", "--", "python", "missing.py"], "missing.py"),
    (["frobnicate"], "frobnicate"),
    ([], "required"),
])
def test_bad_usage_is_one_error_line_and_exit_2(tmp_path: Path, args: list[str], says: str) -> None:
    assert says in _one_error_line(_cli(*args, "--store", str(tmp_path / "store"), cwd=tmp_path)
                                   if args else _cli(cwd=tmp_path))


def test_run_launch_and_list_print_the_json_contract(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    ok = _cli("run", "compute_bound", "--steps", "4", "--json", "--store", store, cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    run = json.loads(ok.stdout)
    assert CONTRACT <= set(run) and run["status"] == "ok" and run["steps_done"] == 4 and run["step_time_ms"] > 0
    assert Path(run["run_dir"]).is_dir()

    oom = _cli("run", "compute_bound", "--set", "memory_budget_mb=64", "--json", "--store", store, cwd=tmp_path)
    assert oom.returncode == 1 and json.loads(oom.stdout)["status"] == "out_of_memory"

    (tmp_path / "train.py").write_text(textwrap.dedent('''
        import torch
        w = torch.randn(8, 2, requires_grad=True)
        for _ in range(100):
            (w ** 2).sum().backward()
            with torch.no_grad():
                w -= 0.01 * w.grad
                w.grad = None
    '''))
    launched = _cli("launch", "--steps", "2", "--json", "--store", store, "--", "python", "train.py", cwd=tmp_path)
    assert launched.returncode == 0, launched.stderr
    assert set(json.loads(launched.stdout)) == set(run)  # launch --json prints the same JSON as run --json

    listed = _cli("list", "--json", "--store", store, cwd=tmp_path)
    rows = json.loads(listed.stdout)
    assert [r["kind"] for r in rows] == ["launch", "run", "run"]
    assert [r["status"] for r in rows] == ["ok", "out_of_memory", "ok"]
    assert run["run_id"] in _cli("list", "--store", store, cwd=tmp_path).stdout


def test_text_mode_shows_progress_on_stderr(tmp_path: Path) -> None:
    proc = _cli("run", "compute_bound", "--steps", "3", "--store", str(tmp_path / "store"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "3/3" in proc.stderr and proc.stdout.startswith("ok: 3 steps")
