"""``python -m profilers``: the JSON contract, exit codes, and one-line errors (never a traceback).

In process (fast): ``cli.profilers.main`` with the launch replaced by one that returns a given result, so the
argument handling, settings, JSON, exit codes, progress bar and run list are checked without training.
In real subprocesses (slow): the same contract with real runs and a launched script, end to end."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import pytest

from cli import profilers as cli
from profilers.run import handle as handles, launch
from profilers.run.records import RunResult, RunStatus
from profilers.run.script_spec import ScriptSpec
from profilers.store.runs import RunStore
from tests.app.fake_runs import fake_run

CONTRACT = {
    "run_id",
    "run_dir",
    "status",
    "step_time_ms",
    "samples_per_s",
    "peak_memory_mb",
    "steps_done",
    "error",
}
WAIT_S = 300
USAGE_ERRORS = [
    (["run", "no_such_workload"], "unknown workload"),
    (["run", "compute_bound", "--set", "no_such_field=1"], "no_such_field"),
    (["run", "compute_bound", "--set", "batch_size"], "batch_size"),
    (["run", "compute_bound", "--size", "gigantic"], "gigantic"),
    (["run", "compute_bound", "--steps", "many"], "many"),
    (["launch", "--", "bash", "train.sh"], "python"),
    (["launch", "--", "python", "missing.py"], "missing.py"),
    (["frobnicate"], "frobnicate"),
    ([], "required"),
]


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "profilers", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )


def _one_error_line(code: int | str | None, stdout: str, stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error:"), stderr
    assert "Traceback" not in stderr and stdout == ""
    return lines[0]


def _main(argv: list[str]) -> int | str | None:
    try:
        return cli.main(argv)
    except SystemExit as exit_:  # argparse's usage errors
        return exit_.code


class FakeRunner:
    """``launch.start_script`` / ``launch.start_launch`` / ``handle.follow`` that record what they were given and end
    with ``result``; ``follow`` reports two progress updates as a live run would, or raises ``interrupt``."""

    def __init__(self, tmp_path: Path, result: RunResult, interrupt: bool = False) -> None:
        self.tmp_path, self.result, self.interrupt = tmp_path, result, interrupt
        self.specs: list[ScriptSpec] = []
        self.launched: list[tuple[list[str], int]] = []
        self.cancelled: list[str] = []

    def _handle(self, run_id: str) -> Any:
        return SimpleNamespace(
            run_id=run_id,
            run_dir=self.tmp_path / run_id,
            cancel=self.cancelled.append,
            wait=lambda: self.result,
        )

    def start(self, spec: ScriptSpec, store: RunStore, label: str | None = None, **_: Any) -> Any:
        self.specs.append(spec)
        return self._handle("run-1")

    def start_launch(
        self, command: list[str], store: RunStore, steps: int, label: str | None, **_: Any
    ) -> Any:
        self.launched.append((command, steps))
        return self._handle("launch-1")

    def follow(
        self, handle: Any, on_progress: Callable[[dict], None] | None, timeout_s: float | None
    ) -> RunResult:
        if self.interrupt:
            raise KeyboardInterrupt
        for step in (1, self.result.steps_done):
            if on_progress is not None:
                on_progress(
                    {"step": step, "total_steps": self.result.steps_done, "loss": 2.5, "eta_s": 1.0}
                )
        return self.result


@pytest.fixture
def fake_runner(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[..., FakeRunner]:
    def install(status: RunStatus = RunStatus.OK, interrupt: bool = False) -> FakeRunner:
        result = RunResult(
            status=status,
            steps_done=3,
            step_time_ms=12.5,
            samples_per_s=2560.0,
            peak_memory_mb=310.0,
            error=None if status is RunStatus.OK else "over budget",
        )
        fake = FakeRunner(tmp_path, result, interrupt)
        monkeypatch.setattr(launch, "start_script", fake.start)
        monkeypatch.setattr(handles, "follow", fake.follow)
        monkeypatch.setattr(launch, "start_launch", fake.start_launch)
        return fake

    return install


@pytest.mark.parametrize("args, says", USAGE_ERRORS)
def test_bad_usage_is_one_error_line_and_exit_2(
    tmp_path: Path,
    args: list[str],
    says: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # "missing.py" is looked up here
    code = _main([*args, "--store", str(tmp_path / "store")] if args else [])
    out, err = capsys.readouterr()
    assert says in _one_error_line(code, out, err)


def test_the_entry_point_prints_one_error_line_in_a_real_process(tmp_path: Path) -> None:
    """``python -m profilers`` reaches ``cli.profilers.main`` (a usage error: no torch import, ~0.5 s CPU)."""
    proc = _cli("frobnicate", cwd=tmp_path)
    assert "invalid choice: 'frobnicate'" in _one_error_line(
        proc.returncode, proc.stdout, proc.stderr
    )


def test_run_json_carries_the_contract_and_the_spec_overrides(
    fake_runner, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = fake_runner()
    assert (
        cli.main(["run", "compute_bound", "--steps", "4", "--set", "batch_size=8", "--json"]) == 0
    )
    out, err = capsys.readouterr()
    run = json.loads(out)
    assert (
        CONTRACT <= set(run)
        and run["status"] == "ok"
        and run["steps_done"] == 3
        and run["step_time_ms"] == 12.5
    )
    assert (run["run_id"], run["run_dir"]) == ("run-1", str(tmp_path / "run-1"))
    assert err == ""  # --json: no progress bar
    (spec,) = (
        fake.specs
    )  # the workload's own script, its settings as its flags; the launcher stops it at 4 steps
    assert spec.command == (
        "python",
        "-m",
        "sample_runs.train",
        "compute_bound",
        "--batch-size",
        "8",
    )
    assert (spec.warmup_steps, spec.measure_steps, spec.profile_steps) == (
        1,
        1,
        1,
    ) and spec.total_steps == 4


def test_a_run_that_did_not_end_ok_still_prints_its_json_and_exits_1(
    fake_runner, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_runner(RunStatus.OUT_OF_MEMORY)
    assert cli.main(["run", "compute_bound", "--set", "memory_budget_mb=64", "--json"]) == 1
    run = json.loads(capsys.readouterr().out)
    assert run["status"] == "out_of_memory" and run["error"] == "over budget"


def test_launch_json_is_the_same_contract_as_run(
    fake_runner, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = fake_runner()
    assert cli.main(["run", "compute_bound", "--json"]) == 0
    run = json.loads(capsys.readouterr().out)
    assert cli.main(["launch", "--steps", "2", "--json", "--", "python", "train.py"]) == 0
    launched = json.loads(capsys.readouterr().out)
    assert set(launched) == set(run) and launched["run_id"] == "launch-1"
    assert fake.launched == [
        (["--", "python", "train.py"], 2)
    ]  # argparse keeps the "--"; start_launch drops it


def test_text_mode_shows_progress_on_stderr_and_figures_on_stdout(
    fake_runner, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_runner()
    assert cli.main(["run", "compute_bound", "--steps", "3"]) == 0
    out, err = capsys.readouterr()
    assert "1/3" in err and "3/3" in err and "loss 2.5" in err and f"[{'#' * cli.BAR_WIDTH}]" in err
    assert out.startswith("ok: 3 steps, 12.50 ms/step, 2560.0 samples/s, peak 310 MiB")
    assert "run folder:" in out


def test_ctrl_c_cancels_the_run_and_reports_how_it_ended(
    fake_runner, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = fake_runner(RunStatus.KILLED, interrupt=True)
    assert cli.main(["run", "compute_bound", "--json"]) == 1
    assert fake.cancelled == ["interrupted from the keyboard"]
    assert json.loads(capsys.readouterr().out)["status"] == "killed"


def test_list_shows_the_stored_runs_newest_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = RunStore(tmp_path / "store")
    first = fake_run(store, label="first")
    fake_run(store, label="second", status=RunStatus.OUT_OF_MEMORY)
    fake_run(store, label="script", kind="launch", files={"launch.json": {"argv": ["train.py"]}})
    assert cli.main(["list", "--json", "--store", str(store.root)]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["kind"], r["label"], r["status"]) for r in rows] == [
        ("launch", "script", "ok"),
        ("run", "second", "out_of_memory"),
        ("run", "first", "ok"),
    ]
    assert cli.main(["list", "--kind", "run", "--store", str(store.root)]) == 0
    text = capsys.readouterr().out
    assert first.run_id in text and "script" not in text


@pytest.mark.slow
def test_run_launch_and_list_print_the_json_contract(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    ok = _cli("run", "compute_bound", "--steps", "4", "--json", "--store", store, cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    run = json.loads(ok.stdout)
    assert (
        CONTRACT <= set(run)
        and run["status"] == "ok"
        and run["steps_done"] == 4
        and run["step_time_ms"] > 0
    )
    assert Path(run["run_dir"]).is_dir()

    oom = _cli(
        "run",
        "compute_bound",
        "--set",
        "memory_budget_mb=64",
        "--json",
        "--store",
        store,
        cwd=tmp_path,
    )
    assert oom.returncode == 1 and json.loads(oom.stdout)["status"] == "out_of_memory"

    (tmp_path / "train.py").write_text(
        textwrap.dedent("""
        import torch
        w = torch.randn(8, 2, requires_grad=True)
        for _ in range(100):
            (w ** 2).sum().backward()
            with torch.no_grad():
                w -= 0.01 * w.grad
                w.grad = None
    """)
    )
    launched = _cli(
        "launch",
        "--steps",
        "2",
        "--json",
        "--store",
        store,
        "--",
        "python",
        "train.py",
        cwd=tmp_path,
    )
    assert launched.returncode == 0, launched.stderr
    assert set(json.loads(launched.stdout)) == set(
        run
    )  # launch --json prints the same JSON as run --json

    listed = _cli("list", "--json", "--store", store, cwd=tmp_path)
    rows = json.loads(listed.stdout)
    assert [r["kind"] for r in rows] == [
        "launch",
        "launch",
        "launch",
    ]  # a workload is a launched script too
    assert [r["status"] for r in rows] == ["ok", "out_of_memory", "ok"]
    assert run["run_id"] in _cli("list", "--store", store, cwd=tmp_path).stdout


@pytest.mark.slow
def test_text_mode_shows_progress_on_stderr(tmp_path: Path) -> None:
    proc = _cli(
        "run", "compute_bound", "--steps", "3", "--store", str(tmp_path / "store"), cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert "3/3" in proc.stderr and proc.stdout.startswith("ok: 3 steps")
