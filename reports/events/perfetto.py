"""A trace, or one window of it, as a gzip'd Chrome trace JSON that ui.perfetto.dev (and chrome://tracing) opens.

Written from the trace's **own files**, not the normalised table, so nothing Perfetto is for is lost: every
event keeps its ``args``, the CPU launch → GPU kernel flow events (``s``/``t``/``f``), instant events (``i``/``I``),
counters and metadata stay. A folder of ranks or a zip becomes one file: each rank's processes get pids of their
own (``process_labels``: ``rank N``) and its flow ids are made unique, so ranks never merge; a pid or tid
written as a name (old Kineto: ``"pid": "Traces"``) becomes a number named by a ``process_name``/``thread_name``. Times are µs from the
trace's first step start (``otherData.origin_unix_ns`` keeps the absolute origin): epoch microseconds as doubles
would lose the sub-µs part.

A window ``[start_ns, end_ns)`` keeps:

- complete events (``X``) that overlap it, **kept whole** (one crossing an edge is not cut);
- point events (instants, counters, begin/end, async) whose time lies in it;
- a flow only with both its ends (an ``s`` and an ``f``, whose start the file holds) and every point of it bound
  to a kept slice of its own track, so no arrow dangles (an end alone, bound to a long host slice crossing the
  window, made 90% of a window's file orphan ``f`` events);
- all metadata (process and thread names).

:class:`ExportCounts` says how many events of each kind went in and came out (``X``, ``instant``, ``flow``,
``other``, ``metadata``, events carrying ``args``), so the export is checked by counting, not by eye.
"""

from __future__ import annotations

import gzip
import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import orjson

from profilers.errors import TraceError
from profilers.trace.load import (
    _rank as rank_of,
)  # the loader's own rule: the same file gets the same rank
from profilers.trace.sources import find_trace_files, iter_opened

INSTRUCTIONS = (
    "1. Download the file below (a gzip'd Chrome trace JSON).",
    "2. Open https://ui.perfetto.dev and choose **Open trace file** (or drag the file onto the page).",
    "3. Each rank is a process; host threads and GPU streams are its tracks; arrows are CPU launch → "
    "GPU kernel flows. Press W/S to zoom, A/D to pan; click an event for its args.",
)

FLOW_PHASES = frozenset("stf")
INSTANT_PHASES = frozenset("iIn")
RANK_PID_STRIDE = (
    10_000_000  # several ranks: pid = (rank + 1) * stride + pid (Linux pids stay below 2**22)
)
RANK_FLOW_SHIFT = (
    40  # several ranks: flow id += rank << 40 (stays below 2**53, exact in JavaScript)
)


def kind_of_event(e: dict[str, Any]) -> str:
    """The counting class of a Chrome trace event: ``X``, ``instant``, ``flow``, ``metadata`` or ``other``."""
    ph = e.get("ph")
    if ph == "X":
        return "X"
    if ph == "M":
        return "metadata"
    if ph in FLOW_PHASES:
        return "flow"
    if ph in INSTANT_PHASES:
        return "instant"
    return "other"


@dataclass(frozen=True)
class ExportCounts:
    """Events of each class that went in (the trace's files) and came out (the export), and those with ``args``.
    ``added``: metadata the export writes itself (one ``process_labels`` per rank process)."""

    given: dict[str, int] = field(default_factory=dict)
    written: dict[str, int] = field(default_factory=dict)
    added: int = 0

    def lost(self) -> dict[str, int]:
        """Per class, how many fewer came out than went in (a whole-trace export loses none)."""
        return {
            k: n - self.written.get(k, 0)
            for k, n in self.given.items()
            if n > self.written.get(k, 0)
        }


def count_events(events: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Events per class (:func:`kind_of_event`), plus ``with_args``: how many carry a non-empty ``args``."""
    counts: Counter[str] = Counter()
    for e in events:
        counts[kind_of_event(e)] += 1
        if e.get("args"):
            counts["with_args"] += 1
    return dict(counts)


def _document(stream: Any, name: str) -> dict[str, Any]:
    data = stream.read()
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:  # NaN/Infinity or huge integers: the standard library reads them
        try:
            doc = json.loads(data)
        except ValueError as err:
            raise TraceError(f"{name}: not a JSON trace ({err})") from None
    if isinstance(doc, list):  # the bare-array form of the Chrome trace format
        doc = {"traceEvents": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TraceError(f"{name}: no traceEvents array")
    return doc


def _num(v: Any) -> float | None:
    return (
        float(v)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        else None
    )


class _Tracks:
    """Per track (pid, tid): the kept slices' starts and the running maximum of their ends, to tell whether a
    time lies inside some kept slice (nested slices included)."""

    def __init__(self, slices: list[tuple[Any, Any, float, float]]) -> None:
        by: dict[tuple[Any, Any], list[tuple[float, float]]] = {}
        for pid, tid, ts, end in slices:
            by.setdefault((str(pid), str(tid)), []).append(
                (ts, end)
            )  # old Kineto: tid "25738" here, 25738 there
        self._tracks = {}
        for key, spans in by.items():
            arr = np.array(sorted(spans), dtype=np.float64)
            self._tracks[key] = (arr[:, 0], np.maximum.accumulate(arr[:, 1]))

    def bound(self, pid: Any, tid: Any, ts: float) -> bool:
        track = self._tracks.get((str(pid), str(tid)))
        if track is None:
            return False
        starts, ends = track
        i = int(np.searchsorted(starts, ts, "right")) - 1
        return i >= 0 and bool(ends[i] >= ts)


def _window_events(
    events: list[dict[str, Any]], lo_us: float | None, hi_us: float | None
) -> list[dict[str, Any]]:
    """The events of one file kept by the window rules (module docs); times still the file's own."""
    lo = -np.inf if lo_us is None else lo_us
    hi = np.inf if hi_us is None else hi_us
    kept: list[dict[str, Any]] = []
    slices: list[tuple[Any, Any, float, float]] = []
    flows: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for e in events:
        if not isinstance(e, dict):
            continue
        ph, ts = e.get("ph"), _num(e.get("ts"))
        if ph == "M":
            kept.append(e)
        elif ph in FLOW_PHASES:
            flows.setdefault((e.get("cat"), e.get("id", e.get("id2"))), []).append(e)
        elif ts is None:
            continue
        elif ph == "X":
            end = ts + (_num(e.get("dur")) or 0.0)
            if ts < hi and end > lo:
                kept.append(e)
                slices.append((e.get("pid"), e.get("tid"), ts, end))
        elif lo <= ts < hi:
            kept.append(e)
    tracks = _Tracks(slices)
    for points in flows.values():
        times = [_num(p.get("ts")) for p in points]
        phases = {p.get("ph") for p in points}
        if (
            "s" in phases
            and "f" in phases
            and all(
                t is not None and tracks.bound(p.get("pid"), p.get("tid"), t)
                for p, t in zip(points, times)
            )
        ):
            kept.extend(points)
    return kept


class _Ids:
    """Numeric pids and tids for Perfetto (it wants integers; old Kineto files write ``"pid": "Traces"`` and
    ``"tid": "stream 7"``): digits become their number, other strings a number of their own, named by an added
    ``process_name``/``thread_name`` unless the file names it."""

    STRING_BASE = (
        9_000_000  # numbers given to non-numeric pids and tids start here (above any Linux pid)
    )

    def __init__(self, pid_base: int) -> None:
        self.pid_base = pid_base
        self.given: dict[tuple[str, Any], int] = {}
        self.names: list[dict[str, Any]] = []

    def _number(self, kind: str, value: Any, pid: int | None = None) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and value.isdigit():
            return int(value)
        key = (kind, value if pid is None else (pid, value))
        if key not in self.given:
            self.given[key] = self.STRING_BASE + len(self.given)
            name = "process_name" if kind == "pid" else "thread_name"
            out_pid = self.given[key] + self.pid_base if pid is None else pid
            self.names.append(
                {
                    "name": name,
                    "ph": "M",
                    "pid": out_pid,
                    "tid": 0 if pid is None else self.given[key],
                    "args": {"name": str(value)},
                }
            )
        return self.given[key]

    def pid(self, value: Any) -> Any:
        return self.pid_base + self._number("pid", value)

    def tid(self, pid: Any, value: Any) -> Any:
        return self._number("tid", value, pid)


def _retimed(e: dict[str, Any], origin_us: float, ids: _Ids, flow_offset: int) -> dict[str, Any]:
    out = dict(e)
    if e.get("ph") != "M" and (ts := _num(e.get("ts"))) is not None:
        out["ts"] = round(ts - origin_us, 3)
    if "pid" in e:
        out["pid"] = ids.pid(e["pid"])
    if "tid" in e:
        out["tid"] = ids.tid(out.get("pid"), e["tid"])
    if flow_offset and e.get("ph") in FLOW_PHASES and isinstance(e.get("id"), int):
        out["id"] = e["id"] + flow_offset
    return out


def chrome_trace_with_counts(
    source: Path | str, origin_ns: int, start_ns: int | None = None, end_ns: int | None = None
) -> tuple[bytes, ExportCounts]:
    """The trace at ``source`` (a file, a folder of ranks, a zip, a run folder) as Chrome trace JSON bytes, all
    of it or the window ``[start_ns, end_ns)`` (ns on the trace clock), and what went in and came out."""
    files = find_trace_files(source)
    if not files:
        raise TraceError(f"{source}: no trace files")
    origin_us = origin_ns / 1e3
    lo_us = None if start_ns is None else start_ns / 1e3
    hi_us = None if end_ns is None else end_ns / 1e3
    docs = [(f, _document(stream, f.name)) for f, stream in iter_opened(files)]
    several = len(docs) > 1
    used: set[int] = set()
    order_ranks: list[int] = []
    out: list[dict[str, Any]] = []
    given: Counter[str] = Counter()
    written: Counter[str] = Counter()
    added = 0
    for order, (f, doc) in enumerate(docs):
        raw_info = doc.get("distributedInfo")
        info: dict[Any, Any] = raw_info if isinstance(raw_info, dict) else {}
        rank = rank_of(info, f.rank_hint, order, used, f.name, [])
        used.add(rank)
        order_ranks.append(rank)
        events = doc["traceEvents"]
        given.update(count_events(e for e in events if isinstance(e, dict)))
        kept = (
            _window_events(events, lo_us, hi_us)
            if (lo_us is not None or hi_us is not None)
            else [e for e in events if isinstance(e, dict)]
        )
        written.update(count_events(kept))
        ids = _Ids((rank + 1) * RANK_PID_STRIDE if several else 0)
        flow_offset = rank << RANK_FLOW_SHIFT if several else 0
        mine = [_retimed(e, origin_us, ids, flow_offset) for e in kept]
        named = {(e.get("name"), e.get("pid"), e.get("tid")) for e in mine if e.get("ph") == "M"}
        extra = [m for m in ids.names if (m["name"], m["pid"], m["tid"]) not in named]
        extra += [
            {
                "name": "process_labels",
                "ph": "M",
                "pid": pid,
                "tid": 0,
                "args": {"labels": f"rank {rank}"},
            }
            for pid in sorted({e["pid"] for e in mine if isinstance(e.get("pid"), int)})
        ]
        out.extend(mine)
        out.extend(extra)
        added += len(extra)
    doc_out = {
        **_top_metadata([(rank, doc) for rank, (_, doc) in zip(order_ranks, docs)]),
        "traceEvents": out,
        "displayTimeUnit": "ms",
        "otherData": {
            "exported_by": "stepwise",
            "origin_unix_ns": str(origin_ns),
            "events": len(out),
            "window_ns": None if start_ns is None and end_ns is None else [start_ns, end_ns],
        },
    }
    try:
        body = orjson.dumps(doc_out, option=orjson.OPT_SERIALIZE_NUMPY)
    except (
        TypeError
    ):  # an integer beyond 64 bits (some writers emit them): the standard library writes it
        body = json.dumps(doc_out, allow_nan=False, default=str).encode()
    return body, ExportCounts(given=dict(given), written=dict(written), added=added)


#: Top-level keys the export writes itself (the rest of a trace's header is kept as the file had it).
_OWN_KEYS = frozenset({"traceEvents", "displayTimeUnit", "otherData"})


def _top_metadata(docs: list[tuple[int, dict[str, Any]]]) -> dict[str, Any]:
    """The trace's own header (``schemaVersion``, ``deviceProperties``, ``distributedInfo``, ``traceName`` …),
    which HTA and Perfetto's info page read: one rank's file keeps it as it was; several ranks in one file keep
    the first file's header, with a ``distributedInfo`` that names no single rank (its ``world_size`` and
    ``backend``) and every rank's own under ``distributedInfo.ranks``."""
    if not docs:
        return {}
    first = {k: v for k, v in docs[0][1].items() if k not in _OWN_KEYS}
    if len(docs) == 1:
        return first
    infos = {
        str(rank): info
        for rank, doc in docs
        if isinstance(info := doc.get("distributedInfo"), dict)
    }
    if infos:
        shared = {
            k: v for k, v in next(iter(infos.values())).items() if k in ("world_size", "backend")
        }
        first["distributedInfo"] = {**shared, "ranks": infos}
    return first


def chrome_trace(
    source: Path | str, origin_ns: int, start_ns: int | None = None, end_ns: int | None = None
) -> bytes:
    """:func:`chrome_trace_with_counts` without the counts."""
    return chrome_trace_with_counts(source, origin_ns, start_ns, end_ns)[0]


def perfetto_gzip(
    source: Path | str, origin_ns: int, start_ns: int | None = None, end_ns: int | None = None
) -> bytes:
    """:func:`chrome_trace`, gzip'd (level 6: a 100 MB trace exports in seconds and shrinks ~10×)."""
    return gzip.compress(chrome_trace(source, origin_ns, start_ns, end_ns), compresslevel=6)
