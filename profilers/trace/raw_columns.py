"""Chunks of raw events (typed Structs or dicts) to plain numpy columns, dropping (and counting) broken events.

numpy only, no pandas: this is the half of the column work a parse worker process does
(:mod:`profilers.trace.parallel`), so a worker never pays pandas' import and what it sends back is a few compact
arrays. :mod:`profilers.trace.columns` turns merged :class:`RawColumns` into the typed frames. The hot loop
touches each event once and only gathers raw values; typing, validation and interning happen afterwards,
vectorised. Only what analyses use is kept: complete (``ph == "X"``) events and ``[memory]`` instants.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson

from profilers.trace.kinds import GPU_KINDS, KINDS, kind_of
from profilers.trace.structs import NO_ARGS, Event

#: Trace times must fit int64 nanoseconds with room for any difference of two: ``|ts|`` and ``|ts + dur|``
#: below 2**62 ns (about 146 years either side of the trace clock's zero). A value beyond is corrupt, not a time;
#: its event is dropped and counted like any other broken event.
MAX_TIME_US = 2.0**62 / 1000
OUT_OF_RANGE = "ts or ts+dur beyond ±2**62 ns"
#: An event name longer than this is kept shortened, to its first ``MAX_NAME_CHARS`` characters and a label with
#: its length and a hash (so two long names stay two): every name classifier scans whole names, and a 10 MB
#: name cost seconds in each. The longest real ones (templated CUTLASS kernels) are a few kB.
MAX_NAME_CHARS = 64 * 1024
MEMORY_COLUMNS = ("ts_ns", "device_type", "device_id", "bytes", "total_allocated", "total_reserved")


@dataclass
class Interned:
    """A column of repeated values as codes into ``uniques`` (in order of first appearance)."""

    codes: np.ndarray
    uniques: list[Any]


@dataclass
class RawColumns:
    """One chunk's (or, merged, one rank's) kept events and ``[memory]`` instants as arrays, and what was dropped."""

    kind: np.ndarray  # int8 codes into KINDS
    name: Interned
    start_ns: np.ndarray
    dur_ns: np.ndarray
    pid: np.ndarray
    tid: Interned  # uniques are the threads' string forms
    device: np.ndarray
    stream: np.ndarray
    correlation: np.ndarray
    dtype: Interned
    memory: dict[str, np.ndarray]
    shapes: Interned = field(
        default_factory=lambda: Interned(np.zeros(0, np.int64), [])
    )  # Input Dims JSON text
    dropped: dict[str, int] = field(default_factory=dict)
    shortened: set[str] = field(
        default_factory=set
    )  # names longer than MAX_NAME_CHARS, as kept (shortened)
    # The distinct process names and labels of the metadata events ("python3", "GPU 0", "MTIA 0"...)
    processes: tuple[str, ...] = ()

    def __len__(self) -> int:
        return int(self.start_ns.size)


def intern(values: list[Any]) -> Interned:
    """Codes by first appearance, like ``pandas.factorize(..., use_na_sentinel=False)`` for hashable values; an
    unhashable value (a list where a name should be) is its own entry."""
    try:
        uniques = list(
            dict.fromkeys(values)
        )  # both loops run in C: 5x faster than a setdefault comprehension
        index = {u: i for i, u in enumerate(uniques)}
        return Interned(
            np.fromiter(map(index.__getitem__, values), dtype=np.int64, count=len(values)), uniques
        )
    except TypeError:
        pass
    table: dict[Any, int] = {}
    uniques = []
    out = []
    for v in values:
        try:
            code = table.setdefault(v, len(uniques))
            if code == len(uniques):
                uniques.append(v)
        except TypeError:
            code = len(uniques)
            uniques.append(v)
        out.append(code)
    return Interned(np.array(out, dtype=np.int64), uniques)


def _num(x: Any) -> float:
    return float(x) if x.__class__ in (int, float) else float("nan")


def _floats(values: list[Any]) -> np.ndarray:
    """Numbers as float64; anything else (None, strings, bools, huge ints) becomes NaN."""
    try:
        arr = np.array(values)
    except (TypeError, ValueError, OverflowError):
        arr = np.array([], dtype=object)
    if arr.dtype.kind in "fiu" and arr.ndim == 1 and arr.size == len(values):
        return arr.astype(np.float64)
    return np.fromiter((_num(v) for v in values), dtype=np.float64, count=len(values))


_FLOAT_EXACT = 2.0**53  # below this magnitude a float64 is the exact value of the int it came from
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _ints(values: list[Any], default: int) -> np.ndarray:
    """Ids (correlation, pid, device, stream...) as exact int64; anything else, or beyond int64, is ``default``.

    All-int lists take numpy's int64 fast path (exact). numpy turns a list with a float, or with an int beyond
    int64, into float64, which cannot tell 2**53 from 2**53 + 1: only then is the list read value by value.
    """
    try:
        arr = np.array(values)
    except (TypeError, ValueError, OverflowError):
        arr = np.array([], dtype=object)
    if arr.ndim == 1 and arr.size == len(values):
        if arr.dtype.kind == "i":
            return arr.astype(np.int64, copy=False)
        if arr.dtype.kind == "f" and not (np.abs(arr) >= _FLOAT_EXACT).any():  # NaN compares False
            arr[~np.isfinite(arr)] = default
            return arr.astype(np.int64)
    return np.fromiter((_exact_int(v, default) for v in values), dtype=np.int64, count=len(values))


def _exact_int(v: Any, default: int) -> int:
    if v.__class__ is int:
        return v if _INT64_MIN <= v <= _INT64_MAX else default
    if v.__class__ is float and -(2.0**63) < v < 2.0**63:  # False for NaN and infinities
        return int(v)
    return default


def to_ns(ts_us: np.ndarray) -> np.ndarray:
    """Microsecond floats to integer nanoseconds without losing sub-µs precision on large epochs."""
    if ts_us.size == 0:
        return ts_us.astype(np.int64)
    base = np.floor(np.nanmin(ts_us))
    # Keep the sum in integers: float64 cannot hold a 2021 epoch in ns to the nanosecond.
    return np.int64(base) * 1000 + np.rint((ts_us - base) * 1000).astype(np.int64)


def _first_dtype(types: Any) -> str:
    """The first non-empty entry of a record_shapes ``Input type`` list (e.g. "float", "c10::BFloat16")."""
    if types.__class__ is list:
        for t in types:
            if t.__class__ is str and t:
                return t
    return ""


_NO_ARGS: dict[str, Any] = {}


def raw_chunk(chunk: list[Any]) -> RawColumns:
    """The columns of one chunk of events: typed Structs (the fast path: attribute reads) or dicts."""
    dropped: dict[str, int] = {}
    if chunk and chunk[0].__class__ is Event:
        xs = [e for e in chunk if e.ph == "X"]
        args = [e.args or NO_ARGS for e in xs]
        rest = [e for e in chunk if e.ph != "X"] if len(xs) < len(chunk) else []
        mem = [
            (e.ts, a.device_type, a.device_id, a.bytes, a.total_allocated, a.total_reserved)
            for e in rest
            if e.ph in ("i", "I") and e.name == "[memory]" and (a := e.args) is not None
        ]
        meta = [
            a.name if e.name == "process_name" else a.labels
            for e in rest
            if e.ph == "M" and e.name in _PROCESS_META and (a := e.args) is not None
        ]
        out = _events(
            ts=[e.ts for e in xs],
            dur=[e.dur for e in xs],
            cat=[e.cat for e in xs],
            name=[e.name for e in xs],
            pid=[e.pid for e in xs],
            tid=[e.tid for e in xs],
            corr=[a.correlation for a in args],
            dev=[a.device for a in args],
            stream=[a.stream for a in args],
            itype=[bytes(a.input_type) for a in args],
            dims=[bytes(a.input_dims) for a in args],
            dropped=dropped,
        )
        out.memory = _memory(mem, dropped)
        out.processes = _texts(meta)
        return out
    # One list comprehension per field: measurably faster than one loop appending to ten lists.
    objs = [e for e in chunk if e.__class__ is dict]
    if len(objs) < len(chunk):
        dropped["not an object"] = len(chunk) - len(objs)
    dxs = [e for e in objs if e.get("ph") == "X"]
    dargs = [a if a.__class__ is dict else _NO_ARGS for a in [e.get("args") for e in dxs]]
    # Numeric defaults keep these lists all-number, so they convert on numpy's fast path.
    out = _events(
        ts=[e.get("ts") for e in dxs],
        dur=[e.get("dur") for e in dxs],
        cat=[e.get("cat") for e in dxs],
        name=[e.get("name") for e in dxs],
        pid=[e.get("pid", -1) for e in dxs],
        tid=[e.get("tid") for e in dxs],
        corr=[a.get("correlation", -1) for a in dargs],
        dev=[a.get("device", -1) for a in dargs],
        stream=[a.get("stream", -1) for a in dargs],
        itype=[a.get("Input type") for a in dargs],
        dims=[a.get("Input Dims") for a in dargs],
        dropped=dropped,
    )
    out.memory = _memory(
        [
            (
                e.get("ts"),
                a.get("Device Type"),
                a.get("Device Id"),
                a.get("Bytes"),
                a.get("Total Allocated"),
                a.get("Total Reserved"),
            )
            for e in objs
            if e.get("ph") in ("i", "I")
            and e.get("name") == "[memory]"
            and (a := e.get("args")).__class__ is dict
        ],
        dropped,
    )
    out.processes = _texts(
        [
            a.get("name") if e.get("name") == "process_name" else a.get("labels")
            for e in objs
            if e.get("ph") == "M"
            and e.get("name") in _PROCESS_META
            and (a := e.get("args")).__class__ is dict
        ]
    )
    return out


_PROCESS_META = ("process_name", "process_labels")


def _texts(values: list[Any]) -> tuple[str, ...]:
    """The distinct strings among ``values``, in order, each at most 200 characters."""
    return tuple(dict.fromkeys(v[:200] for v in values if isinstance(v, str)))


def _events(
    ts: list[Any],
    dur: list[Any],
    cat: list[Any],
    name: list[Any],
    pid: list[Any],
    tid: list[Any],
    corr: list[Any],
    dev: list[Any],
    stream: list[Any],
    itype: list[Any],
    dropped: dict[str, int],
    dims: list[Any] | None = None,
) -> RawColumns:
    ts_f, dur_f = _floats(ts), _floats(dur)
    bad_time = ~np.isfinite(ts_f) | ~np.isfinite(dur_f)
    negative = ~bad_time & (dur_f < 0)
    with np.errstate(over="ignore", invalid="ignore"):
        beyond = ~bad_time & ((np.abs(ts_f) >= MAX_TIME_US) | (np.abs(ts_f + dur_f) >= MAX_TIME_US))
    names_all = intern(name)
    bad_unique = np.fromiter(
        (v.__class__ is not str for v in names_all.uniques),
        dtype=bool,
        count=len(names_all.uniques),
    )
    bad_name = bad_unique[names_all.codes] if len(name) else np.zeros(0, dtype=bool)
    taken = np.zeros(len(ts), dtype=bool)
    for reason, mask in (
        ("missing or non-numeric ts/dur", bad_time),
        ("negative duration", negative),
        (OUT_OF_RANGE, beyond),
        ("missing or non-string name", bad_name),
    ):
        n = int((mask & ~taken).sum())  # each event counted once, under its first reason
        if n:
            dropped[reason] = dropped.get(reason, 0) + n
        taken |= mask
    idx = np.flatnonzero(~taken)
    all_kept = idx.size == len(ts)

    def pick(values: list[Any]) -> list[Any]:
        return values if all_kept else [values[i] for i in idx]

    start_ns = to_ns(ts_f[idx])
    dur_ns = np.rint(dur_f[idx] * 1000).astype(np.int64)
    cats = intern(pick(cat))
    kind_map = np.array(
        [KINDS.index(kind_of(c if isinstance(c, str) else None)) for c in cats.uniques],
        dtype=np.int8,
    )
    kinds = kind_map[cats.codes] if idx.size else np.zeros(0, np.int8)
    names = names_all if all_kept else intern(pick(name))
    shortened = _shorten_long_names(names)
    tids = intern(pick(tid))
    # 7 and "7" in one file are the same thread: intern on the string form.
    tid_labels, tid_inverse = np.unique(
        np.array([str(t) for t in tids.uniques], dtype=object), return_inverse=True
    )
    tid_codes = tid_inverse[tids.codes] if idx.size else tids.codes
    pid_arr = _ints(pick(pid), -1)
    is_gpu = np.isin(kinds, [KINDS.index(k) for k in GPU_KINDS])
    device = np.where(is_gpu, _ints(pick(dev), -1), -1)
    device = np.where(is_gpu & (device < 0), pid_arr, device).astype(np.int16)
    stream_arr = np.where(is_gpu, _ints(pick(stream), -1), -1).astype(np.int32)
    return RawColumns(
        kind=kinds,
        name=names,
        start_ns=start_ns,
        dur_ns=dur_ns,
        pid=pid_arr,
        tid=Interned(np.asarray(tid_codes, dtype=np.int64), list(tid_labels)),
        device=device,
        stream=stream_arr,
        correlation=_ints(pick(corr), -1),
        dtype=_dtypes(pick(itype)),
        shapes=_shapes(pick(dims) if dims is not None else [None] * idx.size),
        memory=_memory([], dropped),
        dropped=dropped,
        shortened=shortened,
    )


def _shapes(dims: list[Any]) -> Interned:
    """Each event's record_shapes ``Input Dims`` as compact JSON text ("" when absent): raw bytes (a typed
    event's) or a list (an orjson dict's), read once per distinct value."""
    raw = intern([orjson.dumps(d) if d.__class__ is list else d for d in dims])
    texts = [_dims_text(u) for u in raw.uniques]
    out = intern(texts)
    return Interned(out.codes[raw.codes] if raw.codes.size else raw.codes, out.uniques)


def _dims_text(u: Any) -> str:
    """Compact JSON of a dims list, or "" for anything that is not one."""
    if u.__class__ is not bytes or not u:
        return ""
    value = _json_or_none(u)
    return orjson.dumps(value).decode() if value.__class__ is list else ""


def _dtypes(itypes: list[Any]) -> Interned:
    """The first type name of each event's ``Input type``: a list (an orjson dict's value), or its raw JSON
    bytes (a typed event's), read once per distinct value."""
    raw = intern(itypes)
    firsts = [
        _first_dtype(_json_or_none(u)) if u.__class__ is bytes else _first_dtype(u)
        for u in raw.uniques
    ]
    out = intern(firsts)
    return Interned(out.codes[raw.codes] if raw.codes.size else raw.codes, out.uniques)


def _json_or_none(data: bytes) -> Any:
    try:
        return orjson.loads(data) if data else None
    except (
        orjson.JSONDecodeError
    ):  # what the typed decoder passes and orjson does not (an integer beyond 64 bits)
        return None


def _shorten_long_names(names: Interned) -> set[str]:
    """Shorten, in place, the distinct names longer than ``MAX_NAME_CHARS``; the shortened names."""
    long = [i for i, u in enumerate(names.uniques) if len(u) > MAX_NAME_CHARS]
    for i in long:
        full: str = names.uniques[i]
        digest = hashlib.blake2b(full.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()
        names.uniques[i] = f"{full[:MAX_NAME_CHARS]}… [{len(full)} characters, {digest}]"
    return {names.uniques[i] for i in long}


def _memory(rows: list[tuple[Any, ...]], dropped: dict[str, int]) -> dict[str, np.ndarray]:
    if not rows:
        return {c: np.zeros(0, dtype=np.int64) for c in MEMORY_COLUMNS}
    raw = list(zip(*rows))
    ts = _floats(list(raw[0]))
    ok = np.isfinite(ts)
    beyond = ok & (np.abs(ts) >= MAX_TIME_US)
    for key, mask in (
        ("[memory] event without numeric ts", ~ok),
        ("[memory] event with ts beyond ±2**62 ns", beyond),
    ):
        if mask.any():
            dropped[key] = dropped.get(key, 0) + int(mask.sum())
    ok &= ~beyond
    frame = {"ts_ns": to_ns(ts[ok])}
    for col, values in zip(MEMORY_COLUMNS[1:], raw[1:]):
        frame[col] = _ints(list(values), 0)[ok]
    return frame


def _merge_interned(parts: list[Interned]) -> Interned:
    """One code space for several chunks: uniques in order of first appearance across them (what
    ``pandas.api.types.union_categoricals`` gives)."""
    if len(parts) == 1:
        return parts[0]
    table: dict[Any, int] = {}
    codes = []
    for p in parts:
        remap = np.array([table.setdefault(u, len(table)) for u in p.uniques], dtype=np.int64)
        codes.append(remap[p.codes] if p.codes.size else p.codes)
    return Interned(np.concatenate(codes), list(table))


def merge(parts: list[RawColumns]) -> RawColumns:
    """The chunks of one rank, in order, as one set of columns (dropped counts added, first reason first)."""
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return _events([], [], [], [], [], [], [], [], [], [], {})
    dropped: dict[str, int] = {}
    for p in parts:
        for k, n in p.dropped.items():
            dropped[k] = dropped.get(k, 0) + n

    def cat(name: str) -> np.ndarray:
        return np.concatenate([getattr(p, name) for p in parts])

    return RawColumns(
        kind=cat("kind"),
        name=_merge_interned([p.name for p in parts]),
        start_ns=cat("start_ns"),
        dur_ns=cat("dur_ns"),
        pid=cat("pid"),
        tid=_merge_interned([p.tid for p in parts]),
        device=cat("device"),
        stream=cat("stream"),
        correlation=cat("correlation"),
        dtype=_merge_interned([p.dtype for p in parts]),
        shapes=_merge_interned([p.shapes for p in parts]),
        memory={c: np.concatenate([p.memory[c] for p in parts]) for c in MEMORY_COLUMNS},
        dropped=dropped,
        shortened=set().union(*(p.shortened for p in parts)),
        processes=tuple(dict.fromkeys(t for p in parts for t in p.processes)),
    )
