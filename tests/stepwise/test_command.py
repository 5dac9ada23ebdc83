"""The ``stepwise`` command: every subcommand of ``python -m advisors|profilers`` under one name, with the same JSON
and exit codes; a missing extra named before anything starts; the checkout's own packages first on its path."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cli.advisors import build_parser
from cli.profilers import _parser as profilers_parser
from stepwise import command, lib
from tests.trace_factory import kernel, step, write, x

REPO = Path(__file__).resolve().parents[2]
STEPWISE = Path(sys.executable).with_name(
    "stepwise"
)  # the console script the editable install made
_IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \| +(\S+)$")


def _subcommands(parser: object) -> set[str]:
    actions = getattr(parser, "_subparsers")._group_actions
    return {name for action in actions for name in action.choices}


def _small_trace(tmp_path: Path) -> Path:
    events = [
        step(1, 0, 1000),
        x("aten::mm", 10, 400),
        x("cudaLaunchKernel", 20, 5, cat="cuda_runtime", correlation=1),
        kernel("sm80_gemm", 30, 500, correlation=1),
        step(2, 1000, 1000),
        x("aten::mm", 1010, 400),
    ]
    return write(tmp_path / "t.json", events)


def _run(argv: list[str], cwd: Path, *prefix: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [*prefix, *argv], cwd=cwd, capture_output=True, text=True, timeout=300, env=env
    )


def test_every_subcommand_of_both_command_lines_is_a_stepwise_command() -> None:
    by_group = {
        g: {c.name for c in command.COMMANDS if c.group == g} for g in ("advisors", "profilers")
    }
    assert by_group["advisors"] == _subcommands(build_parser())
    assert by_group["profilers"] == _subcommands(profilers_parser())
    assert {c.name for c in command.COMMANDS} - by_group["advisors"] - by_group["profilers"] == {
        "dashboard"
    }


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        command.main(["--help"])
    assert done.value.code == 0
    listed = {ln.split()[0] for ln in capsys.readouterr().out.splitlines() if ln.startswith("  ")}
    assert listed == {c.name for c in command.COMMANDS}


@pytest.mark.parametrize("argv", [[], ["bogus"]])
def test_no_or_an_unknown_command_is_a_usage_error(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        command.main(argv)
    assert done.value.code == 2
    if argv:
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: unknown command 'bogus'")


@pytest.mark.parametrize(
    ("argv", "extra"),
    [
        (["run", "digits"], "samples"),
        (["optimize", "data_bound", "--rounds", "1"], "samples"),
        (
            ["optimize", "--rounds", "1", "--", "python", "train.py"],
            None,
        ),  # a user's script: no sample workload
        (["dashboard", "--server.port", "8502"], "dashboard"),
        (["run", "--help"], None),
        (["analyze", "t.json"], None),
        (["launch", "--", "python", "train.py"], None),
    ],
)
def test_the_extra_a_command_needs(argv: list[str], extra: str | None) -> None:
    assert command.extra_needed(argv[0], argv[1:]) == extra


def test_a_missing_extra_is_named_before_anything_starts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = command.importlib.util.find_spec
    monkeypatch.setattr(
        command.importlib.util, "find_spec", lambda name: None if name == "PIL" else real(name)
    )
    assert command.missing("samples") == ["pillow"]
    with pytest.raises(SystemExit) as done:
        command.main(["run", "data_bound"])
    assert done.value.code == 2
    assert (
        capsys.readouterr().err.strip()
        == 'error: stepwise run needs pillow: pip install "stepwise[samples]"'
    )


def test_in_a_checkout_the_packages_are_the_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    assert lib.lib_dir() == REPO
    path = ["/somewhere", str(REPO), "/else"]
    monkeypatch.setattr(sys, "path", path)
    assert lib.use_lib() == REPO and lib.use_lib() == REPO
    assert path == [str(REPO), "/somewhere", "/else"]  # first, once


def test_installed_the_packages_are_under_lib(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = tmp_path / "site-packages" / "stepwise"
    monkeypatch.setattr(lib, "_HERE", here)
    with pytest.raises(RuntimeError, match="reinstall"):
        lib.lib_dir()
    (here / "_lib" / "profilers").mkdir(parents=True)
    (here / "_lib" / "profilers" / "__init__.py").write_text("")
    assert lib.lib_dir() == here / "_lib"


@pytest.mark.slow
def test_stepwise_analyze_is_python_m_advisors_analyze(tmp_path: Path) -> None:
    trace = _small_trace(tmp_path)
    ours = _run(["analyze", str(trace), "--json"], tmp_path, str(STEPWISE))
    theirs = _run(["analyze", str(trace), "--json"], REPO, sys.executable, "-m", "advisors")
    assert ours.returncode == theirs.returncode == 0, ours.stderr[-2000:]
    assert json.loads(ours.stdout) == json.loads(theirs.stdout)
    assert json.loads(ours.stdout)["steps"] == 2
    bad = _run(["analyze", str(tmp_path / "missing.json"), "--json"], tmp_path, str(STEPWISE))
    assert bad.returncode == 2 and bad.stdout == ""
    assert len(bad.stderr.strip().splitlines()) == 1 and bad.stderr.startswith("error:")


@pytest.mark.slow
def test_stepwise_list_is_python_m_profilers_list(tmp_path: Path) -> None:
    ours = _run(["list", "--json", "--store", str(tmp_path / "runs")], tmp_path, str(STEPWISE))
    theirs = _run(
        ["list", "--json", "--store", str(tmp_path / "runs")],
        REPO,
        sys.executable,
        "-m",
        "profilers",
    )
    assert ours.returncode == theirs.returncode == 0, ours.stderr[-2000:]
    assert json.loads(ours.stdout) == json.loads(theirs.stdout) == []
    usage = _run(["list", "--limit", "many"], tmp_path, str(STEPWISE))
    assert (
        usage.returncode == 2 and "stepwise list --help" in usage.stderr
    )  # the usage names the command typed


def test_stepwise_analyze_stays_quick_to_start(tmp_path: Path) -> None:
    """The command adds nothing heavy to ``analyze --json`` (tests/cli/test_quick_analyze.py holds the rest)."""
    done = _run(
        ["-m", "stepwise", "analyze", str(_small_trace(tmp_path)), "--json"],
        tmp_path,
        sys.executable,
        "-X",
        "importtime",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    modules = {m.group(1) for line in done.stderr.splitlines() if (m := _IMPORTED.match(line))}
    assert "advisors.diagnosis" in modules
    assert not {m.split(".")[0] for m in modules} & {"torch", "plotly", "streamlit", "jinja2"}
