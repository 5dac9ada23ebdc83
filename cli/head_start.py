"""A quick start and a quick end for ``python -m advisors analyze``, whose whole-process time is what a user times.

- The trace's parse workers start before the analysis is imported, so reading the file and importing pandas and
  the rules overlap (:func:`profilers.trace.parallel.prime`).
- pyarrow is kept out: pandas imports it when it is installed (the dashboard needs it), which cost ~0.07 s of the
  command's ~1.2 s, and nothing in an analysis without ``--report`` reads or writes Arrow. pandas without pyarrow
  is a supported setup; ``tests/cli/test_quick_analyze.py`` holds the JSON the same either way.
- The process ends without the interpreter's teardown once its output is flushed: freeing pandas' and numpy's
  modules one by one took ~0.1 s after the last byte was written.
- The cyclic garbage collector pauses while the analysis is imported (importing numpy, pandas and the rules
  creates ~10^5 long-lived objects and no garbage, and the collector traversed them again and again: ~0.04 s of
  the imports' ~0.4 s of CPU), and what was imported is frozen out of its sight before the analysis runs, so a
  collection during the analysis walks only the analysis's own objects. Nothing is left uncollected: the
  collector runs as usual from there on.

Imports only the reader's light half (no pandas, no numpy) and never fails: whatever it cannot read from the
command line or the file, it leaves to the analysis, which reads the input as it always does.
"""

from __future__ import annotations

import gc
import os
import sys
from typing import Callable, NoReturn, Sequence

_VALUED = (
    "--report",
    "--device-memory-gib",
    "--engine",
    "--address",
)  # analyze's options that take a value
_gc_paused = False  # head_start paused the cyclic GC for the imports; finish() resumes it


def analyze_path(argv: Sequence[str]) -> str | None:
    """The PATH of ``analyze PATH [options]``, or None for any other command line."""
    words = list(argv[: argv.index("--")] if "--" in argv else argv)
    positional: list[str] = []
    skip = False
    for w in words:
        if skip:
            skip = False
        elif w in _VALUED:
            skip = True
        elif not w.startswith("-"):
            positional.append(w)
    return positional[1] if len(positional) == 2 and positional[0] == "analyze" else None


def head_start(argv: Sequence[str]) -> bool:
    """Start reading ``analyze``'s trace file on worker processes; True if it started."""
    path = analyze_path(argv)
    if path is None:
        return False
    global _gc_paused
    if gc.isenabled():
        gc.disable()  # until finish() runs the analysis: see the module's docstring
        _gc_paused = True
    if "--report" not in argv and "pyarrow" not in sys.modules:
        sys.modules["pyarrow"] = None  # type: ignore[assignment]  # import pyarrow now raises ModuleNotFoundError
    try:
        from profilers.trace.parallel import prime

        return prime(
            path, detach=True
        )  # the command exits after its analysis: no need to wait for the workers
    except Exception:  # the analysis reads the input itself and says what is wrong with it
        return False


def finish(main: Callable[[], int], argv: Sequence[str]) -> NoReturn:
    """Run ``main`` and exit with its code: for ``analyze``, straight after flushing the output (no interpreter
    teardown). SIGTERM or SIGHUP stop the runs under way and end it with 128 + the signal's number.
    A reader that closed the pipe early (``... | head``) ends the command with 1, not a
    traceback."""
    global _gc_paused
    if (
        _gc_paused
    ):  # what was imported stays out of the collector's sight; the analysis's objects do not
        gc.freeze()
        gc.enable()
        _gc_paused = False
    from profilers.run.stopping import Stopped, stop_runs_on_signals

    try:
        try:
            # ending this process ends the runs it started, their trees too
            with stop_runs_on_signals():
                code = main()
        except Stopped as stopped:
            code = stopped.exit_code
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        os.dup2(
            os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno()
        )  # what is left to flush goes nowhere
        code = 1
    if analyze_path(argv) is None:
        sys.exit(code)
    os._exit(code)
