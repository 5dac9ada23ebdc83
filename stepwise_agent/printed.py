"""What the script says: what it prints, with the time it printed it (``RUN_DIR/printed.jsonl``: ``t_unix_ns``,
``line``), and what it warns (:func:`tap_warnings`).

A metric the script prints (``optimize --to-quality --metric REGEX``: a validation loss, an accuracy) is only
worth something against the time it was reached; ``stdout.log`` keeps the text but not the time, and a file
stdout is block-buffered. :func:`tap_stdout` wraps ``sys.stdout`` so every complete line is also written, with
its time, to ``printed.jsonl`` (flushed per line); the script's own output is unchanged. Standard library only.
Bounded: at most :data:`MAX_LINES` lines of at most :data:`MAX_CHARS` characters are recorded.

A warning the script's own code raises (Python's ``warnings.warn`` from a file of the user's: "--tf32 has no effect on
a CPU") joins the run's warnings in its result; the libraries' warnings (torch's deprecations) stay in stderr.
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable, TextIO

MAX_LINES = 100_000
MAX_CHARS = 1_000
MAX_WARNINGS = 20


class _Tee:
    """A text stream that writes through to ``inner`` and records each complete line with its time."""

    def __init__(self, inner: TextIO, log: TextIO, clock_ns: Callable[[], int]) -> None:
        self._inner, self._log, self._clock_ns = inner, log, clock_ns
        self._partial = ""
        self._lines = 0

    def write(self, text: str) -> int:
        n = self._inner.write(text)
        if self._lines < MAX_LINES and isinstance(text, str):
            self._partial += text
            while "\n" in self._partial:
                line, self._partial = self._partial.split("\n", 1)
                self._record(line)
            self._partial = self._partial[-MAX_CHARS:]
        return n

    def _record(self, line: str) -> None:
        if self._lines >= MAX_LINES:
            return
        self._lines += 1
        try:
            self._log.write(
                json.dumps({"t_unix_ns": self._clock_ns(), "line": line[:MAX_CHARS]}) + "\n"
            )
            self._log.flush()
        except (OSError, ValueError):  # the record is a bonus: never the reason a script fails
            self._lines = MAX_LINES

    def flush(self) -> None:
        self._inner.flush()

    def close_log(self) -> None:
        if self._partial:
            self._record(self._partial)
            self._partial = ""
        try:
            self._log.close()
        except OSError:
            pass

    def __getattr__(
        self, name: str
    ) -> Any:  # encoding, isatty, fileno, buffer … of the real stream
        return getattr(self._inner, name)


def tap_stdout(run_dir: Path, clock_ns: Callable[[], int] = time.time_ns) -> Callable[[], None]:
    """Install the tee on ``sys.stdout``; returns the function that removes it (and closes the record)."""
    try:
        log = open(run_dir / "printed.jsonl", "a", encoding="utf-8")
    except OSError:
        return lambda: None
    inner = sys.stdout
    tee = _Tee(inner, log, clock_ns)
    sys.stdout = tee

    def untap() -> None:
        if sys.stdout is tee:
            sys.stdout = inner
        tee.close_log()

    return untap


def tap_warnings(is_users: Callable[[str], bool]) -> tuple[list[str], Callable[[], None]]:
    """Record each warning shown from a file ``is_users`` accepts (``Category: message``, at most
    :data:`MAX_WARNINGS`); returns the live list and the function that stops recording."""
    said: list[str] = []
    original = warnings.showwarning

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        if len(said) < MAX_WARNINGS and is_users(filename):
            said.append(f"{category.__name__}: {message}"[:MAX_CHARS])
        original(message, category, filename, lineno, file, line)

    warnings.showwarning = show

    def untap() -> None:
        if warnings.showwarning is show:
            warnings.showwarning = original

    return said, untap
