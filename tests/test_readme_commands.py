"""The README's command lines, exactly as written, in a fresh checkout: no ``--store``, no ``STEPWISE_HOME``.

Each command starts in the checkout's folder, or, for ``launch`` of the user's own ``train.py``, in the user's
project folder, as a user runs them: the default store is ``./runs`` of the folder the command started in.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.fresh_checkout import fresh_checkout, readme_command, user_environment

pytestmark = pytest.mark.slow  # real runs of the sample workload and of a user's script
WAIT_S = 900  # an upper bound for a stuck command, not a timing assertion

TRAIN = textwrap.dedent('''
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
''')


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fresh_checkout(tmp_path_factory.mktemp("checkout"))


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=user_environment(), capture_output=True, text=True,
                          timeout=WAIT_S, stdin=subprocess.DEVNULL)


def _json(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    return json.loads(done.stdout)


def test_run_list_and_analyze_on_the_default_store(checkout: Path) -> None:
    run = _json(_run(readme_command(".venv/bin/python -m profilers run data_bound"), checkout))
    assert run["status"] == "ok" and run["steps_done"] > 0, run.get("error")
    assert Path(run["run_dir"]).parent == (checkout / "runs").resolve()  # ./runs of where it started
    listed = _run(readme_command(".venv/bin/python -m profilers list"), checkout)
    assert listed.returncode == 0 and run["run_id"] in listed.stdout, listed.stderr
    analyze = readme_command(".venv/bin/python -m advisors analyze PATH --json")
    report = _json(_run([run["run_dir"] if a == "PATH" else a for a in analyze], checkout))
    assert report["steps"] > 0 and report["step_time_ms"] > 0 and report["bottleneck"], report


def test_launch_of_your_own_script_from_your_project_folder(checkout: Path, tmp_path: Path) -> None:
    project = tmp_path / "my-project"
    project.mkdir()
    (project / "train.py").write_text(TRAIN)
    argv = readme_command(".venv/bin/python -m profilers launch --steps 5 --json -- python train.py")
    launched = _json(_run([str(checkout / argv[0]), *argv[1:]], project))
    assert launched["status"] == "ok" and launched["steps_done"] > 0, launched.get("error")
    assert Path(launched["run_dir"]).parent == (project / "runs").resolve()
    assert {s["name"] for s in launched["agent_settings"]} >= {"PYTHONPATH", "PYTHONUNBUFFERED"}
    stored = json.loads((Path(launched["run_dir"]) / "launch.json").read_text())
    assert stored["command"] == ["python", "train.py", "--epochs", "1"]  # the command, not the separator


def test_optimize_a_workload_on_the_default_store(checkout: Path) -> None:
    argv = readme_command(".venv/bin/python -m advisors optimize data_bound")
    rounds = argv.index("--rounds")
    argv[rounds + 1] = "1"  # one round of the README's command: its path end to end, a ladder's worth of time less
    result = _json(_run(argv, checkout))
    assert len(result["rounds"]) == 1 and result["rounds"][0]["outcome"], result
    assert (checkout / "runs" / result["experiment_id"]).is_dir()  # stored in ./runs of where it started
