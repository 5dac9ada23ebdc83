"""A fresh checkout of this repository for tests that run the README's commands exactly as written.

:func:`fresh_checkout` copies the checkout's files (those git tracks, and new ones it does not ignore: what a clone
of this work would hold) into a new folder, with no ``runs/`` and no ``.stepwise``, and links the checkout's
``.venv`` there, which ``scripts/setup.sh`` has already installed. :func:`readme_command` finds a command in the
README's code blocks by how it starts, and :func:`user_environment` is the environment a user has: no
``STEPWISE_HOME`` or ``STEPWISE_INDEX``, so every command runs on its defaults.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"


def _venv_current() -> None:
    """Bring the checkout's own ``.venv`` up to date here, before a copy links it: ``scripts/setup.sh``
    run inside the copy would otherwise reinstall Stepwise from the copy's folder, and the shared
    ``.venv`` would point at a temporary directory once the test ends."""
    subprocess.run(["bash", "scripts/setup.sh"], cwd=REPO, check=True, capture_output=True)


def fresh_checkout(dest: Path) -> Path:
    _venv_current()
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        check=True,
        capture_output=True,
    ).stdout.decode()
    for name in filter(None, out.split("\0")):
        src = REPO / name
        if src.is_file():  # a tracked file deleted in the working tree is not part of this work
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    (dest / ".venv").symlink_to(REPO / ".venv", target_is_directory=True)
    return dest


def readme_command(start: str) -> list[str]:
    """The first command line in the README's ``bash`` blocks that starts with ``start``, its comment dropped."""
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    for line in (ln for block in blocks for ln in block.splitlines()):
        if line.startswith(start):
            return shlex.split(line, comments=True)
    raise AssertionError(f"the README has no command starting {start!r}")


def user_environment() -> dict[str, str]:
    """This process's environment as a user's shell would have it: no store of a test's own."""
    return {k: v for k, v in os.environ.items() if k not in ("STEPWISE_HOME", "STEPWISE_INDEX")}
