"""Each real trace under ../shared/traces is parsed once per test session, not once per test that reads it.

The shared folder is read only, so a file's bytes never change during a run: :class:`TraceMemo` stands in for
``profilers.trace.load.load_trace_files`` (the one function every reader goes through: ``load_trace``, the
observation, ``reports.analysis``, the in-process command line, the dashboard's services) and keeps the
:class:`~profilers.trace.events.Trace` of a shared path. Each caller gets its own shallow copy: new DataFrame
objects over the same column arrays (pandas copy-on-write), so a test that changes its trace's tables changes
only its own copy. Any other path (a test's own files, an upload copied into a run store) is parsed as before.

Tests marked ``real_parse`` (the loader's own tests) bypass the memo: every load there parses the bytes.
``tests/test_trace_memo.py`` checks that a memoised load equals a fresh one.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable

import pandas as pd

from profilers.trace.events import Trace
from profilers.trace.sources import TraceFile

Parse = Callable[[list[TraceFile], str], Trace]
Key = tuple[Path, tuple[tuple[str, int | None], ...]]


class TraceMemo:
    """``load(files, source)`` with the signature of ``load_trace_files``; ``parse`` is the real one."""

    def __init__(self, root: Path, parse: Parse) -> None:
        self.root = root.resolve()
        self.parse = parse
        self.bypass = False  # True: parse every load (the loader's own tests)
        self.traces: dict[Key, Trace] = {}
        self.hits = 0

    def key(self, files: list[TraceFile], source: str) -> Key | None:
        """The memo key of a load from the shared folder (its path and the rank files read), else None."""
        try:
            path = Path(source).resolve()
        except (OSError, RuntimeError, ValueError):
            return None
        if not path.is_relative_to(self.root):
            return None
        return path, tuple((f.name, f.rank_hint) for f in files)

    def load(self, files: list[TraceFile], source: str) -> Trace:
        key = None if self.bypass else self.key(files, source)
        if key is None:
            return self.parse(files, source)
        kept = self.traces.get(key)
        if kept is None:
            kept = self.traces[key] = self.parse(files, source)
        else:
            self.hits += 1
        return own_copy(kept, source)


# pandas 3 is always copy-on-write: a shallow copy's changes never reach the original. Older pandas (the
# requirements allow 2.2) shares the arrays of a shallow copy, so there each caller gets a deep one.
SHALLOW = int(pd.__version__.split(".")[0]) >= 3


def own_copy(trace: Trace, source: str) -> Trace:
    """A Trace, read from ``source``, whose tables are new DataFrames: changing them leaves ``trace`` as it is."""
    deep = not SHALLOW
    return replace(trace, events=trace.events.copy(deep=deep), steps=trace.steps.copy(deep=deep),
                   memory=trace.memory.copy(deep=deep), source=source)
