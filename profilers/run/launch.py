"""Profile a training script nobody changed: ``python -m profilers launch -- python train.py ARGS…``.

The command's leading ``python`` (or ``python3.11``, or this interpreter's path) becomes this interpreter,
and ``-m stepwise_agent.boot RUN_DIR N`` goes before the script (or ``-m module``); interpreter flags such as
``-u`` or ``-X dev`` are kept. Only a script path or module the user typed is run: never ``-c`` code or stdin.
The run is stored like any other (kind ``launch``), with the command in ``launch.json``.

With ``nproc_per_node > 1`` (or ``nnodes > 1``) the boot module runs under ``torchrun`` — every rank
instrumented, as sample workloads are; the script initialises its own process group from torchrun's
environment. :func:`start_script` runs a :class:`~profilers.run.script_spec.ScriptSpec`: the same launch plus a
``boot.json`` (seeds, warm-up/measured/profiled steps, fix knobs to inject) and the spec in ``script.json``.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any, Callable, Mapping

from profilers.errors import RunError
from profilers.run.handle import RunHandle, spawn
from profilers.run.records import RunResult
from profilers.run.script_spec import ScriptSpec
from profilers.store.runs import RunStore

DEFAULT_STEPS = 5
MAX_STEPS = 10_000
_PYTHON = re.compile(r"^python(\d+(\.\d+)*)?$")
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
    elif not (Path(cwd or ".") / target[0]).is_file():
        raise RunError(f"{target[0]}: no such script")
    return flags, target


def boot_command(command: list[str], run_dir: Path, steps: int, nproc_per_node: int = 1, nnodes: int = 1,
                 rdzv_endpoint: str | None = None, cwd: str | None = None) -> list[str]:
    """The command that runs ``command`` under :mod:`stepwise_agent.boot`, profiling ``steps`` steps; under
    ``torchrun`` for more than one rank (interpreter flags cannot pass through torchrun and are dropped)."""
    flags, target = split_command(command, cwd)
    boot = ["-m", "stepwise_agent.boot", str(run_dir), str(steps), *target]
    if nproc_per_node <= 1 and nnodes <= 1:
        return [sys.executable, *flags, *boot]
    if nnodes > 1 and not rdzv_endpoint:
        raise RunError(f"--nnodes {nnodes} needs --rdzv-endpoint HOST:PORT")
    rdzv = ["--rdzv-backend", "c10d", "--rdzv-endpoint", rdzv_endpoint] if rdzv_endpoint else ["--standalone"]
    return [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc_per_node),
            "--nnodes", str(nnodes), *rdzv, *boot]


def start_launch(command: list[str], store: RunStore, steps: int = DEFAULT_STEPS, label: str | None = None,
                 extra_env: Mapping[str, str] | None = None, nproc_per_node: int = 1, nnodes: int = 1,
                 rdzv_endpoint: str | None = None, boot: Mapping[str, Any] | None = None,
                 files: Mapping[str, Any] | None = None, cwd: str | None = None,
                 parent: str | None = None) -> RunHandle:
    """Store a ``launch`` run and start the script; returns without waiting. RunError for a bad command."""
    if not 1 <= steps <= MAX_STEPS:
        raise RunError(f"--steps must be between 1 and {MAX_STEPS}, got {steps}")
    if not 1 <= nproc_per_node <= 64 or not 1 <= nnodes <= 1024:
        raise RunError(f"--nproc-per-node must be 1..64 and --nnodes 1..1024, got {nproc_per_node}, {nnodes}")
    _, target = split_command(command, cwd)
    name = target[1] if target[0] == "-m" else Path(target[0]).name
    content = {"launch.json": {"command": list(command), "steps": steps, "cwd": cwd or os.getcwd(),
                               "nproc_per_node": nproc_per_node, "nnodes": nnodes}, **(files or {})}
    if boot is not None:
        content["boot.json"] = dict(boot)
    record = store.create("launch", label or name, files=content, parent=parent,
                          role="trial" if parent else None)
    run_dir = Path(record.run_dir)
    argv = boot_command(command, run_dir, steps, nproc_per_node, nnodes, rdzv_endpoint, cwd)
    return spawn(store, record.run_id, argv, extra_env, cwd=cwd)


def start_script(spec: ScriptSpec, store: RunStore, label: str | None = None,
                 parent: str | None = None) -> RunHandle:
    """Run a :class:`ScriptSpec`: seeds, warm-up, measured and profiled steps, injected knobs (``boot.json``)."""
    return start_launch(list(spec.command), store, steps=spec.profile_steps, label=label or spec.name,
                        nproc_per_node=spec.nproc_per_node, nnodes=spec.nnodes, rdzv_endpoint=spec.rdzv_endpoint,
                        boot=spec.boot_config(), files={"script.json": spec.to_dict()}, cwd=spec.cwd, parent=parent)


def launch(command: list[str], store: RunStore, steps: int = DEFAULT_STEPS, label: str | None = None,
           on_progress: Callable[[dict[str, Any]], None] | None = None,
           timeout_s: float | None = None) -> tuple[RunHandle, RunResult]:
    """Launch and wait; a crash or kill of the script is a result with a status, never an exception."""
    from profilers.run.runner import follow

    handle = start_launch(command, store, steps, label)
    return handle, follow(handle, on_progress, timeout_s)
