"""Profile a training script nobody changed: ``python -m profilers launch -- python train.py ARGS…``.

The command's leading ``python`` (or ``python3.11``, or this interpreter's path) becomes this interpreter,
and ``-m profilers.launch_boot RUN_DIR N`` goes before the script (or ``-m module``); interpreter flags such as
``-u`` or ``-X dev`` are kept. Only a script path or module the user typed is run: never ``-c`` code or stdin.
The run is stored like any other (kind ``launch``), with the command in ``launch.json``.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any, Callable, Mapping

from profilers.errors import RunError
from profilers.run_handle import RunHandle, spawn
from profilers.run_model import RunResult
from profilers.store import RunStore

DEFAULT_STEPS = 5
MAX_STEPS = 10_000
_PYTHON = re.compile(r"^python(\d+(\.\d+)*)?$")
_FLAGS_WITH_VALUE = {"-W", "-X", "-Q"}


def split_command(command: list[str]) -> tuple[list[str], list[str]]:
    """``(interpreter flags, target)`` where target is ``[SCRIPT, ARGS…]`` or ``["-m", MODULE, ARGS…]``."""
    argv = [a for a in command]
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise RunError("nothing to launch: put the command after --, e.g. -- python train.py")
    first = argv[0]
    if _PYTHON.match(os.path.basename(first)) or os.path.realpath(first) == os.path.realpath(sys.executable):
        flags: list[str] = []
        i = 1
        while i < len(argv) and argv[i].startswith("-") and argv[i] not in ("-m", "-c", "-"):
            flags.append(argv[i])
            if argv[i] in _FLAGS_WITH_VALUE and i + 1 < len(argv):
                flags.append(argv[i + 1])
                i += 1
            i += 1
        target = argv[i:]
    elif first.endswith(".py"):
        flags, target = [], argv
    else:
        raise RunError(f"launch profiles Python training scripts: start the command with python, not {first!r}")
    if not target or target[0] in ("-c", "-"):
        raise RunError("launch needs a script path or -m MODULE after python (not -c code or stdin)")
    if target[0] == "-m":
        if len(target) < 2:
            raise RunError("-m needs a module name")
    elif not Path(target[0]).is_file():
        raise RunError(f"{target[0]}: no such script")
    return flags, target


def boot_command(command: list[str], run_dir: Path, steps: int) -> list[str]:
    """The command that runs ``command`` under :mod:`profilers.launch_boot`, profiling ``steps`` steps."""
    flags, target = split_command(command)
    return [sys.executable, *flags, "-m", "profilers.launch_boot", str(run_dir), str(steps), *target]


def start_launch(command: list[str], store: RunStore, steps: int = DEFAULT_STEPS, label: str | None = None,
                 extra_env: Mapping[str, str] | None = None) -> RunHandle:
    """Store a ``launch`` run and start the script; returns without waiting. RunError for a bad command."""
    if not 1 <= steps <= MAX_STEPS:
        raise RunError(f"--steps must be between 1 and {MAX_STEPS}, got {steps}")
    _, target = split_command(command)
    name = target[1] if target[0] == "-m" else Path(target[0]).name
    record = store.create("launch", label or name, files={"launch.json": {
        "command": list(command), "steps": steps, "cwd": os.getcwd()}})
    return spawn(store, record.run_id, boot_command(command, Path(record.run_dir), steps), extra_env)


def launch(command: list[str], store: RunStore, steps: int = DEFAULT_STEPS, label: str | None = None,
           on_progress: Callable[[dict[str, Any]], None] | None = None,
           timeout_s: float | None = None) -> tuple[RunHandle, RunResult]:
    """Launch and wait; a crash or kill of the script is a result with a status, never an exception."""
    from profilers.runner import follow

    handle = start_launch(command, store, steps, label)
    return handle, follow(handle, on_progress, timeout_s)
