"""The agent reaches the user's interpreter through ``PYTHONPATH``, never by installing anything there.

:func:`agent_folder` copies the :mod:`stepwise_agent` package — alone, not the repository — into a folder named
by a hash of its files (``<store>/.agent/<hash>/stepwise_agent``), once per content; :func:`child_pythonpath`
puts only that folder in front of the user's own ``PYTHONPATH``. A user's own ``app``, ``cli`` or ``reports``
modules are thus never shadowed by ours, and the script cannot import Stepwise's analysis code by accident.

:func:`package_folder` does the same for any package a run's code lives in (the sample workloads' ``sample_runs``:
``<store>/.code/<hash>/sample_runs``): the run starts in that folder, as a user's script starts in its project,
so its files are the run's own — never an installed library's — wherever Stepwise itself is installed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Mapping

import stepwise_agent

PACKAGE = "stepwise_agent"


def package_dir() -> Path:
    return Path(stepwise_agent.__file__).resolve().parent


def _sources(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def content_hash(root: Path | None = None) -> str:
    """A short hash of the package's file names and bytes: a changed agent gets a new folder."""
    root = root or package_dir()
    digest = hashlib.sha256()
    for path in _sources(root):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def package_folder(store_root: Path, root: Path, kind: str = ".code") -> Path:
    """The folder that holds a copy of the package at ``root`` (its ``.py`` files, under the package's own name)
    and nothing else: ``<store>/<kind>/<content hash>``; made once per content, atomically."""
    name = root.name
    dest = store_root / kind / content_hash(root)
    if (dest / name / "__init__.py").is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=dest.parent))
    for path in _sources(root):
        target = tmp / name / path.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    try:
        os.replace(tmp, dest)
    except OSError:  # another launch made it first
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def agent_folder(store_root: Path) -> Path:
    """The folder to put on ``PYTHONPATH`` (it holds ``stepwise_agent/`` and nothing else)."""
    return package_folder(store_root, package_dir(), ".agent")


def child_pythonpath(folder: Path, env: Mapping[str, str]) -> str:
    """``PYTHONPATH`` for the script: the agent folder, then whatever the user had."""
    own = env.get("PYTHONPATH", "")
    return str(folder) + (os.pathsep + own if own else "")
