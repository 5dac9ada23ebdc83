"""What a launched command is: ``[python [FLAGS…]] SCRIPT ARGS…``, ``python -m MODULE ARGS…`` or ``accelerate launch
OPTIONS… SCRIPT ARGS…`` — read apart here, before anything runs, so a command the launcher will not run (``-c`` code,
stdin, a script that is not there) is refused with one clear line.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from profilers.errors import RunError
from profilers.run import interpreter as interp

_FLAGS_WITH_VALUE = {"-W", "-X", "-Q"}


def split_command(command: list[str], cwd: str | None = None) -> tuple[list[str], list[str]]:
    """``(interpreter flags, target)`` where target is ``[SCRIPT, ARGS…]`` or ``["-m", MODULE, ARGS…]``; a script
    path is looked up from ``cwd`` (default: ours)."""
    argv = [a for a in command]
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise RunError("nothing to launch: put the command after --, e.g. -- python train.py")
    first = argv[0]
    launcher = accelerate_launch(argv)
    flags: list[str] = []
    if launcher is not None:
        target = launcher[1]
    elif interp.is_python_word(first) or os.path.realpath(first) == os.path.realpath(
        sys.executable
    ):
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
        raise RunError(
            f"launch profiles Python training scripts: start the command with python, not {first!r}"
        )
    if not target or target[0] in ("-c", "-"):
        raise RunError(
            "launch needs a script path or -m MODULE after python (not -c code or stdin)"
        )
    if target[0] == "-m":
        if len(target) < 2:
            raise RunError("-m needs a module name")
    elif not (Path(cwd or ".") / target[0]).is_file():
        raise RunError(f"{target[0]}: no such script")
    return flags, target


def accelerate_launch(command: list[str]) -> tuple[list[str], list[str]] | None:
    """``accelerate launch OPTIONS… SCRIPT ARGS…`` as ``(OPTIONS, [SCRIPT, ARGS…])`` (the script: the first word
    ending in ``.py`` that is no option), else ``None``. RunError for a launch of a module or without a script."""
    argv = command[1:] if command[:1] == ["--"] else list(command)
    if len(argv) < 2 or os.path.basename(argv[0]) != "accelerate" or argv[1] != "launch":
        return None
    options = argv[2:]
    if any(o in ("-m", "--module", "--no_python") for o in options):
        raise RunError(
            "accelerate launch: Stepwise runs a script path (not --module or --no_python)"
        )
    at = next(
        (i for i, a in enumerate(options) if a.endswith(".py") and not a.startswith("-")), None
    )
    if at is None:
        raise RunError("accelerate launch needs a script path ending in .py")
    return options[:at], options[at:]


#: the module a sample workload's run starts (``python -m sample_runs.train WORKLOAD …``), named, never imported
WORKLOAD_SCRIPT = "sample_runs.train"


def workload_of_command(command: list[str] | tuple[str, ...] | object) -> str | None:
    """The sample workload a command runs (``… -m sample_runs.train NAME …``), else None (a user's script)."""
    if not isinstance(command, (list, tuple)):
        return None
    words = [str(c) for c in command]
    return next(
        (
            words[i + 2]
            for i in range(len(words) - 2)
            if words[i] == "-m" and words[i + 1] == WORKLOAD_SCRIPT
        ),
        None,
    )
