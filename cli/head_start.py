"""A head start for ``python -m advisors analyze FILE``: the trace's parse workers start before the analysis
is imported, so reading the file and importing pandas and the rules overlap (:func:`profilers.trace.parallel.prime`).

Imports only the reader's light half (no pandas, no numpy) and never fails: whatever it cannot read from the
command line or the file, it leaves to the analysis, which reads the input as it always does.
"""

from __future__ import annotations

from typing import Sequence

_VALUED = ("--report", "--device-memory-gib")  # analyze's options that take a value


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
    try:
        from profilers.trace.parallel import prime

        return prime(path)
    except Exception:  # the analysis reads the input itself and says what is wrong with it
        return False
