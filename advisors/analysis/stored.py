"""The analysis stored in a run folder: ``analysis.json``, computed once, read by every door.

A run folder or an upload is Stepwise's own folder: the first time it is analysed once finished, its
:class:`~advisors.analysis.value.Analysis` is written into it (atomically), and every later reader — ``analyze``,
the dashboard's pages, the Runs list, Compare, every report — reads that value instead of computing it again.
The file says what it was computed from::

    {"schema": 1,                      # this file's layout (SCHEMA)
     "code": "<digest>",               # the analysing code: advisors/ and profilers/ (code_digest)
     "inputs": [[name, size, mtime_ns], ...],   # every other file of the folder (its stat fingerprint)
     "headline": {...},                # the few figures the Runs list shows (headline())
     "analysis": {...}}                # the value itself (advisors.analysis.codec)

and is read back only while all three still match: a run that changed (it was still training, a file was added),
a newer Stepwise (any change to the analysing code) or another layout means it is computed again and rewritten.
Only a folder of a run store is written to (:func:`in_run_store`: its parent holds the store's index, or is the
store): a run folder copied elsewhere (a colleague's, a test fixture), a folder that cannot be written
(read-only storage) and a user's own trace files are analysed as before, and left exactly as they were.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import orjson

from advisors.analysis.codec import decode, encode
from advisors.analysis.value import Analysis
from profilers.run.records import RunStatus
from profilers.store.files import read_json
from profilers.store.fingerprint import stat_fingerprint
from profilers.store.index import INDEX_FILE
from profilers.store.runs import default_root

ANALYSIS_FILE = "analysis.json"
SCHEMA = 1


@lru_cache(maxsize=1)
def code_digest() -> str:
    """A digest of the source of the code that computes an analysis (``advisors/`` and ``profilers/``): a
    stored analysis from other code is computed again, never shown as if this code had judged it."""
    import advisors
    import profilers

    h = hashlib.blake2b(digest_size=12)
    for package in (advisors, profilers):
        root = Path(str(package.__file__)).resolve().parent
        for path in sorted(root.rglob("*.py")):
            h.update(
                path.relative_to(root.parent).as_posix().encode()
                + b"\0"
                + path.read_bytes()
                + b"\0"
            )
    return h.hexdigest()


def inputs(folder: Path) -> list[list[Any]]:
    """The folder's stat fingerprint, as stored (its own ``analysis.json`` left out)."""
    return [list(row) for row in stat_fingerprint(folder, exclude=(ANALYSIS_FILE,))]


def headline(a: Analysis) -> dict[str, Any]:
    """What the Runs list shows of an analysis: its step time, samples/s and verdict, as the value says them."""
    d = a.diagnosis
    return {
        "step_time_ms": a.step_time_ms,
        "samples_per_s": a.samples_per_s,
        "bottleneck": d.bottleneck.value if d is not None else None,
        "confidence": d.confidence if d is not None else None,
    }


def _document(folder: Path) -> dict[str, Any] | None:
    """The stored file when its schema, code and inputs all match the folder now, else None."""
    try:
        data = orjson.loads((folder / ANALYSIS_FILE).read_bytes())
    except (OSError, ValueError):
        return None
    if (
        not isinstance(data, dict)
        or data.get("schema") != SCHEMA
        or data.get("code") != code_digest()
    ):
        return None
    return data if data.get("inputs") == inputs(folder) else None


def read_stored(folder: Path) -> Analysis | None:
    """The analysis stored in ``folder`` while it is current (see the module docs), else None."""
    data = _document(folder)
    if data is None:
        return None
    try:
        return decode(data["analysis"], Analysis)
    except (
        KeyError,
        TypeError,
        ValueError,
    ):  # a file edited by hand: computed again, never a crash
        return None


def stored_headline(folder: Path) -> dict[str, Any] | None:
    """The Runs list's figures of the analysis stored in ``folder`` while it is current, else None."""
    data = _document(folder)
    head = data.get("headline") if data is not None else None
    return head if isinstance(head, dict) else None


def in_run_store(folder: Path) -> bool:
    """Whether ``folder`` is a run of a run store: its parent holds the store's index, or is the store
    (``$STEPWISE_HOME``, else ``./runs``)."""
    parent = folder.resolve().parent
    return (parent / INDEX_FILE).is_file() or parent == default_root().resolve()


def finished(folder: Path) -> bool:
    """Whether the run in ``folder`` has ended (its manifest says so): a training run's analysis is not stored."""
    manifest = read_json(folder / "manifest.json")
    status = manifest.get("status") if isinstance(manifest, dict) else None
    return status is not None and RunStatus.parse(status).finished


def write_stored(folder: Path, a: Analysis, seen: list[list[Any]] | None = None) -> bool:
    """Store ``a`` in ``folder`` (atomically), as computed from the files ``seen`` (their fingerprint before it
    was computed: a file changed since makes the stored value stale, as it should). False where it cannot be
    written."""
    # Encoded before anything is written: a value the codec cannot store (a test holds that none exists) must
    # not cost the reader its analysis.
    doc = {
        "schema": SCHEMA,
        "code": code_digest(),
        "inputs": seen if seen is not None else inputs(folder),
        "headline": headline(a),
        "analysis": encode(a, Analysis),
    }
    tmp = folder / f".{ANALYSIS_FILE}.{os.getpid()}.tmp"
    try:
        tmp.write_bytes(orjson.dumps(doc))
        os.replace(tmp, folder / ANALYSIS_FILE)
        return True
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        return False


def stored_or_computed(folder: Path, compute: Callable[[], Analysis]) -> Analysis:
    """The analysis stored in ``folder`` when current; else ``compute()``, stored when the run has ended and
    ``folder`` is a run of a run store."""
    if not in_run_store(folder):
        return compute()
    stored = read_stored(folder)
    if stored is not None:
        return stored
    seen = inputs(folder)
    a = compute()
    if finished(folder):
        write_stored(folder, a, seen)
    return a
