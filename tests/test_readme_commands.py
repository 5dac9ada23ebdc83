"""The README's command lines, exactly as written, in a fresh checkout: no ``--store``, no ``STEPWISE_HOME``.

Each command starts in the checkout's folder, or, for ``launch`` of the user's own ``train.py``, in the user's
project folder, as a user runs them: the default store is ``./runs`` of the folder the command started in.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest

from profilers.run.records import RunStatus
from profilers.store.runs import RunStore
from tests.fresh_checkout import fresh_checkout, readme_command, user_environment

pytestmark = pytest.mark.slow  # real runs of the sample workload and of a user's script
WAIT_S = 900  # an upper bound for a stuck command, not a timing assertion

TRAIN = textwrap.dedent("""
    import argparse, torch
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=1)
    args = p.parse_args()
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 32), torch.randn(64, 1)
    for epoch in range(args.epochs):
        for step in range(40):
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
""")


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fresh_checkout(tmp_path_factory.mktemp("checkout"))


def _argv(line: list[str], checkout: Path) -> list[str]:
    """A README line as the shell runs it: ``stepwise`` is the checkout's ``.venv/bin/stepwise`` (what
    ``scripts/setup.sh`` puts on ``PATH``), ``.venv/bin/…`` the checkout's."""
    head = line[0]
    if head == "stepwise":
        head = str(checkout / ".venv" / "bin" / "stepwise")
    elif head.startswith(".venv/"):
        head = str(checkout / head)
    return [head, *line[1:]]


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        cwd=cwd,
        env=user_environment(),
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        stdin=subprocess.DEVNULL,
    )


def _ok(done: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert done.returncode == 0, (done.args, done.returncode, done.stderr[-3000:])
    return done


def _store(folder: Path) -> RunStore:
    return RunStore(folder / "runs")


def test_run_list_and_analyze_on_the_default_store(checkout: Path) -> None:
    argv = _argv(readme_command(".venv/bin/python -m profilers run data_bound"), checkout)
    run = json.loads(_ok(_run(argv, checkout)).stdout)
    assert run["status"] == "ok" and run["steps_done"] > 0, run.get("error")
    assert (
        Path(run["run_dir"]).parent == (checkout / "runs").resolve()
    )  # ./runs of where it started
    listed = json.loads(
        _ok(_run(_argv(readme_command("stepwise list"), checkout), checkout)).stdout
    )
    assert run["run_id"] in {r["run_id"] for r in listed}
    analyze = _argv(readme_command("stepwise analyze trace.json.gz --json"), checkout)
    report = json.loads(
        _ok(_run([run["run_dir"] if a == "trace.json.gz" else a for a in analyze], checkout)).stdout
    )
    assert report["steps"] > 0 and report["step_time_ms"] > 0 and report["bottleneck"], report


def test_launch_of_your_own_script_from_your_project_folder(checkout: Path, tmp_path: Path) -> None:
    project = tmp_path / "my-project"
    project.mkdir()
    (project / "train.py").write_text(TRAIN)
    argv = _argv(
        readme_command("stepwise launch --steps 5 -- python train.py --epochs 1"), checkout
    )
    _ok(_run(argv, project))
    (launched,) = _store(project).list(kind="launch")  # ./runs of the project's folder
    assert launched.status is RunStatus.OK, launched
    stored = json.loads((Path(launched.run_dir) / "launch.json").read_text())
    assert stored["command"] == [
        "python",
        "train.py",
        "--epochs",
        "1",
    ]  # the command, not the separator
    settings = json.loads((Path(launched.run_dir) / "agent_settings.json").read_text())
    assert {s["name"] for s in settings} >= {"PYTHONPATH", "PYTHONUNBUFFERED"}


def test_optimize_a_workload_on_the_default_store(checkout: Path) -> None:
    argv = _argv(readme_command(".venv/bin/python -m advisors optimize data_bound"), checkout)
    rounds = argv.index("--rounds")
    argv[rounds + 1] = (
        "1"  # one round of the README's command: its path end to end, a ladder's worth of time less
    )
    done = _run(argv, checkout)
    # 3: the round could not be judged (other programs' load on these 2 cores), as right a verdict as a keep;
    # whether the fix is kept on a quiet machine is tests/advisors/experiments/test_script_optimize.py's
    assert done.returncode in (0, 3), (done.args, done.returncode, done.stderr[-3000:])
    said = done.stdout + done.stderr
    assert done.returncode == 0 or "inconclusive" in said, said[-2000:]
    assert "round 1" in said, done.stdout[-2000:]
    (ladder,) = _store(checkout).list(kind="experiment")  # stored in ./runs of where it started
    assert ladder.status.finished, ladder
