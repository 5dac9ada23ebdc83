"""Which Python runs a user's script, and what torch it has — the user's, never silently ours.

The rule (docs/how-to/profile-your-script.md, "Your interpreter"): ``--python PATH`` when given; else the
command's first word —
``python``/``python3.11`` is the one a shell would run (``shutil.which`` over the PATH in effect: the activated
venv or conda env), a path (``/env/bin/python``) is that exact file (not its symlink target: a venv's
``python`` is a link to the base interpreter, and following it would lose the venv). A bare ``train.py``
runs with ``--python`` or, without it, Stepwise's own interpreter.

:func:`probe` asks the interpreter once (cached per path and modification time) for its Python and torch —
version, CUDA build, CUDA available — for ``launch.json`` and to refuse, with one clear line, an interpreter
that does not exist or has no torch.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
from typing import Any, Mapping

from profilers.errors import RunError

PYTHON_NAME = re.compile(r"^python(\d+(\.\d+)*)?$")
PROBE_TIMEOUT_S = 120.0  # importing torch on a cold, busy machine can take tens of seconds
_PROBE = (
    "import json, platform, sys\n"
    "out = {'interpreter': sys.executable, 'python_version': platform.python_version()}\n"
    "try:\n"
    "    import torch\n"
    "except Exception as err:\n"
    "    out['torch_error'] = f'{type(err).__name__}: {err}'\n"
    "else:\n"
    "    out.update(torch_version=torch.__version__, torch_cuda=getattr(torch.version, 'cuda', None),\n"
    "               cuda_available=bool(torch.cuda.is_available()))\n"
    "print(json.dumps(out))\n"
)


def is_python_word(word: str) -> bool:
    """``python``, ``python3``, ``python3.11``, or a path to one (``/env/bin/python``)."""
    return bool(PYTHON_NAME.match(os.path.basename(word)))


def resolve(word: str, env: Mapping[str, str] | None = None) -> str:
    """The interpreter a shell would run for ``word``: a path is kept as given (made absolute), a bare name is
    looked up on ``PATH`` (of ``env``, default ours). RunError when there is none."""
    if os.sep in word:
        path = os.path.abspath(word)
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise RunError(f"{word}: no such Python interpreter")
        return path
    search = (env if env is not None else os.environ).get("PATH", os.defpath)
    found = shutil.which(word, path=search)
    if found is None:
        raise RunError(
            f"{word}: not found on PATH; give the interpreter's path (-- /path/to/env/bin/python "
            "train.py, or --python PATH)"
        )
    return os.path.abspath(found)


def own_interpreter() -> str:
    """Stepwise's own interpreter (the dashboard's default, and a bare ``train.py``'s)."""
    return sys.executable


def probe(interpreter: str) -> dict[str, Any]:
    """``{interpreter, python_version, torch_version, torch_cuda, cuda_available}`` of ``interpreter``;
    RunError when it does not run or has no torch (the one-line reason says which)."""
    try:
        mtime = os.stat(interpreter).st_mtime_ns
    except OSError:
        raise RunError(f"{interpreter}: no such Python interpreter") from None
    return dict(_probe(interpreter, mtime))


@functools.lru_cache(maxsize=16)
def _probe(interpreter: str, mtime_ns: int) -> tuple[tuple[str, Any], ...]:
    try:
        done = subprocess.run(
            [interpreter, "-c", _PROBE],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise RunError(f"{interpreter}: cannot run it as Python ({err})") from None
    lines = done.stdout.strip().splitlines()
    try:
        facts = json.loads(lines[-1]) if lines else None
    except ValueError:
        facts = None
    if done.returncode != 0 or not isinstance(facts, dict):
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RunError(f"{interpreter}: not a working Python interpreter ({last})")
    if "torch_error" in facts:
        raise RunError(
            f"{interpreter} has no torch ({facts['torch_error']}): install PyTorch in that environment, "
            "or pick another interpreter with --python"
        )
    return tuple(sorted(facts.items()))
