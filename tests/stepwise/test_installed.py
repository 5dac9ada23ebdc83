"""Stepwise installed as a user installs it: a fresh venv, ``pip install -c constraints.txt <a copy of the repo>``
(not editable), nothing reused from an earlier run. Then, from a user's project folder that has its own ``app.py``,
``cli/``, ``reports.py``, ``profilers.py``:

- ``stepwise --help`` and ``stepwise analyze TRACE --json`` work (the JSON contract's fields);
- ``import app`` there is the user's, and outside Stepwise our packages are not importable at all;
- the wheel claims two top-level names, ``stepwise`` and ``stepwise_agent``;
- a command whose extra is missing says which (``stepwise[samples]``); with the extra installed, ``stepwise run``
  starts its worker in that venv and the run ends ``ok``;
- ``stepwise launch -- python train.py`` profiles a script of that folder, which imports its own ``app``.

Slow (minutes: torch and the analysis libraries are installed from this machine's wheels and index).
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
OURS = ("app", "cli", "reports", "advisors", "profilers", "sample_runs")
USERS = {
    "app.py": "WHO = 'user'\n",
    "cli/__init__.py": "WHO = 'user'\n",
    "reports.py": "WHO = 'user'\n",
    "profilers.py": "WHO = 'user'\n",
}
ANALYZE_FIELDS = (
    "device",
    "ranks",
    "steps",
    "step_time_ms",
    "profiled_step_time_ms",
    "breakdown",
    "bottleneck",
    "confidence",
    "findings",
)
INSTALL_TIMEOUT_S = 1800  # a generous bound on a busy machine, not a budget
_SKIP = shutil.ignore_patterns(
    ".git",
    ".venv*",
    "runs",
    "build",
    "*.egg-info",
    "__pycache__",
    ".mypy_cache",
    ".pytest_cache",
    ".hypothesis",
    "test-artifacts",
    "bench-out",
    ".stepwise",
)


@dataclass(frozen=True)
class Installed:
    venv: Path
    project: Path  # the user's project folder, with modules named like ours
    empty: Path  # a folder with nothing in it

    def run(
        self, *argv: str, cwd: Path | None = None, timeout: float = 600
    ) -> subprocess.CompletedProcess[str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
        }
        env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        return subprocess.run(
            list(argv),
            cwd=cwd or self.project,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def pip_install(self, target: str, cwd: Path) -> None:
        done = self.run(
            str(self.venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-c",
            str(cwd / "constraints.txt"),
            target,
            cwd=cwd,
            timeout=INSTALL_TIMEOUT_S,
        )
        assert done.returncode == 0, done.stderr[-4000:]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("installed")
    source = (
        root / "source"
    )  # the build writes build/ and *.egg-info beside the sources: never into the checkout
    shutil.copytree(REPO, source, ignore=_SKIP)
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(root / "venv")], check=True, timeout=300)
    project, empty = root / "project", root / "empty"
    empty.mkdir()
    for name, text in USERS.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)
    env = Installed(root / "venv", project, empty)
    env.pip_install(".", cwd=source)
    return env


def test_the_wheel_claims_two_top_level_names(installed: Installed) -> None:
    done = installed.run(
        "python",
        "-c",
        "from importlib.metadata import distribution as d; "
        "print(d('stepwise').read_text('top_level.txt'))",
    )
    assert done.returncode == 0, done.stderr
    assert set(done.stdout.split()) == {"stepwise", "stepwise_agent"}


def test_help(installed: Installed) -> None:
    done = installed.run("stepwise", "--help")
    assert done.returncode == 0, done.stderr
    for name in ("analyze", "optimize", "compare", "launch", "run", "list", "dashboard"):
        assert f"\n  {name} " in done.stdout


@pytest.mark.parametrize("how", [("stepwise",), ("python", "-m", "stepwise")])
def test_analyze_json_from_a_folder_with_modules_named_like_ours(
    installed: Installed, shared_traces: Path, how: tuple[str, ...]
) -> None:
    trace = shared_traces / "host" / "tracelens_h100_bert-small.json.gz"
    done = installed.run(
        *how, "analyze", str(trace), "--json"
    )  # `python -m` puts this folder first on the path
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert set(ANALYZE_FIELDS) <= set(result)
    assert result["steps"] == 1 and result["step_time_ms"] > 0 and result["breakdown"]


def test_the_users_modules_are_the_users(installed: Installed) -> None:
    done = installed.run(
        "python",
        "-c",
        "import app, cli, reports, profilers; print(app.WHO, cli.WHO, reports.WHO, profilers.WHO)",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["user"] * 4


def test_outside_stepwise_our_packages_are_not_importable(installed: Installed) -> None:
    done = installed.run(
        "python",
        "-c",
        "import importlib.util as u, sys; print(*[n for n in sys.argv[1:] if u.find_spec(n)])",
        *OURS,
        "stepwise",
        "stepwise_agent",
        cwd=installed.empty,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["stepwise", "stepwise_agent"]


def test_the_dashboard_settings_travel_with_the_package(installed: Installed) -> None:
    done = installed.run(
        "python", "-c", "from stepwise.dashboard import streamlit_args; print(*streamlit_args([]))"
    )
    assert done.returncode == 0, done.stderr
    args = done.stdout.split()
    assert args[1].endswith("stepwise/_lib/app/main.py") and "--server.address=localhost" in args


def test_a_missing_extra_is_named_then_the_sample_worker_runs_installed(
    installed: Installed, tmp_path: Path
) -> None:
    for cmd, extra in (("run", "samples"), ("dashboard", "dashboard")):
        done = installed.run("stepwise", cmd, "digits")
        assert done.returncode == 2 and done.stdout == ""
        assert (
            done.stderr.startswith("error: ") and f'pip install "stepwise[{extra}]"' in done.stderr
        )
    source = installed.venv.parent / "source"
    installed.pip_install(".[samples]", cwd=source)
    done = installed.run(
        "stepwise", "run", "digits", "--steps", "4", "--json", "--store", str(tmp_path / "runs")
    )
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-2000:]
    result = json.loads(done.stdout)
    assert result["status"] == "ok" and result["steps_done"] == 4


# The user's script: its own `app` (the folder's app.py), a DataLoader, an optimizer; 3 epochs of 8 steps.
TRAIN = """
import torch
import app
assert app.WHO == "user", app.__file__
x, y = torch.randn(64, 8), torch.randn(64, 1)
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(3):
    for xb, yb in loader:
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(xb), yb).backward()
        opt.step()
"""


def _agent_imports_stepwise_packages() -> list[str]:
    """Imports of our other packages in the agent: the launched script has none of them on its path."""
    found = []
    for path in sorted((REPO / "stepwise_agent").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module]
                if isinstance(node, ast.ImportFrom) and node.module and not node.level
                else []
            )
            found += [f"{path.relative_to(REPO)}: {n}" for n in names if n.split(".")[0] in OURS]
    return found


def test_launch_profiles_a_script_of_the_users_folder(installed: Installed, tmp_path: Path) -> None:
    assert (
        _agent_imports_stepwise_packages() == []
    )  # the launched script has none of them on its path
    (installed.project / "train.py").write_text(TRAIN)
    done = installed.run(
        "stepwise",
        "launch",
        "--steps",
        "2",
        "--json",
        "--store",
        str(tmp_path / "runs"),
        "--",
        "python",
        "train.py",
    )
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-2000:]
    assert json.loads(done.stdout)["status"] == "ok"
