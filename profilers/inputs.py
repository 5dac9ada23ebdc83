"""What kind of input a path is: the one table of the kinds Stepwise reads, and the raw reader of each.

A kind has a stable ``name``, a ``title`` for people, the file-name ``suffixes`` a user may upload it under,
a ``recognises(path)`` test and a ``read(path)`` that returns the raw facts: a
:class:`~profilers.trace.events.Trace`, a :class:`~profilers.trace.memory_snapshot.MemorySnapshot` or a
:class:`RunFolder`. A *container* kind (an ``upload`` run) has ``unwrap(path)`` instead: the path it holds,
which is then recognised in turn.

:data:`KINDS` is tried in order and the first kind that recognises a path reads it; ``kineto`` comes last and
takes anything else, so that a file nobody recognises gets the trace reader's own reason (no such file, not
JSON, no events...). :func:`register` adds a kind before it: the command line (``advisors analyze``), the
dashboard's Upload page (its suffix list is :func:`upload_types`) and the analysis (``advisors.analysis``) all
go through :func:`resolve`, so a new format is plugged in here and nowhere else.

Only the readers a path needs are imported (a run folder never loads the trace engine's JSON decoder unless
it holds a trace), so asking what a path is stays cheap.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from profilers.errors import TraceError
from profilers.trace.memory_snapshot import SNAPSHOT_SUFFIXES, is_snapshot_file
from profilers.trace.sources import TRACE_SUFFIXES, ZIP_SUFFIXES

RUN_MARKERS = ("result.json", "spec.json", "manifest.json")
MAX_NESTING = 4  # containers inside containers: more is a loop or a hostile folder


@dataclass(frozen=True)
class RunFolder:
    """A stored run (``profilers.store``): result, spec, steps, telemetry, and its trace under ``tb/`` or ``trace/``."""

    path: Path


@dataclass(frozen=True)
class InputKind:
    """One kind of input. ``read`` returns the raw facts; a container has ``unwrap`` (and no ``read``)."""

    name: str
    title: str
    suffixes: tuple[
        str, ...
    ]  # lower-case file-name endings an upload of this kind may have ("" never)
    recognises: Callable[[Path], bool]
    read: Callable[[Path], Any] | None = None
    unwrap: Callable[[Path], Path] | None = None

    def __post_init__(self) -> None:
        if (self.read is None) == (self.unwrap is None):
            raise ValueError(f"input kind {self.name!r}: give exactly one of read and unwrap")
        if any(not s.startswith(".") or s != s.lower() for s in self.suffixes):
            raise ValueError(
                f"input kind {self.name!r}: suffixes are lower case and start with a dot"
            )


def _manifest_kind(path: Path) -> str | None:
    try:
        with open(path / "manifest.json", encoding="utf-8") as fh:
            manifest = json.load(fh)
    except (OSError, ValueError):
        return None
    return str(manifest.get("kind")) if isinstance(manifest, dict) else None


def is_run_folder(path: Path) -> bool:
    """A folder the run store wrote (or any folder with one of its marker files)."""
    return path.is_dir() and any((path / m).is_file() for m in RUN_MARKERS)


def is_upload_folder(path: Path) -> bool:
    return is_run_folder(path) and _manifest_kind(path) == "upload"


def upload_root(trace_dir: Path) -> Path:
    """What an ``upload`` run holds under ``trace/``: the one file or folder uploaded, else the folder."""
    entries = sorted(trace_dir.iterdir()) if trace_dir.is_dir() else []
    return entries[0] if len(entries) == 1 else trace_dir


def _read_kineto(path: Path) -> Any:
    from profilers.trace.load import (
        load_trace,
    )  # pandas and the JSON decoder, only when a trace is read

    return load_trace(path)


def _read_snapshot(path: Path) -> Any:
    from profilers.trace.memory_snapshot import load_memory_snapshot

    return load_memory_snapshot(path)


KINETO = InputKind(
    "kineto",
    "PyTorch Profiler / Kineto trace (a file, a folder or zip of ranks, a TensorBoard log dir)",
    TRACE_SUFFIXES + ZIP_SUFFIXES,
    lambda p: True,
    read=_read_kineto,
)
KINDS: list[InputKind] = [
    InputKind(
        "upload",
        "an upload stored in the run store",
        (),
        is_upload_folder,
        unwrap=lambda p: upload_root(p / "trace"),
    ),
    InputKind("run", "a stored run folder", (), is_run_folder, read=RunFolder),
    InputKind(
        "memory_snapshot",
        "torch.cuda.memory._dump_snapshot pickle (read by an unpickler that refuses every class)",
        SNAPSHOT_SUFFIXES,
        is_snapshot_file,
        read=_read_snapshot,
    ),
    KINETO,
]


def register(kind: InputKind) -> None:
    """Add ``kind`` (or replace the one of the same name), tried before the Kineto reader that takes the rest."""
    if kind.name == KINETO.name:
        raise ValueError("the kineto kind is the fallback; register a new kind under its own name")
    unregister(kind.name)
    KINDS.insert(len(KINDS) - 1, kind)


def unregister(name: str) -> None:
    KINDS[:] = [k for k in KINDS if k.name != name or k is KINETO]


def kind_of(path: str | os.PathLike[str]) -> InputKind:
    """The first kind in :data:`KINDS` that recognises ``path`` (``kineto`` for anything else)."""
    p = Path(path)
    return next(k for k in KINDS if k.recognises(p))


def resolve(path: str | os.PathLike[str]) -> tuple[InputKind, Path, tuple[InputKind, ...]]:
    """``(kind, path, containers)``: the readable kind behind ``path`` and its path, after opening any
    containers (listed outermost first). Raises TraceError for containers nested past :data:`MAX_NESTING`."""
    p, seen = Path(path), list[InputKind]()
    for _ in range(MAX_NESTING + 1):
        kind = kind_of(p)
        if kind.unwrap is None:
            return kind, p, tuple(seen)
        seen.append(kind)
        p = kind.unwrap(p)
    raise TraceError(f"{path}: containers nested more than {MAX_NESTING} deep")


def read_input(path: str | os.PathLike[str]) -> tuple[InputKind, Path, Any]:
    """``(kind, path, raw facts)`` of whatever ``path`` is. Raises TraceError/RunError from the reader."""
    kind, p, _ = resolve(path)
    assert kind.read is not None
    return kind, p, kind.read(p)


def upload_suffixes() -> tuple[str, ...]:
    """Every file-name ending a readable upload may have, from the kinds' tables (no duplicates, in order)."""
    return tuple(dict.fromkeys(s for k in KINDS for s in k.suffixes))


def upload_types() -> list[str]:
    """The Upload widget's ``type`` list: the last part of each suffix (``.json.gz`` → ``gz``; browsers
    filter a file dialog by its final extension)."""
    return list(dict.fromkeys(s.rsplit(".", 1)[-1] for s in upload_suffixes()))


def upload_kind(name: str) -> InputKind | None:
    """The kind an uploaded file's name says it is, or None when no kind takes that suffix."""
    low = name.lower()
    return next((k for k in KINDS if k.suffixes and low.endswith(k.suffixes)), None)


def describe_uploads() -> str:
    """One sentence per uploadable kind, with its suffixes: what the Upload page tells people."""
    shown = sorted(
        (k for k in KINDS if k.suffixes), key=lambda k: k is not KINETO
    )  # the common kind first
    return "; ".join(f"{k.title}: {', '.join(f'`{s}`' for s in k.suffixes)}" for k in shown)
