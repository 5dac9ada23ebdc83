"""Where Stepwise's own packages are, and how its own processes (never a user's) get them on their path.

Installed, ``app``, ``cli``, ``reports``, ``advisors``, ``profilers`` and ``sample_runs`` sit in
``site-packages/stepwise/_lib``, a folder on no one's ``sys.path``: a user's own ``app`` or ``reports`` is never
shadowed by ours, and ours never by theirs, because the ``stepwise`` command puts ``_lib`` *first* on its path
(:func:`use_lib`; the dashboard's server runs in that process). A launched script never gets it: the agent and the
sample workloads are copied into the store and put on that run's path alone (``profilers.run.agent_path``). In a checkout (an editable install too) they are the
repository's folders.
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent


def lib_dir() -> Path:
    """The folder holding Stepwise's packages: ``stepwise/_lib`` installed, the repository in a checkout."""
    for candidate in (_HERE / "_lib", _HERE.parent):
        if (candidate / "profilers" / "__init__.py").is_file():
            return candidate
    raise RuntimeError(
        f"Stepwise's packages are neither in {_HERE / '_lib'} nor in {_HERE.parent}: reinstall it"
    )


def use_lib() -> Path:
    """Put :func:`lib_dir` first on this process's ``sys.path`` (once) and return it."""
    lib = lib_dir()
    if not sys.path or sys.path[0] != str(lib):
        if str(lib) in sys.path:
            sys.path.remove(str(lib))
        sys.path.insert(0, str(lib))
    return lib
