"""How the checkout's folders become installed names (everything else about the project is in pyproject.toml).

A user installs Stepwise into the environment where they train, next to their own code, which often has an
``app``, ``cli`` or ``reports`` of its own. So the wheel claims two top-level names only:

- ``stepwise``: the ``stepwise`` command (``stepwise/command.py``); the project's own packages travel inside it as
  ``stepwise/_lib/{app,cli,reports,advisors,profilers,sample_runs}`` (a folder, not a package: nothing is ever
  imported as ``stepwise._lib.x``). Stepwise's own processes put ``_lib`` first on their path (the command
  itself, and what it starts in its own environment through ``PYTHONPATH``), so there ``import app`` is ours;
  in a user's process it never is.
- ``stepwise_agent``: the agent that runs inside the user's training process (standard library and torch only).

``LIB`` is the one list of those packages (``tests/test_types_config.py`` holds it equal to the checkout's
top-level packages). A checkout needs none of this: there the packages are the repository's own folders.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
LIB = (
    "app",
    "cli",
    "reports",
    "advisors",
    "profilers",
    "sample_runs",
)  # shipped under stepwise/_lib/
TOP = ("stepwise", "stepwise_agent")  # the only names the wheel puts in site-packages
LIB_DIR = "stepwise/_lib"
DATA = {"reports/templates": ["*.j2"]}  # folders of non-Python files the packages read at run time
STREAMLIT_CONFIG = (
    ".streamlit/config.toml"  # the dashboard server's settings: `stepwise dashboard` reads them
)


def lib_packages() -> dict[str, str]:
    """Installed dotted name → source folder, for every folder of ``LIB`` that holds Python modules (``app/views``,
    the dashboard's pages, has no ``__init__.py``: Streamlit runs those files by path)."""
    code = {f.parent.relative_to(ROOT) for top in LIB for f in (ROOT / top).rglob("*.py")}
    folders = sorted(code | {Path(d) for d in DATA})
    return {_installed(d.as_posix()): d.as_posix() for d in folders if "__pycache__" not in d.parts}


def _installed(folder: str) -> str:
    return "stepwise._lib." + folder.replace("/", ".")


class BuildPy(build_py):
    """Also copies the dashboard's server settings next to the packages, where ``stepwise dashboard`` finds them
    in an installed copy as in a checkout (``<lib>/.streamlit/config.toml``)."""

    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / LIB_DIR / STREAMLIT_CONFIG
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / STREAMLIT_CONFIG, target)


if __name__ == "__main__":
    mapped = lib_packages()
    own = find_packages(str(ROOT), include=[f"{top}{tail}" for top in TOP for tail in ("", ".*")])
    setup(
        packages=[*own, *mapped],
        package_dir=mapped,
        package_data={_installed(folder): globs for folder, globs in DATA.items()},
        cmdclass={"build_py": BuildPy},
    )
