"""Every command the README shows, exactly as written there: its first two are the set-up scripts CI
runs, each ``stepwise …`` and ``.venv/bin/python -m advisors|profilers …`` line parses with the
commands' own parsers (naming workloads and ``--set`` keys that exist), and each ``pip install``
names extras ``pyproject.toml`` defines. What the commands then do is tested where they are built
(``tests/cli``, ``tests/stepwise``)."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
_ADVISORS = ("analyze", "optimize", "compare")
_PREFIXES = {
    "stepwise": None,
    ".venv/bin/python -m advisors": "advisors",
    ".venv/bin/python -m profilers": "profilers",
}


def readme_commands() -> list[str]:
    """Each command line of the README's ``bash`` blocks, its comment dropped, as written."""
    blocks = re.findall(r"^```bash\n(.*?)^```", README.read_text(), re.M | re.S)
    return [
        " ".join(shlex.split(line, comments=True))
        for block in blocks
        for line in block.splitlines()
        if shlex.split(line, comments=True)
    ]


def _words(command: str) -> list[str]:
    return shlex.split(command)


def test_the_readme_opens_with_the_two_setup_commands():
    commands = readme_commands()
    assert commands[:2] == ["bash scripts/dashboard.sh", "bash scripts/test.sh"]
    assert (
        "bash scripts/test.sh" in (REPO / ".ci" / "run").read_text()
    )  # CI runs the README's test command
    assert (REPO / "scripts" / "test.sh").is_file()
    assert "stepwise dashboard" in (REPO / "scripts" / "dashboard.sh").read_text()


def _stepwise_commands() -> list[tuple[str, list[str]]]:
    out = []
    for command in readme_commands():
        for prefix, group in _PREFIXES.items():
            if command.startswith(prefix + " "):
                argv = _words(command[len(prefix) :])
                out.append(
                    (
                        group
                        or (
                            "advisors"
                            if argv[0] in _ADVISORS
                            else "dashboard"
                            if argv[0] == "dashboard"
                            else "profilers"
                        ),
                        argv,
                    )
                )
    return out


def test_the_readme_shows_every_command():
    from stepwise.command import COMMANDS

    shown = {argv[0] for _, argv in _stepwise_commands()}
    assert {c.name for c in COMMANDS} - {"capture"} <= shown  # capture is named beside watch


@pytest.mark.parametrize(
    "group, argv", _stepwise_commands(), ids=lambda v: " ".join(v) if isinstance(v, list) else v
)
def test_each_readme_command_parses(group: str, argv: list[str], tmp_path: Path):
    if group == "dashboard":
        from streamlit import config

        names = [
            a[2:].split("=")[0] for a in argv[1:] if a.startswith("--")
        ]  # Streamlit's own options
        for name in names:
            config.get_option(name)  # raises for an option Streamlit does not have
        return
    if group == "advisors":
        from cli.advisors import build_parser

        ours = argv[: argv.index("--")] if "--" in argv else argv  # after --: the user's command
        args = build_parser(argv[0], "stepwise").parse_args(ours)
    else:
        from cli.profilers import _parser

        args = _parser("stepwise").parse_args(argv)
    workload = getattr(args, "workload", None) or (
        getattr(args, "target", None) if argv[0] == "optimize" else None
    )
    if workload:
        from cli.workloads import parse_sets, workload_spec

        settings, params = parse_sets(getattr(args, "sets", []))
        assert workload_spec(tmp_path, workload, values=settings, params=params).command


def test_each_readme_pip_install_names_extras_that_exist():
    extras = set(
        tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    )
    installs = [c for c in readme_commands() if c.startswith("pip install ")]
    assert installs, "the README shows no pip install: drop this test"
    for command in installs:
        for named in re.findall(r"\[([^\]]+)\]", command):
            assert set(named.split(",")) <= extras, command
