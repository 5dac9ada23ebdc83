"""Each real trace under ../shared/traces is parsed once per test session, not once per test that reads it.

The shared folder is read only, so a file's bytes never change during a run: :class:`TraceMemo` stands in for
``profilers.trace.load.load_trace_files`` (the one function every reader goes through: ``load_trace``, the
observation, ``advisors.analysis``, the in-process command line, the dashboard's services) and keeps the
:class:`~profilers.trace.events.Trace` of a shared path. Each caller gets its own shallow copy: new DataFrame
objects over the same column arrays (pandas copy-on-write), so a test that changes its trace's tables changes
only its own copy. A file with the very bytes of a shared one (an upload copied into a test's run store) is
the same trace, read from its own path. Any other path (a test's own files) is parsed as before.

The breakdown of such a copy is kept too (``breakdown`` stands in for ``profilers.trace.breakdown.breakdown``),
while the copy's tables still hold the very arrays they were handed out with: a copy a test changed (a new
column, an edited cell, a sort: copy-on-write gives it new arrays) gets a breakdown computed from it.

Tests marked ``real_parse`` (the loader's own tests) bypass the memo: every load there parses the bytes and
every breakdown is computed. ``tests/test_trace_memo.py`` checks that a memoised load and breakdown equal
fresh ones.
"""

from __future__ import annotations

import hashlib
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from profilers.trace.breakdown import Breakdown
from profilers.trace.events import Trace
from profilers.trace.parallel import ParallelReader
from profilers.trace.sources import TraceFile

Parse = Callable[..., Trace]  # load_trace_files(files, source, reader=None, first_order=0)
Compute = Callable[[Trace], Breakdown]
Key = tuple[Path, tuple[tuple[str, int | None], ...]]
Arrays = tuple[tuple[Any, ...], ...]


class TraceMemo:
    """``load(files, source, reader)`` with the signature of ``load_trace_files``; ``parse`` is the real one."""

    def __init__(self, root: Path, parse: Parse, compute: Compute) -> None:
        self.root = root.resolve()
        self.parse, self.compute = parse, compute
        self.bypass = (
            False  # True: parse every load, compute every breakdown (the loader's own tests)
        )
        self.traces: dict[Key, Trace] = {}
        self.breakdowns: dict[Key, Breakdown] = {}
        self.handed: dict[
            int, tuple[Trace, Key, Arrays]
        ] = {}  # id(copy): the copy (kept alive), its key, arrays
        self.sizes: dict[int, list[Path]] = {}  # the shared files by size
        self.digests: dict[Path, bytes] = {}
        self.hits = 0

    def key(self, files: list[TraceFile], source: str) -> Key | None:
        """The memo key of a load from the shared folder, or of a file byte for byte one of it (an upload
        copied into a test's run store): the shared path and the rank files read. Else None."""
        try:
            path = Path(source).resolve()
            shared = path if path.is_relative_to(self.root) else self.shared_twin(path)
        except (OSError, RuntimeError, ValueError):
            return None
        return None if shared is None else (shared, tuple((f.name, f.rank_hint) for f in files))

    def shared_twin(self, path: Path) -> Path | None:
        """The shared file with exactly the bytes of the file ``path``, if there is one."""
        if not path.is_file():
            return None
        if not self.sizes:
            for p in sorted(self.root.rglob("*")):
                if p.is_file():
                    self.sizes.setdefault(p.stat().st_size, []).append(p)
        same_size = self.sizes.get(path.stat().st_size, [])
        if not same_size:
            return None
        digest = _digest(path)
        return next(
            (p for p in same_size if self.digests.setdefault(p, _digest(p)) == digest), None
        )

    def load(
        self,
        files: list[TraceFile],
        source: str,
        reader: ParallelReader | None = None,
        first_order: int = 0,
    ) -> Trace:
        key = (
            None if self.bypass or first_order else self.key(files, source)
        )  # a job's rank file alone: parsed
        if key is None:
            return self.parse(files, source, reader, first_order)
        kept = self.traces.get(key)
        if kept is None:
            kept = self.traces[key] = self.parse(files, source, reader)
        else:
            self.hits += 1
            if (
                reader is not None
            ):  # a reader already started for this load (parallel.prime): not needed
                reader.close()
        mine = own_copy(kept, source)
        self.handed[id(mine)] = (mine, key, arrays_of(mine))
        return mine

    def breakdown(self, trace: Trace) -> Breakdown:
        handed = None if self.bypass else self.handed.get(id(trace))
        if handed is None or handed[0] is not trace or arrays_of(trace) != handed[2]:
            return self.compute(trace)
        key = handed[1]
        kept = self.breakdowns.get(key)
        if kept is None:
            kept = self.breakdowns[key] = self.compute(trace)
        return replace(
            kept, **{f.name: own_value(getattr(kept, f.name)) for f in fields(Breakdown)}
        )


def _digest(path: Path) -> bytes:
    return hashlib.sha256(path.read_bytes()).digest()


# pandas 3 is always copy-on-write: a shallow copy's changes never reach the original. Older pandas (the
# requirements allow 2.2) shares the arrays of a shallow copy, so there each caller gets a deep one.
SHALLOW = int(pd.__version__.split(".")[0]) >= 3


def own_value(v: Any) -> Any:
    """``v`` as one caller's own: a DataFrame or dict copied, anything else (frozen) as it is."""
    if isinstance(v, pd.DataFrame):
        return v.copy(deep=not SHALLOW)
    return dict(v) if isinstance(v, dict) else v


def arrays_of(trace: Trace) -> Arrays:
    """What a Trace's tables hold: per table its row labels and, per column, the name, dtype and the address
    of its data (a categorical's codes). Copy-on-write gives a changed column a new array, so a copy that
    still has the addresses it was handed out with holds the same data."""
    out: list[tuple[Any, ...]] = []
    for df in (trace.events, trace.steps, trace.memory):
        rows = df.index
        cols: list[Any] = [
            (rows.start, rows.stop, rows.step) if isinstance(rows, pd.RangeIndex) else object()
        ]
        for name in df.columns:
            col = df[name]
            values = (
                col.cat.codes.to_numpy()
                if isinstance(col.dtype, pd.CategoricalDtype)
                else col.to_numpy()
            )
            # Object arrays are built anew by to_numpy: such a column never matches, so nothing is kept.
            address = object() if values.dtype == object else values.__array_interface__["data"][0]
            cols.append((name, col.dtype, address))
        out.append(tuple(cols))
    return tuple(out)


def own_copy(trace: Trace, source: str) -> Trace:
    """A Trace, read from ``source``, whose tables are new DataFrames: changing them leaves ``trace`` as it is."""
    deep = not SHALLOW
    return replace(
        trace,
        events=trace.events.copy(deep=deep),
        steps=trace.steps.copy(deep=deep),
        memory=trace.memory.copy(deep=deep),
        source=source,
    )
