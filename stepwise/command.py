"""The ``stepwise`` command: one entry point for everything the project's command lines do.

``stepwise analyze|optimize|compare …`` is ``python -m advisors …`` and ``stepwise launch|run|list …`` is
``python -m profilers …``: the same arguments, the same JSON, the same exit codes (0 done; 1 a regression from
``compare`` or a run that did not end ``ok``; 2 bad input or usage, one ``error:`` line on stderr), because they
*are* those commands, reached with Stepwise's packages first on the path (:func:`stepwise.lib.use_lib`).
``stepwise dashboard`` serves the dashboard (:mod:`stepwise.dashboard`).

A command that needs an optional extra says which one when it is missing (``pip install "stepwise[samples]"``)
instead of failing inside a worker.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from typing import NoReturn, Sequence

from stepwise.lib import use_lib

PROG = "stepwise"
EXIT_USAGE = 2


@dataclass(frozen=True)
class Command:
    name: str
    group: str  # "advisors", "profilers" or "dashboard": the command line that runs it
    summary: str


COMMANDS: tuple[Command, ...] = (
    Command(
        "analyze",
        "advisors",
        "break down a trace, a folder of ranks, a .zip or a stored run (--json, --report)",
    ),
    Command(
        "optimize",
        "advisors",
        "diagnose, apply each fix, measure it A/B, keep what helps: optimize -- python train.py",
    ),
    Command(
        "compare",
        "advisors",
        "is NEW slower than BASE? a noise-aware verdict for CI (exit 1: slower)",
    ),
    Command(
        "launch",
        "profilers",
        "profile an unmodified script: launch [options] -- python train.py ARGS…",
    ),
    Command(
        "run", "profilers", "run a sample workload under the profiler (needs stepwise[samples])"
    ),
    Command(
        "watch",
        "profilers",
        "watch the whole run, profiling itself when it slows: watch -- python train.py …",
    ),
    Command("capture", "profilers", "profile the next steps of a watched run now: capture RUN"),
    Command("list", "profilers", "list stored runs, newest first"),
    Command(
        "dashboard",
        "dashboard",
        "serve the dashboard at http://localhost:8501 (needs stepwise[dashboard])",
    ),
)
BY_NAME = {c.name: c for c in COMMANDS}

# What each extra adds, as the module names a command imports and the distribution names pip installs.
EXTRAS: dict[str, dict[str, str]] = {
    "samples": {"sklearn": "scikit-learn", "PIL": "pillow", "tensorboard": "tensorboard"},
    "dashboard": {
        "streamlit": "streamlit",
        "sklearn": "scikit-learn",
        "PIL": "pillow",
        "tensorboard": "tensorboard",
    },
}


def usage() -> str:
    width = max(len(c.name) for c in COMMANDS) + 2
    lines = [
        f"usage: {PROG} COMMAND [ARGS…]",
        "",
        "Why is this PyTorch training slow? Names the bottleneck, applies the fix and measures it.",
        "",
        "commands:",
    ]
    lines += [f"  {c.name:<{width}}{c.summary}" for c in COMMANDS]
    lines += [
        "",
        f"'{PROG} COMMAND --help' shows a command's options. Exit codes: 0 done; 1 a regression (compare)",
        "or a run that did not end ok; 2 bad input or usage (one 'error:' line on stderr).",
    ]
    return "\n".join(lines)


def extra_needed(command: str, args: Sequence[str]) -> str | None:
    """The extra ``command args`` needs: ``run`` and ``optimize`` of a sample workload (no ``--``) the samples',
    ``dashboard`` the dashboard's; None for the rest and for ``--help``."""
    if "-h" in args or "--help" in args:
        return None
    if command == "dashboard":
        return "dashboard"
    if command == "run" or (command == "optimize" and "--" not in args):
        return "samples"
    return None


def missing(extra: str) -> list[str]:
    """The distributions of ``extra`` this environment lacks (by whether their modules can be found)."""
    return sorted(
        {dist for module, dist in EXTRAS[extra].items() if importlib.util.find_spec(module) is None}
    )


def fail(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(EXIT_USAGE)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Run ``stepwise ARGV`` and exit with its code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        sys.exit(0 if argv else EXIT_USAGE)
    if argv[0] in ("-V", "--version"):
        from importlib.metadata import PackageNotFoundError, version

        try:
            print(f"{PROG} {version('stepwise')}")
        except PackageNotFoundError:
            print(f"{PROG} (not installed: a checkout)")
        sys.exit(0)
    command = BY_NAME.get(argv[0])
    if command is None:
        fail(
            f"unknown command {argv[0]!r}; the commands are {', '.join(c.name for c in COMMANDS)} "
            f"(see {PROG} --help)"
        )
    extra = extra_needed(command.name, argv[1:])
    lacking = missing(extra) if extra else []
    if extra and lacking:
        fail(f'{PROG} {command.name} needs {", ".join(lacking)}: pip install "stepwise[{extra}]"')
    use_lib()
    if command.group == "dashboard":
        from stepwise.dashboard import serve

        serve(argv[1:])
    run(command.group, argv)


def run(group: str, argv: list[str]) -> NoReturn:
    """``python -m advisors|profilers ARGV`` in this process, as ``stepwise``."""
    from functools import partial

    from cli.head_start import finish, head_start

    if group == "advisors":
        head_start(argv)  # analyze FILE: the parse workers start while the analysis is imported
        from cli.advisors import main as advisors_main

        finish(partial(advisors_main, argv, PROG), argv)
    from cli.profilers import main as profilers_main

    finish(partial(profilers_main, argv, PROG), argv)
