"""The tests' second environment: a user's training interpreter (``.venv-user``) built by ``scripts/user-env.sh``.

torch 2.13.0 (this machine's wheel), transformers, accelerate, lightning, jsonargparse and hydra-core, the
package ``only_in_user_env``, and none of Stepwise's own dependencies beyond what those frameworks pull in
themselves. Built on first use (about a minute) and reused while ``scripts/user-env.sh`` and the package are unchanged.
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


@functools.lru_cache(maxsize=1)
def user_python() -> Path:
    """The second environment's interpreter, building the environment when missing or stale."""
    out = subprocess.run(
        ["bash", str(REPO / "scripts" / "user-env.sh")],
        check=True,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    path = Path(out.stdout.strip().splitlines()[-1])
    assert path.is_file(), f"scripts/user-env.sh printed {path!r}, which is not an interpreter"
    return path
