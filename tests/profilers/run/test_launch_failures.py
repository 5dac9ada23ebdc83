"""Failures are failures (issue 20, item 7), and the script runs in the user's interpreter (item 2).

Slow tests start real processes: a plain script that imports a package only the second environment has runs
there under ``optimize -- USER_PYTHON script``; a script that cannot import, one that raises at step 2 and a
two-rank script whose rank 1 raises each make ``optimize`` exit 2 with the script's own error line; a profiled
step that allocates past a limit the test sets ends ``out_of_memory``, named, with advice. Fast tests check the
interpreter rule and the pieces of the verdict on hand-written run folders.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from advisors.experiments.optimize import last_error_line
from cli.advisors import main as advisors_main
from cli.profilers import main as profilers_main
from profilers.errors import RunError
from profilers.run import interpreter
from profilers.run.agent_files import LaunchMonitor, finish_launch, killed_for_memory
from profilers.run.launch import interpreter_for, launch
from profilers.run.records import RunStatus
from profilers.store.runs import RunStore
from tests.user_env import user_python

STEP_LOOP = """
import torch
model = torch.nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(1000):
{body}
    loss = model(torch.randn(8, 16)).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
"""
USER_ONLY = "import only_in_user_env\n" + STEP_LOOP.format(body="    pass")
CANNOT_IMPORT = "import a_module_nobody_has_42\n" + STEP_LOOP.format(body="    pass")
RAISES_AT_2 = STEP_LOOP.format(
    body="    if step == 2:\n        raise ValueError('shapes do not match at step 2')"
)
TWO_RANKS = """
import torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(1000):
    if rank == 1 and step == 2:
        raise RuntimeError("rank one broke at step 2")
    model(torch.randn(4, 8)).sum().backward()
    opt.step()
    opt.zero_grad()
"""
# From the first profiled step on, keep 32 MiB chunks (touched, so resident) until the guard stops the step.
GROWS = STEP_LOOP.format(
    body="""    if step >= 2:
        import time
        hoard = []
        for _ in range(100):
            hoard.append(torch.ones(8 * 2**20))
            time.sleep(0.02)"""
)
# The test sets an address-space limit in the child: the allocation fails inside the profiled step.
RLIMITED = STEP_LOOP.format(
    body="""    if step == 2:
        import resource
        vm = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (vm + 256 * 2**20, resource.getrlimit(resource.RLIMIT_AS)[1]))
        torch.empty(2**31, dtype=torch.uint8).fill_(1)"""
)


def _optimize(
    tmp_path: Path,
    source: str,
    capsys: pytest.CaptureFixture[str],
    *extra: str,
    python: str = "python",
) -> tuple[int, dict[str, Any], str]:
    script = tmp_path / "train.py"
    script.write_text(source)
    code = advisors_main(
        [
            "optimize",
            "--rounds",
            "1",
            "--trials",
            "3",
            "--steps",
            "2",
            "--warmup",
            "1",
            "--json",
            "--timeout",
            "300",
            "--store",
            str(tmp_path / "runs"),
            *extra,
            "--",
            python,
            str(script),
        ]
    )
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip() else {}, err


# -- the interpreter rule (fast) ---------------------------------------------------------------------------------
def test_python_is_the_one_on_path_and_a_path_is_kept_as_given(tmp_path: Path) -> None:
    env_bin = tmp_path / "env" / "bin"
    env_bin.mkdir(parents=True)
    fake = env_bin / "python"
    fake.symlink_to(sys.executable)  # a venv's python is a link: the link itself must be kept
    assert interpreter.resolve("python", {"PATH": f"{env_bin}:/usr/bin"}) == str(fake)
    assert interpreter.resolve(str(fake)) == str(fake)
    assert interpreter_for(["python", "train.py"], python=str(fake)) == str(fake)
    assert interpreter_for(["train.py"]) == sys.executable
    with pytest.raises(RunError, match="no such Python interpreter"):
        interpreter.resolve(str(tmp_path / "nope" / "python"))
    with pytest.raises(RunError, match="not found on PATH"):
        interpreter.resolve("python3.99", {"PATH": str(env_bin)})


def test_an_interpreter_without_torch_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "train.py").write_text("pass\n")
    bare = tmp_path / "bare" / "python3"
    bare.parent.mkdir()
    bare.write_text("#!/bin/sh\necho 'ModuleNotFoundError: No module named torch' >&2\nexit 1\n")
    bare.chmod(0o755)
    code = profilers_main(
        ["launch", "--store", str(tmp_path / "runs"), "--", str(bare), str(tmp_path / "train.py")]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and "not a working Python interpreter" in err
    code = profilers_main(
        [
            "launch",
            "--store",
            str(tmp_path / "runs"),
            "--python",
            str(tmp_path / "missing"),
            "--",
            "python",
            str(tmp_path / "train.py"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.count("error: ") == 1 and "no such Python interpreter" in err


def test_a_real_python_without_torch_is_named(tmp_path: Path) -> None:
    system = Path("/usr/bin/python3")
    if (
        not system.is_file()
        or subprocess.run([str(system), "-c", "import torch"], capture_output=True).returncode == 0
    ):
        pytest.skip("no interpreter without torch on this machine")
    with pytest.raises(RunError, match="has no torch .*ModuleNotFoundError"):
        interpreter.probe(str(system))


# -- verdicts from run folders (fast) ------------------------------------------------------------------------
def test_the_first_rank_that_raised_makes_the_run_failed_not_killed(tmp_path: Path) -> None:
    for rank, t, msg in [(1, 10.0, "first"), (0, 11.0, "second")]:
        (tmp_path / f"rank{rank}.error.json").write_text(
            json.dumps(
                {
                    "rank": rank,
                    "type": "RuntimeError",
                    "message": msg,
                    "traceback": "Traceback…",
                    "t_unix": t,
                }
            )
        )
    result = finish_launch(tmp_path, 1)
    assert result is not None and result.status is RunStatus.FAILED
    assert result.error is not None and result.error.startswith(
        "rank 1 raised RuntimeError: first (1 other rank"
    )
    assert json.loads((tmp_path / "result.json").read_text())["status"] == "failed"


def test_ranks_that_ended_before_writing_a_result_keep_the_world_size_asked_for(
    tmp_path: Path,
) -> None:
    store = RunStore(tmp_path)
    record = store.create(
        "launch", "t.py", files={"launch.json": {"command": ["python", "t.py"]}}, world_size=2
    )
    assert record.world_size == 2
    assert (
        store.salvage(record.run_id, RunStatus.FAILED, "a rank exited with code 1").world_size == 2
    )


def test_a_sigkill_near_the_memory_limit_is_out_of_memory(tmp_path: Path) -> None:
    monitor = LaunchMonitor(tmp_path, {"STEPWISE_MEMORY_LIMIT_MB": "1000"})
    monitor.peak_rss_mb = 950.0
    assert killed_for_memory(-signal.SIGKILL, monitor) and not killed_for_memory(1, monitor)
    result = finish_launch(tmp_path, -signal.SIGKILL, monitor)
    assert (
        result is not None
        and result.status is RunStatus.OUT_OF_MEMORY
        and result.peak_memory_mb == 950.0
    )
    assert "950 MiB" in (result.error or "") and "profile fewer steps" in (result.error or "")
    monitor.peak_rss_mb = 100.0  # far from the limit: a plain kill, left to the runner's own words
    (tmp_path / "result.json").unlink()
    assert finish_launch(tmp_path, -signal.SIGKILL, monitor) is None


def test_the_error_line_is_the_scripts_own() -> None:
    tb = 'Traceback (most recent call last):\n  File "t.py", line 3\nValueError: shapes do not match\n'
    assert last_error_line(tb) == "ValueError: shapes do not match"
    assert (
        last_error_line("rank 1 raised RuntimeError: x\nTraceback…\ntorch.OutOfMemoryError: CUDA")
        == "torch.OutOfMemoryError: CUDA"
    )
    assert last_error_line("the worker was killed by SIGKILL") == "the worker was killed by SIGKILL"


# -- real processes (slow) -------------------------------------------------------------------------------------
@pytest.mark.slow
def test_optimize_runs_the_script_in_the_users_interpreter(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    python = str(user_python())
    # a check (one patched run, no verdict asked): where the runs ran is the point, not their speed
    code, out, err = _optimize(tmp_path, USER_ONLY, capsys, "--check", python=python)
    assert code == 0, err
    store = RunStore(tmp_path / "runs")
    trials = store.list(kind="launch", limit=None, trials=True)
    assert trials, "no trial run stored"
    for record in trials:
        launched = json.loads((Path(record.run_dir) / "launch.json").read_text())
        assert launched["interpreter"] == python and launched["torch_version"].startswith("2.")
        agent = json.loads((Path(record.run_dir) / "agent.json").read_text())
        assert (
            agent["interpreter"] == python and agent["torch_version"] == launched["torch_version"]
        )
        assert record.status is RunStatus.OK
    # the same script in Stepwise's own interpreter cannot import the user's package: a failed baseline
    own = tmp_path / "own"
    own.mkdir()
    code, out, err = _optimize(own, USER_ONLY, capsys, python=sys.executable)
    assert code == 2 and "ModuleNotFoundError: No module named 'only_in_user_env'" in err


@pytest.mark.slow
@pytest.mark.parametrize(
    "source, line",
    [
        (CANNOT_IMPORT, "ModuleNotFoundError: No module named 'a_module_nobody_has_42'"),
        (RAISES_AT_2, "ValueError: shapes do not match at step 2"),
    ],
    ids=["cannot-import", "raises-at-step-2"],
)
def test_a_failing_baseline_exits_2_with_the_scripts_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], source: str, line: str
) -> None:
    code, out, err = _optimize(tmp_path, source, capsys)
    assert code == 2
    errors = [x for x in err.splitlines() if x.startswith("error: ")]
    assert len(errors) == 1 and line in errors[0] and "failed" in errors[0]
    assert out["status"] == "failed" and line in out["stderr_tail"] and out["total_speedup"] is None


@pytest.mark.slow
def test_a_rank_that_raises_is_failed_with_its_exception(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _optimize(tmp_path, TWO_RANKS, capsys, "--nproc-per-node", "2")
    assert code == 2, err
    assert "RuntimeError: rank one broke at step 2" in err and out["status"] == "failed"
    run_dir = Path(out["run_dir"])
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == "failed" and result["error"].startswith(
        "rank 1 raised RuntimeError: rank one broke"
    )
    assert json.loads((run_dir / "rank1.error.json").read_text())["steps_done"] == 2
    logs = list(
        (run_dir / "ranks").rglob("stderr.log")
    )  # torchrun's --log-dir: every rank's stderr kept
    assert len(logs) == 2 and any("rank one broke" in p.read_text() for p in logs)


@pytest.mark.slow
def test_the_memory_guard_ends_a_growing_profiled_step_as_out_of_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STEPWISE_MEMORY_LIMIT_MB", "1200")
    (tmp_path / "train.py").write_text(GROWS)
    handle, result = launch(
        ["python", str(tmp_path / "train.py")], RunStore(tmp_path / "runs"), steps=3, timeout_s=300
    )
    assert result.status is RunStatus.OUT_OF_MEMORY, result.error
    assert "memory guard ended the run" in (result.error or "")
    assert "smaller batch" in (result.error or "") and "profile fewer steps" not in (
        result.error or ""
    )
    assert result.peak_memory_mb is not None
    assert result.peak_memory_mb > 1200
    assert any("memory guard" in w for w in result.warnings)
    guard = json.loads((Path(handle.run_dir) / "memory_guard.json").read_text())
    assert guard["run_limit_mb"] == 1200 and guard["rss_mb"] > 1200 and guard["action"] == "end_run"
    # the growth began with the profiler recording: the profile was cut first, and the script grew on by itself
    assert "the script's own memory" in (result.error or "") and result.profile_cut is None


@pytest.mark.slow
def test_an_allocation_past_the_childs_address_limit_is_out_of_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _optimize(tmp_path, RLIMITED, capsys)
    assert code == 2 and out["status"] == "out_of_memory"
    errors = [x for x in err.splitlines() if x.startswith("error: ")]
    assert (
        len(errors) == 1 and "can't allocate memory" in errors[0] and "out of memory" in errors[0]
    )
    assert "profile fewer steps" in out["run_error"]
